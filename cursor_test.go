package queen_test

import (
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCursor_BatchAckStopsAtFirstComeback(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.RetryDelay = 0
		_, err := b.ConfigureQueue(bg, "batch", cfg)
		require.NoError(t, err)
		pushN(t, b, "batch", "", 3)
		pr := pop(t, b, queen.PopRequest{Queue: "batch", Batch: 3})
		m := pr.Messages
		items := ackItems(m, queen.AckCompleted)
		items[1].Status = queen.AckFailed
		res := ack(t, b, items...)
		for _, r := range res {
			require.True(t, r.Success)
			require.True(t, r.LeaseReleased)
		}
		again := pop(t, b, queen.PopRequest{Queue: "batch", Batch: 3})
		require.Equal(t, []int64{1, 2}, offsets(again.Messages), "m2 and m3 come back, m1 stays acked")
		require.Equal(t, []int{2, 2}, attemptsOf(again.Messages))
		ackAll(t, b, again.Messages, queen.AckCompleted)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "batch"}).Messages)
	})
}

func TestCursor_PartialAcksAdvanceInOrder(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "part", "", 3)
	pr := pop(t, b, queen.PopRequest{Queue: "part", Batch: 3})
	m := pr.Messages
	// m3 first: the cursor cannot pass m1 and m2 yet.
	ackAll(t, b, m[2:3], queen.AckCompleted)
	ackAll(t, b, m[0:1], queen.AckCompleted)
	st, err := b.QueueStats(bg, "part")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Partitions[0].Cursors[0].Offset)
	// m2 retried: m3's completed is discarded and it comes back too.
	res := ack(t, b, ackItems(m[1:2], queen.AckRetry)...)
	require.True(t, res[0].LeaseReleased)
	again := pop(t, b, queen.PopRequest{Queue: "part", Batch: 3})
	require.Equal(t, []int64{1, 2}, offsets(again.Messages))
	st, err = b.QueueStats(bg, "part")
	require.NoError(t, err)
	require.Equal(t, 0, st.Partitions[0].Cursors[0].Retries, "retry spends no budget")
}

func TestCursor_RetryBudgetThenDeadLetter(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.RetryLimit = 2
		cfg.RetryDelay = 5 * time.Second
		_, err := b.ConfigureQueue(bg, "pay", cfg)
		require.NoError(t, err)
		pushOne(t, b, "pay", "acct-1", "bad", `{"amount":-1}`)
		pushOne(t, b, "pay", "acct-1", "good", `{"amount":5}`)
		pushOne(t, b, "pay", "acct-2", "other", `{"amount":7}`)

		for attempt := 1; attempt <= 3; attempt++ {
			pr := pop(t, b, queen.PopRequest{Queue: "pay", Group: "billing", SubscriptionMode: queen.SubscriptionModeAll, Partition: "acct-1"})
			require.Len(t, pr.Messages, 1, "attempt %d", attempt)
			require.Equal(t, "bad", pr.Messages[0].TransactionID)
			require.Equal(t, attempt, pr.Messages[0].DeliveryAttempt)
			res, err := b.Ack(bg, pr.Messages[0], false, queen.AckOptions{ConsumerGroup: "billing", Error: "declined"})
			require.NoError(t, err)
			require.Equal(t, attempt == 3, res.DeadLettered)
			if attempt < 3 {
				// retryDelay holds only this partition back.
				require.Empty(t, pop(t, b, queen.PopRequest{Queue: "pay", Group: "billing", Partition: "acct-1"}).Messages)
				other := pop(t, b, queen.PopRequest{Queue: "pay", Group: "billing", Partition: "acct-2"})
				if attempt == 1 {
					require.Len(t, other.Messages, 1)
					ackAll(t, b, other.Messages, queen.AckCompleted)
				}
				clock.Advance(5 * time.Second)
			}
		}
		// Exhausted: dead-lettered with payload, error, retry count and group; the cursor moved past it.
		pr := pop(t, b, queen.PopRequest{Queue: "pay", Group: "billing", Partition: "acct-1"})
		require.Equal(t, "good", pr.Messages[0].TransactionID)
		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "pay"})
		require.NoError(t, err)
		require.Equal(t, 1, page.Total)
		dl := page.Letters[0]
		require.Equal(t, "bad", dl.TransactionID)
		require.Equal(t, `{"amount":-1}`, string(dl.Payload))
		require.Equal(t, "declined", dl.Error)
		require.Equal(t, 2, dl.RetryCount)
		require.Equal(t, "billing", dl.ConsumerGroup)
		require.Equal(t, "acct-1", dl.Partition)
		require.Equal(t, int64(0), dl.Offset)
		require.NotEmpty(t, dl.PartitionID)
		// The budget started over once the batch completed.
		ackAll(t, b, pr.Messages, queen.AckCompleted)
		st, err := b.QueueStats(bg, "pay")
		require.NoError(t, err)
		require.Equal(t, int64(1), st.DeadLetters)

		// Another group still receives the dead-lettered message normally.
		ap := pop(t, b, queen.PopRequest{Queue: "pay", Group: "audit", SubscriptionMode: queen.SubscriptionModeAll, Partition: "acct-1", Batch: 10})
		require.Equal(t, []int64{0, 1}, offsets(ap.Messages))
	})
}

