package queen_test

import (
	"context"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// Deleted messages leave holes in what a partition can read. These tests
// pin that every way of reading steps over them.

// txids lists the transaction ids of msgs.
func txids(msgs []*queen.Message) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.TransactionID)
	}
	return out
}

// pushTx pushes one message per txid to queue's Default partition and
// returns the partition id.
func pushTx(t *testing.T, b *queen.Broker, queue string, ids ...string) string {
	t.Helper()
	pid := ""
	for _, id := range ids {
		pid = msgPush(t, b, queue, "", id).PartitionID
	}
	return pid
}

func TestHoles_WaitingPopOverDeletedHeadDelivers(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pid := pushTx(t, b, "q", "t1", "t2")
		require.NoError(t, b.DeleteMessage(bg, pid, "t1"))
		// Before the fix this pop recursed until the process died of a
		// stack overflow: its claim covered only the deleted offset.
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		res, err := b.Pop(ctx, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Wait: true, Timeout: 5 * time.Second})
		require.NoError(t, err)
		require.Equal(t, []string{"t2"}, txids(res.Messages))
		require.Equal(t, 1, res.Messages[0].DeliveryAttempt)
	})
}

func TestHoles_OnlyDeletedLeftWaitsAndTimesOutEmpty(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pid := pushTx(t, b, "q", "a", "b")
		require.NoError(t, b.DeleteMessage(bg, pid, "a"))
		require.NoError(t, b.DeleteMessage(bg, pid, "b"))
		res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Wait: true, Timeout: 20 * time.Millisecond})
		require.NoError(t, err)
		require.Empty(t, res.Messages)
		res, err = b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
		require.NoError(t, err)
		require.Empty(t, res.Messages)
		// A later push is delivered, at the next offset.
		msgPush(t, b, "q", "", "c")
		for _, g := range []string{"", "g"} {
			res, err = b.Pop(bg, queen.PopRequest{Queue: "q", Group: g, Wait: true, Timeout: time.Second})
			require.NoError(t, err)
			require.Equal(t, []string{"c"}, txids(res.Messages))
			require.Equal(t, int64(2), res.Messages[0].Offset)
		}
	})
}

func TestHoles_GroupPoppingOneAtATimeStepsOverDeletedMiddle(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pid := pushTx(t, b, "q", "a", "b", "c", "d", "e")
		require.NoError(t, b.DeleteMessage(bg, pid, "b"))
		require.NoError(t, b.DeleteMessage(bg, pid, "d"))
		require.NoError(t, b.DeleteMessage(bg, pid, "e"))
		for _, g := range []string{"", "g"} {
			var got []string
			for i := 0; i < 4; i++ {
				res := pop(t, b, queen.PopRequest{Queue: "q", Group: g, SubscriptionMode: queen.SubscriptionModeAll})
				if len(res.Messages) == 0 {
					break
				}
				got = append(got, txids(res.Messages)...)
				ackAll(t, b, res.Messages, queen.AckCompleted)
			}
			require.Equal(t, []string{"a", "c"}, got, "group %q", g)
		}
		st, err := b.QueueStats(bg, "q")
		require.NoError(t, err)
		for _, c := range st.Partitions[0].Cursors {
			require.Zero(t, c.Lag, "%s", c.Group)
		}
	})
}

func TestHoles_BatchCountsOnlyStoredMessages(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pid := pushTx(t, b, "q", "a", "b", "c", "d", "e", "f")
		for _, id := range []string{"b", "c", "e"} {
			require.NoError(t, b.DeleteMessage(bg, pid, id))
		}
		res := pop(t, b, queen.PopRequest{Queue: "q", Batch: 2})
		require.Equal(t, []string{"a", "d"}, txids(res.Messages))
		ackAll(t, b, res.Messages, queen.AckCompleted)
		res = pop(t, b, queen.PopRequest{Queue: "q", Batch: 2})
		require.Equal(t, []string{"f"}, txids(res.Messages))
		// A batch that comes back comes back whole, holes still skipped.
		ack(t, b, ackItems(res.Messages, queen.AckRetry)...)
		res = pop(t, b, queen.PopRequest{Queue: "q", Batch: 5})
		require.Equal(t, []string{"f"}, txids(res.Messages))
		require.Equal(t, 2, res.Messages[0].DeliveryAttempt)
		ackAll(t, b, res.Messages, queen.AckCompleted)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q"}).Messages)
	})
}

