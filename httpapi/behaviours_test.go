package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Integers past 2^53 cannot be told apart once a JavaScript client has
// parsed them: where the API expects an integer (a query parameter or a
// body member) it refuses one beyond ±2^53 with 400, however it is
// written, and takes 2^53 itself.
func TestBehaviour_RefusesIntegersBeyond2To53(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("q", "", "t1", 1)
	const pid = "00000000-0000-8000-8000-000000000001"
	const (
		limit   = "9007199254740992" // 2^53
		past    = "9007199254740993" // 2^53 + 1
		pastExp = "9.007199254740994e15"
	)
	queries := []struct{ path, param string }{
		{"/api/v1/messages?", "offset"},
		{"/api/v1/messages?", "limit"},
		{"/api/v1/fetch/queue/q/partition/Default?", "fromOffset"},
		{"/api/v1/fetch/queue/q/partition/Default?", "limit"},
		{"/api/v1/dlq?", "offset"},
		{"/api/v1/pop/queue/q?consumerGroup=g&", "batch"},
		{"/api/v1/pop/queue/q?consumerGroup=g&", "partitions"},
		{"/api/v1/pop/queue/q?consumerGroup=g&wait=false&", "timeout"},
	}
	for _, q := range queries {
		for _, v := range []string{past, "-" + past, pastExp, "1e300"} {
			rec := e.do("GET", q.path+q.param+"="+v, nil)
			require.Equal(t, http.StatusBadRequest, rec.Code, "%s%s=%s: %s", q.path, q.param, v, rec.Body.String())
			require.Contains(t, rec.Body.String(), q.param)
		}
		if q.param != "timeout" && q.param != "batch" && q.param != "partitions" {
			rec := e.do("GET", q.path+q.param+"="+limit, nil)
			require.Equal(t, http.StatusOK, rec.Code, "%s%s=%s: %s", q.path, q.param, limit, rec.Body.String())
		}
	}
	// Body members.
	for _, v := range []string{past, "-" + past, pastExp} {
		e.fails("POST", "/api/v1/ack", `{"transactionId":"t1","partitionId":"`+pid+`","status":"retry","delayMs":`+v+`}`,
			http.StatusBadRequest, "delayMs")
		e.fails("POST", "/api/v1/lease/0190e4a4-0b1c-7a3e-8f00-5d1a2b3c4d60/extend", `{"seconds":`+v+`}`, http.StatusBadRequest, "seconds")
		e.fails("POST", "/api/v1/configure", `{"queue":"q","options":{"priority":`+v+`}}`, http.StatusBadRequest, "options.priority")
	}
}

// Names are at most 255 bytes: one of 255 is taken, one of 256 refused,
// in a path, a query and a body.
func TestBehaviour_NamesOf255And256Bytes(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	ok, long := strings.Repeat("n", 255), strings.Repeat("n", 256)
	e.push(ok, ok, ok, 1)
	res := e.obj("GET", "/api/v1/pop/queue/"+ok+"/partition/"+ok+"?consumerGroup="+ok+"&subscriptionMode=all", nil, http.StatusOK)
	require.Len(t, res["messages"], 1)

	item := func(queue, partition, txid string) map[string]any {
		return map[string]any{"items": []any{map[string]any{"queue": queue, "partition": partition, "transactionId": txid, "payload": 1}}}
	}
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{item(long, ok, ok), "queue"},
		{item(ok, long, ok), "partition"},
		{item(ok, ok, long), "transactionId"},
	} {
		e.fails("POST", "/api/v1/push", c.body, http.StatusBadRequest, "items[0]."+c.field+" is longer than 255 bytes")
	}
	e.fails("GET", "/api/v1/pop/queue/"+long, nil, http.StatusBadRequest, "queue is longer than 255 bytes")
	e.fails("GET", "/api/v1/pop/queue/"+ok+"/partition/"+long, nil, http.StatusBadRequest, "partition is longer than 255 bytes")
	e.fails("GET", "/api/v1/pop/queue/"+ok+"?consumerGroup="+long, nil, http.StatusBadRequest, "consumerGroup is longer than 255 bytes")
	e.fails("POST", "/api/v1/configure", map[string]any{"queue": long}, http.StatusBadRequest, "queue is longer than 255 bytes")
	e.fails("GET", "/api/v1/pop?namespace="+long, nil, http.StatusBadRequest, "namespace is longer than 255 bytes")
	e.call("POST", "/api/v1/configure", map[string]any{"queue": ok, "namespace": ok, "task": ok}, http.StatusOK)
	e.fails("POST", "/api/v1/configure", map[string]any{"queue": ok, "namespace": long}, http.StatusBadRequest, "namespace is longer than 255 bytes")
}

// Query booleans are true/1 or false/0 in any case; anything else is
// refused.
func TestBehaviour_QueryBooleansInAnyCase(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("q", "", "t1", 1)
	e.push("q", "", "t2", 2)
	res := e.pop("/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all&wait=FALSE&autoAck=TRUE")
	require.Len(t, msgs(t, res), 1)
	require.Empty(t, msgs(t, res)[0]["leaseId"], "autoAck=TRUE commits on delivery")
	res = e.pop("/api/v1/pop/queue/q?consumerGroup=g&wait=False&autoAck=True")
	require.Len(t, msgs(t, res), 1)
	require.Nil(t, e.pop("/api/v1/pop/queue/q?consumerGroup=g&wait=fAlSe"))
	e.fails("GET", "/api/v1/pop/queue/q?wait=yes", nil, http.StatusBadRequest, `wait must be true or false, not "yes"`)
}

// Where a UUID is required, a string that only starts with one is refused.
func TestBehaviour_UUIDsAreExactly36Characters(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	const id = "0190e4a4-0b1c-7a3e-8f00-5d1a2b3c4d60"
	for _, bad := range []string{id + "0", id + "-", id[:35]} {
		e.fails("POST", "/api/v1/lease/"+bad+"/extend", `{"seconds":30}`, http.StatusBadRequest, "leaseId must be a UUID")
		e.fails("GET", "/api/v1/messages/"+bad+"/t1", nil, http.StatusBadRequest, "partitionId must be a UUID")
	}
	rec := e.do("POST", "/api/v1/lease/"+id+"/extend", `{"seconds":30}`)
	require.NotEqual(t, http.StatusBadRequest, rec.Code, rec.Body.String())
}
