package httpapi_test

// What Queen's 2.x clients send and read (the spec's Part E), field by
// field: the pop's echoes, commitOnDelivery, the lease answer, and the
// read routes fetch, fetch/offsets and consumer-groups/positions.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

func TestQueen2_ConflationEcho(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for i := range 3 {
		e.push("cmd", "", fmt.Sprintf("c%d", i), i)
	}
	// The group's first pop decides; the answer says conflation applies.
	res := e.pop("/api/v1/pop/queue/cmd?consumerGroup=g&subscriptionMode=all&conflation=true&batch=10")
	require.Equal(t, true, res["conflation"])
	require.NotContains(t, res, "conflationConflict")
	require.Len(t, msgs(t, res), 1, "only the newest")
	ack := ackBody(msgs(t, res)[0], "completed")
	ack["consumerGroup"] = "g"
	require.Equal(t, true, e.arr("POST", "/api/v1/ack", ack, http.StatusOK)[0].(map[string]any)["success"])
	// Empty, still echoed: 200 with messages [] (a 2.x client raises
	// without the key).
	res = e.pop("/api/v1/pop/queue/cmd?consumerGroup=g&conflation=true")
	require.NotNil(t, res, "an empty conflating pop is 200")
	require.Equal(t, true, res["conflation"])
	require.Empty(t, res["messages"])

	// A group made without conflation: a pop declaring it conflicts; the
	// stored policy wins, and the answer has no conflation key.
	e.pop("/api/v1/pop/queue/cmd?consumerGroup=plain&subscriptionMode=all&commitOnDelivery=true&batch=10")
	res = e.pop("/api/v1/pop/queue/cmd?consumerGroup=plain&conflation=true")
	require.NotNil(t, res, "an empty pop that conflicts is 200")
	require.Equal(t, true, res["conflationConflict"])
	require.NotContains(t, res, "conflation")
	// And the other way: a conflating group popped without the flag.
	e.push("cmd", "", "c9", 9)
	res = e.pop("/api/v1/pop/queue/cmd?consumerGroup=g")
	require.Equal(t, true, res["conflation"])
	require.Equal(t, true, res["conflationConflict"])
	require.Len(t, msgs(t, res), 1)

	// A queue that does not exist yet: conflation as asked.
	res = e.pop("/api/v1/pop/queue/later?consumerGroup=g&conflation=true")
	require.NotNil(t, res)
	require.Equal(t, true, res["conflation"])
	// Pops that never asked about conflation keep 204.
	require.Nil(t, e.pop("/api/v1/pop/queue/later?consumerGroup=g"))
}

func TestQueen2_CommitOnDelivery(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("cod", "", "a", 1)
	e.push("cod", "", "b", 2)
	res := e.pop("/api/v1/pop/queue/cod?consumerGroup=g&subscriptionMode=all&commitOnDelivery=true&batch=1")
	m := msgs(t, res)[0]
	require.Equal(t, "a", m["transactionId"])
	require.Equal(t, "", m["leaseId"], "no lease: the cursor moved at delivery")
	e.clock.Advance(10 * time.Minute) // no lease to expire: a is not delivered again
	m = msgs(t, e.pop("/api/v1/pop/queue/cod?consumerGroup=g&batch=10"))[0]
	require.Equal(t, "b", m["transactionId"])
	e.fails("GET", "/api/v1/pop/queue/cod?consumerGroup=h&conflation=true&commitOnDelivery=true", nil, http.StatusBadRequest,
		"conflation cannot be combined with autoAck/commitOnDelivery")
	e.fails("GET", "/api/v1/pop/queue/cod?consumerGroup=h&conflation=true&autoAck=true", nil, http.StatusBadRequest, "commitOnDelivery")
}

