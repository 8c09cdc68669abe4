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

// Issue 27, inside the consume loop: the record of what a loop holds
// (what a drain that gives up lists) lets go of every message the loop
// finishes with, whatever became of it.

func openTrust27(t *testing.T) *Broker {
	t.Helper()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func pushTrust27(t *testing.T, b *Broker, queue string, partitions, n int) {
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

func TestTrust27_LoopLetsGoOfWhatItFinishes(t *testing.T) {
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
			b := openTrust27(t)
			cfg := DefaultQueueConfig()
			cfg.RetryLimit = 1
			cfg.RetryDelay = 0
			_, err := b.ConfigureQueue(context.Background(), "q", cfg)
			require.NoError(t, err)
			pushTrust27(t, b, "q", 3, 14)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			require.Zero(t, heldAfter(t, tc.build(b, ctx, cancel), ctx), "messages the loop finished with are still held")
		})
	}
}
