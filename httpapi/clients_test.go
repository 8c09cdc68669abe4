package httpapi_test

// One test per client flow of the wire spec's section 5: what Queen's
// official Go and JS clients send, byte for byte where it matters, and
// what they read back.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// goClientDecode decodes a body as the Go client does: an object as is, an
// array wrapped as {"data": [...]}, an empty body as nil.
func goClientDecode(t *testing.T, body []byte) map[string]any {
	t.Helper()
	if len(body) == 0 {
		return nil
	}
	var v any
	require.NoError(t, json.Unmarshal(body, &v))
	if arr, ok := v.([]any); ok {
		return map[string]any{"data": arr}
	}
	return v.(map[string]any)
}

// goClientFailed reports whether the Go client would see an error in a 2xx
// body: a top-level string "error".
func goClientFailed(m map[string]any) bool {
	_, ok := m["error"].(string)
	return ok
}

func TestClientGo_PushReadByPosition(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	body := `{"items":[` +
		`{"queue":"orders","partition":"Default","payload":{"id":1},"transactionId":"0190a0b0-1111-7222-8333-000000000001","traceId":"0190a0b0-1111-7222-8333-aaaaaaaaaaaa"},` +
		`{"queue":"orders","partition":"Default","payload":{"id":2},"transactionId":"0190a0b0-1111-7222-8333-000000000002"},` +
		`{"queue":"orders","partition":"Default","payload":{"id":1},"transactionId":"0190a0b0-1111-7222-8333-000000000001"}]}`
	rec := e.do("POST", "/api/v1/push", body)
	require.Equal(t, http.StatusCreated, rec.Code)
	res := goClientDecode(t, rec.Body.Bytes())["data"].([]any)
	require.Len(t, res, 3)
	for i, want := range []string{"queued", "queued", "duplicate"} {
		item := res[i].(map[string]any)
		require.Equal(t, want, item["status"])
		_, isString := item["error"].(string)
		require.False(t, isString)
	}
	require.Equal(t, "0190a0b0-1111-7222-8333-000000000002", res[1].(map[string]any)["transactionId"])
}

func TestClientJS_PushClassifiesByStatus(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.obj("POST", "/api/v1/configure", `{"queue":"capped","options":{"maxSize":1}}`, http.StatusOK)
	res := e.arr("POST", "/api/v1/push", `{"items":[
		{"queue":"capped","payload":{"a":1},"transactionId":"0190a0b0-1111-7222-8333-000000000001","traceId":"0190a0b0-1111-4222-8333-444455556666"},
		{"queue":"capped","payload":{"a":1},"transactionId":"0190a0b0-1111-7222-8333-000000000001"},
		{"queue":"capped","partition":"Default","payload":{"a":2},"transactionId":"0190a0b0-1111-7222-8333-000000000003"}]}`, http.StatusCreated)
	require.Equal(t, "queued", res[0].(map[string]any)["status"])
	require.Regexp(t, uuidRE, res[0].(map[string]any)["message_id"])
	require.Equal(t, "duplicate", res[1].(map[string]any)["status"])
	require.Equal(t, "failed", res[2].(map[string]any)["status"])
	require.Equal(t, "queue full", res[2].(map[string]any)["error"])
}

