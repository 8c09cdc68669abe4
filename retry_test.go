package queen_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestRetryPolicy_Backoff(t *testing.T) {
	t.Parallel()
	exp := queen.ExponentialRetry(6, 10*time.Second, 300*time.Second)
	var got []time.Duration
	for a := 1; a <= 7; a++ {
		got = append(got, exp.Backoff(a))
	}
	s := time.Second
	require.Equal(t, []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s}, got)

	fixed := queen.FixedRetry(3, 5*time.Second)
	require.Equal(t, 5*time.Second, fixed.Backoff(1))
	require.Equal(t, 5*time.Second, fixed.Backoff(9))
	require.Equal(t, queen.RetryPolicy{MaxAttempts: 1}, queen.NoRetry())

	huge := queen.RetryPolicy{InitialDelay: time.Hour, Multiplier: 10}
	require.Positive(t, huge.Backoff(1000), "no overflow")

	jit := queen.RetryPolicy{InitialDelay: time.Second, Multiplier: 1, Jitter: 0.5}
	for range 100 {
		d := jit.Backoff(1)
		require.GreaterOrEqual(t, d, 500*time.Millisecond)
		require.LessOrEqual(t, d, time.Second)
	}
}

func TestRetryPolicy_Validation(t *testing.T) {
	t.Parallel()
	b, _ := clocked(t, nil)
	nop := func(ctx context.Context, msg *queen.Message) error { return nil }
	for field, p := range map[string]queen.RetryPolicy{
		"RetryPolicy.MaxAttempts":   {MaxAttempts: -1},
		"RetryPolicy.InitialDelay":  {InitialDelay: -1},
		"RetryPolicy.MaxDelay":      {MaxDelay: -1},
		"RetryPolicy.MaxMessageAge": {MaxMessageAge: -1},
		"RetryPolicy.Multiplier":    {Multiplier: -2},
		"RetryPolicy.Jitter":        {Jitter: 1.5},
	} {
		err := b.Queue("q").RetryPolicy(p).Consume(context.Background(), nop).Execute(context.Background())
		var ae *queen.ArgumentError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, field, ae.Field)
	}
}

func TestRetryPolicy_BackoffHoldsOnlyItsPartition(t *testing.T) {
	t.Parallel()
	b, clock := clocked(t, nil)
	pushTo(t, b, "q", "slow", numbered(2)...)
	pushTo(t, b, "q", "fast", numbered(2)...)
	var (
		mu    sync.Mutex
		order []string
	)
	fastDone := make(chan struct{})
	failedOnce := false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := b.Queue("q").Autopilot(false).Batch(1).RetryPolicy(queen.FixedRetry(3, 10*time.Second)).Each().Limit(5).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, fmt.Sprintf("%s%d/%d", msg.Partition, dataN(msg), msg.DeliveryAttempt))
			if msg.Partition == "slow" && dataN(msg) == 0 && !failedOnce {
				failedOnce = true
				return errors.New("database down")
			}
			if msg.Partition == "fast" && dataN(msg) == 1 {
				close(fastDone)
			}
			return nil
		})
	require.NoError(t, c.Start(ctx))
	// slow0 fails and waits 10 s (of the fake clock); fast goes on.
	recv(t, fastDone)
	mu.Lock()
	require.Contains(t, order, "slow0/1")
	require.NotContains(t, order, "slow1/1", "nothing overtakes the failed message")
	mu.Unlock()
	clock.Advance(9 * time.Second)
	kick(t, b)
	clock.Advance(time.Second)
	kick(t, b)
	recv(t, c.Done())
	require.NoError(t, c.Err())

	var slow []string
	for _, o := range order {
		if o[0] == 's' {
			slow = append(slow, o)
		}
	}
	require.Equal(t, []string{"slow0/1", "slow0/2", "slow1/1"}, slow)
	cs := cursorOf(t, b, "q", "slow", "")
	require.EqualValues(t, 2, cs.Offset)
	require.Zero(t, b.Counters().Acked[queen.AckFailed], "the queue's budget is untouched")
}

