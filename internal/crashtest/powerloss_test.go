package crashtest_test

// Power loss: what is and is not verified.
//
// The promise (doc.go, queen.go): with SyncEveryCommit a call returns only
// after the storage transaction holding it was fsynced, so it survives a
// power loss; with SyncPushes so does a push, while an ack is fsynced in
// the background within Options.AckSyncDelay; with SyncNever a call
// survives kill -9 only.
//
// A wrapper that drops unsynced writes, the usual way to test that, cannot
// be put under Badger: Badger has no file-system interface, and it writes
// its write-ahead logs (the memtable .mem files and the value log .vlog
// files) through shared memory maps, so the writes are plain memory stores
// that no Go wrapper sees. Block-level tools (dm-log-writes, dm-flakey)
// need a device-mapper block device, which CI does not have. So the power
// loss itself is not simulated. What is verified instead:
//
//  1. The SIGKILL test (crash_test.go) proves both modes keep every
//     confirmed call across a process crash.
//  2. TestPowerLoss_SyncedBeforeReturn traces the real syscalls of the
//     child (strace) while it pushes and acks one call at a time, and checks
//     that with SyncEveryCommit each call, before it returns, msyncs the
//     memtable log it was written to and, for a payload kept in the value
//     log, the value-log file it went to, including across a value-log file
//     rotation (forced with a 2 MiB file size through queen.OpenDB); and that
//     with SyncNever nothing is synced on the way. That is the whole of what
//     Badger needs for its recovery, which replays those two logs.
//  3. By reading Badger's code (v4.9.6), what the trace cannot show:
//     - A memtable log that rotates between the writer's commit and its
//       db.Sync() is not synced by that Sync (Badger syncs only the current
//       memtable and value-log file). The broker's single writer goroutine
//       makes this impossible for its own writes, but Badger's value-log GC
//       (Options.GCInterval) and other writers of an OpenDB database write
//       too: if one of them fills the memtable in that window, the call
//       returns with its memtable log unsynced until the memtable is flushed
//       to an SSTable (which is synced). A power loss in that window loses
//       it. Narrow, not reproduced.
//     - New .mem and .vlog files are created without an fsync of the
//       directory (ristretto's z.OpenMmapFile syncs the directory only for
//       files created empty; Badger creates them preallocated). The data in
//       them is synced, but POSIX does not promise the directory entry
//       survives a power loss without a directory fsync; ext4 and XFS commit
//       it with the file's journal transaction in practice. The trace test
//       TestPowerLoss_NewLogFileDirectoryNotSynced pins the missing fsync and
//       asserts it, as a known gap.
//     - SSTables, the MANIFEST and the key registry are fsynced (with their
//       directory) by Badger when they are written; the trace shows the
//       MANIFEST and directory fsyncs at open.
//  4. Not verified at all: disks that lie about flushes (write caches
//     without power-loss protection) and file systems that do not order a
//     file's data with its size; no software test here can see those.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// traceEvent is one finished syscall of the traced child.
type traceEvent struct {
	call string // "msync", "write", "mmap", ...
	line string
}

// cannotTrace skips the test when the machine cannot trace a child, except
// in CI (CI=true), where a power-loss test that silently skips would hide a
// broken set-up: there it fails.
func cannotTrace(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: the power-loss trace must run in CI; .ci/run installs strace)", why)
	}
	t.Skip(why)
}

// straceChild runs the child in -seq mode under strace and returns its
// finished syscalls in order.
func straceChild(t *testing.T, args ...string) []traceEvent {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		cannotTrace(t, "strace not installed (apt-get install strace): the syscall trace cannot run")
	}
	bin := child(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "trace")
	cmdArgs := append([]string{"-f", "-qq", "-y", "-e", "trace=mmap,mremap,munmap,msync,fsync,fdatasync,write,openat", "-o", out, bin,
		"-dir", filepath.Join(dir, "data"), "-log", filepath.Join(dir, "seqlog")}, args...)
	if b, err := exec.Command(strace, cmdArgs...).CombinedOutput(); err != nil {
		if strings.Contains(string(b), "ptrace") || strings.Contains(string(b), "Operation not permitted") {
			cannotTrace(t, "strace cannot trace here: "+string(b))
		}
		t.Fatalf("strace child: %v\n%s", err, b)
	}
	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	evs, err := parseTrace(f)
	require.NoError(t, err)
	return evs
}

