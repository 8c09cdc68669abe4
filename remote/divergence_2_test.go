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

// Divergence 2, found by TestDifferential: remote.Client.Pop reports
// PopResult.Conflating false for a conflating group's pop that returned
// messages; a Broker reports true.
func TestDivergence2_ConflatingPopWithMessages(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	req := queen.PopRequest{Queue: "q", Group: "cf", Conflation: true, SubscriptionMode: queen.SubscriptionModeAll}
	for _, cl := range []queen.Client{b, c} {
		_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
		require.NoError(t, err)
		res, err := cl.Pop(ctx, req)
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		require.True(t, res.Conflating, "%T", cl)
	}
}
