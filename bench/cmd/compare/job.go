package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Job is one measurement, run in a child process so that its peak RSS is
// its own and one system's garbage never slows another.
type Job struct {
	Kind       string        `json:"kind"` // push, preload, drain, fanout, order, idle, latency, httppush, httppop, httpone, pushdrain, loop, remote-push, remote-drain
	System     string        `json:"system"`
	Sync       bool          `json:"sync"`
	Dir        string        `json:"dir"`
	N          int           `json:"n"`       // messages (cap)
	MaxTime    time.Duration `json:"maxTime"` // time cap of the measured phase
	Payload    int           `json:"payload"`
	Producers  int           `json:"producers"`
	Consumers  int           `json:"consumers"`
	Partitions int           `json:"partitions"`
	Groups     int           `json:"groups"`
	Batch      int           `json:"batch"`              // push batch (push) or pop/fetch batch (consumers)
	PopBatch   int           `json:"popBatch,omitempty"` // pop/fetch batch of pushdrain, whose Batch is the push's
	Idle       int           `json:"idle"`
	Rate       int           `json:"rate"`
	Tag        string        `json:"tag"` // makes group/consumer names unique per round
	Profile    string        `json:"profile,omitempty"`
	JSDedup    bool          `json:"jsDedup,omitempty"`
	Bin        string        `json:"bin,omitempty"` // cmd/queen binary of systems server*
	// MemoryMB is queen's Options.MemoryBudget in MiB (systems queen@N); 0
	// is the default.
	MemoryMB int `json:"memoryMB,omitempty"`
	// Experiments: Badger options for system queen-tuned (through OpenDB).
	Tuned           bool `json:"tuned,omitempty"`
	BadgerMemMB     int  `json:"badgerMemMB,omitempty"`
	BadgerMemtables int  `json:"badgerMemtables,omitempty"`
	BadgerCacheMB   int  `json:"badgerCacheMB"` // -1: Badger's default
	// Tweak changes the Badger options queen.BadgerOptions derives from
	// the budget (systems queen~<tweak>, see applyTweak): experiments.
	Tweak string `json:"tweak,omitempty"`
}

// Result is what a child reports.
type Result struct {
	Msgs    int64   `json:"msgs"`
	Seconds float64 `json:"seconds"`
	// Latencies in milliseconds: per call for pushes, push→handler for
	// scenario 7, per request for HTTP.
	P50  float64 `json:"p50,omitempty"`
	P99  float64 `json:"p99,omitempty"`
	P999 float64 `json:"p999,omitempty"`
	// Heap bytes (after GC) at points of interest, for scenario 6.
	HeapLive int64 `json:"heapLive,omitempty"`
	// HeapStore is the part of HeapLive allocated under Badger (memtables,
	// table builders, caches), estimated from the heap profile.
	HeapStore int64 `json:"heapStore,omitempty"`
	// DrainSeconds is how long the drain phase of a pushdrain job took
	// (Msgs messages); Seconds is its push phase.
	DrainSeconds float64 `json:"drainSeconds,omitempty"`
	Capped       bool    `json:"capped,omitempty"` // stopped by MaxTime before N
	Note         string  `json:"note,omitempty"`
	Err          string  `json:"err,omitempty"`
	PeakHeap     int64   `json:"peakHeap,omitempty"` // sampled Go heap objects, bytes
	Mem          MemPeak `json:"mem"`                // the process at its peak RSS
	RSSKB        int64   `json:"-"`                  // filled by the parent from rusage
	Round        int     `json:"-"`                  // filled by the parent: the round it was measured in
	Wall         float64
}

func (r Result) rate() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Msgs) / r.Seconds
}

// drainRate is the drain phase's msgs/s of a pushdrain job.
func (r Result) drainRate() float64 {
	if r.DrainSeconds <= 0 {
		return 0
	}
	return float64(r.Msgs) / r.DrainSeconds
}

const resultMarker = "BENCHRESULT "