func TestRetryPolicy_Exhausted(t *testing.T) {
	t.Parallel()
	t.Run("after MaxAttempts", func(t *testing.T) {
		t.Parallel()
		b, _ := clocked(t, nil)
		pushTo(t, b, "q", "Default", numbered(2)...)
		var attempts []int
		err := b.Queue("q").RetryPolicy(queen.FixedRetry(3, 0)).Each().Limit(4).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				if dataN(msg) == 1 {
					return nil
				}
				attempts = append(attempts, msg.DeliveryAttempt)
				return fmt.Errorf("attempt %d: card declined", msg.DeliveryAttempt)
			}).Execute(context.Background())
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3}, attempts)
		dl, err := b.DeadLetters(context.Background(), queen.LetterFilter{Queue: "q"})
		require.NoError(t, err)
		require.Len(t, dl.Letters, 1)
		require.Equal(t, "attempt 3: card declined", dl.Letters[0].Error)
		require.EqualValues(t, 2, cursorOf(t, b, "q", "Default", "").Offset, "the next message follows")
	})
	t.Run("NoRetry", func(t *testing.T) {
		t.Parallel()
		b, _ := clocked(t, nil)
		pushTo(t, b, "q", "Default", `{}`)
		s := consumeOne(t, b, b.Queue("q").RetryPolicy(queen.NoRetry()), errors.New("nope"))
		require.Equal(t, queen.AckDLQ, s.Status)
		require.Equal(t, queen.OutcomeDeadLettered, s.Outcome)
	})
	t.Run("MaxMessageAge", func(t *testing.T) {
		t.Parallel()
		b, clock := clocked(t, nil)
		pushTo(t, b, "q", "Default", `{}`)
		clock.Advance(2 * time.Hour)
		p := queen.ExponentialRetry(0, time.Second, time.Minute)
		p.MaxMessageAge = time.Hour
		s := consumeOne(t, b, b.Queue("q").RetryPolicy(p), errors.New("too late"))
		require.Equal(t, queen.AckDLQ, s.Status)
		dl, err := b.DeadLetters(context.Background(), queen.LetterFilter{Queue: "q"})
		require.NoError(t, err)
		require.Equal(t, "too late", dl.Letters[0].Error)
	})
	t.Run("Retry outcome follows the policy", func(t *testing.T) {
		t.Parallel()
		b, _ := clocked(t, nil)
		pushTo(t, b, "q", "Default", `{}`)
		s := consumeOne(t, b, b.Queue("q").RetryPolicy(queen.ExponentialRetry(5, 3*time.Second, time.Minute)), queen.Retry(errors.New("later")))
		require.Equal(t, queen.AckRetry, s.Status)
		require.Equal(t, 3*time.Second, s.Delay)
	})
}

// TestRetry_BatchDoesNotWaitForTheHeldMessageBehindIt: a batch
// cut short by a message DelayedProcessing still holds comes back at once
// when retried (no retry delay): it does not wait until the held message
// behind it becomes visible, for the claim leaves that message's hold off
// the cursor while the batch is still out.
func TestRetry_BatchDoesNotWaitForTheHeldMessageBehindIt(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	configureWith(t, b, "q", func(c *queen.QueueConfig) { c.DelayedProcessing = 20 * time.Second; c.RetryDelay = 0 })
	pushOne(t, b, "q", "p", "a", `1`)
	pushOne(t, b, "q", "p", "b", `2`)
	clock.Advance(30 * time.Second)
	pushOne(t, b, "q", "p", "c", `3`) // held for 20 s
	res := pop(t, b, queen.PopRequest{Queue: "q", Batch: 10})
	require.Equal(t, []string{"a", "b"}, txids(res.Messages), "the batch stops before the held message")
	_, err := b.AckBatch(bg, []queen.AckItem{
		{TransactionID: "a", PartitionID: res.Messages[0].PartitionID, LeaseID: res.LeaseID, Status: queen.AckRetry},
		{TransactionID: "b", PartitionID: res.Messages[1].PartitionID, LeaseID: res.LeaseID, Status: queen.AckCompleted},
	})
	require.NoError(t, err)
	again := pop(t, b, queen.PopRequest{Queue: "q", Batch: 10})
	// (b, after a on the cursor, comes back with it: see AckBatch.)
	require.Equal(t, []string{"a", "b"}, txids(again.Messages), "the batch comes back at once; c is still held")
}
