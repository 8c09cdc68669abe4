package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// repeatJSON joins n copies of elem into a JSON array.
func repeatJSON(elem string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]"
}

// TestPush_ItemCap: a push of more than queen.MaxPushItems items is a 413
// naming the cap, decided before any item is read (the first one here is
// invalid) and writing nothing; a push at the cap is served.
func TestPush_ItemCap(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	item := `{"queue":"capped","payload":1}`
	over := `{"items":` + repeatJSON(item, queen.MaxPushItems+1) + `}`
	e.fails("POST", "/api/v1/push", over, http.StatusRequestEntityTooLarge,
		"request too large: a push takes at most 10000 items (queen.MaxPushItems), not 10001")
	bad := `{"items":[{"queue":""},` + strings.TrimPrefix(repeatJSON(item, queen.MaxPushItems), "[") + `}`
	e.fails("POST", "/api/v1/push", bad, http.StatusRequestEntityTooLarge, "at most 10000 items")
	_, err := e.b.QueueStats(t.Context(), "capped")
	require.ErrorIs(t, err, queen.ErrNotFound, "a refused push creates nothing")

	res := e.arr("POST", "/api/v1/push", `{"items":`+repeatJSON(item, queen.MaxPushItems)+`}`, http.StatusCreated)
	require.Len(t, res, queen.MaxPushItems)
}

// TestTransaction_OperationCap: a transaction of more than queen.MaxTxOps
// operations, counting each item of a push operation's items as one, is
// a 413 naming the cap and writes nothing. An operations array longer than
// the cap is refused before any operation is read (the first one here is
// invalid).
func TestTransaction_OperationCap(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	push := `{"type":"push","queue":"capped","payload":1}`
	flat := `{"operations":[{"type":"nonsense"},` + strings.TrimPrefix(repeatJSON(push, queen.MaxTxOps), "[") + `}`
	e.fails("POST", "/api/v1/transaction", flat, http.StatusRequestEntityTooLarge,
		"request too large: a transaction takes at most 10000 operations (queen.MaxTxOps)")
	half := `{"type":"push","items":` + repeatJSON(`{"queue":"capped","payload":1}`, queen.MaxTxOps/2) + `}`
	e.fails("POST", "/api/v1/transaction", `{"operations":[`+half+`,`+half+`,`+push+`]}`,
		http.StatusRequestEntityTooLarge, "at most 10000 operations (queen.MaxTxOps)")
	_, err := e.b.QueueStats(t.Context(), "capped")
	require.ErrorIs(t, err, queen.ErrNotFound, "a refused transaction creates nothing")
}

// TestAckBatch_ItemCap: an ack batch of more than queen.MaxAckItems items
// is refused with the 400 Broker.AckBatch gives, before any item is read
// (the first one here is invalid).
func TestAckBatch_ItemCap(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	ack := `{"transactionId":"t","partitionId":"0190a0b0-1111-4222-8333-444455556666"}`
	body := `{"acknowledgments":[{},` + strings.TrimPrefix(repeatJSON(ack, queen.MaxAckItems), "[") + `}`
	e.fails("POST", "/api/v1/ack/batch", body, http.StatusBadRequest, "invalid items: at most 10000 per call, not 10001")
}
