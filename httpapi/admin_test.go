package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

func TestConfigure(t *testing.T) {
	t.Parallel()

	t.Run("creates and replaces the whole configuration", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		res := e.obj("POST", "/api/v1/configure", map[string]any{
			"queue": "orders", "namespace": "billing", "task": "invoices",
			"options": map[string]any{"leaseTime": 30, "retryLimit": 5, "retryDelay": 250, "priority": -2, "maxSize": 10,
				"delayedProcessing": 1, "windowBuffer": 2, "retentionSeconds": 3, "completedRetentionSeconds": 4,
				"maxWaitTimeSeconds": 5, "ttl": 6, "deadLetterQueue": true, "dlqAfterMaxRetries": true, "retentionEnabled": true,
				"somethingNew": "accepted"},
		}, http.StatusOK)
		require.Equal(t, true, res["configured"])
		require.Regexp(t, uuidRE, res["queueId"])
		require.Regexp(t, uuidRE, res["partitionId"])
		require.Equal(t, "orders", res["queue"])
		require.Equal(t, "billing", res["namespace"])
		require.Equal(t, "invoices", res["task"])
		require.Equal(t, map[string]any{"priority": -2.0, "leaseTime": 30.0, "retryLimit": 5.0, "retryDelay": 250.0, "maxSize": 10.0,
			"ttl": 6.0, "deadLetterQueue": true, "dlqAfterMaxRetries": true, "delayedProcessing": 1.0, "windowBuffer": 2.0,
			"retentionSeconds": 3.0, "completedRetentionSeconds": 4.0, "retentionEnabled": true, "encryptionEnabled": false,
			"maxWaitTimeSeconds": 5.0}, res["options"])

		// Omitted options and labels return to their defaults.
		res = e.obj("POST", "/api/v1/configure", `{"queue":"orders"}`, http.StatusOK)
		require.Nil(t, res["namespace"])
		require.Nil(t, res["task"])
		require.Equal(t, map[string]any{"priority": 0.0, "leaseTime": 300.0, "retryLimit": 3.0, "retryDelay": 1000.0, "maxSize": 0.0,
			"ttl": 3600.0, "deadLetterQueue": false, "dlqAfterMaxRetries": false, "delayedProcessing": 0.0, "windowBuffer": 0.0,
			"retentionSeconds": 0.0, "completedRetentionSeconds": 0.0, "retentionEnabled": false, "encryptionEnabled": false,
			"maxWaitTimeSeconds": 0.0}, res["options"])
		e.push("orders", "", "m", 1)
		m := msgs(t, e.pop("/api/v1/pop/queue/orders"))[0]
		lease := e.obj("POST", "/api/v1/lease/"+m["leaseId"].(string)+"/extend", `{"seconds":0}`, http.StatusOK)
		require.Equal(t, itest.Stamp("2026-11-30T12:05:00.000Z"), lease["expiresAt"], "the configured 300 s lease")
	})

	t.Run("encryption needs a key", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.fails("POST", "/api/v1/configure", `{"queue":"s","options":{"encryptionEnabled":true}}`, http.StatusBadRequest,
			"options.encryptionEnabled needs an encryption key")
		k := setup(t, &queen.Options{EncryptionKey: make([]byte, 32)}, nil)
		res := k.obj("POST", "/api/v1/configure", `{"queue":"s","options":{"encryptionEnabled":true}}`, http.StatusOK)
		require.Equal(t, true, res["options"].(map[string]any)["encryptionEnabled"])
		k.push("s", "", "secret", map[string]any{"pin": 1234})
		require.Equal(t, map[string]any{"pin": 1234.0}, msgs(t, k.pop("/api/v1/pop/queue/s"))[0]["data"])
	})

	t.Run("refuses bad bodies", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		for _, c := range []struct{ body, want string }{
			{`{}`, "queue is required"},
			{`{"queue":5}`, "queue is required"},
			{`{"queue":""}`, "queue is required"},
			{`{"queue":"` + strings.Repeat("q", 256) + `"}`, "queue is longer than 255 bytes"},
			{`{"queue":"q","namespace":5}`, "namespace must be a string"},
			{`{"queue":"q","task":"` + strings.Repeat("t", 256) + `"}`, "task is longer than 255 bytes"},
			{`{"queue":"q","options":"fast"}`, "options must be an object"},
			{`{"queue":"q","options":{"leaseTime":"300"}}`, "options.leaseTime must be a number"},
			{`{"queue":"q","options":{"leaseTime":-1}}`, "options.leaseTime must not be negative"},
			{`{"queue":"q","options":{"leaseTime":1.5}}`, "options.leaseTime must be an integer"},
			{`{"queue":"q","options":{"leaseTime":1e15}}`, "options.leaseTime must be at most 31536000"},
			{`{"queue":"q","options":{"leaseTime":31536001}}`, "options.leaseTime must be at most 31536000"},
			{`{"queue":"q","options":{"retryDelay":1073741825}}`, "options.retryDelay must be at most 1073741824"},
			{`{"queue":"q","options":{"retryLimit":1073741825}}`, "options.retryLimit must be at most 1073741824"},
			{`{"queue":"q","options":{"maxSize":1e12}}`, "options.maxSize must be at most 1073741824"},
			{`{"queue":"q","options":{"priority":-1073741825}}`, "options.priority must be between -1073741824 and 1073741824"},
			{`{"queue":"q","options":{"priority":1073741825}}`, "options.priority must be between -1073741824 and 1073741824"},
			{`{"queue":"q","options":{"retryLimit":-2}}`, "options.retryLimit must not be negative"},
			{`{"queue":"q","options":{"priority":"high"}}`, "options.priority must be a number"},
			{`{"queue":"q","options":{"retentionEnabled":"yes"}}`, "options.retentionEnabled must be a boolean"},
			{`{"queue":"q","options":{"encryptionEnabled":1}}`, "options.encryptionEnabled must be a boolean"},
		} {
			e.fails("POST", "/api/v1/configure", c.body, http.StatusBadRequest, c.want)
		}
		e.fails("GET", "/api/v1/resources/queues/q", nil, http.StatusNotFound, "Queue not found")
	})
}

