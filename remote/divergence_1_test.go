package remote_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// Divergence 1, found by TestDifferential: remote.Client.Pop accepts a
// PopRequest.Lease below one second that a Broker refuses with an
// *ArgumentError (docs/limits.md: "Lease / leaseSeconds: 1 s..365 days,
// Go: refused"), and it rounds any Lease up to whole seconds, where a
// Broker keeps it to the microsecond.
func TestDivergence1_PopLeaseBelowOrBetweenSeconds(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	for _, cl := range []queen.Client{b, c} {
		_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q1", Payload: json.RawMessage(`1`)}, {Queue: "q2", Payload: json.RawMessage(`1`)}})
		require.NoError(t, err)
	}

	t.Run("below a second", func(t *testing.T) {
		req := queen.PopRequest{Queue: "q1", Lease: 500 * time.Millisecond}
		_, err := b.Pop(ctx, req)
		require.ErrorIs(t, err, queen.ErrInvalidArgument, "Broker")
		_, err = c.Pop(ctx, req)
		require.ErrorIs(t, err, queen.ErrInvalidArgument, "remote.Client")
	})

	t.Run("between seconds", func(t *testing.T) {
		req := queen.PopRequest{Queue: "q2", Lease: 1500 * time.Millisecond}
		for _, cl := range []queen.Client{b, c} {
			res, err := cl.Pop(ctx, req)
			require.NoError(t, err)
			require.Len(t, res.Messages, 1)
		}
		clock.Advance(1600 * time.Millisecond) // past a 1.5 s lease, not past 2 s
		again := func(cl queen.Client) int {
			res, err := cl.Pop(ctx, queen.PopRequest{Queue: "q2"})
			require.NoError(t, err)
			return len(res.Messages)
		}
		require.Equal(t, 1, again(b), "Broker: the 1.5 s lease ran out")
		require.Equal(t, 1, again(c), "remote.Client: the lease ran out too")
	})
}