func TestQueen2_AutopilotEcho(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for i := range 4 {
		e.push("auto", fmt.Sprintf("p%d", i), fmt.Sprintf("a%d", i), i)
	}
	// A default 2.x pop: autopilot=true and no batch nor partitions.
	res := e.pop("/api/v1/pop/queue/auto?consumerGroup=g&subscriptionMode=all&autopilot=true")
	require.Equal(t, map[string]any{"partitions": 4.0, "batch": 100.0}, res["autopilot"], "the ready partitions, a cold group's batch")
	require.Len(t, msgs(t, res), 4)
	// A knob the client set is never changed.
	e.push("auto", "p0", "a9", 9)
	res = e.pop("/api/v1/pop/queue/auto?consumerGroup=h&subscriptionMode=all&autopilot=true&batch=7")
	require.Equal(t, map[string]any{"partitions": 4.0, "batch": 7.0}, res["autopilot"])
	// No autopilot, no echo; an empty autopilot pop is 204, as Queen 2.x.
	res = e.pop("/api/v1/pop/queue/auto?consumerGroup=k&subscriptionMode=all")
	require.NotContains(t, res, "autopilot")
	require.Nil(t, e.pop("/api/v1/pop/queue/auto?consumerGroup=g&autopilot=true"))
}

func TestQueen2_LeaseRenewedCountsPartitions(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for i := range 3 {
		e.push("multi", fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i), i)
	}
	res := e.pop("/api/v1/pop/queue/multi?partitions=3&batch=10")
	require.Len(t, msgs(t, res), 3)
	r := e.obj("POST", "/api/v1/lease/"+res["leaseId"].(string)+"/extend", `{}`, http.StatusOK)
	require.Equal(t, true, r["success"])
	require.Equal(t, 3.0, r["renewed"], "one lease over three partitions")
}

// fetchBody is a POST /api/v1/fetch body.
func fetchBody(entries ...map[string]any) map[string]any {
	return map[string]any{"entries": entries}
}

func TestQueen2_Fetch(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for i := range 3 {
		e.push("log", "a", fmt.Sprintf("a%d", i), map[string]any{"n": i})
	}
	e.push("log", "7", "k0", "seven")
	e.clock.Advance(time.Second)
	res := e.obj("POST", "/api/v1/fetch", fetchBody(
		map[string]any{"queue": "log", "partition": "a", "offset": 1},
		map[string]any{"queue": "log", "partition": 7, "offset": 0}, // Kafka's partition 7 is "7"
		map[string]any{"queue": "log", "partition": "never", "offset": 0},
		map[string]any{"queue": "nope", "offset": 0},
		map[string]any{"queue": "log", "partition": "a", "offset": 4},
	), http.StatusOK)
	require.Len(t, res, 1, "only entries at the top")
	entries := res["entries"].([]any)
	require.Equal(t, map[string]any{"queue": "log", "partition": "a", "highWatermark": 3.0, "logStartOffset": 0.0, "records": []any{
		map[string]any{"offset": 1.0, "transactionId": "a1", "payload": map[string]any{"n": 1.0}, "ts": itest.Stamp("2026-11-30T12:00:00.000000Z")},
		map[string]any{"offset": 2.0, "transactionId": "a2", "payload": map[string]any{"n": 2.0}, "ts": itest.Stamp("2026-11-30T12:00:00.000000Z")},
	}}, entries[0])
	require.Equal(t, "7", entries[1].(map[string]any)["partition"])
	require.Equal(t, "seven", entries[1].(map[string]any)["records"].([]any)[0].(map[string]any)["payload"])
	require.Equal(t, map[string]any{"queue": "log", "partition": "never", "highWatermark": 0.0, "logStartOffset": 0.0, "records": []any{}},
		entries[2], "a partition never written is an empty log")
	require.Equal(t, map[string]any{"queue": "nope", "partition": "Default", "highWatermark": 0.0, "logStartOffset": 0.0, "records": []any{},
		"error": "UNKNOWN_TOPIC_OR_PARTITION"}, entries[3])
	require.Equal(t, map[string]any{"queue": "log", "partition": "a", "highWatermark": 3.0, "logStartOffset": 0.0, "records": []any{},
		"error": "OFFSET_OUT_OF_RANGE"}, entries[4], "past the high watermark, with the bounds to start again from")

	// maxBytes: the first record always comes, later ones while they fit.
	one := e.obj("POST", "/api/v1/fetch", fetchBody(map[string]any{"queue": "log", "partition": "a", "offset": 0, "maxBytes": 1}), http.StatusOK)
	require.Len(t, one["entries"].([]any)[0].(map[string]any)["records"], 1)

	e.fails("POST", "/api/v1/fetch", fetchBody(map[string]any{"queue": "log", "offset": -1}), http.StatusBadRequest, "offset must be non-negative")
	e.fails("POST", "/api/v1/fetch", fetchBody(map[string]any{"queue": "log"}), http.StatusBadRequest, "offset is required")
	e.fails("POST", "/api/v1/fetch", fetchBody(map[string]any{"offset": 0}), http.StatusBadRequest, "every entry names a queue")
	e.fails("POST", "/api/v1/fetch", `{"entries":{}}`, http.StatusBadRequest, "entries is an array")
	many := make([]map[string]any, queen.MaxFetchPartitions+1)
	for i := range many {
		many[i] = map[string]any{"queue": "log", "offset": 0}
	}
	e.fails("POST", "/api/v1/fetch", fetchBody(many...), http.StatusBadRequest, "too many entries")
	require.Equal(t, map[string]any{"entries": []any{}}, e.obj("POST", "/api/v1/fetch", `{}`, http.StatusOK))
}