func TestHoles_EveryKindOfPopStepsOver(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pid := pushTx(t, b, "q", "a", "b", "c", "d")
		require.NoError(t, b.DeleteMessage(bg, pid, "a"))
		require.NoError(t, b.DeleteMessage(bg, pid, "c"))

		auto := pop(t, b, queen.PopRequest{Queue: "q", Group: "auto", SubscriptionMode: queen.SubscriptionModeAll, CommitOnDelivery: true})
		require.Equal(t, []string{"b"}, txids(auto.Messages))
		auto = pop(t, b, queen.PopRequest{Queue: "q", Group: "auto", CommitOnDelivery: true})
		require.Equal(t, []string{"d"}, txids(auto.Messages))
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "auto", CommitOnDelivery: true}).Messages)

		named := pop(t, b, queen.PopRequest{Queue: "q", Group: "part", SubscriptionMode: queen.SubscriptionModeAll, Partition: queen.DefaultPartition, Batch: 10})
		require.Equal(t, []string{"b", "d"}, txids(named.Messages))

		disc, err := b.ConfigureQueue(bg, "lab", queen.QueueConfig{Namespace: "ns"})
		require.NoError(t, err)
		msgPush(t, b, "lab", "", "x")
		msgPush(t, b, "lab", "", "y")
		require.NoError(t, b.DeleteMessage(bg, disc.DefaultPartitionID, "x"))
		res, err := b.Pop(bg, queen.PopRequest{Namespace: "ns"})
		require.NoError(t, err)
		require.Equal(t, []string{"y"}, txids(res.Messages))
	})
}

func TestHoles_ConflatingGroupGetsNewestStoredMessage(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pid := pushTx(t, b, "q", "a", "b", "c")
		require.NoError(t, b.DeleteMessage(bg, pid, "c"))
		res := pop(t, b, queen.PopRequest{Queue: "q", Group: "last", SubscriptionMode: queen.SubscriptionModeAll, Conflation: true})
		require.Equal(t, []string{"b"}, txids(res.Messages))
		ackAll(t, b, res.Messages, queen.AckCompleted)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "last"}).Messages)
		require.NoError(t, b.DeleteMessage(bg, pid, "a"))
		require.NoError(t, b.DeleteMessage(bg, pid, "b"))
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "last2", SubscriptionMode: queen.SubscriptionModeAll, Conflation: true}).Messages)
	})
}

func TestHoles_DeleteInsideALeasedBatch(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pid := pushTx(t, b, "q", "a", "b", "c")
		res := pop(t, b, queen.PopRequest{Queue: "q", Batch: 3})
		require.Len(t, res.Messages, 3)
		require.NoError(t, b.DeleteMessage(bg, pid, "b"))
		// The lease holder can still ack what it holds, the deleted one too.
		ackAll(t, b, res.Messages, queen.AckCompleted)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q"}).Messages)

		// A batch given back after a delete comes back without it.
		pushTx(t, b, "q", "d", "e", "f")
		res = pop(t, b, queen.PopRequest{Queue: "q", Batch: 3})
		require.Equal(t, []string{"d", "e", "f"}, txids(res.Messages))
		require.NoError(t, b.DeleteMessage(bg, pid, "d"))
		require.NoError(t, b.DeleteMessage(bg, pid, "f"))
		ack(t, b, ackItems(res.Messages[:1], queen.AckRetry)...)
		res = pop(t, b, queen.PopRequest{Queue: "q", Batch: 3})
		require.Equal(t, []string{"e"}, txids(res.Messages))
		require.Equal(t, 2, res.Messages[0].DeliveryAttempt)
	})
}

func TestHoles_SurviveReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	pid := pushTx(t, b, "q", "a", "b", "c", "d")
	require.NoError(t, b.DeleteMessage(bg, pid, "b"))
	require.NoError(t, b.DeleteMessage(bg, pid, "c"))
	require.NoError(t, b.Close())

	b = itest.OpenDir(t, dir, nil)
	st, err := b.QueueStats(bg, "q")
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Messages)
	require.Equal(t, int64(2), st.Pending)
	res := pop(t, b, queen.PopRequest{Queue: "q", Batch: 2})
	require.Equal(t, []string{"a", "d"}, txids(res.Messages))
	require.NoError(t, b.DeleteMessage(bg, pid, "a"))
	ack(t, b, ackItems(res.Messages, queen.AckRetry)...)
	require.NoError(t, b.Close())

	b = itest.OpenDir(t, dir, nil)
	res = pop(t, b, queen.PopRequest{Queue: "q", Batch: 2})
	require.Equal(t, []string{"d"}, txids(res.Messages))
	st, err = b.QueueStats(bg, "q")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Messages)
	require.Equal(t, int64(1), st.Pending)
}

