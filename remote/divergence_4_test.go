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

// Divergence 4, found by TestDifferential: the ack results of
// remote.Client.ExecTransaction have no Queue, no Partition and
// LeaseReleased false; and after an abort, the acks before the refused
// operation are reported as refused items (Success false, no Err), where
// a Broker leaves their results empty (nil Ack).
func TestDivergence4_TransactionAckResults(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})

	t.Run("committed", func(t *testing.T) {
		var got []queen.AckResult // without the transactionId, which differs
		for _, cl := range []queen.Client{b, c} {
			_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
			require.NoError(t, err)
			p, err := cl.Pop(ctx, queen.PopRequest{Queue: "q"})
			require.NoError(t, err)
			m := p.Messages[0]
			res, err := cl.ExecTransaction(ctx, []queen.TxOp{{Ack: &queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: p.LeaseID}}})
			require.NoError(t, err)
			a := res.Results[0].Ack
			got = append(got, queen.AckResult{Queue: a.Queue, Partition: a.Partition, Success: a.Success, Err: a.Err, LeaseReleased: a.LeaseReleased,
				DeadLettered: a.DeadLettered, Parked: a.Parked})
		}
		require.Equal(t, queen.AckResult{Queue: "q", Partition: queen.DefaultPartition, Success: true, LeaseReleased: true}, got[0], "Broker")
		require.Equal(t, got[0], got[1], "remote.Client")
	})

	t.Run("aborted", func(t *testing.T) {
		var got []*queen.AckResult
		for _, cl := range []queen.Client{b, c} {
			_, err := cl.ConfigureQueue(ctx, "full", queen.QueueConfig{MaxSize: 1})
			require.NoError(t, err)
			_, err = cl.Push(ctx, []queen.PushItem{{Queue: "full", Payload: json.RawMessage(`1`)}, {Queue: "r", Payload: json.RawMessage(`1`)}})
			require.NoError(t, err)
			p, err := cl.Pop(ctx, queen.PopRequest{Queue: "r"})
			require.NoError(t, err)
			m := p.Messages[0]
			res, err := cl.ExecTransaction(ctx, []queen.TxOp{
				{Ack: &queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: p.LeaseID}},
				{Push: &queen.PushItem{Queue: "full", Payload: json.RawMessage(`2`)}},
			})
			require.ErrorIs(t, err, queen.ErrQueueFull)
			require.NotNil(t, res)
			require.Len(t, res.Results, 2)
			got = append(got, res.Results[0].Ack)
		}
		require.Nil(t, got[0], "Broker: nothing gathered for the ack before the refused push")
		require.Equal(t, got[0], got[1], "remote.Client")
	})
}
