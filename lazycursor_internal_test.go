package queen

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// madeCursors counts the cursors g's queue holds for it in memory.
func madeCursors(b *Broker, queue, group string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[queue]
	g := q.groups[group]
	n := 0
	for _, p := range q.order {
		if p.cursorOf(g) != nil {
			n++
		}
	}
	return n
}

// A group joining a queue of many partitions makes a cursor only where it
// claims: its first pop costs the partitions it reads, not all of them,
// and so does a restart. Its pops still reach every partition.
func TestCursor_JoinMakesCursorsAsPartitionsAreClaimed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	const n = 200
	items := make([]PushItem, n)
	for i := range items {
		items[i] = PushItem{Queue: "many", Partition: "c" + strconv.Itoa(i)}
	}
	_, err = b.Push(ctx, items)
	require.NoError(t, err)

	res, err := b.Pop(ctx, PopRequest{Queue: "many", Group: "g", SubscriptionMode: SubscriptionModeAll, Batch: 3, Partitions: 3})
	require.NoError(t, err)
	require.Len(t, res.Messages, 3)
	require.LessOrEqual(t, madeCursors(b, "many", "g"), 3, "a cursor per claimed partition, not per partition")
	_, err = b.AckBatch(ctx, ackItemsOf(res.Messages))
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b, err = Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, 3, madeCursors(b, "many", "g"), "a restart makes the stored cursors only")
	seen := map[string]bool{}
	for _, m := range res.Messages {
		seen[m.Partition] = true
	}
	for len(seen) < n {
		res, err := b.Pop(ctx, PopRequest{Queue: "many", Group: "g", Batch: 7, Partitions: 7})
		require.NoError(t, err)
		require.NotEmpty(t, res.Messages, "%d of %d partitions read", len(seen), n)
		for _, m := range res.Messages {
			require.False(t, seen[m.Partition], "partition %s delivered twice", m.Partition)
			seen[m.Partition] = true
		}
		_, err = b.AckBatch(ctx, ackItemsOf(res.Messages))
		require.NoError(t, err)
	}
	res, err = b.Pop(ctx, PopRequest{Queue: "many", Group: "g", Batch: 10, Partitions: 10})
	require.NoError(t, err)
	require.Empty(t, res.Messages)
}

func ackItemsOf(msgs []*Message) []AckItem {
	items := make([]AckItem, len(msgs))
	for i, m := range msgs {
		items[i] = AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: m.ConsumerGroup}
	}
	return items
}
