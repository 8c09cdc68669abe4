package queen

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPending_GroupJoins: a group joining a queue that already has one
// leaves the pending count MaxSize relies on right, whatever its mode: in
// mode "new" it stands at every partition's end and adds nothing (the
// join does not walk the partitions), in mode "all" its start counts
// where the first group is past it, and pushes after either join count
// for both.
func TestPending_GroupJoins(t *testing.T) {
	t.Parallel()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	for _, part := range []string{"a", "b", "c"} {
		for range 3 {
			_, err := b.Push(ctx, []PushItem{{Queue: "jq", Partition: part, Payload: []byte(`1`)}})
			require.NoError(t, err)
		}
	}
	// The first group settles two partitions' messages.
	for range 2 {
		res, err := b.Pop(ctx, PopRequest{Queue: "jq", Group: "first", Batch: 3, SubscriptionMode: SubscriptionModeAll})
		require.NoError(t, err)
		require.Len(t, res.Messages, 3)
		var items []AckItem
		for _, m := range res.Messages {
			items = append(items, AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: "first", Status: AckCompleted})
		}
		_, err = b.AckBatch(ctx, items)
		require.NoError(t, err)
	}
	checkPending(t, b, "first group")
	require.Equal(t, int64(3), b.queues["jq"].pending)

	res, err := b.Pop(ctx, PopRequest{Queue: "jq", Group: "late", SubscriptionMode: SubscriptionModeNew})
	require.NoError(t, err)
	require.Empty(t, res.Messages)
	checkPending(t, b, "group in mode new joined")
	require.Equal(t, int64(3), b.queues["jq"].pending)

	_, err = b.Push(ctx, []PushItem{{Queue: "jq", Partition: "a", Payload: []byte(`2`)}})
	require.NoError(t, err)
	checkPending(t, b, "push after the join")
	require.Equal(t, int64(4), b.queues["jq"].pending)

	_, err = b.Pop(ctx, PopRequest{Queue: "jq", Group: "all", Batch: 1, SubscriptionMode: SubscriptionModeAll})
	require.NoError(t, err)
	checkPending(t, b, "group in mode all joined")
	require.Equal(t, int64(10), b.queues["jq"].pending, "every message is pending for the new group")
}
