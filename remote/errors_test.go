package remote_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// A refusal that names a lease maps to queen.ErrLeaseExpired whatever the
// case of its text: in an ack item's result and in a 409 answer.
func TestErrors_LeaseErrorsWhateverTheirCase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newScripted(t)
	item := queen.AckItem{TransactionID: "t", PartitionID: "00000000-0000-8000-8000-000000000001", LeaseID: "0190e4a4-0b1c-7a3e-8f00-5d1a2b3c4d60"}
	for _, text := range []string{"Lease expired", "lease expired", "LEASE EXPIRED", "Invalid Lease", "leaseId no longer holds the message"} {
		s.script("/api/v1/ack", scriptedAnswer{http.StatusOK, `[{"transactionId":"t","success":false,"error":` + quote(text) + `}]`})
		res, err := c.AckBatch(ctx, []queen.AckItem{item})
		require.NoError(t, err)
		require.False(t, res[0].Success)
		require.ErrorIs(t, res[0].Err, queen.ErrLeaseExpired, "item error %q", text)

		s.script("/api/v1/ack", scriptedAnswer{http.StatusConflict, `{"error":` + quote(text) + `}`})
		_, err = c.AckBatch(ctx, []queen.AckItem{item})
		require.ErrorIs(t, err, queen.ErrLeaseExpired, "409 %q", text)
	}
	// A text that names no lease is not a lease error.
	s.script("/api/v1/ack", scriptedAnswer{http.StatusOK, `[{"transactionId":"t","success":false,"error":"Message already settled"}]`})
	res, err := c.AckBatch(ctx, []queen.AckItem{item})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, queen.ErrAlreadySettled)
	require.NotErrorIs(t, res[0].Err, queen.ErrLeaseExpired)
}
