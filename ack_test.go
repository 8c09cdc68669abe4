package queen_test

import (
	"testing"

	"time"

	"errors"

	"runtime"
	"sync"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// A live lease of a group of another queue is not "another group's lease"
// for an ack: it does not hold the message, so the ack is refused with
// ErrLeaseExpired, not ErrWrongGroup.
func TestAck_AnotherQueuesLeaseIsLeaseExpired(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "a", "", 1)
	pushN(t, b, "b", "", 1)
	inA := pop(t, b, queen.PopRequest{Queue: "a", Group: "ga", SubscriptionMode: queen.SubscriptionModeAll})
	inB := pop(t, b, queen.PopRequest{Queue: "b", Group: "gb", SubscriptionMode: queen.SubscriptionModeAll})
	require.Len(t, inA.Messages, 1)
	require.Len(t, inB.Messages, 1)
	_, err := b.Ack(bg, inB.Messages[0], true, queen.AckOptions{LeaseID: inA.LeaseID})
	require.ErrorIs(t, err, queen.ErrLeaseExpired)
	require.NotErrorIs(t, err, queen.ErrWrongGroup)
	// Another group's lease of the same queue is ErrWrongGroup.
	pushN(t, b, "b", "", 1)
	other := pop(t, b, queen.PopRequest{Queue: "b", Group: "gc", SubscriptionMode: queen.SubscriptionModeAll})
	require.NotEmpty(t, other.LeaseID)
	_, err = b.Ack(bg, inB.Messages[0], true, queen.AckOptions{LeaseID: other.LeaseID})
	require.ErrorIs(t, err, queen.ErrWrongGroup)
	ackAll(t, b, inB.Messages, queen.AckCompleted)
}

// A failed ack's Delay holds the partition exactly that long, whether it
// is shorter or longer than the queue's RetryDelay: one microsecond
// before, a pop of the partition gets nothing; at it, the message again.
// Both ways of giving it: AckItem.Delay and AckOptions.Delay.
func TestAck_FailedDelayHoldsThatLong(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		retryDelay, delay time.Duration
		viaAck            bool // Broker.Ack with AckOptions, else AckBatch with AckItem
	}{
		{"shorter than RetryDelay, AckItem", 10 * time.Second, 3 * time.Second, false},
		{"longer than RetryDelay, AckItem", time.Second, 5 * time.Second, false},
		{"shorter than RetryDelay, AckOptions", 10 * time.Second, 3 * time.Second, true},
		{"longer than RetryDelay, AckOptions", time.Second, 5 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := itest.NewClock()
			b := queentest.NewBroker(t, &queen.Options{Clock: clock})
			configureWith(t, b, "q", func(c *queen.QueueConfig) { c.RetryLimit, c.RetryDelay = 3, tc.retryDelay })
			pushOne(t, b, "q", "p", "", `1`)
			req := queen.PopRequest{Queue: "q", Partition: "p"}
			pr := pop(t, b, req)
			require.Len(t, pr.Messages, 1)
			if tc.viaAck {
				res, err := b.Ack(bg, pr.Messages[0], false, queen.AckOptions{Delay: tc.delay})
				require.NoError(t, err)
				require.True(t, res.Success)
			} else {
				items := ackItems(pr.Messages, queen.AckFailed)
				items[0].Delay = tc.delay
				res := ack(t, b, items...)
				require.True(t, res[0].Success, "%v", res[0].Err)
			}
			clock.Advance(tc.delay - time.Microsecond)
			require.Empty(t, pop(t, b, req).Messages, "held until the ack's Delay ends")
			clock.Advance(time.Microsecond)
			again := pop(t, b, req)
			require.Len(t, again.Messages, 1, "served when the ack's Delay ends")
			require.Equal(t, pr.Messages[0].TransactionID, again.Messages[0].TransactionID)
		})
	}
}

// TestAck_ConflictingItemsForOneMessage: completed then dlq for the same
// message in one AckBatch both reported success, and the dlq did nothing.
// Now the first item decides; a later one with another status is refused,
// a repeat of the same status succeeds; in a transaction the conflict
// aborts everything.
func TestAck_ConflictingItemsForOneMessage(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "c", "", 2)
		pr := pop(t, b, queen.PopRequest{Queue: "c", Batch: 1})
		m := pr.Messages
		items := append(ackItems(m, queen.AckCompleted), ackItems(m, queen.AckDLQ)...)
		items = append(items, ackItems(m, queen.AckCompleted)...)
		res := ack(t, b, items...)
		require.True(t, res[0].Success)
		require.False(t, res[1].Success, "dlq after completed in one call")
		require.ErrorIs(t, res[1].Err, queen.ErrInvalidArgument)
		require.Contains(t, res[1].Err.Error(), "item 0")
		require.False(t, res[1].DeadLettered)
		require.True(t, res[2].Success, "the same status again is a no-op")
		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "c"})
		require.NoError(t, err)
		require.Zero(t, page.Total)
		require.Equal(t, int64(1), queueStats(t, b, "c").Partitions[0].Cursors[0].Offset)

		pr = pop(t, b, queen.PopRequest{Queue: "c", Batch: 1})
		_, err = b.Transaction().
			Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{}).
			Push(queen.PushItem{Queue: "c2"}).
			Ack(pr.Messages[0], queen.AckDLQ, queen.AckOptions{}).
			Commit(bg)
		require.ErrorIs(t, err, queen.ErrTransactionAborted)
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
		var te *queen.TransactionError
		require.True(t, errors.As(err, &te))
		require.Equal(t, 2, te.Index)
		require.Equal(t, 1, queueStats(t, b, "c").Partitions[0].Cursors[0].InFlight)
		_, err = b.DescribeQueue(bg, "c2")
		require.ErrorIs(t, err, queen.ErrNotFound)
	})
}

// TestAck_ConcurrentAcksShareOneCommit: acks that reach the writer while
// it is busy are written together, in one transaction and one fsync
// (group commit), whoever sent them.
func TestAck_ConcurrentAcksShareOneCommit(t *testing.T) {
	b := openDurable(t)
	const n = 8
	var msgs []*queen.Message
	for p := range n + 1 {
		part := string(rune('a' + p))
		_, err := b.Push(bg, []queen.PushItem{{Queue: "q", Partition: part, Payload: []byte(`1`)}})
		require.NoError(t, err)
		res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Partition: part, Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		msgs = append(msgs, res.Messages[0])
	}

	held, queued, release := queen.HoldCommitsForTest(b)
	defer release()
	before := queen.CommitsForTest(b)
	ack := func(m *queen.Message, errs chan<- error) {
		_, err := b.Ack(bg, m, true, queen.AckOptions{})
		errs <- err
	}
	errs := make(chan error, n+1)
	go ack(msgs[n], errs) // the writer takes it and waits at the gate
	<-held
	var wg sync.WaitGroup
	for _, m := range msgs[:n] {
		wg.Add(1)
		go func() { defer wg.Done(); ack(m, errs) }()
	}
	for queued() != n { // the acks reach the writer's queue
		runtime.Gosched()
	}
	release()
	wg.Wait()
	for range n + 1 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, before+2, queen.CommitsForTest(b), "the held ack, then the %d others in one commit", n)
}