func TestQueen2_FetchLongPoll(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("tail", "", "t0", 0)
	done := make(chan map[string]any, 1)
	go func() {
		rec := e.do("POST", "/api/v1/fetch", `{"entries":[{"queue":"tail","offset":1}],"maxWaitMs":30000}`)
		v := map[string]any{"code": float64(rec.Code), "body": rec.Body.String()}
		done <- v
	}()
	itest.AwaitWaiting(t, e.b, 1) // parked at the high watermark
	e.push("tail", "", "t1", 1)
	var v map[string]any
	select {
	case v = <-done:
	case <-time.After(10 * time.Second): // a bound, far under the 30 s the fetch may wait
		t.Fatal("the push did not end the wait")
	}
	require.Equal(t, 200.0, v["code"])
	require.Contains(t, v["body"], `"transactionId":"t1"`, "woken by the push, not by the 30 s deadline")
	// minBytes 0 never waits.
	res := e.obj("POST", "/api/v1/fetch", `{"entries":[{"queue":"tail","offset":2}],"maxWaitMs":30000,"minBytes":0}`, http.StatusOK)
	require.Empty(t, res["entries"].([]any)[0].(map[string]any)["records"])
}

func TestQueen2_FetchOffsets(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	t0 := e.clock.Now()
	e.push("ev", "", "e0", 0)
	e.clock.Advance(time.Minute)
	e.push("ev", "", "e1", 1)
	e.clock.Advance(time.Minute)
	e.push("ev", "", "e2", 2)
	res := e.obj("POST", "/api/v1/fetch/offsets", map[string]any{"entries": []any{
		map[string]any{"queue": "ev", "timestamp": t0.Add(30 * time.Second).UnixMilli()},
		map[string]any{"queue": "ev", "timestamp": t0.Add(-time.Hour).Format(time.RFC3339)},
		map[string]any{"queue": "ev", "timestamp": t0.Add(time.Hour).Format(time.RFC3339)},
		map[string]any{"queue": "gone", "timestamp": 0},
	}}, http.StatusOK)
	entries := res["entries"].([]any)
	require.Equal(t, map[string]any{"queue": "ev", "partition": "Default", "offset": 1.0, "ts": itest.Stamp("2026-11-30T12:01:00.000000Z"),
		"highWatermark": 3.0, "logStartOffset": 0.0}, entries[0])
	require.Equal(t, 0.0, entries[1].(map[string]any)["offset"], "a time before the log: its start")
	require.Equal(t, map[string]any{"queue": "ev", "partition": "Default", "offset": nil, "ts": nil, "highWatermark": 3.0, "logStartOffset": 0.0},
		entries[2], "nothing that late: null, start at the high watermark")
	require.Equal(t, "UNKNOWN_TOPIC_OR_PARTITION", entries[3].(map[string]any)["error"])
	for _, bad := range []string{`-1`, `"yesterday"`, `true`} {
		e.fails("POST", "/api/v1/fetch/offsets", `{"entries":[{"queue":"ev","timestamp":`+bad+`}]}`, http.StatusBadRequest,
			"timestamp must be a non-negative number of epoch milliseconds or an ISO-8601 time")
	}
}

