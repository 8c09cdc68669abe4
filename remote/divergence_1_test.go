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

// Divergence 1, found by TestDifferential: remote.Client.Pop accepted a
// PopRequest.Lease below one second that a Broker refuses with an
// *ArgumentError (docs/limits.md: "Lease / leaseSeconds: 1 s..365 days,
// Go: refused"); it now refuses it too, before sending. It rounds any
// Lease up to whole seconds, where a Broker keeps it to the microsecond:
// that is a documented deliberate difference (package doc, "What the
// remote API does not carry"): the wire's leaseSeconds is Queen's unit,
// and Queen's server would not honour a finer field.
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
		_, berr := b.Pop(ctx, req)
		require.ErrorIs(t, berr, queen.ErrInvalidArgument, "Broker")
		_, cerr := c.Pop(ctx, req)
		require.ErrorIs(t, cerr, queen.ErrInvalidArgument, "remote.Client")
		require.Equal(t, berr.Error(), cerr.Error())
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
		require.Equal(t, 0, again(c), "remote.Client: the lease was rounded up to 2 s (documented)")
		clock.Advance(500 * time.Millisecond) // past 2 s
		require.Equal(t, 1, again(c), "remote.Client: the 2 s lease ran out")
	})
}
