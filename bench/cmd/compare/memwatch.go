package main

import (
	"fmt"
	"runtime/debug"

	"bufio"
	"bytes"
	"github.com/dgraph-io/badger/v4"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// MemPeak is where a child's memory was when its resident set was
// largest (sampled every 20 ms): the kernel's split of the resident set
// (/proc/self/status), the Go runtime's (runtime/metrics) and, from
// /proc/self/smaps, the resident pages of Badger's memory-mapped files
// by kind. All in KiB.
type MemPeak struct {
	HWM      int64 `json:"hwm"`      // VmHWM at the end: the peak RSS
	RSS      int64 `json:"rss"`      // VmRSS at the sampled peak
	Anon     int64 `json:"anon"`     // RssAnon
	File     int64 `json:"file"`     // RssFile
	Shmem    int64 `json:"shmem"`    // RssShmem
	HeapLive int64 `json:"heapLive"` // heap objects (live and not yet swept)
	HeapGoal int64 `json:"heapGoal"` // the collector's goal
	HeapFree int64 `json:"heapFree"` // heap spans free, not returned to the OS
	Stacks   int64 `json:"stacks"`
	GoOther  int64 `json:"goOther"` // the runtime's other mapped memory (metadata, buffers)
	Released int64 `json:"released"`
	// Resident pages of mapped files: value log, memtable WALs (.mem),
	// tables (.sst), others (discard stats, binaries, libraries).
	Vlog, WAL, SST, OtherFile int64
	SmapsAt                   int64   `json:"smapsAt"` // VmRSS when smaps was read
	At                        float64 `json:"at"`      // seconds from the start
}

// memWatch samples the process every 20 ms until stop is closed and then
// sends the sample taken at the highest VmRSS. When prof is not "", it
// writes a heap profile (no forced GC) to prof+".peak.heap.pprof" each
// time the resident set grows 5 % past the last one written.
func memWatch(stop <-chan struct{}, out chan<- MemPeak, prof string) {
	names := []string{
		"/memory/classes/heap/objects:bytes",
		"/gc/heap/goal:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/stacks:bytes",
		"/memory/classes/os-stacks:bytes",
		"/memory/classes/total:bytes",
		"/memory/classes/heap/released:bytes",
		"/memory/classes/heap/unused:bytes",
	}
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	u := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64() >> 10)
	}
	var peak MemPeak
	start := time.Now()
	var smapsRSS, profRSS int64
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		st := procStatus()
		if st["VmRSS"] > peak.RSS {
			metrics.Read(s)
			p := MemPeak{RSS: st["VmRSS"], Anon: st["RssAnon"], File: st["RssFile"], Shmem: st["RssShmem"],
				At: time.Since(start).Seconds(), HeapLive: u(0), HeapGoal: u(1), HeapFree: u(2), Stacks: u(3) + u(4), Released: u(6)}
			p.GoOther = u(5) - u(0) - u(2) - u(3) - u(4) - u(6) - u(7)
			p.Vlog, p.WAL, p.SST, p.OtherFile, p.SmapsAt = peak.Vlog, peak.WAL, peak.SST, peak.OtherFile, peak.SmapsAt
			if p.RSS > smapsRSS*102/100 {
				smapsRSS = p.RSS
				p.Vlog, p.WAL, p.SST, p.OtherFile = smapsFiles()
				p.SmapsAt = p.RSS
			}
			if prof != "" && p.RSS > profRSS*105/100 {
				profRSS = p.RSS
				if f, err := os.Create(prof + ".peak.heap.pprof"); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
			peak = p
		}
		select {
		case <-stop:
			peak.HWM = procStatus()["VmHWM"]
			out <- peak
			return
		case <-t.C:
		}
	}
}

// procStatus reads the kB fields of /proc/self/status.
func procStatus() map[string]int64 {
	m := map[string]int64{}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			m[k] = n
		}
	}
	return m
}

// smapsFiles sums the resident KiB of mapped files by kind.
func smapsFiles() (vlog, wal, sst, other int64) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return
	}
	var cur *int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			cur = nil
			if len(f) >= 6 && strings.HasPrefix(f[5], "/") {
				switch filepath.Ext(f[5]) {
				case ".vlog":
					cur = &vlog
				case ".mem":
					cur = &wal
				case ".sst":
					cur = &sst
				default:
					cur = &other
				}
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok && cur != nil {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				*cur += n
			}
		}
	}
	return
}

// applyTweak changes bo by a comma list of key=value: vlog (value-log
// file MiB), thr (value threshold bytes), comp (compactors), bt (base
// table KiB), bl (base level KiB), l0 (level-0 tables), l0s (level-0
// stall), blk (block size bytes), mt (memtable KiB), nmt (memtables),
// gogc (the child's GC percent; diagnosis only), none (no change).
func applyTweak(bo badger.Options, tweak string) (badger.Options, error) {
	for _, kv := range strings.Split(tweak, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if k == "none" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return bo, fmt.Errorf("tweak %q: %w", kv, err)
		}
		switch k {
		case "vlog":
			bo = bo.WithValueLogFileSize(n << 20)
		case "thr":
			bo = bo.WithValueThreshold(n)
		case "comp":
			bo = bo.WithNumCompactors(int(n))
		case "bt":
			bo = bo.WithBaseTableSize(n << 10)
		case "bl":
			bo = bo.WithBaseLevelSize(n << 10)
		case "l0":
			bo = bo.WithNumLevelZeroTables(int(n))
		case "l0s":
			bo = bo.WithNumLevelZeroTablesStall(int(n))
		case "blk":
			bo = bo.WithBlockSize(int(n))
		case "mt":
			bo = bo.WithMemTableSize(n << 10)
		case "nmt":
			bo = bo.WithNumMemtables(int(n))
		case "gogc":
			debug.SetGCPercent(int(n))
		default:
			return bo, fmt.Errorf("tweak %q: unknown key", kv)
		}
	}
	return bo, nil
}