func TestCursor_DLQAndParkAcksSkipTheBudget(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "x", "", 3)
	pr := pop(t, b, queen.PopRequest{Queue: "x", Batch: 3})
	items := ackItems(pr.Messages, queen.AckCompleted)
	items[0].Status, items[0].Error = queen.AckDLQ, "poison"
	items[1].Status, items[1].Error = queen.AckPark, "schema v9"
	res := ack(t, b, items...)
	require.True(t, res[0].DeadLettered)
	require.True(t, res[1].Parked)
	require.True(t, res[2].LeaseReleased)
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "x"}).Messages)
	dl, err := b.DeadLetters(bg, queen.LetterFilter{})
	require.NoError(t, err)
	require.Equal(t, 1, dl.Total)
	require.Equal(t, "poison", dl.Letters[0].Error)
	parked, err := b.ParkedMessages(bg, queen.LetterFilter{Queue: "x"})
	require.NoError(t, err)
	require.Equal(t, 1, parked.Total)
	require.Equal(t, "schema v9", parked.Letters[0].Error)
	require.Equal(t, `{"i":1}`, string(parked.Letters[0].Payload))
}

func TestCursor_AckRefusals(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "r", "", 2)
	pr := pop(t, b, queen.PopRequest{Queue: "r"})
	m := pr.Messages[0]
	for name, tc := range map[string]struct {
		item queen.AckItem
		err  error
	}{
		"unknown message":   {queen.AckItem{TransactionID: "nope", PartitionID: m.PartitionID, LeaseID: m.LeaseID}, queen.ErrNotFound},
		"unknown partition": {queen.AckItem{TransactionID: m.TransactionID, PartitionID: "8f7e0000-0000-8000-8000-000000000001"}, queen.ErrNotFound},
		"garbage partition": {queen.AckItem{TransactionID: m.TransactionID, PartitionID: "not-a-uuid"}, queen.ErrNotFound},
		"wrong lease":       {queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: "0190aaaa-bbbb-7ccc-8ddd-eeeeffff0000"}, queen.ErrLeaseExpired},
		"bad status":        {queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "maybe"}, queen.ErrInvalidArgument},
		"not delivered yet": {queen.AckItem{TransactionID: "", PartitionID: m.PartitionID}, nil},
	} {
		if tc.err == nil {
			_, err := b.AckBatch(bg, []queen.AckItem{tc.item})
			require.ErrorIs(t, err, queen.ErrInvalidArgument, name)
			continue
		}
		res := ack(t, b, tc.item)
		require.False(t, res[0].Success, name)
		require.ErrorIs(t, res[0].Err, tc.err, name)
	}
	// The refusals changed nothing: the real ack still works.
	res, err := b.Ack(bg, m, true, queen.AckOptions{})
	require.NoError(t, err)
	require.True(t, res.LeaseReleased)
	// Acking it again (unfenced) is refused as settled, and changes nothing.
	res2 := ack(t, b, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID})
	require.False(t, res2[0].Success)
	require.ErrorIs(t, res2[0].Err, queen.ErrAlreadySettled)
	// An unfenced ack of a message nobody holds is refused.
	f, err := b.Fetch(bg, "r", "", 1, 1)
	require.NoError(t, err)
	res2 = ack(t, b, queen.AckItem{TransactionID: f.Records[0].TransactionID, PartitionID: m.PartitionID})
	require.ErrorIs(t, res2[0].Err, queen.ErrLeaseExpired)
}

