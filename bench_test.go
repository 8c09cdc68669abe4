package queen_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
)

// Micro-benchmarks of the broker's hot calls. Each runs on three stores:
// mem (Options.InMemory), disk (SyncNever) and disk-fsync
// (SyncEveryCommit, skipped with -short). Every benchmark checks after its
// loop that the work it timed really happened. The committed baseline is
// benchmark.txt:
//
//	go test -run '^$' -bench . -benchmem ./

var benchStores = []struct {
	name  string
	opts  queen.Options
	disk  bool
	heavy bool
}{
	{name: "mem", opts: queen.Options{InMemory: true}},
	{name: "disk", opts: queen.Options{Durability: queen.SyncNever}, disk: true},
	{name: "disk-fsync", opts: queen.Options{Durability: queen.SyncEveryCommit}, disk: true, heavy: true},
}

const benchQueue = "bench"

var benchPayload = json.RawMessage(`{"p":"` + strings.Repeat("x", 256-8) + `"}`)

func benchEach(b *testing.B, fn func(b *testing.B, open func() *queen.Broker)) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			if st.heavy && testing.Short() {
				b.Skip("fsync per commit: skipped with -short")
			}
			open := func() *queen.Broker {
				dir := ""
				if st.disk {
					dir = b.TempDir()
				}
				opts := st.opts
				br, err := queen.Open(dir, &opts)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { br.Close() })
				return br
			}
			fn(b, open)
		})
	}
}

func benchParts(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "p" + strconv.Itoa(i)
	}
	return names
}

// benchFill pushes n messages, message i to partOf(i), 1000 per call.
func benchFill(b testing.TB, br *queen.Broker, n int, partOf func(i int) string) {
	b.Helper()
	ctx := context.Background()
	for lo := 0; lo < n; lo += 1000 {
		items := make([]queen.PushItem, 0, 1000)
		for i := lo; i < min(lo+1000, n); i++ {
			items = append(items, queen.PushItem{Queue: benchQueue, Partition: partOf(i), Payload: benchPayload})
		}
		if _, err := br.Push(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
}

func benchCount(b *testing.B, br *queen.Broker, want int64) {
	b.Helper()
	qs, err := br.QueueStats(context.Background(), benchQueue)
	if err != nil {
		b.Fatal(err)
	}
	if qs.Messages != want {
		b.Fatalf("queue holds %d messages, want %d", qs.Messages, want)
	}
}

// BenchmarkBroker_Push pushes one 256-byte message per call, over 10
// partitions, from one goroutine.
func BenchmarkBroker_Push(b *testing.B) {
	benchEach(b, func(b *testing.B, open func() *queen.Broker) {
		br := open()
		ctx := context.Background()
		parts := benchParts(10)
		items := make([]queen.PushItem, 1)
		b.ReportAllocs()
		b.SetBytes(int64(len(benchPayload)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			items[0] = queen.PushItem{Queue: benchQueue, Partition: parts[i%len(parts)], Payload: benchPayload}
			res, err := br.Push(ctx, items)
			if err != nil || res[0].Status != queen.PushQueued {
				b.Fatalf("push: %v %v", err, res)
			}
		}
		b.StopTimer()
		benchCount(b, br, int64(b.N))
	})
}

// BenchmarkBroker_PushBatch pushes 100 messages per call; ns/op is per call.
func BenchmarkBroker_PushBatch(b *testing.B) {
	const batch = 100
	benchEach(b, func(b *testing.B, open func() *queen.Broker) {
		br := open()
		ctx := context.Background()
		parts := benchParts(10)
		items := make([]queen.PushItem, batch)
		b.ReportAllocs()
		b.SetBytes(int64(batch * len(benchPayload)))
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			for k := range items {
				items[k] = queen.PushItem{Queue: benchQueue, Partition: parts[k%len(parts)], Payload: benchPayload}
			}
			if _, err := br.Push(ctx, items); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "msgs/s")
		b.StopTimer()
		benchCount(b, br, int64(b.N*batch))
	})
}

// BenchmarkBroker_PopAck pops and acks one message per iteration (batch
// 1, one group, 10 partitions): allocs/op is the allocation count of one
// message's pop+ack. The batch100 variant pops and acks 100 per call;
// its ns/op and allocs/op are per message.
//
// The idle100k variants run batch 100 with 100,000 idle partitions (each
// pushed once and consumed by the same group) beside the 10 busy ones:
// scenario 6 of the harness, in process (skipped with -short).
func BenchmarkBroker_PopAck(b *testing.B) {
	for _, v := range []struct {
		name        string
		batch, idle int
	}{{"batch1", 1, 0}, {"batch100", 100, 0}, {"batch100/idle100k", 100, 100000}} {
		batch := v.batch
		b.Run(v.name, func(b *testing.B) {
			if v.idle > 0 && testing.Short() {
				b.Skip("100,000 idle partitions: skipped with -short")
			}
			benchEach(b, func(b *testing.B, open func() *queen.Broker) {
				br := open()
				ctx := context.Background()
				if v.idle > 0 {
					benchIdle(b, br, v.idle)
				}
				parts := benchParts(10)
				calls := (b.N + batch - 1) / batch
				// Runs of batch messages per partition, so each pop fills up.
				benchFill(b, br, calls*batch, func(i int) string { return parts[i/batch%len(parts)] })
				req := queen.PopRequest{Queue: benchQueue, Group: "g", Batch: batch, SubscriptionMode: queen.SubscriptionModeAll}
				items := make([]queen.AckItem, 0, batch)
				next := map[string]int64{}
				settled := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < calls; i++ {
					res, err := br.Pop(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Messages) != batch {
						b.Fatalf("pop %d: %d messages, want %d", i, len(res.Messages), batch)
					}
					items = items[:0]
					for _, m := range res.Messages {
						if m.Offset != next[m.Partition] {
							b.Fatalf("partition %s: offset %d, want %d", m.Partition, m.Offset, next[m.Partition])
						}
						next[m.Partition]++
						items = append(items, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: "g"})
					}
					ar, err := br.AckBatch(ctx, items)
					if err != nil {
						b.Fatal(err)
					}
					for _, a := range ar {
						if !a.Success || a.Err != nil {
							b.Fatalf("ack refused: %v", a.Err)
						}
					}
					settled += len(items)
				}
				b.StopTimer()
				if batch > 1 {
					// Report per message, whatever b.N was rounded to.
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(settled), "ns/msg")
				}
				if settled != calls*batch {
					b.Fatalf("settled %d of %d", settled, calls*batch)
				}
				gs, err := br.ListGroups(ctx, queen.GroupFilter{Group: "g"})
				if err != nil || len(gs) != 1 || gs[0].Lag != 0 || gs[0].Consumed != int64(settled+v.idle) {
					b.Fatalf("group after the loop: %+v %v", gs, err)
				}
			})
		})
	}
}

