package remote_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// Divergence 10, found by TestDifferential: remote.Client.QueueStats (and
// ListQueues) rebuild Pending as the wire's pending plus processing
// counts, and processing counts the leased messages of every group, so
// with two groups holding the same message under leases Pending is 2 for
// a queue of one message; a Broker says 1 ("never more than Messages").
func TestDivergence10_PendingWithSeveralGroupsLeasing(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	for _, cl := range []queen.Client{b, c} {
		_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
		require.NoError(t, err)
		for _, g := range []string{"g1", "g2"} {
			p, err := cl.Pop(ctx, queen.PopRequest{Queue: "q", Group: g, SubscriptionMode: queen.SubscriptionModeAll})
			require.NoError(t, err)
			require.Len(t, p.Messages, 1)
		}
		qs, err := cl.QueueStats(ctx, "q")
		require.NoError(t, err)
		require.Equal(t, int64(1), qs.Messages, "%T", cl)
		require.Equal(t, int64(2), qs.InFlight, "%T", cl)
		require.Equal(t, int64(1), qs.Pending, "%T: Pending", cl)
		list, err := cl.ListQueues(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), list[0].Pending, "%T: ListQueues Pending", cl)
	}
}
