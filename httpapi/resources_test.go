package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

func TestResources(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.obj("POST", "/api/v1/configure", `{"queue":"orders","namespace":"shop","task":"bill"}`, http.StatusOK)
	e.push("orders", "a", "a1", 1)
	e.push("orders", "a", "a2", 2)
	e.push("orders", "b", "b1", 3)
	e.clock.Advance(time.Second)
	e.push("shop.mail", "", "m1", 4)
	m := msgs(t, e.pop("/api/v1/pop/queue/orders/partition/a"))[0]
	e.arr("POST", "/api/v1/ack", ackBody(m, "dlq"), http.StatusOK)
	e.pop("/api/v1/pop/queue/orders/partition/a")

	t.Run("queues", func(t *testing.T) {
		t.Parallel()
		res := e.obj("GET", "/api/v1/resources/queues", nil, http.StatusOK)
		queues := res["queues"].([]any)
		require.Len(t, queues, 2)
		first := queues[0].(map[string]any)
		require.Equal(t, "shop.mail", first["name"], "newest first")
		orders := queues[1].(map[string]any)
		require.Equal(t, "orders", orders["name"])
		require.Regexp(t, uuidRE, orders["id"])
		require.Equal(t, "shop", orders["namespace"])
		require.Equal(t, "bill", orders["task"])
		require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000Z"), orders["createdAt"])
		require.EqualValues(t, 3, orders["partitions"])
		require.Equal(t, map[string]any{"total": 3.0, "pending": 1.0, "processing": 1.0, "completed": 0.0, "failed": 0.0, "deadLetter": 1.0},
			orders["messages"])
		// Ours: the broker's counts (queen.QueueStats), which Queen's
		// counters cannot always be read back into.
		require.Equal(t, map[string]any{"messages": 3.0, "pending": 2.0, "inFlight": 1.0, "deadLetters": 1.0}, orders["counts"])
		// Ours: the Default partition's id and the consumer groups by name.
		require.Regexp(t, uuidRE, orders["defaultPartitionId"])
		require.Regexp(t, uuidRE, first["defaultPartitionId"])
		require.Equal(t, []any{queen.QueueModeGroup}, orders["groups"])
		require.Equal(t, []any{}, first["groups"])
		res = e.obj("GET", "/api/v1/resources/queues?namespace=shop&task=mail&limit=10&offset=0", nil, http.StatusOK)
		require.Len(t, res["queues"], 1)
		e.fails("GET", "/api/v1/resources/queues?limit=ten", nil, http.StatusBadRequest, "limit must be a number")
	})

	t.Run("queue", func(t *testing.T) {
		t.Parallel()
		res := e.obj("GET", "/api/v1/resources/queues/orders", nil, http.StatusOK)
		require.Equal(t, "orders", res["name"])
		require.Equal(t, map[string]any{"total": 3.0, "pending": 1.0, "processing": 1.0, "completed": 0.0, "failed": 0.0, "deadLetter": 1.0},
			res["totals"])
		parts := res["partitions"].([]any)
		require.Len(t, parts, 3)
		a := parts[1].(map[string]any)
		require.Equal(t, "a", a["name"])
		require.Regexp(t, uuidRE, a["id"])
		require.Equal(t, map[string]any{"total": 2.0, "pending": 0.0, "processing": 1.0, "completed": 0.0, "failed": 0.0, "deadLetter": 1.0}, a["stats"])
		require.Equal(t, map[string]any{"messages": 2.0, "pending": 1.0, "inFlight": 1.0}, a["counts"], "no dead letters or parked per partition")
		require.Equal(t, map[string]any{"messages": 3.0, "pending": 2.0, "inFlight": 1.0, "deadLetters": 1.0}, res["counts"])
		require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000Z"), a["oldestMessage"])
		require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000Z"), a["newestMessage"])
		require.NotContains(t, a, "cursor")
		e.fails("GET", "/api/v1/resources/queues/none", nil, http.StatusNotFound, "Queue not found")
	})

	t.Run("labels", func(t *testing.T) {
		t.Parallel()
		res := e.obj("GET", "/api/v1/resources/namespaces", nil, http.StatusOK)
		require.Equal(t, []any{map[string]any{"namespace": "shop", "queues": 2.0, "partitions": 4.0,
			"messages": map[string]any{"total": 4.0, "pending": 2.0}}}, res["namespaces"])
		res = e.obj("GET", "/api/v1/resources/tasks", nil, http.StatusOK)
		tasks := res["tasks"].([]any)
		require.Len(t, tasks, 2)
		require.Equal(t, "bill", tasks[0].(map[string]any)["task"])
		require.Equal(t, "mail", tasks[1].(map[string]any)["task"])
	})

	t.Run("overview", func(t *testing.T) {
		t.Parallel()
		res := e.obj("GET", "/api/v1/resources/overview", nil, http.StatusOK)
		require.EqualValues(t, 2, res["queues"])
		require.EqualValues(t, 4, res["partitions"])
		require.EqualValues(t, 1, res["namespaces"])
		require.EqualValues(t, 2, res["tasks"])
		require.Equal(t, map[string]any{"total": 4.0, "pending": 2.0, "processing": 1.0, "completed": 0.0, "failed": 0.0, "deadLetter": 1.0}, res["messages"])
		lag := res["lag"].(map[string]any)
		require.EqualValues(t, 2, lag["offset"].(map[string]any)["max"])
		require.Contains(t, res["throughput"], "ingestedPerSecond")
		require.Contains(t, res["throughput"], "processedPerSecond")
		require.Contains(t, res, "timestamp")
		require.EqualValues(t, 0, res["statsAge"])
	})

	t.Run("status", func(t *testing.T) {
		t.Parallel()
		res := e.obj("GET", "/api/v1/status/queues?limit=1", nil, http.StatusOK)
		require.Len(t, res["queues"], 1)
		require.Equal(t, map[string]any{"limit": 1.0, "offset": 0.0}, res["pagination"])
		res = e.obj("GET", "/api/v1/status/queues?offset=1", nil, http.StatusOK)
		require.Equal(t, "orders", res["queues"].([]any)[0].(map[string]any)["name"])

		res = e.obj("GET", "/api/v1/status/queues/orders?includePartitions=true", nil, http.StatusOK)
		q := res["queue"].(map[string]any)
		require.Equal(t, "orders", q["name"])
		require.Equal(t, map[string]any{"leaseTime": 300.0, "retryLimit": 3.0, "retryDelay": 1000.0, "ttl": 3600.0,
			"maxQueueSize": 0.0, "deadLetterQueue": false}, q["config"])
		require.Equal(t, []any{queen.QueueModeGroup}, q["groups"])
		require.Equal(t, map[string]any{"messages": 3.0, "pending": 2.0, "inFlight": 1.0, "deadLetters": 1.0}, q["counts"])
		totals := res["totals"].(map[string]any)
		require.EqualValues(t, 3, totals["total"])
		require.EqualValues(t, 1, totals["deadLetter"])
		a := res["partitions"].([]any)[1].(map[string]any)
		require.Equal(t, map[string]any{"totalConsumed": 1.0, "batchesConsumed": 0.0}, a["cursor"])
		require.Equal(t, itest.Stamp("2026-11-30T12:00:01.000Z"), a["lastActivity"], "the ack after the push")
		e.fails("GET", "/api/v1/status/queues/none", nil, http.StatusNotFound, "Queue not found")

		res = e.obj("GET", "/api/v1/status/queues/orders/messages?limit=2", nil, http.StatusOK)
		rows := res["messages"].([]any)
		require.Len(t, rows, 2)
		require.Equal(t, []string{"createdAt", "id", "partition", "partitionId", "queue", "queuePath", "status", "transactionId"},
			sortedKeys(rows[0].(map[string]any)))
		e.fails("GET", "/api/v1/status/queues/none/messages", nil, http.StatusNotFound, "Queue not found")
		e.fails("GET", "/api/v1/status/queues/orders/messages?limit=-1", nil, http.StatusBadRequest, "limit must not be negative")
	})
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestMessages(t *testing.T) {
	t.Parallel()
	e := setup(t, &queen.Options{Clock: systemClock{}}, nil)
	a := e.push("orders", "a", "a1", map[string]any{"n": 1})
	e.push("orders", "a", "a2", map[string]any{"n": 2})
	e.push("other", "", "o1", "x")
	m := msgs(t, e.pop("/api/v1/pop/queue/orders"))[0]
	e.arr("POST", "/api/v1/ack", ackBody(m, "dlq"), http.StatusOK)
	e.pop("/api/v1/pop/queue/orders")

	t.Run("list", func(t *testing.T) {
		t.Parallel()
		res := e.obj("GET", "/api/v1/messages", nil, http.StatusOK)
		list := res["messages"].([]any)
		require.Len(t, list, 3)
		require.Equal(t, map[string]any{"hasQueueMode": true, "busGroupsCount": 0.0, "type": "queue"}, res["mode"])
		res = e.obj("GET", "/api/v1/messages?queue=orders&partition=a&ns=orders&status=processing&limit=5&offset=0&consumerGroup=x", nil, http.StatusOK)
		list = res["messages"].([]any)
		require.Len(t, list, 1)
		got := list[0].(map[string]any)
		require.Equal(t, "a2", got["transactionId"])
		require.Equal(t, "orders/a", got["queuePath"])
		require.Equal(t, "processing", got["status"])
		require.Equal(t, "processing", got["queueStatus"])
		require.Equal(t, map[string]any{"consumedBy": 0.0, "totalGroups": 0.0}, got["busStatus"])
		require.NotNil(t, got["leaseExpiresAt"])
		require.NotContains(t, got, "payload")
		res = e.obj("GET", "/api/v1/messages?status=dead_letter", nil, http.StatusOK)
		require.Equal(t, "a1", res["messages"].([]any)[0].(map[string]any)["transactionId"])
		res = e.obj("GET", "/api/v1/messages?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z", nil, http.StatusOK)
		require.Empty(t, res["messages"])
		e.fails("GET", "/api/v1/messages?status=lost", nil, http.StatusBadRequest, "status must be pending, processing")
		e.fails("GET", "/api/v1/messages?limit=x", nil, http.StatusBadRequest, "limit must be a number")
		e.fails("GET", "/api/v1/messages?from=x", nil, http.StatusBadRequest, "from must be an ISO-8601 timestamp")
	})

	t.Run("get", func(t *testing.T) {
		t.Parallel()
		res := e.obj("GET", "/api/v1/messages/"+a["partition_id"].(string)+"/a1", nil, http.StatusOK)
		require.Equal(t, "a1", res["transactionId"])
		require.Equal(t, a["message_id"], res["id"])
		require.Equal(t, "dead_letter", res["status"])
		require.Equal(t, map[string]any{"n": 1.0}, res["payload"])
		require.Equal(t, false, res["isEncrypted"])
		require.Equal(t, "Unknown error", res["errorMessage"])
		require.EqualValues(t, 0, res["retryCount"])
		require.Equal(t, map[string]any{"leaseTime": 60.0, "retryLimit": 3.0, "retryDelay": 1000.0, "ttl": 3600.0, "priority": 0.0}, res["queueConfig"])
		require.Equal(t, map[string]any{"hasQueueMode": true, "busGroupsCount": 0.0, "type": "queue", "consumedByGroups": 1.0}, res["mode"])
		require.Equal(t, []any{map[string]any{"name": queen.QueueModeGroup, "consumed": true, "leaseExpiresAt": nil}}, res["consumerGroups"])

		res = e.obj("GET", "/api/v1/messages/"+a["partition_id"].(string)+"/a2", nil, http.StatusOK)
		require.Nil(t, res["errorMessage"])
		require.Nil(t, res["retryCount"])
		e.fails("GET", "/api/v1/messages/"+a["partition_id"].(string)+"/zz", nil, http.StatusNotFound, "Message not found")
		e.fails("GET", "/api/v1/messages/not-a-uuid/a1", nil, http.StatusBadRequest, "partitionId must be a UUID")
	})

	t.Run("delete", func(t *testing.T) {
		t.Parallel()
		d := setup(t, nil, nil)
		p := d.push("q", "", "t1", 1)
		path := "/api/v1/messages/" + p["partition_id"].(string) + "/t1"
		require.Equal(t, map[string]any{"success": true, "partitionId": p["partition_id"], "transactionId": "t1",
			"message": "Message deleted successfully"}, d.obj("DELETE", path, nil, http.StatusOK))
		require.Equal(t, map[string]any{"success": false, "partitionId": p["partition_id"], "transactionId": "t1",
			"message": "Message not found"}, d.obj("DELETE", path, nil, http.StatusOK))
		d.call("GET", "/api/v1/pop/queue/q", nil, http.StatusNoContent)
		d.fails("DELETE", "/api/v1/messages/bad/t1", nil, http.StatusBadRequest, "partitionId must be a UUID")
		d.fails("DELETE", "/api/v1/messages/"+p["partition_id"].(string)+"/"+strings.Repeat("t", 256), nil, http.StatusBadRequest,
			"transactionId is longer than 255 bytes")
	})
}

func TestTraces(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	p := e.push("orders", "", "o1", map[string]any{"order": 1})
	pid := p["partition_id"].(string)

	res := e.obj("POST", "/api/v1/traces", map[string]any{"transactionId": "o1", "partitionId": pid, "consumerGroup": "billing",
		"traceNames": []any{"order-1", "vip"}, "eventType": "step", "data": map[string]any{"charged": true}}, http.StatusCreated)
	require.Equal(t, true, res["success"])
	require.Regexp(t, uuidRE, res["traceId"])
	e.clock.Advance(time.Millisecond)
	e.obj("POST", "/api/v1/traces", map[string]any{"transactionId": "o1", "partitionId": pid, "traceNames": "order-1",
		"data": map[string]any{"mailed": true}}, http.StatusCreated)
	e.obj("POST", "/api/v1/traces", map[string]any{"transactionId": "o1", "partitionId": pid, "traceNames": nil,
		"data": map[string]any{}}, http.StatusCreated)

	got := e.obj("GET", "/api/v1/traces/"+pid+"/o1", nil, http.StatusOK)["traces"].([]any)
	require.Len(t, got, 3)
	first := got[0].(map[string]any)
	require.Equal(t, res["traceId"], first["id"])
	require.Equal(t, "step", first["event_type"])
	require.Equal(t, map[string]any{"charged": true}, first["data"])
	require.Equal(t, "billing", first["consumer_group"])
	require.Nil(t, first["worker_id"])
	require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000Z"), first["created_at"])
	require.Equal(t, []any{"order-1", "vip"}, first["trace_names"])
	second := got[1].(map[string]any)
	require.Equal(t, "info", second["event_type"])
	require.Equal(t, queen.QueueModeGroup, second["consumer_group"])
	require.Equal(t, []any{}, got[2].(map[string]any)["trace_names"])
	require.Empty(t, e.obj("GET", "/api/v1/traces/"+pid+"/other", nil, http.StatusOK)["traces"])

	byName := e.obj("GET", "/api/v1/traces/by-name/order-1?limit=1", nil, http.StatusOK)
	require.EqualValues(t, 2, byName["total"])
	require.Equal(t, map[string]any{"limit": 1.0, "offset": 0.0}, byName["pagination"])
	row := byName["traces"].([]any)[0].(map[string]any)
	require.Equal(t, "o1", row["transaction_id"])
	require.Equal(t, pid, row["partition_id"])
	require.Equal(t, "orders", row["queue_name"])
	require.Equal(t, "Default", row["partition_name"])
	require.Equal(t, map[string]any{"order": 1.0}, row["message_payload"])
	require.Equal(t, map[string]any{"mailed": true}, row["data"], "newest first")

	names := e.obj("GET", "/api/v1/traces/names", nil, http.StatusOK)
	require.EqualValues(t, 2, names["total"])
	require.Equal(t, map[string]any{"trace_name": "order-1", "trace_count": 2.0, "message_count": 1.0, "last_seen": itest.Stamp("2026-11-30T12:00:00.001Z")},
		names["trace_names"].([]any)[0])
	require.Equal(t, map[string]any{"limit": 50.0, "offset": 0.0}, names["pagination"])

	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"partitionId":"` + pid + `","data":{}}`, 400, "transactionId and partitionId are required"},
		{`{"transactionId":"o1","data":{}}`, 400, "transactionId and partitionId are required"},
		{`{"transactionId":"o1","partitionId":"` + pid + `"}`, 400, "data is required"},
		{`{"transactionId":"o1","partitionId":"` + pid + `","data":null}`, 400, "data is required"},
		{`{"transactionId":"o1","partitionId":"` + pid + `","data":"x"}`, 400, "data must be an object"},
		{`{"transactionId":"o1","partitionId":"p","data":{}}`, 400, "partitionId must be a UUID"},
		{`{"transactionId":"o1","partitionId":"` + pid + `","data":{},"traceNames":5}`, 400, "traceNames must be a string or an array of strings"},
		{`{"transactionId":"o1","partitionId":"` + pid + `","data":{},"traceNames":[1]}`, 400, "traceNames must be a string or an array of strings"},
		{`{"transactionId":"o1","partitionId":"` + pid + `","data":{},"traceNames":[""]}`, 400, "traceNames[] is required"},
		{`{"transactionId":"o1","partitionId":"` + pid + `","data":{},"eventType":7}`, 400, "eventType must be a string"},
		{`{"transactionId":"zz","partitionId":"` + pid + `","data":{}}`, 404, "Message not found"},
	} {
		e.fails("POST", "/api/v1/traces", c.body, c.status, c.want)
	}
	e.fails("GET", "/api/v1/traces/bad/o1", nil, http.StatusBadRequest, "partitionId must be a UUID")
	e.fails("GET", "/api/v1/traces/by-name/x?offset=y", nil, http.StatusBadRequest, "offset must be a number")
	e.fails("GET", "/api/v1/traces/names?limit=-4", nil, http.StatusBadRequest, "limit must not be negative")
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("orders", "", "a", 1)
	e.push("orders", "", "b", 2)
	m := msgs(t, e.pop("/api/v1/pop/queue/orders?consumerGroup=g&subscriptionMode=all"))[0]
	body := ackBody(m, "dlq")
	body["consumerGroup"] = "g"
	e.arr("POST", "/api/v1/ack", body, http.StatusOK)
	e.pop("/api/v1/pop/queue/orders?consumerGroup=g")

	rec := e.do("GET", "/metrics/prometheus", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/plain; version=0.0.4; charset=utf-8", rec.Header().Get("Content-Type"))
	text := rec.Body.String()
	for _, line := range []string{
		"# TYPE queen_messages_pushed_total counter",
		"queen_messages_pushed_total 2",
		"queen_messages_popped_total 2",
		`queen_messages_acked_total{status="dlq"} 1`,
		`queen_messages_acked_total{status="completed"} 0`,
		"queen_messages_dead_lettered_total 1",
		"# TYPE queen_queues gauge",
		"queen_queues 1",
		`queen_queue_messages{queue="orders"} 2`,
		`queen_queue_inflight_messages{queue="orders"} 1`,
		`queen_queue_leases_active{queue="orders"} 1`,
		`queen_dlq_depth{queue="orders"} 1`,
		`queen_parked_depth{queue="orders"} 0`,
		`queen_consumer_lag_messages{queue="orders",group="g"} 1`,
		`queen_consumer_inflight_messages{queue="orders",group="g"} 1`,
	} {
		require.Contains(t, text, line+"\n")
	}
	e.push(`we"ird\q`, "", "x", 1)
	require.Contains(t, e.do("GET", "/metrics/prometheus", nil).Body.String(), `queen_queue_messages{queue="we\"ird\\q"} 1`)

	res := e.obj("GET", "/metrics", nil, http.StatusOK)
	require.EqualValues(t, 3, res["messages"].(map[string]any)["total"])
	require.Greater(t, res["requests"].(map[string]any)["total"], 0.0)
	for _, k := range []string{"uptime", "database", "memory", "cpu"} {
		require.Contains(t, res, k)
	}
}