func TestDeleteQueue(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("gone", "", "m", 1)
	require.Equal(t, map[string]any{"deleted": true, "queue": "gone", "existed": true}, e.obj("DELETE", "/api/v1/resources/queues/gone", nil, http.StatusOK))
	require.Equal(t, map[string]any{"deleted": true, "queue": "gone", "existed": false}, e.obj("DELETE", "/api/v1/resources/queues/gone", nil, http.StatusOK))
	e.call("GET", "/api/v1/pop/queue/gone", nil, http.StatusNoContent)
	e.fails("DELETE", "/api/v1/resources/queues/"+strings.Repeat("x", 300), nil, http.StatusBadRequest, "queue is longer than 255 bytes")
}

func TestFetch(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for _, tx := range []string{"a", "b", "c"} {
		e.push("f", "p", tx, map[string]any{"tx": tx})
	}
	res := e.obj("GET", "/api/v1/fetch/queue/f/partition/p?fromOffset=1&limit=1", nil, http.StatusOK)
	require.Equal(t, "f", res["queue"])
	require.Equal(t, "p", res["partition"])
	require.EqualValues(t, 2, res["nextOffset"])
	rec := res["records"].([]any)[0].(map[string]any)
	require.EqualValues(t, 1, rec["offset"])
	require.Equal(t, "b", rec["transactionId"])
	require.Equal(t, map[string]any{"tx": "b"}, rec["data"])
	require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000000Z"), rec["createdAt"])
	require.Nil(t, rec["traceId"])
	require.Regexp(t, uuidRE, rec["id"])
	res = e.obj("GET", "/api/v1/fetch/queue/f/partition/p", nil, http.StatusOK)
	require.Len(t, res["records"], 3)
	require.EqualValues(t, 3, res["nextOffset"])
	res = e.obj("GET", "/api/v1/fetch/queue/f/partition/p?fromOffset=10&limit=5000", nil, http.StatusOK)
	require.Empty(t, res["records"])
	// Fetching does not consume.
	require.Len(t, msgs(t, e.pop("/api/v1/pop/queue/f?batch=10")), 3)

	e.fails("GET", "/api/v1/fetch/queue/f/partition/none", nil, http.StatusNotFound, "Queue or partition not found")
	e.fails("GET", "/api/v1/fetch/queue/none/partition/p", nil, http.StatusNotFound, "Queue or partition not found")
	e.fails("GET", "/api/v1/fetch/queue/f/partition/p?fromOffset=-1", nil, http.StatusBadRequest, "fromOffset must not be negative")
	e.fails("GET", "/api/v1/fetch/queue/f/partition/p?limit=all", nil, http.StatusBadRequest, "limit must be a number")
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct{ path, status, idField, missing string }{
		{"/api/v1/dlq", "dlq", "deadLetterId", "Dead letter not found"},
		{"/api/v1/parked", "park", "parkedId", "Parked message not found"},
	} {
		t.Run(kind.path, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil, nil)
			pushed := e.push("orders", "p1", "o-1", map[string]any{"id": 1})
			e.push("orders", "p2", "o-2", map[string]any{"id": 2})
			e.push("other", "", "x-1", "x")
			for _, part := range []string{"p1", "p2"} {
				m := msgs(t, e.pop("/api/v1/pop/queue/orders/partition/"+part+"?consumerGroup=billing&subscriptionMode=all"))[0]
				body := ackBody(m, kind.status)
				body["consumerGroup"], body["error"] = "billing", "bad "+part
				e.arr("POST", "/api/v1/ack", body, http.StatusOK)
			}
			m := msgs(t, e.pop("/api/v1/pop/queue/other"))[0]
			e.arr("POST", "/api/v1/ack", ackBody(m, kind.status), http.StatusOK)

			all := e.obj("GET", kind.path, nil, http.StatusOK)
			require.EqualValues(t, 3, all["total"])
			require.Equal(t, map[string]any{"limit": 100.0, "offset": 0.0}, all["pagination"])
			page := e.obj("GET", kind.path+"?queue=orders&consumerGroup=billing&partition=p1&limit=10&offset=0", nil, http.StatusOK)
			require.EqualValues(t, 1, page["total"])
			entry := page["messages"].([]any)[0].(map[string]any)
			id := entry[kind.idField].(string)
			require.Regexp(t, uuidRE, id)
			require.Equal(t, entry["deadLetterId"], id)
			require.Equal(t, pushed["message_id"], entry["id"])
			require.Equal(t, "o-1", entry["transactionId"])
			require.Equal(t, pushed["partition_id"], entry["partitionId"])
			require.Equal(t, "orders", entry["queue"])
			require.Equal(t, "p1", entry["partition"])
			require.Equal(t, "billing", entry["consumerGroup"])
			require.Equal(t, "bad p1", entry["errorMessage"])
			require.EqualValues(t, 0, entry["retryCount"])
			require.Equal(t, map[string]any{"id": 1.0}, entry["data"])
			require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000Z"), entry["createdAt"])
			require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000Z"), entry["failedAt"])
			require.EqualValues(t, 0, entry["offset"])

			require.EqualValues(t, 3, e.obj("GET", kind.path+"?from="+itest.Stamp("2026-11-30T11:00:00Z")+"&to="+itest.Stamp("2026-11-30T12:00:01Z"), nil, http.StatusOK)["total"])
			require.EqualValues(t, 0, e.obj("GET", kind.path+"?from="+itest.Stamp("2026-11-30T13:00:00Z"), nil, http.StatusOK)["total"])
			paged := e.obj("GET", kind.path+"?limit=1&offset=1", nil, http.StatusOK)
			require.Len(t, paged["messages"], 1)
			require.EqualValues(t, 3, paged["total"])

			rep := e.obj("POST", kind.path+"/"+id+"/replay", nil, http.StatusOK)
			require.Equal(t, true, rep["success"])
			require.Equal(t, id, rep[kind.idField])
			require.Regexp(t, uuidRE, rep["messageId"])
			require.Contains(t, rep["transactionId"], id)
			require.EqualValues(t, 1, rep["offset"])
			require.Equal(t, false, rep["duplicate"])
			again := e.obj("POST", kind.path+"/"+id+"/replay", nil, http.StatusOK)
			require.Equal(t, true, again["duplicate"])
			require.Equal(t, rep["messageId"], again["messageId"])
			// The copy reaches every group of the partition.
			copied := msgs(t, e.pop("/api/v1/pop/queue/orders/partition/p1?consumerGroup=billing"))[0]
			require.Equal(t, rep["transactionId"], copied["transactionId"])
			require.Equal(t, map[string]any{"id": 1.0}, copied["data"])

			del := e.obj("DELETE", kind.path+"/"+id, nil, http.StatusOK)
			require.Equal(t, true, del["success"])
			require.Equal(t, id, del[kind.idField])
			require.EqualValues(t, 2, e.obj("GET", kind.path, nil, http.StatusOK)["total"])
			e.fails("DELETE", kind.path+"/"+id, nil, http.StatusNotFound, kind.missing)
			e.fails("POST", kind.path+"/"+id+"/replay", nil, http.StatusNotFound, kind.missing)
			e.fails("POST", kind.path+"/nope/replay", nil, http.StatusBadRequest, kind.idField+" must be a UUID")
			e.fails("DELETE", kind.path+"/nope", nil, http.StatusBadRequest, kind.idField+" must be a UUID")
			e.fails("GET", kind.path+"?limit=x", nil, http.StatusBadRequest, "limit must be a number")
			e.fails("GET", kind.path+"?offset=-1", nil, http.StatusBadRequest, "offset must not be negative")
			e.fails("GET", kind.path+"?from=soon", nil, http.StatusBadRequest, "from must be an ISO-8601 timestamp")
			e.fails("GET", kind.path+"?queue="+strings.Repeat("q", 256), nil, http.StatusBadRequest, "queue is longer than 255 bytes")
		})
	}
}