// parseTrace reads strace -f output into finished syscalls, in order.
func parseTrace(r io.Reader) ([]traceEvent, error) {
	lineRE := regexp.MustCompile(`^(\d+)\s+(.*)$`)
	callRE := regexp.MustCompile(`^([a-z0-9_]+)\(`)
	resumedRE := regexp.MustCompile(`^<\.\.\. ([a-z0-9_]+) resumed>(.*)$`)
	unfinished := map[string]string{}
	atEntry := map[string]bool{"msync": true, "fsync": true, "fdatasync": true, "write": true}
	var evs []traceEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		pid, rest := m[1], m[2]
		// With several threads strace may print a syscall's exit after
		// another thread's next call. A sync or a log write is placed where
		// it started (its arguments are all there); the others where they
		// finished (mmap's address is its result).
		if strings.HasSuffix(rest, "<unfinished ...>") {
			rest = strings.TrimSuffix(rest, "<unfinished ...>")
			if c := callRE.FindStringSubmatch(rest); c != nil && atEntry[c[1]] {
				evs = append(evs, traceEvent{call: c[1], line: rest})
				unfinished[pid] = ""
				continue
			}
			unfinished[pid] = rest
			continue
		}
		if r := resumedRE.FindStringSubmatch(rest); r != nil {
			if atEntry[r[1]] {
				delete(unfinished, pid)
				continue
			}
			rest = unfinished[pid] + r[2]
			delete(unfinished, pid)
		}
		if c := callRE.FindStringSubmatch(rest); c != nil {
			evs = append(evs, traceEvent{call: c[1], line: rest})
		}
	}
	return evs, sc.Err()
}

var (
	// strace pads a result to a column ("<... mmap resumed>)      = 0x…"),
	// so the space before "=" is any run of blanks.
	mmapRE   = regexp.MustCompile(`^mmap\(NULL, \d+, [^,]+, MAP_SHARED, \d+<([^>]+)>, 0\s*\)\s+=\s+(0x[0-9a-f]+)`)
	mremapRE = regexp.MustCompile(`^mremap\((0x[0-9a-f]+), \d+, \d+, [^)]*\)\s+=\s+(0x[0-9a-f]+)`)
	msyncRE  = regexp.MustCompile(`^msync\((0x[0-9a-f]+),`)
	logRE    = regexp.MustCompile(`^write\(\d+<[^>]*seqlog>, "(begin|ok) (push|ack) (\d+) (true|false)\\n"`)
	fsyncRE  = regexp.MustCompile(`^f(?:data)?sync\(\d+<([^>]+)>\)`)
	createRE = regexp.MustCompile(`^openat\([^,]+, "([^"]+\.(?:vlog|mem))", [^)]*O_CREAT`)
)

// window is what happened between a call's begin and ok lines.
type window struct {
	op, n       string
	big         bool
	vlogAtStart string
	synced      map[string]bool // files msynced or fsynced
	created     []string        // log files created
	// unmapped are msynced addresses whose mmap the trace had not shown
	// yet: with several threads, strace may print an mmap's result after
	// a later msync of another thread, even after the call's ok line on a
	// loaded machine. Resolved by the first mapping of the address the
	// trace shows after the msync (see windows).
	unmapped []string
	at       []int // index in the trace of each unmapped msync
}

