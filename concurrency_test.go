package queen_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// TestConcurrency_PerPartitionOrderUnderChaos runs 8 workers of one group
// over 100 partitions while producers push, with random completed, failed,
// retry and abandoned batches (left to expire on the fake clock), and checks
// every delivery against a model of the cursor rule: each batch of a
// partition starts exactly at the lowest unsettled offset, is contiguous,
// nothing settled comes back, and attempts count every delivery.
func TestConcurrency_PerPartitionOrderUnderChaos(t *testing.T) {
	t.Parallel()
	const (
		partitions = 100
		perPart    = 20
		workers    = 8
	)
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.RetryLimit, cfg.RetryDelay, cfg.LeaseTime = 1<<30, 0, 30*time.Second
		_, err := b.ConfigureQueue(bg, "chaos", cfg)
		require.NoError(t, err)

		var model struct {
			sync.Mutex
			cursor     map[string]int64         // partition → lowest unsettled offset
			deliveries map[string]map[int64]int // partition → offset → times delivered
			errs       []string
		}
		model.cursor = map[string]int64{}
		model.deliveries = map[string]map[int64]int{}
		for p := 0; p < partitions; p++ {
			model.deliveries[fmt.Sprint("p", p)] = map[int64]int{}
		}
		fail := func(format string, args ...any) {
			if len(model.errs) < 20 {
				model.errs = append(model.errs, fmt.Sprintf(format, args...))
			}
		}

		var pushers sync.WaitGroup
		for w := 0; w < 4; w++ {
			pushers.Add(1)
			go func() {
				defer pushers.Done()
				for i := 0; i < perPart; i++ {
					for p := w; p < partitions; p += 4 {
						_, err := b.Push(bg, []queen.PushItem{{Queue: "chaos", Partition: fmt.Sprint("p", p), Payload: []byte(fmt.Sprint(i))}})
						if err != nil {
							panic(err)
						}
					}
				}
			}()
		}

		var settled atomic.Int64
		done := make(chan struct{})
		var workersWG sync.WaitGroup
		for w := 0; w < workers; w++ {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			workersWG.Add(1)
			go func() {
				defer workersWG.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					res, err := b.Pop(bg, queen.PopRequest{Queue: "chaos", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 1 + rng.IntN(5), Partitions: 1 + rng.IntN(2)})
					if err != nil {
						panic(err)
					}
					if len(res.Messages) == 0 {
						time.Sleep(time.Millisecond)
						continue
					}
					byPart := map[string][]*queen.Message{}
					var order []string
					for _, m := range res.Messages {
						if byPart[m.Partition] == nil {
							order = append(order, m.Partition)
						}
						byPart[m.Partition] = append(byPart[m.Partition], m)
					}
					for _, part := range order {
						msgs := byPart[part]
						model.Lock()
						if msgs[0].Offset != model.cursor[part] {
							fail("%s: batch starts at %d, cursor is %d", part, msgs[0].Offset, model.cursor[part])
						}
						for i, m := range msgs {
							if m.Offset != msgs[0].Offset+int64(i) {
								fail("%s: batch not contiguous: %v", part, offsets(msgs))
							}
							model.deliveries[part][m.Offset]++
							if m.DeliveryAttempt != model.deliveries[part][m.Offset] {
								fail("%s@%d: attempt %d, delivered %d times", part, m.Offset, m.DeliveryAttempt, model.deliveries[part][m.Offset])
							}
						}
						if rng.IntN(20) == 0 { // abandon: the lease will expire
							model.Unlock()
							continue
						}
						items := ackItems(msgs, queen.AckCompleted)
						firstBack := len(items)
						for i := range items {
							switch r := rng.IntN(100); {
							case r < 8:
								items[i].Status = queen.AckFailed
							case r < 15:
								items[i].Status = queen.AckRetry
							}
							if items[i].Status != queen.AckCompleted && i < firstBack {
								firstBack = i
							}
						}
						results, err := b.AckBatch(bg, items)
						if err != nil {
							panic(err)
						}
						if results[0].Success {
							model.cursor[part] = msgs[0].Offset + int64(firstBack)
							settled.Add(int64(firstBack))
						} else if results[0].Err != queen.ErrLeaseExpired {
							fail("%s: unexpected refusal %v", part, results[0].Err)
						}
						model.Unlock()
					}
				}
			}()
		}
		// The clock moves now and then, expiring abandoned (and some slow) leases.
		deadline := time.Now().Add(60 * time.Second)
		for settled.Load() < partitions*perPart && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
			clock.Advance(3 * time.Second)
		}
		close(done)
		workersWG.Wait()
		pushers.Wait()
		model.Lock()
		defer model.Unlock()
		require.Empty(t, model.errs)
		require.Equal(t, int64(partitions*perPart), settled.Load(), "every message settled")
		for p := 0; p < partitions; p++ {
			require.Equal(t, int64(perPart), model.cursor[fmt.Sprint("p", p)])
		}
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "chaos", Group: "g", Partitions: 64, Batch: 1000}).Messages)
	})
}
