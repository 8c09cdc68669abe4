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

// Divergence 3, found by TestDifferential: remote.Client.ListQueues lists
// the queues newest first (the order of GET /resources/queues), where
// Broker.ListQueues lists them by name, and without their
// DefaultPartitionID and Groups. The package doc of remote says only that
// ListQueues carries the labels and Priority of a queue's Config.
func TestDivergence3_ListQueues(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	for _, q := range []string{"a", "b"} { // b is the newest
		for _, cl := range []queen.Client{b, c} {
			_, err := cl.Push(ctx, []queen.PushItem{{Queue: q, Payload: json.RawMessage(`1`)}})
			require.NoError(t, err)
			_, err = cl.Pop(ctx, queen.PopRequest{Queue: q, Group: "g"})
			require.NoError(t, err)
		}
		clock.Advance(time.Second)
	}
	type entry struct {
		name      string
		defaultID bool
		groups    []string
	}
	list := func(cl queen.Client) []entry {
		qs, err := cl.ListQueues(ctx)
		require.NoError(t, err)
		var out []entry
		for _, q := range qs {
			out = append(out, entry{q.Name, q.DefaultPartitionID != "", q.Groups})
		}
		return out
	}
	want := []entry{{"a", true, []string{"g"}}, {"b", true, []string{"g"}}}
	require.Equal(t, want, list(b), "Broker")
	require.Equal(t, want, list(c), "remote.Client")
}
