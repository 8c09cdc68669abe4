package queen_test

import (
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// Behaviours that no other test held (issue 19): each test below goes red
// when the code that implements its behaviour is broken.

// A transaction aborted by a refused ack gives back the MaxSize room its
// pushes had reserved: afterwards a push of MaxSize messages fits.
func TestBehaviour_AbortedTransactionGivesBackMaxSizeRoom(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.MaxSize = 3
		_, err := b.ConfigureQueue(bg, "capped", cfg)
		require.NoError(t, err)
		pushN(t, b, "in", "", 1)
		pr := pop(t, b, queen.PopRequest{Queue: "in"})
		bogus := *pr.Messages[0]
		bogus.TransactionID = "no-such-message"
		for range 3 { // without the room given back, the second abort is already full
			_, err = b.Transaction().
				Push(queen.PushItem{Queue: "capped", Payload: []byte(`1`)}, queen.PushItem{Queue: "capped", Payload: []byte(`2`)}).
				Ack(&bogus, queen.AckCompleted, queen.AckOptions{}).
				Commit(bg)
			require.ErrorIs(t, err, queen.ErrTransactionAborted)
			require.ErrorIs(t, err, queen.ErrNotFound, "refused by the ack, not by the room")
		}
		st, err := b.QueueStats(bg, "capped")
		require.NoError(t, err)
		require.Zero(t, st.Messages, "the aborted pushes stored nothing")
		require.Zero(t, st.Pending)
		pushN(t, b, "capped", "", 3) // MaxSize messages: every one queued
		res, err := b.Push(bg, []queen.PushItem{{Queue: "capped", Payload: []byte(`4`)}})
		require.NoError(t, err)
		require.ErrorIs(t, res[0].Err, queen.ErrQueueFull, "and the cap still holds")
	})
}

// Deleting a queue drops its live leases: renewing or acking with one is
// refused, and a queue created again under the name pops at once, not
// once the old lease would have expired.
func TestBehaviour_DeleteQueueDropsLiveLeases(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "doomed", "p", 2)
		for _, group := range []string{"", "g"} {
			req := queen.PopRequest{Queue: "doomed", Partition: "p", Group: group, SubscriptionMode: queen.SubscriptionModeAll, Lease: time.Hour}
			res := pop(t, b, req)
			require.Len(t, res.Messages, 1)
			require.NotEmpty(t, res.LeaseID)
			_, err := b.RenewLease(bg, res.LeaseID, time.Hour)
			require.NoError(t, err, "live before the delete")

			existed, err := b.DeleteQueue(bg, "doomed")
			require.NoError(t, err)
			require.True(t, existed)

			_, err = b.RenewLease(bg, res.LeaseID, time.Hour)
			require.ErrorIs(t, err, queen.ErrNotFound, "the lease went with its queue")
			ar, err := b.Ack(bg, res.Messages[0], true, queen.AckOptions{})
			require.Error(t, err, "an ack with the old lease is refused")
			require.False(t, ar.Success)

			// Created again: its messages are served now, with the clock
			// far from the old lease's expiry.
			pushN(t, b, "doomed", "p", 2)
			again := pop(t, b, req)
			require.Equal(t, []int64{0}, offsets(again.Messages))
			require.NotEqual(t, res.LeaseID, again.LeaseID)
			ackAll(t, b, again.Messages, queen.AckCompleted)
			// The new queue's lease is not disturbed by the old one's
			// time passing.
			clock.Advance(2 * time.Hour)
			require.Equal(t, []int64{1}, offsets(pop(t, b, req).Messages))
			_, err = b.DeleteQueue(bg, "doomed")
			require.NoError(t, err)
			pushN(t, b, "doomed", "p", 2)
		}
	})
}

// Completed retention deletes only what every group has consumed: a
// partition no group has read keeps all of its messages, and so does a
// queue without any group.
func TestBehaviour_CompletedRetentionKeepsUnreadPartitions(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.CompletedRetention = time.Minute
		for _, q := range []string{"read", "unread"} {
			_, err := b.ConfigureQueue(bg, q, cfg)
			require.NoError(t, err)
			pushN(t, b, q, "a", 3)
			pushN(t, b, q, "b", 3)
		}
		// One group reads all of partition a of queue "read", nothing of b.
		res := pop(t, b, queen.PopRequest{Queue: "read", Partition: "a", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 10})
		require.Len(t, res.Messages, 3)
		ackAll(t, b, res.Messages, queen.AckCompleted)
		clock.Advance(2 * time.Minute)
		require.NoError(t, b.Maintain(bg))

		left := func(q, p string) int {
			f, err := b.Fetch(bg, q, p, 0, 100)
			require.NoError(t, err)
			return len(f.Records)
		}
		require.Zero(t, left("read", "a"), "consumed by every group: deleted")
		require.Equal(t, 3, left("read", "b"), "no group has read it: kept")
		require.Equal(t, 3, left("unread", "a"), "a queue without groups keeps everything")
		require.Equal(t, 3, left("unread", "b"))
		res = pop(t, b, queen.PopRequest{Queue: "read", Partition: "b", Group: "g", Batch: 10})
		require.Equal(t, []int64{0, 1, 2}, offsets(res.Messages))
	})
}