func TestCursor_TwoGroupsReadIndependently(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "events", "", 4)
		bill := pop(t, b, queen.PopRequest{Queue: "events", Group: "billing", SubscriptionMode: queen.SubscriptionModeAll, Batch: 10})
		ana := pop(t, b, queen.PopRequest{Queue: "events", Group: "analytics", SubscriptionMode: queen.SubscriptionModeAll, Batch: 2})
		require.Equal(t, []int64{0, 1, 2, 3}, offsets(bill.Messages))
		require.Equal(t, []int64{0, 1}, offsets(ana.Messages))
		ackAll(t, b, bill.Messages, queen.AckCompleted)
		ackAll(t, b, ana.Messages[:1], queen.AckCompleted)
		r := ack(t, b, ackItems(ana.Messages[1:], queen.AckFailed)...)
		require.True(t, r[0].Success)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "events", Group: "billing"}).Messages)
		groups, err := b.ListGroups(bg, queen.GroupFilter{})
		require.NoError(t, err)
		require.Len(t, groups, 2)
		require.Equal(t, "analytics", groups[0].Group)
		require.Equal(t, int64(3), groups[0].Lag)
		require.False(t, groups[0].OldestPendingAt.IsZero())
		require.Equal(t, int64(0), groups[1].Lag)
	})
}

func TestCursor_SubscriptionModes(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "s", "old", 4)
		clock.Advance(time.Minute)
		mid := clock.Now()
		pushN(t, b, "s", "old", 2)
		clock.Advance(time.Minute)

		newG := pop(t, b, queen.PopRequest{Queue: "s", Group: "fresh", Batch: 100})
		require.Empty(t, newG.Messages, "new (the default) skips what exists")
		allG := pop(t, b, queen.PopRequest{Queue: "s", Group: "all", SubscriptionMode: queen.SubscriptionModeAll, Batch: 100})
		require.Len(t, allG.Messages, 6)
		fromG := pop(t, b, queen.PopRequest{Queue: "s", Group: "from", SubscriptionFrom: mid, Batch: 100})
		require.Equal(t, []int64{4, 5}, offsets(fromG.Messages))
		qm := pop(t, b, queen.PopRequest{Queue: "s", SubscriptionMode: queen.SubscriptionModeNew, Batch: 100})
		require.Len(t, qm.Messages, 6, "queue mode ignores the subscription mode")

		// Fixed at the first pop: a later mode changes nothing.
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "s", Group: "fresh", SubscriptionMode: queen.SubscriptionModeAll, Batch: 100}).Messages)
		pushN(t, b, "s", "old", 1)
		pushN(t, b, "s", "brand-new", 1)
		got := pop(t, b, queen.PopRequest{Queue: "s", Group: "fresh", Partitions: 2, Batch: 100})
		require.Len(t, got.Messages, 2, "a new group sees what is pushed after it joined, in every partition")
	})
}

func TestCursor_DefaultSubscriptionModeOption(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, &queen.Options{DefaultSubscriptionMode: queen.SubscriptionModeAll})
	pushN(t, b, "q", "", 2)
	require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "g", Batch: 10}).Messages, 2)
	_, err := queen.Open("", &queen.Options{InMemory: true, DefaultSubscriptionMode: "bogus"})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

