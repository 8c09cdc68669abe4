package queen_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
)

// benchManyParts is the partition count of the many-partitions benchmarks:
// one queue, one message per partition (a partition per customer).
var benchManyParts = flag.Int("bench.parts", 1_000_000, "partitions of the many-partitions benchmarks")

// benchManyDir, when set, keeps the many-partitions fixtures there and
// reuses them in later runs (building one takes a while): so that two
// binaries can be timed against the same stores.
var benchManyDir = flag.String("bench.store", "", "directory that keeps the many-partitions fixtures across runs (default: a new temporary one)")

// manyPayloads are the payload sizes of the many-partitions benchmarks:
// 7 bytes ({"x":1}), whose message records stay in Badger's LSM tree,
// and 256 bytes, whose records go to its value log (see vlogThreshold).
var manyPayloads = []struct {
	name    string
	payload json.RawMessage
}{
	{"payload=7B", json.RawMessage(`{"x":1}`)},
	{"payload=256B", benchPayload},
}

// benchManyStore returns the directory of a closed store holding one queue
// with *benchManyParts partitions of one message (payload) each, as its
// last Close left it: in -bench.store if set (built there once), else in a
// new temporary one. The store is the master copy: measurements open a
// copy of it (see freshCopy), since the first Open after the fill is not
// like the ones after it (Badger's compactions of the filled tree run
// then).
func benchManyStore(b *testing.B, payload json.RawMessage) string {
	b.Helper()
	var dir string
	if *benchManyDir != "" {
		dir = filepath.Join(*benchManyDir, fmt.Sprintf("parts%d-payload%d", *benchManyParts, len(payload)))
		if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
			return dir
		}
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
	} else {
		dir = b.TempDir()
	}
	br, err := queen.Open(dir, &queen.Options{Durability: queen.SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	n := *benchManyParts
	for lo := 0; lo < n; lo += 1000 {
		items := make([]queen.PushItem, 0, 1000)
		for i := lo; i < min(lo+1000, n); i++ {
			items = append(items, queen.PushItem{Queue: benchQueue, Partition: "c" + strconv.Itoa(i), Payload: payload})
		}
		if _, err := br.Push(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	if err := br.Close(); err != nil {
		b.Fatal(err)
	}
	if *benchManyDir != "" {
		if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// freshCopy copies the store in master to a new directory beside it (the
// files, flat, as Badger keeps them) and returns it; the caller removes it.
func freshCopy(b *testing.B, master string) string {
	b.Helper()
	dir, err := os.MkdirTemp(filepath.Dir(master), "copy-")
	if err != nil {
		b.Fatal(err)
	}
	entries, err := os.ReadDir(master)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "complete" {
			continue
		}
		if err := copyFile(filepath.Join(master, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// heapMiB is the live Go heap after a full collection, MiB.
func heapMiB() float64 { return float64(liveHeap()) / (1 << 20) }

// manyChildEnv names the environment variable that makes
// TestManyPartitionsChild measure (see openFresh).
const manyChildEnv = "QUEEN_MANYPARTS_CHILD"

// manyResult is what a fresh process measured after opening a store.
type manyResult struct {
	OpenNs    int64   // Open
	HeapMiB   float64 // live Go heap after Open and a full collection, less the heap before Open
	AllPopNs  int64   // first pop of a new group in mode all, right after Open
	NewPopNs  int64   // then of a new group in mode new
	Messages  int64
	PopGotAll int
}

// openFresh runs TestManyPartitionsChild in a new process of this test
// binary, on a fresh copy of the store in master, and returns what it
// measured: the figures of a process that did nothing before Open (no
// fixture's garbage, caches or heap growth left behind), on the store as
// the fill left it. mode is "default" ([queen.Open]) or "small-badger"
// ([queen.OpenDB] with a 1 MiB block cache and an 8 MiB memtable).
func openFresh(b *testing.B, master, mode string) manyResult {
	b.Helper()
	dir := freshCopy(b, master)
	defer os.RemoveAll(dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestManyPartitionsChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), manyChildEnv+"="+mode+","+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		b.Fatalf("child: %v\n%s", err, out.String())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "manyparts: "); ok {
			var r manyResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				b.Fatal(err)
			}
			return r
		}
	}
	b.Fatalf("child reported nothing:\n%s", out.String())
	return manyResult{}
}

// manyProfEnv, set for a many-partitions benchmark, makes its child write
// a CPU profile of Open to $QUEEN_MANYPARTS_PROF.cpu.pprof and a heap
// profile where the heap is measured to $QUEEN_MANYPARTS_PROF.heap.pprof.
const manyProfEnv = "QUEEN_MANYPARTS_PROF"

// TestManyPartitionsChild is the measuring half of the many-partitions
// benchmarks, run by openFresh in a process of its own; skipped otherwise.
// It opens the store, pops one message as a new group in mode all and
// none as one in mode new (both deleted again), and reports the times and
// the heap.
func TestManyPartitionsChild(t *testing.T) {
	env := os.Getenv(manyChildEnv)
	if env == "" {
		t.Skip("run by the many-partitions benchmarks")
	}
	mode, dir, _ := strings.Cut(env, ",")
	prof := os.Getenv(manyProfEnv)
	base := heapMiB()
	if prof != "" {
		f, err := os.Create(prof + ".cpu.pprof")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var db *badger.DB
	var br *queen.Broker
	var err error
	if mode == "small-badger" {
		db, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithBlockCacheSize(1 << 20).WithMemTableSize(8 << 20))
		if err == nil {
			br, err = queen.OpenDB(db, nil)
		}
	} else {
		br, err = queen.Open(dir, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	r := manyResult{OpenNs: time.Since(start).Nanoseconds()}
	if prof != "" {
		pprof.StopCPUProfile()
	}
	ctx := context.Background()
	for _, m := range []queen.SubscriptionMode{queen.SubscriptionModeAll, queen.SubscriptionModeNew} {
		group := "fresh-" + string(m)
		start := time.Now()
		res, err := br.Pop(ctx, queen.PopRequest{Queue: benchQueue, Group: group, Batch: 1, SubscriptionMode: m})
		if err != nil {
			t.Fatal(err)
		}
		if m == queen.SubscriptionModeAll {
			r.AllPopNs, r.PopGotAll = time.Since(start).Nanoseconds(), len(res.Messages)
		} else {
			r.NewPopNs = time.Since(start).Nanoseconds()
			if len(res.Messages) != 0 {
				t.Fatalf("group in mode new got %d messages", len(res.Messages))
			}
		}
	}
	r.HeapMiB = heapMiB() - base
	if prof != "" {
		f, err := os.Create(prof + ".heap.pprof")
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		err = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	qs, err := br.QueueStats(ctx, benchQueue)
	if err != nil {
		t.Fatal(err)
	}
	r.Messages = qs.Messages
	for _, m := range []queen.SubscriptionMode{queen.SubscriptionModeAll, queen.SubscriptionModeNew} {
		if _, err := br.DeleteGroup(ctx, "fresh-"+string(m), benchQueue, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	if db != nil {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	enc, _ := json.Marshal(r)
	fmt.Printf("manyparts: %s\n", enc)
}

// BenchmarkOpen_1MPartitions opens a store holding one queue with
// -bench.parts partitions of one message each (and no group), each time
// in a new process (see openFresh), for a payload stored in Badger's LSM
// tree (7 B) and one in its value log (256 B). ns/op is the time Open
// takes; heap-MiB the live Go heap of the open broker (after a full
// collection, the largest of the runs); allpop-ms and newpop-ms the first
// pop of a new group in mode all and then of one in mode new, right after
// Open (while the collector may still be busy with Open's garbage; means
// of the runs). The "default" case opens it with [queen.Open]'s Badger
// settings; "small-badger" runs [queen.OpenDB] on a database with a 1 MiB
// block cache and an 8 MiB memtable.
//
//	go test -run '^$' -bench Open_1M -benchtime 3x -bench.store /tmp/many .
func BenchmarkOpen_1MPartitions(b *testing.B) {
	for _, pl := range manyPayloads {
		b.Run(pl.name, func(b *testing.B) {
			dir := benchManyStore(b, pl.payload)
			for _, mode := range []string{"default", "small-badger"} {
				b.Run(mode, func(b *testing.B) {
					var open, allPop, newPop time.Duration
					var heap float64
					for i := 0; i < b.N; i++ {
						r := openFresh(b, dir, mode)
						if r.Messages != int64(*benchManyParts) || r.PopGotAll != 1 {
							b.Fatalf("queue holds %d messages, first pop got %d; want %d and 1", r.Messages, r.PopGotAll, *benchManyParts)
						}
						open += time.Duration(r.OpenNs)
						allPop += time.Duration(r.AllPopNs)
						newPop += time.Duration(r.NewPopNs)
						heap = max(heap, r.HeapMiB)
					}
					n := float64(b.N)
					b.ReportMetric(float64(open.Nanoseconds())/n, "ns/op")
					b.ReportMetric(heap, "heap-MiB")
					b.ReportMetric(allPop.Seconds()*1e3/n, "allpop-ms")
					b.ReportMetric(newPop.Seconds()*1e3/n, "newpop-ms")
				})
			}
		})
	}
}

// BenchmarkFirstPop_1MPartitions times the first pop of a new consumer
// group (one message, lease and all) on a queue with -bench.parts
// partitions of one message each, for both payload sizes, in the group's
// modes: "all" reads the backlog; "new" finds nothing (every message is
// older than the group). Every iteration is a group never seen before, on
// one open broker (the first pops right after Open are in
// BenchmarkOpen_1MPartitions).
func BenchmarkFirstPop_1MPartitions(b *testing.B) {
	for _, pl := range manyPayloads {
		b.Run(pl.name, func(b *testing.B) {
			master := benchManyStore(b, pl.payload)
			for _, mode := range []queen.SubscriptionMode{queen.SubscriptionModeAll, queen.SubscriptionModeNew} {
				b.Run(string(mode), func(b *testing.B) {
					dir := freshCopy(b, master)
					defer os.RemoveAll(dir)
					br, err := queen.Open(dir, nil)
					if err != nil {
						b.Fatal(err)
					}
					defer br.Close()
					ctx := context.Background()
					want := 1
					if mode == queen.SubscriptionModeNew {
						want = 0
					}
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						group := string(mode) + strconv.Itoa(i)
						res, err := br.Pop(ctx, queen.PopRequest{Queue: benchQueue, Group: group, Batch: 1, SubscriptionMode: mode})
						if err != nil {
							b.Fatal(err)
						}
						if len(res.Messages) != want {
							b.Fatalf("group %s: %d messages, want %d", group, len(res.Messages), want)
						}
						b.StopTimer()
						// Forget the group, so the next iteration pays for its own.
						if _, err := br.DeleteGroup(ctx, group, benchQueue, true); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				})
			}
		})
	}
}
