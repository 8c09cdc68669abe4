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

// Divergence 8, found by TestDifferential: remote.Client.Push reports a
// failed item (ErrQueueFull) with no PartitionID and no TraceID; a
// Broker reports both.
func TestDivergence8_FailedPushItem(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	const trace = "5f0c7e4a-1b2c-4d3e-8f90-a1b2c3d4e5f6"
	for _, cl := range []queen.Client{b, c} {
		_, err := cl.ConfigureQueue(ctx, "q", queen.QueueConfig{MaxSize: 1})
		require.NoError(t, err)
		res, err := cl.Push(ctx, []queen.PushItem{
			{Queue: "q", TransactionID: "t1", Payload: json.RawMessage(`1`)},
			{Queue: "q", TransactionID: "t2", TraceID: trace, Payload: json.RawMessage(`2`)},
		})
		require.NoError(t, err)
		require.Equal(t, queen.PushFailed, res[1].Status)
		require.ErrorIs(t, res[1].Err, queen.ErrQueueFull)
		require.Equal(t, res[0].PartitionID, res[1].PartitionID, "%T", cl)
		require.Equal(t, trace, res[1].TraceID, "%T", cl)
	}
}