func TestCursor_SeekReleasesLeaseAndMoves(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "events", "a", 3)
		clock.Advance(time.Hour)
		since := clock.Now()
		pushN(t, b, "events", "a", 2)
		pushN(t, b, "events", "b", 1)

		pr := pop(t, b, queen.PopRequest{Queue: "events", Group: "archiver", SubscriptionMode: queen.SubscriptionModeAll, Partition: "a", Batch: 10})
		require.Len(t, pr.Messages, 5)
		ackAll(t, b, pr.Messages, queen.AckCompleted)

		res, err := b.SeekGroup(bg, "archiver", "events", queen.SeekOptions{Timestamp: since})
		require.NoError(t, err)
		require.Equal(t, 2, res.PartitionsUpdated)
		re := pop(t, b, queen.PopRequest{Queue: "events", Group: "archiver", Partition: "a", Batch: 10})
		require.Equal(t, []int64{3, 4}, offsets(re.Messages), "reads again since that time")

		// The seek to the end releases the live lease; acks of the
		// abandoned batch are refused: the cursor moved past them, so for
		// the group they are settled (they do not come back).
		_, err = b.SeekGroup(bg, "archiver", "events", queen.SeekOptions{ToEnd: true})
		require.NoError(t, err)
		r := ack(t, b, ackItems(re.Messages, queen.AckCompleted)...)
		require.ErrorIs(t, r[0].Err, queen.ErrAlreadySettled)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "events", Group: "archiver", Partitions: 2, Batch: 10}).Messages)
		pushN(t, b, "events", "b", 1)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "events", Group: "archiver", Batch: 10}).Messages, 1)

		// One partition back to the start.
		sp, err := b.SeekPartition(bg, "archiver", "events", "a", queen.SeekOptions{Timestamp: time.Unix(0, 0)})
		require.NoError(t, err)
		require.Equal(t, int64(0), sp.CursorMovedTo)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "events", Group: "archiver", Partition: "a", Batch: 10}).Messages, 5)

		_, err = b.SeekPartition(bg, "archiver", "events", "zzz", queen.SeekOptions{})
		require.ErrorIs(t, err, queen.ErrNotFound)
		_, err = b.SeekGroup(bg, "archiver", "nope", queen.SeekOptions{})
		require.ErrorIs(t, err, queen.ErrNotFound)
		res, err = b.SeekGroup(bg, "never-popped", "events", queen.SeekOptions{})
		require.ErrorIs(t, err, queen.ErrGroupNotFound, "a typo is not a seek of nothing")
		require.ErrorIs(t, err, queen.ErrNotFound)
		require.Nil(t, res)
		_, err = b.SeekPartition(bg, "never-popped", "events", "a", queen.SeekOptions{})
		require.ErrorIs(t, err, queen.ErrGroupNotFound)
		_, err = b.SeekPartition(bg, "never-popped", "events", "zzz", queen.SeekOptions{})
		require.ErrorIs(t, err, queen.ErrNotFound, "the partition is checked first")
		require.NotErrorIs(t, err, queen.ErrGroupNotFound)
	})
}

func TestCursor_DeleteGroupAndSubscription(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	pushN(t, b, "q", "", 3)
	pr := pop(t, b, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 3})
	ackAll(t, b, pr.Messages, queen.AckCompleted)
	n, err := b.DeleteGroup(bg, "g", "q", false)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "g", Batch: 10}).Messages, 3, "without deleting metadata the group restarts at its start point")
	n, err = b.DeleteGroup(bg, "g", "", true)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "g", Batch: 10}).Messages, "forgotten: it starts again as new")

	clock.Advance(time.Minute)
	pushN(t, b, "q", "", 1)
	rows, err := b.SetGroupSubscription(bg, "late", time.Unix(0, 0))
	require.ErrorIs(t, err, queen.ErrGroupNotFound, "unknown group: nothing to move")
	require.Zero(t, rows)
	_ = pop(t, b, queen.PopRequest{Queue: "q", Group: "late", Partition: "zzz"}) // joins with mode new
	rows, err = b.SetGroupSubscription(bg, "late", time.Unix(0, 0))
	require.NoError(t, err)
	require.Equal(t, 1, rows)
	require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "late", Batch: 10}).Messages, 4)
}

