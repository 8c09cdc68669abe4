package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.obj("POST", "/api/v1/configure", `{"queue":"orders","namespace":"shop","task":"bill"}`, http.StatusOK)
	e.push("orders", "a", "a1", 1)
	e.push("orders", "a", "a2", 2)
	e.push("orders", "b", "b1", 3)
	e.push("orders", "c", "c1", 4)
	e.clock.Advance(time.Second)
	e.push("mail", "", "m1", 5)
	for _, part := range []string{"a", "b"} {
		m := msgs(t, e.pop("/api/v1/pop/queue/orders/partition/"+part))[0]
		body := ackBody(m, "dlq")
		body["error"] = "bad sku"
		e.arr("POST", "/api/v1/ack", body, http.StatusOK)
	}
	e.pop("/api/v1/pop/queue/orders/partition/a") // a2 stays leased

	res := e.obj("GET", "/api/v1/status", nil, http.StatusOK)
	queues := res["queues"].([]any)
	require.Len(t, queues, 2)
	listed := e.obj("GET", "/api/v1/status/queues", nil, http.StatusOK)["queues"].([]any)
	require.Equal(t, "orders", listed[1].(map[string]any)["name"], "/status/queues lists newest first")
	require.Equal(t, listed[0], queues[0], "each queue as /status/queues has it, by name")
	require.Equal(t, listed[1], queues[1])
	orders := queues[1].(map[string]any)
	require.Equal(t, "orders", orders["name"])
	require.Equal(t, "shop", orders["namespace"])
	require.Equal(t, "bill", orders["task"])
	require.Equal(t, map[string]any{"total": 4.0, "pending": 1.0, "processing": 1.0, "completed": 0.0, "failed": 0.0, "deadLetter": 2.0},
		orders["messages"])
	require.Equal(t, map[string]any{"total": 5.0, "pending": 2.0, "processing": 1.0, "completed": 0.0, "failed": 0.0, "deadLetter": 2.0,
		"batchEfficiency": map[string]any{"push": 0.0, "pop": 0.0, "ack": 0.0}, "requests": map[string]any{"push": 0.0, "pop": 0.0, "ack": 0.0}},
		res["messages"], "summed over the queues; no History, no batch figures")
	require.Equal(t, map[string]any{"active": 1.0, "partitionsWithLeases": 1.0, "totalBatchSize": 1.0, "totalAcked": 0.0}, res["leases"])
	require.Equal(t, map[string]any{"totalMessages": 2.0, "affectedPartitions": 2.0,
		"topErrors": []any{map[string]any{"error": "bad sku", "count": 2.0}}}, res["deadLetterQueue"])
	now := e.clock.Now().UTC()
	require.Equal(t, map[string]any{"from": now.Add(-time.Hour).Format("2006-01-02T15:04:05.000Z"), "to": now.Format("2006-01-02T15:04:05.000Z"),
		"bucketMinutes": 1.0, "pointCount": 0.0}, res["timeRange"], "the last hour on the broker's clock")
	require.Equal(t, []any{}, res["throughput"])
	require.Equal(t, []any{}, res["workers"])
	require.Equal(t, map[string]any{"from": "2026-11-30T10:00:00.000Z", "to": "2026-11-30T11:00:00.000Z", "bucketMinutes": 1.0, "pointCount": 0.0},
		e.obj("GET", "/api/v1/status?from=2026-11-30T10:00:00Z&to=2026-11-30T11:00:00Z", nil, http.StatusOK)["timeRange"])

	// Filters: by queue, namespace and task.
	for _, c := range []struct {
		query string
		names []any
	}{
		{"queue=mail", []any{"mail"}},
		{"namespace=shop&task=bill", []any{"orders"}},
		{"task=none", nil},
	} {
		res := e.obj("GET", "/api/v1/status?"+c.query, nil, http.StatusOK)
		var names []any
		for _, q := range res["queues"].([]any) {
			names = append(names, q.(map[string]any)["name"])
		}
		require.Equal(t, c.names, names, c.query)
		if c.query == "queue=mail" {
			require.Equal(t, map[string]any{"totalMessages": 0.0, "affectedPartitions": 0.0, "topErrors": []any{}}, res["deadLetterQueue"])
			require.Equal(t, 0.0, res["leases"].(map[string]any)["active"])
		}
	}
	e.fails("GET", "/api/v1/status?from=yesterday", nil, http.StatusBadRequest, "from must be an ISO-8601 timestamp")
	e.fails("GET", "/api/v1/status?queue=%00", nil, http.StatusBadRequest, "queue contains a NUL byte")
}
