package queen_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenlite/queen"
)

// BenchmarkConsume_VsDrain drains one backlog of 40,000 messages over 16
// partitions on the durable default (SyncEveryCommit), once per
// iteration, in three ways: by hand (Pop batch N + one AckBatch per pop,
// 4 goroutines), with the README's consume loop under Each(), and with
// ConsumeBatch, all at Concurrency(4). Its msg/s figures, taken in one
// run, are the ratio the README's Consuming section states.
func BenchmarkConsume_VsDrain(b *testing.B) {
	if testing.Short() {
		b.Skip("fsync per commit: skipped with -short")
	}
	for _, dur := range []queen.Durability{queen.SyncEveryCommit, queen.SyncNever} {
		for _, batch := range []int{10, 100} {
			for _, way := range []string{"drain", "each", "batch"} {
				consumeVsDrain(b, dur, way, batch)
			}
		}
	}
}

func consumeVsDrain(b *testing.B, dur queen.Durability, way string, batch int) {
	const backlog, parts, workers = 40000, 16, 4
	b.Run(dur.String()+"/"+way+"/batch"+itoa(batch), func(b *testing.B) {
		var total time.Duration
		for range b.N {
			b.StopTimer()
			br, err := queen.Open(b.TempDir(), &queen.Options{Durability: dur})
			if err != nil {
				b.Fatal(err)
			}
			names := benchParts(parts)
			benchFill(b, br, backlog, func(i int) string { return names[i%parts] })
			b.StartTimer()
			start := time.Now()
			n := drainWay(b, br, way, batch, workers, backlog)
			total += time.Since(start)
			b.StopTimer()
			if n != backlog {
				b.Fatalf("settled %d of %d", n, backlog)
			}
			br.Close()
		}
		b.ReportMetric(float64(backlog*b.N)/total.Seconds(), "msg/s")
	})
}

func itoa(n int) string {
	return map[int]string{10: "10", 100: "100"}[n]
}

func drainWay(b testing.TB, br *queen.Broker, way string, batch, workers, backlog int) int64 {
	ctx := context.Background()
	var n atomic.Int64
	switch way {
	case "drain":
		req := queen.PopRequest{Queue: benchQueue, Group: "g", Batch: batch, SubscriptionMode: queen.SubscriptionModeAll}
		var wg sync.WaitGroup
		wg.Add(workers)
		for range workers {
			go func() {
				defer wg.Done()
				for n.Load() < int64(backlog) {
					res, err := br.Pop(ctx, req)
					if err != nil {
						b.Error(err)
						return
					}
					if len(res.Messages) == 0 {
						continue
					}
					items := make([]queen.AckItem, 0, len(res.Messages))
					for _, m := range res.Messages {
						items = append(items, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: "g"})
					}
					if _, err := br.AckBatch(ctx, items); err != nil {
						b.Error(err)
						return
					}
					n.Add(int64(len(items)))
				}
			}()
		}
		wg.Wait()
	default:
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		q := br.Queue(benchQueue).Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(batch).Concurrency(workers)
		var c *queen.Consumer
		if way == "each" {
			c = q.Each().Consume(ctx, func(context.Context, *queen.Message) error { return nil })
		} else {
			c = q.ConsumeBatch(ctx, func(context.Context, []*queen.Message) error { return nil })
		}
		c.OnSettled(func(s queen.Settlement) {
			if s.Outcome == queen.OutcomeAccepted && n.Add(1) == int64(backlog) {
				cancel()
			}
		})
		if err := c.Execute(ctx); err != nil && !errors.Is(err, context.Canceled) {
			b.Fatal(err)
		}
	}
	return n.Load()
}

// BenchmarkConsume_PinnedBatch measures the consume loop pinned to a small
// batch against the hand-written drain of the same shape of backlog, in
// one run, on the durable default (SyncEveryCommit): 16 partitions, 4
// goroutines or Concurrency(4). Each iteration drains a fresh backlog by
// hand (Pop batch 100 + AckBatch), then with the Each loop at Batch(10)
// and at Batch(1). It reports each way's msg/s, the loops' ratios to the
// hand drain (x10, x1) and each way's storage commits (one fsync each)
// per message.
func BenchmarkConsume_PinnedBatch(b *testing.B) {
	if testing.Short() {
		b.Skip("fsync per commit: skipped with -short")
	}
	const parts, workers = 16, 4
	names := benchParts(parts)
	ways := []struct {
		name         string
		way          string
		batch, total int
	}{
		{"drain100", "drain", 100, 40000},
		{"each10", "each", 10, 20000},
		{"each1", "each", 1, 4000},
	}
	elapsed := make([]time.Duration, len(ways))
	commits := make([]int64, len(ways))
	for range b.N {
		for i, w := range ways {
			b.StopTimer()
			br, err := queen.Open(b.TempDir(), &queen.Options{Durability: queen.SyncEveryCommit})
			if err != nil {
				b.Fatal(err)
			}
			benchFill(b, br, w.total, func(i int) string { return names[i%parts] })
			c0 := queen.CommitsForTest(br)
			b.StartTimer()
			start := time.Now()
			n := drainWay(b, br, w.way, w.batch, workers, w.total)
			elapsed[i] += time.Since(start)
			b.StopTimer()
			commits[i] += queen.CommitsForTest(br) - c0
			if n != int64(w.total) {
				b.Fatalf("%s: settled %d of %d", w.name, n, w.total)
			}
			br.Close()
		}
	}
	rate := make([]float64, len(ways))
	for i, w := range ways {
		rate[i] = float64(w.total*b.N) / elapsed[i].Seconds()
		b.ReportMetric(rate[i], w.name+"-msg/s")
	}
	b.ReportMetric(rate[1]/rate[0], "x10")
	b.ReportMetric(rate[2]/rate[0], "x1")
	for i, w := range ways {
		b.ReportMetric(float64(commits[i])/float64(w.total*b.N), "commits/msg-"+w.name)
	}
}