// TestMetrics_ConsumeOutcomes: the consume loops of an embedded broker are
// counted by outcome on /metrics/prometheus, under the names
// contrib/queenprom uses.
func TestMetrics_ConsumeOutcomes(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("jobs", "", "a", 1)
	e.push("jobs", "", "b", 2)
	n := 0
	err := e.b.Queue("jobs").Each().Limit(2).Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
		n++
		if n == 2 {
			return queen.Reject(errors.New("bad job"))
		}
		return nil
	}).Execute(context.Background())
	require.NoError(t, err)
	text := e.do("GET", "/metrics/prometheus", nil).Body.String()
	for _, line := range []string{
		"# TYPE queen_consume_messages_total counter",
		`queen_consume_messages_total{outcome="accepted"} 1`,
		`queen_consume_messages_total{outcome="dead_lettered"} 1`,
		"# TYPE queen_consume_handlers_inflight gauge",
		"queen_consume_handlers_inflight 0",
	} {
		require.Contains(t, text, line+"\n")
	}
}

// TestMetrics_PopsWaiting: a long-poll pop parked on a queue shows in
// queen_pops_waiting while it waits, and leaves it when it ends.
func TestMetrics_PopsWaiting(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.b.Pop(ctx, queen.PopRequest{Queue: "jobs", Wait: true, Timeout: time.Minute})
		done <- err
	}()
	require.Eventually(t, func() bool { return e.b.WaitingPops()["jobs"] == 1 }, 10*time.Second, time.Millisecond)
	text := e.do("GET", "/metrics/prometheus", nil).Body.String()
	require.Contains(t, text, "# TYPE queen_pops_waiting gauge\n")
	require.Contains(t, text, `queen_pops_waiting{queue="jobs"} 1`+"\n")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	text = e.do("GET", "/metrics/prometheus", nil).Body.String()
	require.NotContains(t, text, `queen_pops_waiting{queue="jobs"}`)
}
