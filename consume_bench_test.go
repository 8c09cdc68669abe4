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
