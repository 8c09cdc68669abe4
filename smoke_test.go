package queen_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

func TestSmoke_PushPopAck(t *testing.T) {
	t.Parallel()
	queentest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		ctx := context.Background()
		res, err := b.Push(ctx, []queen.PushItem{{Queue: "orders", Payload: json.RawMessage(`{"n":1}`)}, {Queue: "orders", Payload: json.RawMessage(`{"n":2}`)}})
		require.NoError(t, err)
		require.Equal(t, queen.PushQueued, res[0].Status)
		require.Equal(t, int64(1), res[1].Offset)
		pr, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Batch: 10})
		require.NoError(t, err)
		require.Len(t, pr.Messages, 2)
		require.Equal(t, `{"n":1}`, string(pr.Messages[0].Payload))
		require.Equal(t, 1, pr.Messages[0].DeliveryAttempt)
		acks := []queen.AckItem{}
		for _, m := range pr.Messages {
			acks = append(acks, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID})
		}
		ar, err := b.AckBatch(ctx, acks)
		require.NoError(t, err)
		require.True(t, ar[0].Success, "%v", ar[0].Err)
		require.True(t, ar[1].LeaseReleased)
		pr, err = b.Pop(ctx, queen.PopRequest{Queue: "orders", Batch: 10})
		require.NoError(t, err)
		require.Empty(t, pr.Messages)
	})
}