// windows splits the trace into per-call windows.
func windows(t *testing.T, evs []traceEvent) []window {
	t.Helper()
	maps := map[string]string{} // address → file
	var out []window
	var cur *window
	curVlog := ""
	type mapping struct {
		at         int
		addr, file string
	}
	var mapped []mapping // every mmap and mremap, in trace order
	for i, e := range evs {
		switch e.call {
		case "mmap":
			if m := mmapRE.FindStringSubmatch(e.line); m != nil {
				maps[m[2]] = m[1]
				mapped = append(mapped, mapping{i, m[2], m[1]})
				if strings.HasSuffix(m[1], ".vlog") {
					curVlog = m[1]
				}
			}
		case "mremap": // a log file grown in place may move: the file follows
			if m := mremapRE.FindStringSubmatch(e.line); m != nil {
				if f, ok := maps[m[1]]; ok {
					maps[m[2]] = f
					mapped = append(mapped, mapping{i, m[2], f})
				}
			}
		case "msync":
			if m := msyncRE.FindStringSubmatch(e.line); m != nil && cur != nil {
				if f, ok := maps[m[1]]; ok {
					cur.synced[f] = true
				} else {
					cur.unmapped = append(cur.unmapped, m[1])
					cur.at = append(cur.at, i)
				}
			}
		case "fsync", "fdatasync":
			if m := fsyncRE.FindStringSubmatch(e.line); m != nil && cur != nil {
				cur.synced[m[1]] = true
			}
		case "openat":
			if m := createRE.FindStringSubmatch(e.line); m != nil && cur != nil {
				cur.created = append(cur.created, m[1])
			}
		case "write":
			m := logRE.FindStringSubmatch(e.line)
			if m == nil {
				continue
			}
			if m[1] == "begin" {
				cur = &window{op: m[2], n: m[3], big: m[4] == "true", vlogAtStart: curVlog, synced: map[string]bool{}}
				continue
			}
			require.NotNil(t, cur, "ok line without begin")
			require.Equal(t, cur.op+cur.n, m[2]+m[3])
			out = append(out, *cur)
			cur = nil
		}
	}
	for w := range out {
		for k, addr := range out[w].unmapped {
			for _, mp := range mapped {
				if mp.at > out[w].at[k] && mp.addr == addr {
					out[w].synced[mp.file] = true
					break
				}
			}
		}
	}
	return out
}

func syncedKind(w window, suffix string) bool {
	for f := range w.synced {
		if strings.HasSuffix(f, suffix) {
			return true
		}
	}
	return false
}

// TestPowerLoss_SyncedBeforeReturn checks in the syscall trace that every
// push and ack made with SyncEveryCommit, and every push made with
// SyncPushes, msyncs, before it returns, the memtable log and the
// value-log file its write went to, across a value-log rotation; that
// SyncPushes leaves acks to its background sync; and that SyncNever syncs
// nothing.
func TestPowerLoss_SyncedBeforeReturn(t *testing.T) {
	t.Parallel()
	// syncedBeforeReturn checks that every push (every call with allCalls) synced
	// its logs before it returned, across a value-log rotation, and
	// returns the windows of the acks.
	syncedBeforeReturn := func(t *testing.T, mode queen.Durability, allCalls bool) (acks []window) {
		ws := windows(t, straceChild(t, "-seq", "12", "-vlogsize", fmt.Sprint(2<<20), "-durability", mode.String()))
		require.Len(t, ws, 24, "12 pushes and 12 acks")
		rotations := 0
		for _, w := range ws {
			if w.op == "ack" {
				acks = append(acks, w)
				if !allCalls {
					continue
				}
			}
			where := fmt.Sprintf("%s %s", w.op, w.n)
			require.True(t, syncedKind(w, ".mem"), "%s returned before its memtable log was synced: %v (msyncs of unknown mappings: %v)", where, w.synced, w.unmapped)
			if w.big {
				require.True(t, w.synced[w.vlogAtStart], "%s returned before its value-log file %s was synced: %v", where, w.vlogAtStart, w.synced)
			}
			if len(w.created) > 0 {
				rotations++
			}
		}
		require.Positive(t, rotations, "the 2 MiB value log should have rotated")
		return acks
	}
	t.Run("sync-every-commit", func(t *testing.T) {
		t.Parallel()
		syncedBeforeReturn(t, queen.SyncEveryCommit, true)
	})
	t.Run("sync-pushes", func(t *testing.T) {
		t.Parallel()
		// Acks are synced later, in the background (AckSyncDelay is 10 s in
		// the child, so not during its calls).
		for _, w := range syncedBeforeReturn(t, queen.SyncPushes, false) {
			require.False(t, syncedKind(w, ".mem") || syncedKind(w, ".vlog"), "ack %s synced with SyncPushes: %v", w.n, w.synced)
		}
	})
	t.Run("sync-never", func(t *testing.T) {
		t.Parallel()
		ws := windows(t, straceChild(t, "-seq", "6", "-durability", queen.SyncNever.String()))
		require.Len(t, ws, 12)
		for _, w := range ws {
			require.False(t, syncedKind(w, ".mem") || syncedKind(w, ".vlog"), "%s %s synced with SyncNever: %v", w.op, w.n, w.synced)
		}
	})
}