// Max-wait eviction dead-letters what waits unread, and leaves a leased
// batch to its lease: it can still be acked, and nothing of it is
// dead-lettered.
func TestBehaviour_MaxWaitEvictionLeavesLeasedMessages(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.MaxWaitTime = 10 * time.Minute
		_, err := b.ConfigureQueue(bg, "w", cfg)
		require.NoError(t, err)
		pushN(t, b, "w", "leased", 2)
		pushN(t, b, "w", "idle", 2)
		res := pop(t, b, queen.PopRequest{Queue: "w", Partition: "leased", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 10, Lease: time.Hour})
		require.Len(t, res.Messages, 2)
		clock.Advance(11 * time.Minute)
		require.NoError(t, b.Maintain(bg))

		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "w", ConsumerGroup: "g"})
		require.NoError(t, err)
		require.Equal(t, 2, page.Total, "the idle partition's two, not the leased ones")
		for _, l := range page.Letters {
			require.Equal(t, "idle", l.Partition)
		}
		ackAll(t, b, res.Messages, queen.AckCompleted)
		st, err := b.QueueStats(bg, "w")
		require.NoError(t, err)
		for _, p := range st.Partitions {
			switch p.Name {
			case "leased":
				require.Equal(t, int64(2), p.Cursors[0].Offset)
				require.Equal(t, int64(2), p.Cursors[0].Consumed, "settled by the ack, not by eviction")
			case "idle":
				require.Equal(t, int64(2), p.Cursors[0].Offset, "passed by eviction")
			}
		}
	})
}

// A commit-on-delivery pop that reads up to a message still on hold
// (DelayedProcessing) leaves the cursor on it: the next pop delivers
// nothing before the hold ends and the held message once after.
func TestBehaviour_CommitOnDeliveryStopsAtHeldMessage(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.DelayedProcessing = 10 * time.Second
	_, err := b.ConfigureQueue(bg, "d", cfg)
	require.NoError(t, err)
	pushN(t, b, "d", "", 1)
	clock.Advance(4 * time.Second)
	pushN(t, b, "d", "", 1) // visible at 14 s
	clock.Advance(6 * time.Second)
	req := queen.PopRequest{Queue: "d", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, CommitOnDelivery: true, Batch: 10}
	require.Equal(t, []int64{0}, offsets(pop(t, b, req).Messages))
	st, err := b.QueueStats(bg, "d")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Partitions[0].Cursors[0].Offset, "the cursor stands on the held message")
	require.Empty(t, pop(t, b, req).Messages)
	clock.Advance(3 * time.Second) // 13 s: still held
	require.Empty(t, pop(t, b, req).Messages)
	clock.Advance(time.Second)
	require.Equal(t, []int64{1}, offsets(pop(t, b, req).Messages))
	require.Empty(t, pop(t, b, req).Messages, "delivered once")
}

// Mutation survivors (issue 19): behaviours the tests above and the rest
// of the suite did not pin.

// A live lease of a group of another queue is not "another group's lease"
// for an ack: it does not hold the message, so the ack is refused with
// ErrLeaseExpired, not ErrWrongGroup.
func TestBehaviour_AckWithAnotherQueuesLeaseIsLeaseExpired(t *testing.T) {
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

// A transaction's ack needs both its TransactionID and its PartitionID:
// one without either is an *ArgumentError and nothing runs.
func TestBehaviour_TransactionAckNeedsBothIDs(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "in", "", 1)
	pr := pop(t, b, queen.PopRequest{Queue: "in"})
	m := pr.Messages[0]
	for _, it := range []queen.AckItem{
		{TransactionID: m.TransactionID, LeaseID: m.LeaseID},
		{PartitionID: m.PartitionID, LeaseID: m.LeaseID},
	} {
		_, err := b.ExecTransaction(bg, []queen.TxOp{{Push: &queen.PushItem{Queue: "out", Payload: []byte(`1`)}}, {Ack: &it}})
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
		require.NotErrorIs(t, err, queen.ErrTransactionAborted, "refused before anything runs")
		var ae *queen.ArgumentError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, "ops[1].Ack", ae.Field)
	}
	_, err := b.DescribeQueue(bg, "out")
	require.ErrorIs(t, err, queen.ErrNotFound)
}

// Retention deletes messages older than Retention: one exactly that old is
// kept, and goes once it is older.
func TestBehaviour_RetentionKeepsAMessageExactlyRetentionOld(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.Retention = time.Hour
	_, err := b.ConfigureQueue(bg, "r", cfg)
	require.NoError(t, err)
	pushN(t, b, "r", "", 1)
	clock.Advance(time.Hour)
	require.NoError(t, b.Maintain(bg))
	f, err := b.Fetch(bg, "r", "", 0, 10)
	require.NoError(t, err)
	require.Len(t, f.Records, 1, "exactly Retention old: not older, kept")
	clock.Advance(time.Microsecond)
	require.NoError(t, b.Maintain(bg))
	f, err = b.Fetch(bg, "r", "", 0, 10)
	require.NoError(t, err)
	require.Empty(t, f.Records)
}
