package queen_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// A partition's Pending is what its slowest group has not settled, leased
// messages included, and its InFlight counts a message once for each group
// leasing it; the queue's are their sums.
func TestQueueStats_PartitionCounts(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	ctx := context.Background()
	for _, p := range []string{"a", "a", "a", "b"} {
		_, err := b.Push(ctx, []queen.PushItem{{Queue: "q", Partition: p, Payload: json.RawMessage(`{}`)}})
		require.NoError(t, err)
	}
	counts := func() map[string][2]int64 {
		t.Helper()
		st, err := b.QueueStats(ctx, "q")
		require.NoError(t, err)
		out := map[string][2]int64{}
		var pending, inFlight int64
		for _, p := range st.Partitions {
			out[p.Name] = [2]int64{p.Pending, p.InFlight}
			pending, inFlight = pending+p.Pending, inFlight+p.InFlight
			require.LessOrEqual(t, p.Pending, p.Messages)
		}
		require.Equal(t, pending, st.Pending)
		require.Equal(t, inFlight, st.InFlight)
		return out
	}
	require.Equal(t, map[string][2]int64{"a": {3, 0}, "b": {1, 0}}, counts(), "no group: every message")
	pop := func(group string, n int) []*queen.Message {
		t.Helper()
		msgs, err := b.Queue("q").Partition("a").Group(group).SubscriptionMode(queen.SubscriptionModeAll).Batch(n).Wait(false).Pop(ctx)
		require.NoError(t, err)
		require.Len(t, msgs, n)
		return msgs
	}
	g1 := pop("g1", 2)
	pop("g2", 3)
	require.Equal(t, map[string][2]int64{"a": {3, 5}, "b": {1, 0}}, counts(), "two groups leasing the same messages")
	for _, m := range g1 {
		_, err := b.Ack(ctx, m, true, queen.AckOptions{})
		require.NoError(t, err)
	}
	require.Equal(t, map[string][2]int64{"a": {3, 3}, "b": {1, 0}}, counts(), "g2, the slowest, settled nothing")
}
