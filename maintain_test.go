package queen_test

import (
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestMaintain_RetentionDeletesOldMessages(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.Retention = time.Hour
		_, err := b.ConfigureQueue(bg, "r", cfg)
		require.NoError(t, err)
		pushN(t, b, "r", "", 3)
		clock.Advance(40 * time.Minute)
		pushN(t, b, "r", "", 2)
		clock.Advance(30 * time.Minute)
		require.NoError(t, b.Maintain(bg))
		f, err := b.Fetch(bg, "r", "", 0, 100)
		require.NoError(t, err)
		require.Equal(t, []int64{3, 4}, []int64{f.Records[0].Offset, f.Records[1].Offset}, "the three old ones are gone")
		require.Len(t, f.Records, 2)
		st, err := b.QueueStats(bg, "r")
		require.NoError(t, err)
		require.Equal(t, int64(2), st.Messages)
		require.Equal(t, int64(3), st.Partitions[0].FirstOffset)
		// A group reading from the start begins at the horizon.
		res := pop(t, b, queen.PopRequest{Queue: "r", Batch: 10})
		require.Equal(t, []int64{3, 4}, offsets(res.Messages))
		// Offsets are never reused.
		require.Equal(t, int64(5), pushN(t, b, "r", "", 1)[0].Offset)
	})
}

func TestMaintain_CompletedRetentionWaitsForEveryGroup(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.CompletedRetention = time.Minute
	_, err := b.ConfigureQueue(bg, "c", cfg)
	require.NoError(t, err)
	pushN(t, b, "c", "", 4)
	fast := pop(t, b, queen.PopRequest{Queue: "c", Group: "fast", SubscriptionMode: queen.SubscriptionModeAll, Batch: 4})
	ackAll(t, b, fast.Messages, queen.AckCompleted)
	slow := pop(t, b, queen.PopRequest{Queue: "c", Group: "slow", SubscriptionMode: queen.SubscriptionModeAll, Batch: 2})
	ackAll(t, b, slow.Messages, queen.AckCompleted)
	clock.Advance(2 * time.Minute)
	require.NoError(t, b.Maintain(bg))
	f, err := b.Fetch(bg, "c", "", 0, 100)
	require.NoError(t, err)
	require.Len(t, f.Records, 2, "only what both groups passed is deleted")
	require.Equal(t, int64(2), f.Records[0].Offset)
}

func TestMaintain_MaxWaitTimeDeadLetters(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.MaxWaitTime = 10 * time.Minute
	_, err := b.ConfigureQueue(bg, "w", cfg)
	require.NoError(t, err)
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "w", Group: "g"}).Messages) // the group joins
	pushN(t, b, "w", "", 2)
	clock.Advance(11 * time.Minute)
	pushN(t, b, "w", "", 1)
	require.NoError(t, b.Maintain(bg))
	page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "w", ConsumerGroup: "g"})
	require.NoError(t, err)
	require.Equal(t, 2, page.Total)
	require.Equal(t, "max wait time exceeded", page.Letters[0].Error)
	res := pop(t, b, queen.PopRequest{Queue: "w", Group: "g", Batch: 10})
	require.Equal(t, []int64{2}, offsets(res.Messages), "only the fresh one is left to read")
}

// A queue no group has read yet has nobody to dead-letter for: its messages
// older than MaxWaitTime are deleted, as Queen's eviction deletes
// never-consumed messages, instead of being kept forever.
func TestMaintain_MaxWaitTimeEvictsUnreadQueues(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.MaxWaitTime = 10 * time.Minute
		_, err := b.ConfigureQueue(bg, "w", cfg)
		require.NoError(t, err)
		pushN(t, b, "w", "a", 2)
		pushN(t, b, "w", "b", 1)
		clock.Advance(11 * time.Minute)
		pushN(t, b, "w", "a", 1)
		require.NoError(t, b.Maintain(bg))

		f, err := b.Fetch(bg, "w", "a", 0, 100)
		require.NoError(t, err)
		require.Len(t, f.Records, 1, "only the fresh message is left")
		require.Equal(t, int64(2), f.Records[0].Offset)
		f, err = b.Fetch(bg, "w", "b", 0, 100)
		require.NoError(t, err)
		require.Empty(t, f.Records)
		st, err := b.QueueStats(bg, "w")
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Messages)
		require.Zero(t, st.DeadLetters, "no group to dead-letter for")
		// Offsets are never reused, and a group reading from the start
		// begins at the horizon.
		require.Equal(t, int64(1), pushN(t, b, "w", "b", 1)[0].Offset)
		res := pop(t, b, queen.PopRequest{Queue: "w", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 10, Partitions: 2})
		require.ElementsMatch(t, []int64{2, 1}, offsets(res.Messages))

		// Once a group reads the queue, its waiting messages are
		// dead-lettered for it, not deleted.
		ackAll(t, b, res.Messages, queen.AckCompleted)
		pushN(t, b, "w", "a", 1)
		clock.Advance(11 * time.Minute)
		require.NoError(t, b.Maintain(bg))
		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "w", ConsumerGroup: "g"})
		require.NoError(t, err)
		require.Equal(t, 1, page.Total)
		f, err = b.Fetch(bg, "w", "a", 0, 100)
		require.NoError(t, err)
		require.Equal(t, []int64{2, 3}, []int64{f.Records[0].Offset, f.Records[1].Offset})
	})
}

// Completed retention deletes only what every group has consumed: a
// partition no group has read keeps all of its messages, and so does a
// queue without any group.
func TestRetention_CompletedKeepsUnreadPartitions(t *testing.T) {
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
func TestEviction_MaxWaitLeavesLeasedMessages(t *testing.T) {
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

// Retention deletes messages older than Retention: one exactly that old is
// kept, and goes once it is older.
func TestRetention_KeepsAMessageExactlyRetentionOld(t *testing.T) {
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