func TestHoles_StatsCountOnlyStoredMessages(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.Retention = time.Hour
		_, err := b.ConfigureQueue(bg, "q", cfg)
		require.NoError(t, err)
		pid := pushTx(t, b, "q", "a", "b")
		clock.Advance(2 * time.Hour)
		pushTx(t, b, "q", "c", "d", "e")
		require.NoError(t, b.DeleteMessage(bg, pid, "d"))

		check := func(messages, lag int64) {
			t.Helper()
			st, err := b.QueueStats(bg, "q")
			require.NoError(t, err)
			require.Equal(t, messages, st.Messages)
			require.Equal(t, messages, st.Partitions[0].Messages)
			require.LessOrEqual(t, st.Pending, st.Messages)
			require.Equal(t, lag, st.Pending)
			for _, c := range st.Partitions[0].Cursors {
				require.Equal(t, lag, c.Lag, c.Group)
			}
			gs, err := b.ListGroups(bg, queen.GroupFilter{Group: "g"})
			require.NoError(t, err)
			require.Len(t, gs, 1)
			require.Equal(t, lag, gs[0].Lag)
		}
		// No group yet: pending is what is stored.
		st, err := b.QueueStats(bg, "q")
		require.NoError(t, err)
		require.Equal(t, int64(4), st.Pending)
		require.Equal(t, int64(4), st.Messages)

		// Groups that join before retention runs.
		res := pop(t, b, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
		require.Equal(t, []string{"a"}, txids(res.Messages))
		ack(t, b, ackItems(res.Messages, queen.AckRetry)...)
		check(4, 4)

		require.NoError(t, b.Maintain(bg)) // retention deletes a and b
		check(2, 2)
		gs, err := b.ListGroups(bg, queen.GroupFilter{Group: "g"})
		require.NoError(t, err)
		require.Equal(t, clock.Now().UTC(), gs[0].OldestPendingAt)

		res = pop(t, b, queen.PopRequest{Queue: "q", Group: "g", Batch: 10})
		require.Equal(t, []string{"c", "e"}, txids(res.Messages))
		ackAll(t, b, res.Messages[:1], queen.AckCompleted)
		check(2, 1)
		require.NoError(t, b.DeleteMessage(bg, pid, "e"))
		check(1, 0)
	})
}

// MaxSize bounds pending messages; a deleted one frees its place.
func TestHoles_DeletedMessageFreesMaxSizeRoom(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.MaxSize = 2
		_, err := b.ConfigureQueue(bg, "cap", cfg)
		require.NoError(t, err)
		pid := pushTx(t, b, "cap", "a", "b")
		res, err := b.Push(bg, []queen.PushItem{{Queue: "cap", TransactionID: "c"}})
		require.NoError(t, err)
		require.Equal(t, queen.PushFailed, res[0].Status, "full")
		require.NoError(t, b.DeleteMessage(bg, pid, "a"))
		res, err = b.Push(bg, []queen.PushItem{{Queue: "cap", TransactionID: "c"}})
		require.NoError(t, err)
		require.Equal(t, queen.PushQueued, res[0].Status, "%v", res[0].Err)

		// With a group too: its lag, not the offsets, is what counts.
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "cap", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 10}).Messages, 2)
		require.NoError(t, b.DeleteMessage(bg, pid, "b"))
		res, err = b.Push(bg, []queen.PushItem{{Queue: "cap", TransactionID: "d"}})
		require.NoError(t, err)
		require.Equal(t, queen.PushQueued, res[0].Status, "%v", res[0].Err)
		st, err := b.QueueStats(bg, "cap")
		require.NoError(t, err)
		require.Equal(t, int64(2), st.Messages)
		require.LessOrEqual(t, st.Pending, st.Messages)
	})
}