func TestClientGo_PopWithoutWait(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	path := "/api/v1/pop/queue/" + url.PathEscape("jobs.v1") + "?batch=1&wait=false&timeout=30000"
	rec := e.do("GET", path, nil)
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Nil(t, goClientDecode(t, rec.Body.Bytes()), "204 has no body")

	e.push("jobs.v1", "", "j1", map[string]any{"k": "v"})
	rec = e.do("GET", path, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	body := goClientDecode(t, rec.Body.Bytes())
	require.False(t, goClientFailed(body))
	m := body["messages"].([]any)[0].(map[string]any)
	for _, k := range []string{"transactionId", "partitionId", "leaseId", "queue", "partition", "createdAt"} {
		require.IsType(t, "", m[k], k)
	}
	require.IsType(t, map[string]any{}, m["data"], "the Go client keeps object payloads")
	_, err := time.Parse(time.RFC3339Nano, m["createdAt"].(string))
	require.NoError(t, err)
	require.Nil(t, m["producerSub"])
}

func TestClientGo_ConsumeLoop(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for _, tx := range []string{"a", "b"} {
		e.push("events", url.PathEscape("part/1"), tx, map[string]any{"tx": tx})
	}
	// Go consume: wait=true, batch 1, a group; partition escaped in the path.
	path := "/api/v1/pop/queue/events/partition/" + url.PathEscape("part%2F1") +
		"?batch=1&wait=true&timeout=30000&consumerGroup=workers&subscriptionMode=all"
	for _, want := range []string{"a", "b"} {
		m := msgs(t, e.pop(path))[0]
		require.Equal(t, want, m["transactionId"])
		// One message at a time: a single ack, with the group and the lease.
		rec := e.do("POST", "/api/v1/ack", map[string]any{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
			"leaseId": m["leaseId"], "status": "completed", "consumerGroup": "workers"})
		require.Equal(t, http.StatusOK, rec.Code)
		reply := goClientDecode(t, rec.Body.Bytes())
		require.False(t, goClientFailed(reply))
		require.Equal(t, true, reply["data"].([]any)[0].(map[string]any)["success"])
	}
}

func TestClientGo_HandlerErrorAcksFailed(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.obj("POST", "/api/v1/configure", `{"queue":"work","options":{"retryLimit":1,"retryDelay":0}}`, http.StatusOK)
	e.push("work", "", "w", map[string]any{})
	for attempt := 1; attempt <= 2; attempt++ {
		m := msgs(t, e.pop("/api/v1/pop/queue/work?batch=1&wait=true&timeout=30000"))[0]
		require.EqualValues(t, attempt, m["deliveryAttempt"])
		res := e.arr("POST", "/api/v1/ack", map[string]any{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
			"leaseId": m["leaseId"], "status": "failed", "error": "handler: boom"}, http.StatusOK)
		require.Equal(t, attempt == 2, res[0].(map[string]any)["dlq"])
	}
	dlq := e.obj("GET", "/api/v1/dlq?queue=work&limit=100&offset=0", nil, http.StatusOK)
	require.Equal(t, "handler: boom", dlq["messages"].([]any)[0].(map[string]any)["errorMessage"])
}

func TestClientGo_BatchAck(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for _, tx := range []string{"a", "b", "c"} {
		e.push("bulk", "", tx, map[string]any{})
	}
	got := msgs(t, e.pop("/api/v1/pop/queue/bulk?batch=3&wait=false&timeout=30000&consumerGroup=g&subscriptionMode=all"))
	acks := []any{}
	for i, m := range got {
		a := map[string]any{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": "completed"}
		if i == 2 {
			a["status"], a["error"] = "failed", "nope"
		}
		acks = append(acks, a)
	}
	rec := e.do("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks, "consumerGroup": "g"})
	require.Equal(t, http.StatusOK, rec.Code)
	data := goClientDecode(t, rec.Body.Bytes())["data"].([]any)
	require.Len(t, data, 3)
	for _, d := range data {
		_, isString := d.(map[string]any)["error"].(string)
		require.False(t, isString)
	}
}

func TestClientJS_AcksWithNulls(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for _, tx := range []string{"a", "b", "c"} {
		e.push("js", "", tx, map[string]any{})
	}
	// JS pop: wait=true&timeout=30000&batch=1 and a raw path.
	m := msgs(t, e.pop("/api/v1/pop/queue/js?wait=true&timeout=30000&batch=1"))[0]
	res := e.arr("POST", "/api/v1/ack", `{"transactionId":"`+m["transactionId"].(string)+`","partitionId":"`+m["partitionId"].(string)+
		`","status":"completed","error":null,"consumerGroup":null,"leaseId":"`+m["leaseId"].(string)+`"}`, http.StatusOK)
	require.Equal(t, true, res[0].(map[string]any)["success"])

	// JS batch acks always go through /ack/batch, even for one message.
	m = msgs(t, e.pop("/api/v1/pop/queue/js?wait=true&timeout=30000&batch=1"))[0]
	res = e.arr("POST", "/api/v1/ack/batch", `{"acknowledgments":[{"transactionId":"`+m["transactionId"].(string)+`","partitionId":"`+
		m["partitionId"].(string)+`","status":"completed","error":null,"leaseId":"`+m["leaseId"].(string)+`"}],"consumerGroup":null}`, http.StatusOK)
	require.Equal(t, true, res[0].(map[string]any)["success"])
	require.Nil(t, res[0].(map[string]any)["error"])

	// Status strings the caller passes through (retry) are honoured.
	m = msgs(t, e.pop("/api/v1/pop/queue/js?wait=true&timeout=30000&batch=1"))[0]
	res = e.arr("POST", "/api/v1/ack", map[string]any{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
		"status": "retry", "error": nil, "consumerGroup": nil, "leaseId": m["leaseId"]}, http.StatusOK)
	require.Equal(t, true, res[0].(map[string]any)["leaseReleased"])
}

func TestClient_LeaseRenewalWithEmptyBody(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("slow", "", "s", map[string]any{})
	m := msgs(t, e.pop("/api/v1/pop/queue/slow?batch=1&wait=true&timeout=30000"))[0]
	e.clock.Advance(30 * time.Second)
	rec := e.do("POST", "/api/v1/lease/"+m["leaseId"].(string)+"/extend", "{}")
	require.Equal(t, http.StatusOK, rec.Code)
	res := goClientDecode(t, rec.Body.Bytes())
	require.False(t, goClientFailed(res))
	require.Equal(t, itest.Stamp("2026-11-30T12:01:30.000Z"), res["newExpiresAt"], "now + 60 s: the 1.x Go client reads newExpiresAt")
	e.clock.Advance(45 * time.Second) // beyond the original 60 s, within the renewal
	require.Nil(t, e.pop("/api/v1/pop/queue/slow"), "still leased")
}

func TestClientGo_Transaction(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("in", "", "in-1", map[string]any{})
	m := msgs(t, e.pop("/api/v1/pop/queue/in?consumerGroup=stage&subscriptionMode=all"))[0]
	rec := e.do("POST", "/api/v1/transaction", map[string]any{
		"operations": []any{
			map[string]any{"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed", "consumerGroup": "stage"},
			map[string]any{"type": "push", "items": []any{map[string]any{"queue": "out", "partition": "Default", "payload": map[string]any{"x": 1},
				"transactionId": "0190a0b0-1111-7222-8333-000000000009"}}},
		},
		"requiredLeases": []any{m["leaseId"]},
	})
	require.Equal(t, http.StatusOK, rec.Code)
	res := goClientDecode(t, rec.Body.Bytes())
	require.Equal(t, true, res["success"])
	require.False(t, goClientFailed(res))
	require.Nil(t, e.pop("/api/v1/pop/queue/in?consumerGroup=stage"), "the input was acked")
	require.NotNil(t, e.pop("/api/v1/pop/queue/out"))

	// A refusal is success:false with a string error, still HTTP 200.
	rec = e.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed", "consumerGroup": "nobody"},
	}})
	require.Equal(t, http.StatusOK, rec.Code)
	res = goClientDecode(t, rec.Body.Bytes())
	require.Equal(t, false, res["success"])
	require.True(t, goClientFailed(res))
}

