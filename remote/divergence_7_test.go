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

// Divergence 7, found by TestDifferential: remote.Client.AckBatch sets
// AckResult.Parked on every accepted item of status park (it infers it
// from the request); a Broker sets it only where the item parked the
// message, not on items that changed nothing: a repeat of an item in the
// same call, or an item behind a message of its batch that comes back
// (that one is delivered again).
func TestDivergence7_ParkedOnItemsThatChangedNothing(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	// parked acks the messages of one pop with statuses and returns
	// Parked of the last item.
	parked := func(t *testing.T, cl queen.Client, queue string, statuses ...queen.AckStatus) bool {
		_, err := cl.Push(ctx, []queen.PushItem{{Queue: queue, Payload: json.RawMessage(`1`)}, {Queue: queue, Payload: json.RawMessage(`2`)}})
		require.NoError(t, err)
		p, err := cl.Pop(ctx, queen.PopRequest{Queue: queue, Batch: 2})
		require.NoError(t, err)
		require.Len(t, p.Messages, 2)
		items := make([]queen.AckItem, len(statuses))
		for i, st := range statuses {
			m := p.Messages[min(i, 1)]
			if len(statuses) == 2 && statuses[0] == statuses[1] {
				m = p.Messages[0] // the same item twice
			}
			items[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: p.LeaseID, Status: st}
		}
		res, err := cl.AckBatch(ctx, items)
		require.NoError(t, err)
		last := res[len(res)-1]
		require.True(t, last.Success, "%T: %+v", cl, last)
		return last.Parked
	}
	t.Run("repeated item", func(t *testing.T) {
		require.False(t, parked(t, b, "q1", queen.AckPark, queen.AckPark), "Broker")
		require.False(t, parked(t, c, "q1", queen.AckPark, queen.AckPark), "remote.Client")
	})
	t.Run("behind a retry", func(t *testing.T) {
		require.False(t, parked(t, b, "q2", queen.AckRetry, queen.AckPark), "Broker")
		require.False(t, parked(t, c, "q2", queen.AckRetry, queen.AckPark), "remote.Client")
	})
}