// TestPowerLoss_NewLogFileDirectoryNotSynced pins a known gap rather than
// skipping over it: a call whose write went to a newly created value-log
// or memtable file returns without the directory being fsynced, so the
// file's directory entry is not promised to survive a power loss (see the
// comment at the top of this file and README "Known limits"). If a Badger
// upgrade starts syncing the directory, this test fails: drop the known
// limit from the README and turn the assertion around.
func TestPowerLoss_NewLogFileDirectoryNotSynced(t *testing.T) {
	t.Parallel()
	ws := windows(t, straceChild(t, "-seq", "12", "-vlogsize", fmt.Sprint(2<<20)))
	created := 0
	for _, w := range ws {
		for _, f := range w.created {
			created++
			require.False(t, w.synced[filepath.Dir(f)], "%s %s created %s and synced its directory: the known gap is closed, update README and this test", w.op, w.n, f)
		}
	}
	require.Positive(t, created, "the 2 MiB value log should have rotated into a new file during a call")
}

// TestParseTrace_SplitCalls feeds the trace parser the lines strace writes
// when threads interleave: an mmap of the memtable log split into its
// unfinished start and a padded resumed result, printed after another
// thread's msync of the same address. The push's window must count the
// memtable log as synced (CI once failed here: the split mmap was dropped).
func TestParseTrace_SplitCalls(t *testing.T) {
	const trace = `100 write(3</d/seqlog>, "begin push 0 false\n", 19) = 19
101 mmap(NULL, 134217728, PROT_READ|PROT_WRITE, MAP_SHARED, 7</d/data/00001.mem>, 0 <unfinished ...>
100 msync(0x7f3f7c000000, 4096, MS_SYNC <unfinished ...>
101 <... mmap resumed>)               = 0x7f3f7c000000
100 <... msync resumed>)              = 0
102 mremap(0x7f3f7c000000, 134217728, 268435456, MREMAP_MAYMOVE <unfinished ...>
102 <... mremap resumed>)             = 0x7f3f60000000
100 write(3</d/seqlog>, "ok push 0 false\n", 16) = 16
100 write(3</d/seqlog>, "begin ack 0 false\n", 18) = 18
100 msync(0x7f3f60000000, 4096, MS_SYNC) = 0
100 write(3</d/seqlog>, "ok ack 0 false\n", 15) = 15
`
	evs, err := parseTrace(strings.NewReader(trace))
	require.NoError(t, err)
	ws := windows(t, evs)
	require.Len(t, ws, 2)
	require.True(t, syncedKind(ws[0], ".mem"), "push: %v unmapped %v", ws[0].synced, ws[0].unmapped)
	require.True(t, syncedKind(ws[1], ".mem"), "ack after a split mremap: %v unmapped %v", ws[1].synced, ws[1].unmapped)
}