func TestClientJS_TransactionWithoutTransactionIDs(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("in", "", "in-1", map[string]any{})
	m := msgs(t, e.pop("/api/v1/pop/queue/in?wait=true&timeout=30000&batch=1"))[0]
	res := e.obj("POST", "/api/v1/transaction", map[string]any{
		"operations": []any{
			map[string]any{"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed"},
			map[string]any{"type": "push", "items": []any{map[string]any{"queue": "out", "payload": map[string]any{"y": 2}}}},
		},
		"requiredLeases": []any{},
	}, http.StatusOK)
	require.Equal(t, true, res["success"])
	require.Regexp(t, uuidRE, res["results"].([]any)[1].(map[string]any)["transactionId"])
}

func TestClientGo_QueueCreateAndDelete(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	rec := e.do("POST", "/api/v1/configure", `{"queue":"jobs","namespace":"ns","task":"tk","options":{"leaseTime":120,"retryLimit":2,"priority":3,"maxSize":100}}`)
	require.Equal(t, http.StatusOK, rec.Code)
	res := goClientDecode(t, rec.Body.Bytes())
	require.False(t, goClientFailed(res))
	require.Equal(t, true, res["configured"])
	require.EqualValues(t, 120, res["options"].(map[string]any)["leaseTime"])
	rec = e.do("POST", "/api/v1/configure", `{"queue":"bare"}`)
	require.Equal(t, http.StatusOK, rec.Code)
	for _, q := range []string{"jobs", "bare"} {
		rec = e.do("DELETE", "/api/v1/resources/queues/"+url.PathEscape(q), nil)
		require.Equal(t, http.StatusOK, rec.Code)
	}
}