// A named group that first pops before its queue exists starts at the
// queue's first message: everything the queue holds was pushed after that
// pop, and mode "new" promises exactly those.
func TestCursor_GroupThatPoppedBeforeTheQueueExistedMissesNothing(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "later", Group: "g"}).Messages)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "later", Group: "all", SubscriptionMode: queen.SubscriptionModeAll}).Messages)
		pushOne(t, b, "later", "", "m1", `1`)
		pushOne(t, b, "later", "p2", "m2", `2`)
		res := pop(t, b, queen.PopRequest{Queue: "later", Group: "g", Batch: 10, Partitions: 2})
		require.ElementsMatch(t, []string{"m1", "m2"}, txids(res.Messages))
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "later", Group: "all", Batch: 10, Partitions: 2}).Messages, 2)
		// A group whose first pop finds the queue starts after what is there.
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "later", Group: "fresh"}).Messages)
		gs, err := b.ListGroups(bg, queen.GroupFilter{Group: "g"})
		require.NoError(t, err)
		require.Equal(t, queen.SubscriptionModeNew, gs[0].Mode)

		// Forgetting the group forgets its early pop too: that is a group
		// found (0 cursors removed), on its queue that does not exist yet
		// as on every queue; without deleteMetadata the queue is unknown.
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "later2", Group: "h"}).Messages)
		_, err = b.DeleteGroup(bg, "h", "later2", false)
		require.ErrorIs(t, err, queen.ErrNotFound)
		require.NotErrorIs(t, err, queen.ErrGroupNotFound)
		n, err := b.DeleteGroup(bg, "h", "later2", true)
		require.NoError(t, err)
		require.Zero(t, n)
		_, err = b.DeleteGroup(bg, "h", "", true)
		require.ErrorIs(t, err, queen.ErrGroupNotFound, "forgotten already")
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "later2", Group: "h"}).Messages)
		_, err = b.DeleteGroup(bg, "h", "", true)
		require.NoError(t, err)
		pushOne(t, b, "later2", "", "n1", `1`)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "later2", Group: "h"}).Messages)
	})
}

// SetGroupSubscription keeps the cursor of a partition under a live lease
// (and of one the group settled messages of), and a restart agrees.
func TestCursor_SetGroupSubscriptionLiveAndReopenedAgree(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	dir := t.TempDir()
	opts := &queen.Options{Clock: clock, Durability: queen.SyncNever}
	b := itest.OpenDir(t, dir, opts)
	pushOne(t, b, "s", "leased", "l0", `0`)
	pushOne(t, b, "s", "idle", "i0", `0`)
	clock.Advance(time.Minute)
	from := clock.Now()
	pushOne(t, b, "s", "leased", "l1", `1`)
	pushOne(t, b, "s", "idle", "i1", `1`)
	res := pop(t, b, queen.PopRequest{Queue: "s", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Partition: "leased"})
	require.Equal(t, []string{"l0"}, txids(res.Messages))

	n, err := b.SetGroupSubscription(bg, "g", from)
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the idle partition moves")
	offsetsOf := func(b *queen.Broker) map[string]int64 {
		st, err := b.QueueStats(bg, "s")
		require.NoError(t, err)
		out := map[string]int64{}
		for _, p := range st.Partitions {
			for _, c := range p.Cursors {
				out[p.Name] = c.Offset
			}
		}
		return out
	}
	live := offsetsOf(b)
	require.Equal(t, map[string]int64{"leased": 0, "idle": 1}, live)
	require.NoError(t, b.Close())

	b = itest.OpenDir(t, dir, opts)
	require.Equal(t, live, offsetsOf(b), "a restart finds the cursors where they were")
	res = pop(t, b, queen.PopRequest{Queue: "s", Group: "g", Partition: "leased"})
	require.Equal(t, []string{"l0"}, txids(res.Messages), "the lease died with the process; its batch comes back")
}