func TestQueen2_Positions(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for i := range 4 {
		e.push("orders", "3", fmt.Sprintf("o%d", i), i)
	}
	e.push("orders", "4", "x0", 0)
	// A leased batch, then a position set under it: the lease is released.
	res := e.pop("/api/v1/pop/queue/orders/partition/3?consumerGroup=billing&subscriptionMode=all&batch=2")
	held := msgs(t, res)
	tx := e.obj("POST", "/api/v1/transaction", map[string]any{"positions": []any{
		map[string]any{"queue": "orders", "partition": "3", "consumerGroup": "billing", "offset": 3, "metadata": "kafka:42"},
	}}, http.StatusOK)
	require.Equal(t, true, tx["success"])
	r := tx["results"].([]any)[0].(map[string]any)
	require.Equal(t, "position", r["type"])
	require.Equal(t, true, r["success"])
	require.Equal(t, 3.0, r["offset"])
	ack := ackBody(held[0], "completed")
	ack["consumerGroup"] = "billing"
	acked := e.arr("POST", "/api/v1/ack", ack, http.StatusOK)[0].(map[string]any)
	require.Equal(t, false, acked["success"], "the position moved past it")
	// A set that leaves the batch ahead of the cursor: the lease is
	// released (the ack refused) and the batch delivered again.
	x := msgs(t, e.pop("/api/v1/pop/queue/orders/partition/4?consumerGroup=billing"))[0]
	e.obj("POST", "/api/v1/transaction", `{"positions":[{"queue":"orders","partition":"4","consumerGroup":"billing","offset":0}]}`, http.StatusOK)
	ack = ackBody(x, "completed")
	ack["consumerGroup"] = "billing"
	acked = e.arr("POST", "/api/v1/ack", ack, http.StatusOK)[0].(map[string]any)
	require.Equal(t, false, acked["success"])
	require.Contains(t, acked["error"], "lease", "the set released the lease the batch was under")
	require.Equal(t, "x0", msgs(t, e.pop("/api/v1/pop/queue/orders/partition/4?consumerGroup=billing"))[0]["transactionId"])
	m := msgs(t, e.pop("/api/v1/pop/queue/orders/partition/3?consumerGroup=billing&batch=10"))
	require.Len(t, m, 1)
	require.Equal(t, "o3", m[0]["transactionId"], "delivery goes on from the position set")

	pos := e.obj("POST", "/api/v1/consumer-groups/positions", map[string]any{"consumerGroup": "billing", "entries": []any{
		map[string]any{"queue": "orders", "partition": "3"},
		map[string]any{"queue": "orders", "partition": "none"},
		map[string]any{"queue": "other"},
	}}, http.StatusOK)
	require.Equal(t, map[string]any{"consumerGroup": "billing", "entries": []any{
		map[string]any{"queue": "orders", "partition": "3", "offset": 3.0, "metadata": "kafka:42"},
		map[string]any{"queue": "orders", "partition": "none", "offset": nil},
		map[string]any{"queue": "other", "partition": "Default", "offset": nil},
	}}, pos)
	all := e.obj("POST", "/api/v1/consumer-groups/positions", `{"consumerGroup":"billing"}`, http.StatusOK)
	require.Len(t, all["entries"], 2, "every partition of every queue the group reads")

	// null forgets: the group goes back to its start point there.
	e.obj("POST", "/api/v1/transaction", `{"positions":[{"queue":"orders","partition":"3","consumerGroup":"billing","offset":null}]}`, http.StatusOK)
	pos = e.obj("POST", "/api/v1/consumer-groups/positions", `{"consumerGroup":"billing","entries":[{"queue":"orders","partition":"3"}]}`, http.StatusOK)
	require.Equal(t, map[string]any{"queue": "orders", "partition": "3", "offset": 0.0, "metadata": ""}, pos["entries"].([]any)[0])

	// All or nothing: a refused position aborts the push beside it.
	tx = e.obj("POST", "/api/v1/transaction", map[string]any{
		"operations": []any{map[string]any{"type": "push", "items": []any{map[string]any{"queue": "orders", "partition": "4", "transactionId": "x1", "payload": 1}}}},
		"positions":  []any{map[string]any{"queue": "missing", "consumerGroup": "billing", "offset": 0}},
	}, http.StatusOK)
	require.Equal(t, false, tx["success"])
	require.Equal(t, "queue_not_found", tx["reason"])
	require.True(t, strings.HasPrefix(tx["error"].(string), "POSITION operation failed: "), tx["error"])
	f := e.obj("POST", "/api/v1/fetch", `{"entries":[{"queue":"orders","partition":"4","offset":0}]}`, http.StatusOK)
	require.Len(t, f["entries"].([]any)[0].(map[string]any)["records"], 1, "the push was not applied")
	tx = e.obj("POST", "/api/v1/transaction", `{"positions":[{"queue":"orders","partition":"4","consumerGroup":"billing","offset":9}]}`, http.StatusOK)
	require.Equal(t, "offset_out_of_range", tx["reason"])

	e.fails("POST", "/api/v1/consumer-groups/positions", `{}`, http.StatusBadRequest, "consumerGroup is required")
	e.fails("POST", "/api/v1/consumer-groups/positions", `{"consumerGroup":"g","entries":[{"partition":"1"}]}`, http.StatusBadRequest, "every entry names a queue")
	e.fails("POST", "/api/v1/transaction", `{"positions":[{"queue":"orders","consumerGroup":"g"}]}`, http.StatusBadRequest, "offset is required")
	e.fails("POST", "/api/v1/transaction", `{"positions":[{"queue":"orders","consumerGroup":"g","offset":0,"metadata":"`+strings.Repeat("m", 4097)+`"}]}`,
		http.StatusBadRequest, "exceeds 4096 B")
	e.fails("POST", "/api/v1/transaction", `{"positions":[{"queue":"orders","consumerGroup":"g","offset":0,"metadata":5}]}`, http.StatusBadRequest, "metadata is a string")
}