func TestClientJS_QueueCreateWithDefaultsAndNulls(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	res := e.obj("POST", "/api/v1/configure", map[string]any{"queue": "js-queue", "namespace": nil, "task": nil, "options": map[string]any{
		"leaseTime": 300, "retryLimit": 3, "priority": 0, "delayedProcessing": 0, "windowBuffer": 0, "maxSize": 0,
		"retentionSeconds": 0, "completedRetentionSeconds": 0, "encryptionEnabled": false, "custom": map[string]any{"x": 1},
	}}, http.StatusOK)
	require.Equal(t, true, res["configured"])
	require.NotContains(t, res, "error")
	e.obj("DELETE", "/api/v1/resources/queues/"+url.PathEscape("js-queue"), nil, http.StatusOK)
}

func TestClient_DeadLetterListing(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("orders", "p2", "o", map[string]any{})
	m := msgs(t, e.pop("/api/v1/pop/queue/orders?consumerGroup=g&subscriptionMode=all"))[0]
	body := ackBody(m, "dlq")
	body["consumerGroup"] = "g"
	e.arr("POST", "/api/v1/ack", body, http.StatusOK)
	// Go: partition only when not Default, plus time bounds.
	res := e.obj("GET", "/api/v1/dlq?queue=orders&consumerGroup=g&partition=p2&limit=10&offset=0&from="+itest.Stamp("2026-11-30T00:00:00Z")+"&to="+itest.Stamp("2026-12-01T00:00:00Z"), nil, http.StatusOK)
	require.EqualValues(t, 1, res["total"])
	require.Len(t, res["messages"], 1)
	// JS: queue, limit=100, offset=0.
	res = e.obj("GET", "/api/v1/dlq?queue=orders&limit=100&offset=0", nil, http.StatusOK)
	require.EqualValues(t, 1, res["total"])
	res = e.obj("GET", "/api/v1/dlq?queue=nothing&limit=100&offset=0", nil, http.StatusOK)
	require.Equal(t, map[string]any{"messages": []any{}, "total": 0.0, "pagination": map[string]any{"limit": 100.0, "offset": 0.0}}, res)
}