// An empty group name addresses the queue-mode group in DeleteGroup,
// SeekGroup and SetGroupSubscription, as it does in pops and acks.
func TestCursor_EmptyGroupIsQueueMode(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "qm", "", 3)
		ackAll(t, b, pop(t, b, queen.PopRequest{Queue: "qm", Batch: 2}).Messages, queen.AckCompleted)
		named := pop(t, b, queen.PopRequest{Queue: "qm", Group: "named", SubscriptionMode: queen.SubscriptionModeAll, Batch: 2})
		ackAll(t, b, named.Messages, queen.AckCompleted)

		res, err := b.SeekGroup(bg, "", "qm", queen.SeekOptions{ToEnd: true})
		require.NoError(t, err)
		require.Equal(t, 1, res.PartitionsUpdated)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "qm"}).Messages, "queue mode moved to the end")

		n, err := b.DeleteGroup(bg, "", "qm", false)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "qm", Batch: 10}).Messages, 3, "queue mode back at its start")

		n, err = b.DeleteGroup(bg, queen.QueueModeGroup, "qm", true)
		require.NoError(t, err)
		require.Equal(t, 1, n, "the constant names the same group")
		gs, err := b.ListGroups(bg, queen.GroupFilter{})
		require.NoError(t, err)
		require.Len(t, gs, 1)
		require.Equal(t, "named", gs[0].Group, "named groups are untouched")
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "qm", Group: "named", Batch: 10}).Messages, 1)
	})
}

// Every group has a position in every partition of its queue, whether it
// has read there or not, joined before or after the partition appeared,
// and a restart reports the same: cursors, lag, pending and group stats.
func TestCursor_EveryGroupInEveryPartitionLiveAndReopened(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	dir := t.TempDir()
	opts := &queen.Options{Clock: clock, Durability: queen.SyncNever}
	b := itest.OpenDir(t, dir, opts)
	cfg := queen.DefaultQueueConfig()
	cfg.MaxSize = 3
	_, err := b.ConfigureQueue(bg, "lz", cfg)
	require.NoError(t, err)
	pushN(t, b, "lz", "a", 2)
	pushN(t, b, "lz", "b", 1)
	ackAll(t, b, pop(t, b, queen.PopRequest{Queue: "lz", Group: "all", SubscriptionMode: queen.SubscriptionModeAll, Partition: "a"}).Messages, queen.AckCompleted)
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "lz", Group: "new", SubscriptionMode: queen.SubscriptionModeNew}).Messages)
	clock.Advance(time.Second)
	pushN(t, b, "lz", "late", 1) // after both joined
	res, err := b.Push(bg, []queen.PushItem{{Queue: "lz", Partition: "refused"}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, queen.ErrQueueFull, "the partition exists, with no message")

	type view struct {
		Cursors map[string]queen.CursorStats
		Pending int64
		Groups  []queen.GroupStats
	}
	look := func(b *queen.Broker) view {
		st, err := b.QueueStats(bg, "lz")
		require.NoError(t, err)
		v := view{Cursors: map[string]queen.CursorStats{}, Pending: st.Pending}
		for _, p := range st.Partitions {
			var groups []string
			for _, c := range p.Cursors {
				v.Cursors[p.Name+"/"+c.Group] = c
				groups = append(groups, c.Group)
			}
			require.ElementsMatch(t, []string{"all", "new"}, groups, "partition %s", p.Name)
		}
		v.Groups, err = b.ListGroups(bg, queen.GroupFilter{})
		require.NoError(t, err)
		return v
	}
	live := look(b)
	require.Len(t, live.Cursors, 10, "5 partitions × 2 groups")
	require.Equal(t, queen.CursorStats{Group: "all", Offset: 1, Lag: 1, Consumed: 1, LastAckAt: clock.Now().Add(-time.Second)}, live.Cursors["a/all"])
	require.Equal(t, queen.CursorStats{Group: "all", Offset: 0, Lag: 1}, live.Cursors["b/all"], "not read yet: at the first message")
	require.Equal(t, queen.CursorStats{Group: "new", Offset: 1, Lag: 0}, live.Cursors["b/new"], "mode new: past what was there at its join")
	require.Equal(t, queen.CursorStats{Group: "new", Offset: 0, Lag: 1}, live.Cursors["late/new"])
	require.Equal(t, queen.CursorStats{Group: "all", Offset: 0, Lag: 0}, live.Cursors["refused/all"])
	require.EqualValues(t, 3, live.Pending, "a: 1, b: 1, late: 1")
	for _, g := range live.Groups {
		require.Equal(t, 5, g.Partitions, g.Group)
	}
	require.NoError(t, b.Close())

	b = itest.OpenDir(t, dir, opts)
	require.Equal(t, live, look(b), "a restart reports the same")
	for _, group := range []string{"all", "new"} {
		got := map[string][]int64{}
		for {
			res := pop(t, b, queen.PopRequest{Queue: "lz", Group: group, Batch: 10, Partitions: 10})
			if len(res.Messages) == 0 {
				break
			}
			for _, m := range res.Messages {
				got[m.Partition] = append(got[m.Partition], m.Offset)
			}
			ackAll(t, b, res.Messages, queen.AckCompleted)
		}
		want := map[string][]int64{"a": {1}, "b": {0}, "late": {0}}
		if group == "new" {
			want = map[string][]int64{"late": {0}}
		}
		require.Equal(t, want, got, group)
	}
}

