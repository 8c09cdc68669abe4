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
