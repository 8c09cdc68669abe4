package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The ack answers carry parked beside dlq: whether this ack moved the
// message to the parked store, not whether it asked to. A park behind a
// retry of the same batch or transaction parks nothing.
func TestAck_Parked(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for _, tx := range []string{"a0", "a1"} {
		e.push("pk", "", tx, 1)
	}
	got := msgs(t, e.pop("/api/v1/pop/queue/pk?batch=2"))
	require.Len(t, got, 2)
	res := e.arr("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{ackBody(got[0], "retry"), ackBody(got[1], "park")}}, http.StatusOK)
	require.Equal(t, true, res[1].(map[string]any)["success"])
	require.Equal(t, false, res[1].(map[string]any)["parked"], "behind a retry")
	require.EqualValues(t, 0, e.obj("GET", "/api/v1/parked?queue=pk", nil, http.StatusOK)["total"])

	got = msgs(t, e.pop("/api/v1/pop/queue/pk?batch=2"))
	require.Len(t, got, 2)
	tx := func(ops ...any) map[string]any {
		return e.obj("POST", "/api/v1/transaction", map[string]any{"operations": ops}, http.StatusOK)
	}
	op := func(m map[string]any, status string) map[string]any {
		o := ackBody(m, status)
		o["type"] = "ack"
		return o
	}
	reply := tx(op(got[0], "retry"), op(got[1], "park"))
	require.Equal(t, true, reply["success"])
	require.Equal(t, false, reply["results"].([]any)[1].(map[string]any)["parked"], "behind a retry")
	require.EqualValues(t, 0, e.obj("GET", "/api/v1/parked?queue=pk", nil, http.StatusOK)["total"])

	got = msgs(t, e.pop("/api/v1/pop/queue/pk?batch=2"))
	require.Len(t, got, 2)
	reply = tx(op(got[0], "park"))
	require.Equal(t, true, reply["results"].([]any)[0].(map[string]any)["parked"])
	// An aborted transaction parked nothing.
	gone := op(got[1], "park")
	gone["transactionId"] = "ghost"
	reply = tx(op(got[1], "park"), gone)
	require.Equal(t, false, reply["success"])
	require.Equal(t, false, reply["results"].([]any)[0].(map[string]any)["parked"])
	r := e.arr("POST", "/api/v1/ack", ackBody(got[1], "park"), http.StatusOK)[0].(map[string]any)
	require.Equal(t, true, r["parked"])
	require.EqualValues(t, 2, e.obj("GET", "/api/v1/parked?queue=pk", nil, http.StatusOK)["total"])
}