// After a restart a group may have no cursor in a partition it read (none
// was stored at the first message); an ack of a lease that died with the
// process is refused: as expired while the message is there, as not found
// once it is deleted.
func TestCursor_AckAfterRestartWithoutStoredCursor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := &queen.Options{Durability: queen.SyncNever}
	b := itest.OpenDir(t, dir, opts)
	pushOne(t, b, "ar", "", "t0", `0`)
	res := pop(t, b, queen.PopRequest{Queue: "ar", Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
	require.Len(t, res.Messages, 1)
	require.NoError(t, b.Close())

	b = itest.OpenDir(t, dir, opts)
	out, err := b.AckBatch(bg, ackItems(res.Messages, queen.AckCompleted))
	require.NoError(t, err)
	require.ErrorIs(t, out[0].Err, queen.ErrLeaseExpired)
	require.NoError(t, b.DeleteMessage(bg, res.Messages[0].PartitionID, "t0"))
	out, err = b.AckBatch(bg, ackItems(res.Messages, queen.AckCompleted))
	require.NoError(t, err)
	require.ErrorIs(t, out[0].Err, queen.ErrNotFound)
	require.NotErrorIs(t, out[0].Err, queen.ErrGroupNotFound)
}

// A group in mode "new" moved back by SetGroupSubscription counts again
// what it now has to read, in QueueStats.Pending and against MaxSize.
func TestCursor_SetGroupSubscriptionCountsInPending(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.MaxSize = 3
	_, err := b.ConfigureQueue(bg, "sp", cfg)
	require.NoError(t, err)
	start := clock.Now()
	pushN(t, b, "sp", "a", 2)
	pushN(t, b, "sp", "b", 1)
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "sp", Group: "g", SubscriptionMode: queen.SubscriptionModeNew}).Messages)
	st, err := b.QueueStats(bg, "sp")
	require.NoError(t, err)
	require.Zero(t, st.Pending, "g joined past every message")

	_, err = b.SetGroupSubscription(bg, "g", start)
	require.NoError(t, err)
	st, err = b.QueueStats(bg, "sp")
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Pending)
	res, err := b.Push(bg, []queen.PushItem{{Queue: "sp", Partition: "a"}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, queen.ErrQueueFull)
}