func TestQueen2_TransactionLeases(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("in", "", "i0", 0)
	e.push("in", "", "i1", 1)
	m := msgs(t, e.pop("/api/v1/pop/queue/in?consumerGroup=g&subscriptionMode=all&batch=1&leaseSeconds=10"))[0]
	stale := m["leaseId"].(string)
	e.clock.Advance(11 * time.Second) // the lease expires; the message comes back under a new one
	again := msgs(t, e.pop("/api/v1/pop/queue/in?consumerGroup=g&batch=1"))[0]
	require.Equal(t, m["transactionId"], again["transactionId"])
	ack := map[string]any{"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"], "consumerGroup": "g", "status": "completed"}
	// One lease named: lent to the ack that carries none, which it fences.
	tx := e.obj("POST", "/api/v1/transaction", map[string]any{"operations": []any{ack}, "requiredLeases": []any{stale}}, http.StatusOK)
	require.Equal(t, false, tx["success"], "the stale lease fences the ack out")
	require.Contains(t, tx["error"], "Invalid or expired lease")
	// Several leases: each ack by its own (none here: unfenced, as in 1.x).
	tx = e.obj("POST", "/api/v1/transaction", map[string]any{"operations": []any{ack}, "requiredLeases": []any{stale, again["leaseId"]}}, http.StatusOK)
	require.Equal(t, true, tx["success"])

	e.fails("POST", "/api/v1/transaction", map[string]any{"operations": []any{ack}, "requiredLeases": []any{1}}, http.StatusBadRequest, "requiredLeases[0] must be a string")
	e.fails("POST", "/api/v1/transaction", map[string]any{"operations": []any{ack},
		"kv": []any{map[string]any{"op": "check", "required": true}}}, http.StatusBadRequest, "kv operations are not supported")
}
