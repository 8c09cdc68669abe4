package queen_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
)

// BenchmarkWaitingLongPoll measures what one waiting long-poll costs while
// it waits: heap (heap-B/pop) and goroutine stack (stack-B/pop), for each
// kind of wait. b.N pops are parked at once (the parked-pop count says
// when they all wait), measured, then ended by Close. ns/op is meaningless
// here and reported as 0. The README's per-long-poll figures come from
// this benchmark:
//
//	go test -run '^$' -bench ParkedLongPoll -benchtime 10000x .
func BenchmarkWaitingLongPoll(b *testing.B) {
	for _, kind := range []struct {
		name string
		req  queen.PopRequest
	}{
		{"queue", queen.PopRequest{Queue: "lp"}},
		{"partition", queen.PopRequest{Queue: "lp", Partition: "p0"}},
		{"group", queen.PopRequest{Queue: "lp", Group: "g"}},
		{"unknown-queue", queen.PopRequest{Queue: "not-yet"}},
	} {
		b.Run(kind.name, func(b *testing.B) {
			broker, err := queen.Open("", &queen.Options{InMemory: true})
			if err != nil {
				b.Fatal(err)
			}
			defer broker.Close()
			pushN(b, broker, "lp", "p0", 1)
			for _, g := range []string{"", "g"} { // the queue, its partition and both groups exist
				if _, err := broker.Pop(context.Background(), queen.PopRequest{Queue: "lp", Group: g, SubscriptionMode: queen.SubscriptionModeAll, CommitOnDelivery: true}); err != nil {
					b.Fatal(err)
				}
			}
			req := kind.req
			req.Wait, req.Timeout = true, time.Minute

			runtime.GC()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, b.N)
			for range b.N {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := broker.Pop(context.Background(), req)
					errs <- err
				}()
			}
			itest.AwaitWaiting(b, broker, b.N)
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/float64(b.N), "heap-B/pop")
			b.ReportMetric(float64(int64(ms1.StackInuse)-int64(ms0.StackInuse))/float64(b.N), "stack-B/pop")
			if err := broker.Close(); err != nil {
				b.Fatal(err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, queen.ErrClosed) {
					b.Fatalf("a waiting pop ended by Close returned %v, want ErrClosed", err)
				}
			}
		})
	}
}