// A group that joins in mode "new" while pushes to a partition wait for
// the writer starts after their messages: a push submitted before the
// join counts as before it, however the writer's commits fall (the first
// push alone, the rest in one commit after it), whether the group first
// pops the queue or names the partition, and a push submitted after the
// join is the first message the group reads there. Live and after a
// restart alike.
func TestCursor_NewGroupStartsAfterPushesSubmittedBeforeItJoined(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		partition string // the joining pop's
		after     bool   // a push submitted after the join
	}{
		{"queue", "", false},
		{"partition", "p", false},
		{"queue, then a push", "", true},
		{"partition, then a push", "p", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			b := itest.OpenDir(t, dir, nil)
			pushOne(t, b, "q", "p", "old", `0`)
			steps := []func(){
				func() { pushOne(t, b, "q", "p", "y", `2`) },
				func() {
					res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Partition: tc.partition, Group: "g", SubscriptionMode: queen.SubscriptionModeNew})
					assert.NoError(t, err)
					assert.Empty(t, res.Messages)
				},
			}
			want := []string{}
			if tc.after {
				steps = append(steps, func() { pushOne(t, b, "q", "p", "z", `3`) })
				want = []string{"z"}
			}
			behindCommit(t, b, func() { pushOne(t, b, "q", "p", "x", `1`) }, steps...)

			read := func(what string) {
				res := pop(t, b, queen.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 10})
				require.Equal(t, want, txids(res.Messages), what)
			}
			read("live")
			require.NoError(t, b.Close())
			b = itest.OpenDir(t, dir, nil)
			read("reopened")
		})
	}
}

// While the first push after a group's join (mode "new") waits for the
// writer, the group reads nothing of a partition whose pushes from before
// the join are published meanwhile, and maintenance dead-letters none of
// them for it: where it starts is known once that push is written, and it
// is after them.
func TestCursor_NewGroupWaitsForThePushThatPlacesIt(t *testing.T) {
	t.Parallel()
	clock := queentest.NewClock(time.Unix(1_000_000, 0))
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.MaxWaitTime = time.Minute
	_, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	pushOne(t, b, "q", "p", "old", `0`)

	held, queued, release := queen.HoldCommitsForTest(b)
	defer release()
	xDone := make(chan struct{})
	go func() { defer close(xDone); pushOne(t, b, "q", "p", "x", `1`) }()
	<-held // x's commit waits, alone
	joined := make(chan struct{})
	go func() {
		defer close(joined)
		res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeNew})
		assert.NoError(t, err)
		assert.Empty(t, res.Messages)
	}()
	require.Eventually(t, func() bool { return queued() == 1 }, 10*time.Second, time.Millisecond)
	zDone := make(chan struct{})
	go func() { defer close(zDone); pushOne(t, b, "q", "p", "z", `2`) }()
	require.Eventually(t, func() bool { return queued() == 2 }, 10*time.Second, time.Millisecond)

	held2, _, release2 := queen.HoldCommitsForTest(b) // the join's and z's commit waits
	defer release2()
	release()
	<-xDone // x is published
	<-held2
	res := pop(t, b, queen.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 10})
	require.Empty(t, res.Messages, "x came before g joined; z is not written yet")
	clock.Advance(2 * time.Minute) // x waited past MaxWaitTime
	maintained := make(chan error, 1)
	go func() { maintained <- b.Maintain(bg) }()
	require.Eventually(t, func() bool { return queued() > 0 || len(maintained) > 0 }, 10*time.Second, time.Millisecond,
		"maintenance looked at p: done, or waiting for the writer")

	release2()
	<-joined
	<-zDone
	require.NoError(t, <-maintained)
	letters, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "q", ConsumerGroup: "g"})
	require.NoError(t, err)
	require.Empty(t, letters.Letters, "nothing before g's start is g's to dead-letter")
	res = pop(t, b, queen.PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 10})
	require.Equal(t, []string{"z"}, txids(res.Messages))
}
