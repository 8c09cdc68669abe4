package remote_test

import (
	"context"
	"errors"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// Divergence 6, found by TestDifferential: a transaction whose ack names
// a partition id that is not a UUID (one no broker hands out) is refused
// by a Broker with a *TransactionError wrapping ErrNotFound, and by
// remote.Client with a bare *ArgumentError (the server's 400), although
// remote.Client maps the same kind of id to ErrNotFound elsewhere (dead
// letter and parked ids, "as the broker answers").
func TestDivergence6_TransactionAckOfAnIDNoBrokerIssues(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	ops := []queen.TxOp{{Ack: &queen.AckItem{TransactionID: "t1", PartitionID: "missing"}}}
	for _, cl := range []queen.Client{b, c} {
		_, err := cl.ExecTransaction(ctx, ops)
		var te *queen.TransactionError
		require.True(t, errors.As(err, &te), "%T: %v", cl, err)
		require.ErrorIs(t, err, queen.ErrNotFound, "%T", cl)
	}
}