func runChild(spec string) {
	var j Job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintln(os.Stderr, "bad job:", err)
		os.Exit(2)
	}
	start := time.Now()
	stop := make(chan struct{})
	peak := make(chan int64)
	mem := make(chan MemPeak)
	go samplePeakHeap(stop, peak)
	go memWatch(stop, mem, j.Profile)
	res, err := runJob(&j)
	close(stop)
	res.PeakHeap = <-peak
	res.Mem = <-mem
	if err != nil {
		res.Err = err.Error()
	}
	res.Wall = time.Since(start).Seconds()
	b, _ := json.Marshal(res)
	fmt.Println(resultMarker + string(b))
}

func runJob(j *Job) (Result, error) {
	if j.Kind == "loop" {
		return runLoopJob(j) // scenario 10: systems queen[+each|+batch], http[+each|+batch]
	}
	if j.Kind == "remote-push" || j.Kind == "remote-drain" {
		return runRemoteJob(j) // scenario 11: systems server, queen-mq
	}
	if strings.HasPrefix(j.Kind, "open") {
		return runOpenJob(j) // scenario 12: systems queen, queen+second, badger
	}
	if j.Kind == "idle" {
		// Scenario 6: "queen" runs the busy partitions alone, "queen+idle"
		// beside j.Idle idle ones.
		sys, idle := strings.CutSuffix(j.System, "+idle")
		if !idle {
			j.Idle = 0
		}
		j.System = sys
	}
	if mb, ok := strings.CutPrefix(j.System, "queen@"); ok {
		n, err := strconv.Atoi(mb)
		if err != nil {
			return Result{}, fmt.Errorf("system %q: bad budget", j.System)
		}
		j.MemoryMB = n
		return runQueen(j)
	}
	if tw, ok := strings.CutPrefix(j.System, "queen~"); ok {
		j.Tweak = tw
		return runQueen(j)
	}
	switch j.System {
	case "queen":
		return runQueen(j)
	case "queen-tuned":
		j.Tuned = true
		return runQueen(j)
	case "jetstream":
		return runJS(j)
	case "badger":
		return runBadger(j)
	case "http", "server", "server-base", "server-pushes":
		return runHTTP(j)
	}
	return Result{}, fmt.Errorf("unknown system %q", j.System)
}

// profiler records a CPU profile of the measured phase and an alloc profile
// at its end, when the job asks for it.
type profiler struct {
	path string
	f    *os.File
}

func startProfile(j *Job) *profiler {
	p := &profiler{path: j.Profile}
	if p.path == "" {
		return p
	}
	f, err := os.Create(p.path + ".cpu.pprof")
	if err == nil && pprof.StartCPUProfile(f) == nil {
		p.f = f
	}
	return p
}

func (p *profiler) stop() {
	if p.path == "" {
		return
	}
	if p.f != nil {
		pprof.StopCPUProfile()
		p.f.Close()
	}
	if f, err := os.Create(p.path + ".allocs.pprof"); err == nil {
		_ = pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
	}
	p.path = ""
}

// payloads ---------------------------------------------------------------

// fixedPayload is a JSON object of exactly size bytes (at least 16).
func fixedPayload(size int) []byte {
	return padJSON([]byte(`{"p":"`), size)
}

// seqPayload encodes key k, sequence s and a time t (ns) in a JSON object of
// size bytes (longer if the numbers do not fit).
func seqPayload(k, s int, t int64, size int) []byte {
	b := make([]byte, 0, size+8)
	b = append(b, `{"k":`...)
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, `,"s":`...)
	b = strconv.AppendInt(b, int64(s), 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, t, 10)
	b = append(b, `,"p":"`...)
	return padJSON(b, size)
}