func TestClient_ConsumerGroupManagement(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("orders", "a", "a1", map[string]any{})
	e.pop("/api/v1/pop/queue/orders?consumerGroup=" + url.QueryEscape("my group") + "&subscriptionMode=all")

	require.Len(t, e.arr("GET", "/api/v1/consumer-groups", nil, http.StatusOK), 1)
	require.Contains(t, e.obj("GET", "/api/v1/consumer-groups/"+url.PathEscape("my group"), nil, http.StatusOK), "orders")
	e.arr("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=60", nil, http.StatusOK)
	e.obj("POST", "/api/v1/stats/refresh", nil, http.StatusOK)
	e.obj("POST", "/api/v1/consumer-groups/"+url.PathEscape("my group")+"/subscription", `{"subscriptionTimestamp":"`+itest.Stamp("2026-11-30T11:00:00.000Z")+`"}`, http.StatusOK)
	e.obj("POST", "/api/v1/consumer-groups/"+url.PathEscape("my group")+"/queues/orders/seek", `{"timestamp":"`+itest.Stamp("2026-11-30T11:00:00.000Z")+`"}`, http.StatusOK)
	e.obj("POST", "/api/v1/consumer-groups/"+url.PathEscape("my group")+"/queues/orders/seek", `{"toEnd":true}`, http.StatusOK)
	// Go only: partition seek with {}.
	e.obj("POST", "/api/v1/consumer-groups/"+url.PathEscape("my group")+"/queues/orders/partitions/a/seek", `{}`, http.StatusOK)
	res := e.obj("DELETE", "/api/v1/consumer-groups/"+url.PathEscape("my group")+"/queues/orders?deleteMetadata=false", nil, http.StatusOK)
	require.Equal(t, false, res["metadataDeleted"])
	// Go sends the group unescaped; a plain name works either way.
	e.pop("/api/v1/pop/queue/orders?consumerGroup=plain")
	res = e.obj("DELETE", "/api/v1/consumer-groups/plain?deleteMetadata=true", nil, http.StatusOK)
	require.Equal(t, true, res["success"])
}

func TestClient_Traces(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	p := e.push("t", "", "m", map[string]any{})
	res := e.obj("POST", "/api/v1/traces", map[string]any{"transactionId": "m", "partitionId": p["partition_id"],
		"consumerGroup": queen.QueueModeGroup, "traceNames": nil, "data": map[string]any{"note": "hi"}}, http.StatusCreated)
	require.Equal(t, true, res["success"])
	got := e.obj("GET", "/api/v1/traces/"+p["partition_id"].(string)+"/m", nil, http.StatusOK)["traces"].([]any)
	require.Equal(t, "info", got[0].(map[string]any)["event_type"])
}

func TestClientStreams_PopThroughOrdinaryRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for _, part := range []string{"k1", "k2", "k3"} {
		e.push("source", part, "m", map[string]any{"k": part})
	}
	res := e.pop("/api/v1/pop/queue/source?consumerGroup=query-1&wait=true&timeout=30000&batch=10&partitions=3&subscriptionFrom=" + itest.Stamp("2026-11-30T00:00:00Z"))
	require.EqualValues(t, 3, res["partitionsClaimed"])
	for _, m := range msgs(t, res) {
		require.Equal(t, res["leaseId"], m["leaseId"])
		require.Equal(t, "query-1", m["consumerGroup"])
		require.NotEmpty(t, m["partition"])
	}
}

func TestClient_ObservabilityPassthroughs(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for _, p := range []string{"/health", "/metrics", "/api/v1/resources/overview", "/api/v1/resources/queues",
		"/api/v1/resources/namespaces", "/api/v1/resources/tasks", "/api/v1/messages", "/api/v1/status/queues", "/api/v1/status",
		"/api/v1/system/maintenance", "/api/v1/system/maintenance/pop", "/api/v1/analytics/system-metrics",
		"/api/v1/analytics/worker-metrics"} {
		e.obj("GET", p, nil, http.StatusOK)
	}
	require.Equal(t, http.StatusOK, e.do("GET", "/metrics/prometheus", nil).Code)
	require.Equal(t, "postgresql-only", e.obj("GET", "/api/v1/analytics/postgres-stats", nil, http.StatusNotFound)["reason"])
	for _, p := range []string{"/api/v1/status/analytics", "/api/v1/system/shared-state"} {
		require.Equal(t, map[string]any{"error": "not supported"}, e.obj("GET", p, nil, http.StatusNotFound))
	}
}