// benchIdle gives group g n idle partitions: each gets one message, which
// g pops and acks.
func benchIdle(b *testing.B, br *queen.Broker, n int) {
	b.Helper()
	ctx := context.Background()
	benchFill(b, br, n, func(i int) string { return "idle" + strconv.Itoa(i) })
	for done := 0; done < n; {
		res, err := br.Pop(ctx, queen.PopRequest{Queue: benchQueue, Group: "g", Batch: 64, Partitions: 64, SubscriptionMode: queen.SubscriptionModeAll})
		if err != nil || len(res.Messages) == 0 {
			b.Fatalf("idle pop: %v", err)
		}
		items := make([]queen.AckItem, 0, len(res.Messages))
		for _, m := range res.Messages {
			items = append(items, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: "g"})
		}
		if _, err := br.AckBatch(ctx, items); err != nil {
			b.Fatal(err)
		}
		done += len(items)
	}
}

// BenchmarkBroker_Renew extends one live lease per iteration.
func BenchmarkBroker_Renew(b *testing.B) {
	benchEach(b, func(b *testing.B, open func() *queen.Broker) {
		br := open()
		ctx := context.Background()
		benchFill(b, br, 1, func(int) string { return "p0" })
		res, err := br.Pop(ctx, queen.PopRequest{Queue: benchQueue, Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
		if err != nil || len(res.Messages) != 1 {
			b.Fatalf("pop: %v", err)
		}
		var last queen.LeaseRenewal
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if last, err = br.RenewLease(ctx, res.LeaseID, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if time.Until(last.ExpiresAt) < 50*time.Second {
			b.Fatalf("lease expires at %v", last.ExpiresAt)
		}
		m := res.Messages[0]
		ar, err := br.AckBatch(ctx, []queen.AckItem{{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: res.LeaseID, Group: "g"}})
		if err != nil || !ar[0].Success {
			b.Fatalf("ack under the renewed lease: %v %v", err, ar[0].Err)
		}
	})
}

// BenchmarkBroker_Fetch reads pages of 100 messages by offset from a
// partition of 10,000.
func BenchmarkBroker_Fetch(b *testing.B) {
	const total, page = 10000, 100
	benchEach(b, func(b *testing.B, open func() *queen.Broker) {
		br := open()
		ctx := context.Background()
		benchFill(b, br, total, func(int) string { return "p0" })
		b.ReportAllocs()
		b.SetBytes(int64(page * len(benchPayload)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			from := int64(i*page) % total
			fr, err := br.Fetch(ctx, benchQueue, "p0", from, page)
			if err != nil {
				b.Fatal(err)
			}
			if len(fr.Records) != page || fr.Records[0].Offset != from || fr.Records[page-1].Offset != from+page-1 || fr.NextOffset != from+page {
				b.Fatalf("fetch from %d: %d records, next %d", from, len(fr.Records), fr.NextOffset)
			}
			if string(fr.Records[0].Payload) != string(benchPayload) {
				b.Fatal("payload differs")
			}
		}
	})
}
