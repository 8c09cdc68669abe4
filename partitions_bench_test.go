package queen_test

import (
	"context"
	"flag"
	"strconv"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
)

// benchManyParts is the partition count of the many-partitions benchmarks:
// one queue, one message per partition (a partition per customer).
var benchManyParts = flag.Int("bench.parts", 1_000_000, "partitions of the many-partitions benchmarks")

// benchManyStore fills a store on disk with *benchManyParts partitions of
// one message each and returns its directory, closed.
func benchManyStore(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	br, err := queen.Open(dir, &queen.Options{Durability: queen.SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	benchFill(b, br, *benchManyParts, func(i int) string { return "c" + strconv.Itoa(i) })
	if err := br.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// heapMiB is the live Go heap after a full collection, MiB.
func heapMiB() float64 { return float64(liveHeap()) / (1 << 20) }

// BenchmarkOpen_1MPartitions opens a store holding one queue with
// -bench.parts partitions of one message each (and no group): ns/op is
// the time Open takes, heap-MiB the live Go heap of the open broker. The
// "default" case opens it with [queen.Open]'s Badger settings, whose
// memtable and block cache take much of that heap; "small-badger" runs
// [queen.OpenDB] on a database with a 1 MiB block cache and an 8 MiB
// memtable, so its heap is mostly the broker's own state.
func BenchmarkOpen_1MPartitions(b *testing.B) {
	dir := benchManyStore(b)
	for _, small := range []bool{false, true} {
		name := "default"
		if small {
			name = "small-badger"
		}
		b.Run(name, func(b *testing.B) {
			base := heapMiB()
			var heap float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var db *badger.DB
				var br *queen.Broker
				var err error
				if small {
					db, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithBlockCacheSize(1 << 20).WithMemTableSize(8 << 20))
					if err == nil {
						br, err = queen.OpenDB(db, nil)
					}
				} else {
					br, err = queen.Open(dir, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				heap = max(heap, heapMiB()-base)
				benchCount(b, br, int64(*benchManyParts))
				if err := br.Close(); err != nil {
					b.Fatal(err)
				}
				if db != nil {
					if err := db.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(heap, "heap-MiB")
		})
	}
}

// BenchmarkFirstPop_1MPartitions times the first pop of a new consumer
// group (one message, lease and all) on a queue with -bench.parts
// partitions of one message each, in the group's modes: "all" reads the
// backlog; "new" finds nothing (every message is older than the group).
// Every iteration is a group never seen before.
func BenchmarkFirstPop_1MPartitions(b *testing.B) {
	dir := benchManyStore(b)
	for _, mode := range []queen.SubscriptionMode{queen.SubscriptionModeAll, queen.SubscriptionModeNew} {
		b.Run(string(mode), func(b *testing.B) {
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
}
