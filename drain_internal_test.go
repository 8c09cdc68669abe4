package queen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Inside the consume loop: the record of what a loop holds
// (what a drain that gives up lists) lets go of every message the loop
// finishes with, whatever became of it; and a handler that settled its
// own message is sent no second ack.

// ackRecorder is a host that records every AckBatch call of a loop.
type ackRecorder struct {
	*Broker
	mu    sync.Mutex
	items []AckItem
}

func (a *ackRecorder) AckBatch(ctx context.Context, items []AckItem) ([]AckResult, error) {
	a.mu.Lock()
	a.items = append(a.items, items...)
	a.mu.Unlock()
	return a.Broker.AckBatch(ctx, items)
}

func (a *ackRecorder) acked() []AckItem {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]AckItem(nil), a.items...)
}

func openLoopBroker(t *testing.T) *Broker {
	t.Helper()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func pushToLoop(t *testing.T, b *Broker, queue string, partitions, n int) {
	t.Helper()
	var items []PushItem
	for p := range partitions {
		for i := range n {
			items = append(items, PushItem{Queue: queue, Partition: fmt.Sprintf("p%d", p), Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		}
	}
	_, err := b.Push(context.Background(), items)
	require.NoError(t, err)
}

// heldAfter runs c to its end and returns what its run still holds.
func heldAfter(t *testing.T, c *Consumer, ctx context.Context) int {
	t.Helper()
	require.NoError(t, c.Execute(ctx))
	r := c.run()
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

func TestDrain_ListsOnlyWhatTheLoopHasNotFinished(t *testing.T) {
	t.Parallel()
	outcomes := func(_ context.Context, msg *Message) error {
		switch msg.Offset % 7 {
		case 1:
			return errors.New("failed")
		case 2:
			return Reject(errors.New("rejected"))
		case 3:
			return Park(errors.New("parked"))
		case 4:
			return InProgress(time.Hour)
		case 5:
			panic("boom")
		}
		return nil
	}
	cases := []struct {
		name  string
		build func(b *Broker, ctx context.Context, cancel context.CancelFunc) *Consumer
	}{
		{"each, every outcome", func(b *Broker, ctx context.Context, _ context.CancelFunc) *Consumer {
			return b.Queue("q").Batch(10).Partitions(3).Each().Concurrency(2).IdleMillis(100).Consume(ctx, outcomes)
		}},
		{"batches, every outcome", func(b *Broker, ctx context.Context, _ context.CancelFunc) *Consumer {
			return b.Queue("q").Batch(4).IdleMillis(100).ConsumeBatch(ctx, func(ctx context.Context, msgs []*Message) error {
				return outcomes(ctx, msgs[0])
			})
		}},
		{"handler settles, or fails", func(b *Broker, ctx context.Context, _ context.CancelFunc) *Consumer {
			return b.Queue("q").Batch(10).Each().AutoAck(false).IdleMillis(100).Consume(ctx, func(ctx context.Context, msg *Message) error {
				if msg.Offset%2 == 0 {
					_, err := b.Ack(ctx, msg, true, AckOptions{})
					return err
				}
				return Reject(errors.New("no"))
			})
		}},
		{"stopped mid-lane", func(b *Broker, ctx context.Context, cancel context.CancelFunc) *Consumer {
			return b.Queue("q").Batch(10).Partitions(3).Each().Consume(ctx, func(ctx context.Context, msg *Message) error {
				if msg.Offset == 2 {
					cancel()
				}
				return nil
			})
		}},
		{"lease lost", func(b *Broker, ctx context.Context, _ context.CancelFunc) *Consumer {
			var once sync.Once
			return b.Queue("q").Group("g").SubscriptionMode(SubscriptionModeAll).Batch(10).Each().IdleMillis(100).Consume(ctx, func(ctx context.Context, msg *Message) error {
				deleted := false
				once.Do(func() { deleted = true })
				if deleted {
					_, err := b.DeleteGroup(ctx, "g", "q", true)
					return err
				}
				return nil
			})
		}},
		{"seek past the lane", func(b *Broker, ctx context.Context, _ context.CancelFunc) *Consumer {
			var once sync.Once
			return b.Queue("q").Group("g").SubscriptionMode(SubscriptionModeAll).Batch(10).Each().IdleMillis(100).Consume(ctx, func(ctx context.Context, msg *Message) error {
				var err error
				// The rest of the lane is settled ahead of the loop.
				once.Do(func() { _, err = b.SeekGroup(ctx, "g", "q", SeekOptions{ToEnd: true}) })
				return err
			})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := openLoopBroker(t)
			cfg := DefaultQueueConfig()
			cfg.RetryLimit = 1
			cfg.RetryDelay = 0
			_, err := b.ConfigureQueue(context.Background(), "q", cfg)
			require.NoError(t, err)
			pushToLoop(t, b, "q", 3, 14)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			require.Zero(t, heldAfter(t, tc.build(b, ctx, cancel), ctx), "messages the loop finished with are still held")
		})
	}
}

// A handler that settled its own message and then failed is sent no
// second ack: the loop's only AckBatch items are for the messages the
// handler left unsettled.
func TestConsume_NoSecondAckAfterTheHandlerSettled(t *testing.T) {
	t.Parallel()
	for _, onError := range []bool{false, true} {
		t.Run(fmt.Sprintf("AutoAck(false) or OnError: %v", onError), func(t *testing.T) {
			t.Parallel()
			b := openLoopBroker(t)
			pushToLoop(t, b, "q", 1, 4)
			h := &ackRecorder{Broker: b}
			var mu sync.Mutex
			var own []string
			c := newQueueBuilder(h, "q").Batch(4).Each().AutoAck(onError).Limit(4).
				Consume(context.Background(), func(ctx context.Context, msg *Message) error {
					if msg.Offset%2 == 0 {
						if _, err := b.Ack(ctx, msg, true, AckOptions{}); err != nil {
							return err
						}
						mu.Lock()
						own = append(own, msg.TransactionID)
						mu.Unlock()
					}
					return Reject(errors.New("failed"))
				})
			if onError {
				c.OnError(func(ctx context.Context, msg *Message, err error) error { return err })
			}
			require.NoError(t, c.Execute(context.Background()))
			require.Len(t, own, 2)
			items := h.acked()
			for _, it := range items {
				require.NotContains(t, own, it.TransactionID, "a second ack for a message its handler settled")
			}
			require.Len(t, items, 2, "the two messages the handler left unsettled are dead-lettered")
		})
	}
}

// holdingHost holds a loop's first AckBatch call until release is closed;
// entered is closed once the call is held.
type holdingHost struct {
	*Broker
	entered, release chan struct{}
	once             sync.Once
}

func (h *holdingHost) AckBatch(ctx context.Context, items []AckItem) ([]AckResult, error) {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	return h.Broker.AckBatch(ctx, items)
}

// Two drains that give up at once (say Stop and the ctx's end, or
// Close) both return the DrainError: the second one waits for the list
// the first one is making while an ack it waits for is in flight.
func TestDrain_SecondDrainGetsTheFirstOnesList(t *testing.T) {
	t.Parallel()
	b := openLoopBroker(t)
	pushToLoop(t, b, "q", 1, 3)
	h := &holdingHost{Broker: b, entered: make(chan struct{}), release: make(chan struct{})}
	started, abandoned := make(chan struct{}), make(chan struct{})
	ctx := context.Background()
	c := newQueueBuilder(h, "q").Autopilot(false).Batch(3).Each().DrainTimeout(time.Millisecond).
		Consume(ctx, func(ctx context.Context, msg *Message) error {
			if msg.Offset == 1 {
				close(started)
				<-ctx.Done()
				close(abandoned)
			}
			return nil
		})
	require.NoError(t, c.Start(ctx))
	wait := func(ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("timed out")
		}
	}
	wait(h.entered) // message 0's ack is being written
	wait(started)
	r := c.run()
	second := make(chan struct{})
	r.mu.Lock()
	r.testListWait = func() { close(second) }
	r.mu.Unlock()

	errs := make(chan error, 2)
	go func() { errs <- c.Stop(ctx) }()
	wait(abandoned) // the first drain gave up and waits for the ack
	go func() { errs <- c.Stop(ctx) }()
	wait(second) // the second drain waits for the first one's list
	close(h.release)
	var lists [][]int64
	for range 2 {
		var err error
		select {
		case err = <-errs:
		case <-time.After(10 * time.Second):
			t.Fatal("a drain did not return")
		}
		var de *DrainError
		require.ErrorAs(t, err, &de)
		var offs []int64
		for _, m := range de.Unsettled {
			offs = append(offs, m.Offset)
		}
		lists = append(lists, offs)
	}
	require.Equal(t, [][]int64{{1, 2}, {1, 2}}, lists, "message 0's ack landed")
}
