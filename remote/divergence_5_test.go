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

// Divergence 5, found by TestDifferential: remote.Client's SeekGroup,
// DeleteGroup and SetGroupSubscription refuse the empty group with an
// *ArgumentError, and its SeekPartition answers ErrNotFound (the path has
// an empty segment); a Broker reads the empty group as queue mode ("As in
// PopRequest.Group, an empty group (or QueueModeGroup) is the queue-mode
// group"), and so does remote.Client with QueueModeGroup spelt out.
func TestDivergence5_EmptyGroupIsQueueMode(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	for _, cl := range []queen.Client{b, c} {
		_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
		require.NoError(t, err)
		_, err = cl.Pop(ctx, queen.PopRequest{Queue: "q"}) // queue mode joins q
		require.NoError(t, err)
	}
	calls := []struct {
		name string
		call func(cl queen.Client) error
	}{
		{"SeekGroup", func(cl queen.Client) error {
			_, err := cl.SeekGroup(ctx, "", "q", queen.SeekOptions{ToEnd: true})
			return err
		}},
		{"SeekPartition", func(cl queen.Client) error {
			_, err := cl.SeekPartition(ctx, "", "q", queen.DefaultPartition, queen.SeekOptions{ToEnd: true})
			return err
		}},
		{"SetGroupSubscription", func(cl queen.Client) error {
			_, err := cl.SetGroupSubscription(ctx, "", clock.Now())
			return err
		}},
		{"DeleteGroup", func(cl queen.Client) error {
			_, err := cl.DeleteGroup(ctx, "", "q", false)
			return err
		}},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.call(b), "Broker")
			require.NoError(t, tc.call(c), "remote.Client")
		})
	}
}
