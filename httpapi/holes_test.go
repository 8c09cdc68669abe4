package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A deleted message used to strand a waiting group pop in endless
// recursion (the server died of a stack overflow) and to stop a group
// popping one at a time in front of it forever.
func TestDeleteMessage_PopsStepOverIt(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	p := e.push("q", "", "t1", 1)
	e.push("q", "", "t2", 2)
	e.obj("DELETE", "/api/v1/messages/"+p["partition_id"].(string)+"/t1", nil, http.StatusOK)
	got := msgs(t, e.pop("/api/v1/pop/queue/q?consumerGroup=cli&subscriptionMode=all&wait=true&timeout=2000"))
	require.Len(t, got, 1)
	require.Equal(t, "t2", got[0]["transactionId"])

	e.push("q", "", "a", 3)
	e.push("q", "", "b", 4)
	e.push("q", "", "c", 5)
	e.obj("DELETE", "/api/v1/messages/"+p["partition_id"].(string)+"/b", nil, http.StatusOK)
	var seen []any
	for i := 0; i < 5; i++ {
		res := e.pop("/api/v1/pop/queue/q?consumerGroup=one&subscriptionMode=all&batch=1")
		if res == nil {
			break
		}
		m := msgs(t, res)[0]
		seen = append(seen, m["transactionId"])
		body := ackBody(m, "completed")
		body["consumerGroup"] = "one"
		e.arr("POST", "/api/v1/ack", body, http.StatusOK)
	}
	require.Equal(t, []any{"t2", "a", "c"}, seen)
}