func padJSON(prefix []byte, size int) []byte {
	b := prefix
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// parseSeq reads k, s and t back from a seqPayload.
func parseSeq(b []byte) (k, s int, t int64, ok bool) {
	get := func(name string) (int64, bool) {
		i := bytes.Index(b, []byte(`"`+name+`":`))
		if i < 0 {
			return 0, false
		}
		i += len(name) + 3
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		v, err := strconv.ParseInt(string(b[i:j]), 10, 64)
		return v, err == nil
	}
	kv, ok1 := get("k")
	sv, ok2 := get("s")
	tv, ok3 := get("t")
	return int(kv), int(sv), tv, ok1 && ok2 && ok3
}

// latencies ----------------------------------------------------------------

// lats collects durations from many goroutines.
type lats struct {
	mu sync.Mutex
	ns []int64
}

func (l *lats) add(d time.Duration) {
	l.mu.Lock()
	l.ns = append(l.ns, int64(d))
	l.mu.Unlock()
}

func (l *lats) addAll(ds []int64) {
	l.mu.Lock()
	l.ns = append(l.ns, ds...)
	l.mu.Unlock()
}

func (l *lats) fill(r *Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ns) == 0 {
		return
	}
	slices.Sort(l.ns)
	pct := func(p float64) float64 {
		i := int(p * float64(len(l.ns)-1))
		return float64(l.ns[i]) / 1e6
	}
	r.P50, r.P99, r.P999 = pct(0.50), pct(0.99), pct(0.999)
}

// heapAfterGC returns the live heap after two collections.
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// heapUnder estimates, from the heap profile of the last GC (call
// heapAfterGC first), the bytes in use by objects allocated under a
// function of a package whose path starts with prefix.
func heapUnder(prefix string) int64 {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, false)
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	rate := float64(runtime.MemProfileRate)
	var sum float64
	for i := range recs {
		r := &recs[i]
		objs, bytes := r.InUseObjects(), r.InUseBytes()
		if objs <= 0 || !stackUnder(r.Stack(), prefix) {
			continue
		}
		// Unsample as runtime/pprof does: each object of the record's mean
		// size was sampled with probability 1-exp(-size/rate).
		scale := 1.0
		if rate > 1 {
			scale = 1 / (1 - math.Exp(-float64(bytes)/float64(objs)/rate))
		}
		sum += float64(bytes) * scale
	}
	return int64(sum)
}

func stackUnder(stk []uintptr, prefix string) bool {
	frames := runtime.CallersFrames(stk)
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, prefix) {
			return true
		}
		if !more {
			return false
		}
	}
}

// seen checks exactly-once delivery of sequence numbers 1..n (JetStream
// stream sequences) or 0..n-1.
type seen struct {
	mu   sync.Mutex
	bits []uint64
	n    int64
	dups int64
}

func newSeen(n int) *seen { return &seen{bits: make([]uint64, n/64+2)} }

func (s *seen) mark(i uint64) {
	s.mu.Lock()
	if int(i/64) >= len(s.bits) {
		s.bits = append(s.bits, make([]uint64, int(i/64)-len(s.bits)+1)...)
	}
	if s.bits[i/64]&(1<<(i%64)) != 0 {
		s.dups++
	} else {
		s.bits[i/64] |= 1 << (i % 64)
		s.n++
	}
	s.mu.Unlock()
}

// samplePeakHeap samples the Go heap every 20 ms until stop is closed, then
// sends the largest reading.
func samplePeakHeap(stop <-chan struct{}, out chan<- int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak int64
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 {
			peak = max(peak, int64(s[0].Value.Uint64()))
		}
		select {
		case <-stop:
			out <- peak
			return
		case <-t.C:
		}
	}
}

// writeHeapProfile writes the in-use heap profile (after a GC) when the
// job is profiled.
func writeHeapProfile(j *Job, suffix string) {
	if j.Profile == "" {
		return
	}
	runtime.GC()
	if f, err := os.Create(j.Profile + "." + suffix + ".heap.pprof"); err == nil {
		_ = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
}

// deadline returns the deadline of a measured phase starting now.
func deadline(j *Job) time.Time {
	if j.MaxTime <= 0 {
		return time.Now().Add(24 * time.Hour)
	}
	return time.Now().Add(j.MaxTime)
}
