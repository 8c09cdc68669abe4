package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestPush(t *testing.T) {
	t.Parallel()

	t.Run("answers 201 with one result per item in order", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		res := e.arr("POST", "/api/v1/push", map[string]any{"items": []any{
			map[string]any{"queue": "orders", "partition": "p1", "payload": map[string]any{"n": 1}, "transactionId": "t-1",
				"traceId": "0190a0b0-1111-4222-8333-444455556666"},
			map[string]any{"queue": "orders", "partition": "p1", "payload": "again", "transactionId": "t-1"},
			map[string]any{"queue": "orders", "payload": nil},
			map[string]any{"queue": "orders"},
		}}, http.StatusCreated)
		require.Len(t, res, 4)
		first := res[0].(map[string]any)
		require.Equal(t, "queued", first["status"])
		require.Equal(t, "t-1", first["transaction_id"])
		require.Equal(t, "t-1", first["transactionId"])
		require.Regexp(t, uuidRE, first["message_id"])
		require.Regexp(t, uuidRE, first["partition_id"])
		require.Equal(t, "0190a0b0-1111-4222-8333-444455556666", first["trace_id"])
		require.Equal(t, "orders", first["queueName"])
		require.Equal(t, "p1", first["partition"])
		require.EqualValues(t, 0, first["offset"])
		require.EqualValues(t, 0, first["index"])
		require.NotContains(t, first, "error")

		dup := res[1].(map[string]any)
		require.Equal(t, "duplicate", dup["status"])
		require.Equal(t, first["message_id"], dup["message_id"])
		require.EqualValues(t, 1, dup["index"])

		third := res[2].(map[string]any)
		require.Equal(t, "queued", third["status"])
		require.Equal(t, "Default", third["partition"])
		require.Nil(t, third["trace_id"])
		require.Regexp(t, uuidRE, third["transaction_id"], "a missing transactionId is generated")

		// Payloads round-trip as they were sent.
		page := e.obj("GET", "/api/v1/fetch/queue/orders/partition/Default", nil, http.StatusOK)
		recs := page["records"].([]any)
		require.Len(t, recs, 2)
		require.Nil(t, recs[0].(map[string]any)["data"])
		require.Nil(t, recs[1].(map[string]any)["data"])
		page = e.obj("GET", "/api/v1/fetch/queue/orders/partition/p1", nil, http.StatusOK)
		require.Equal(t, map[string]any{"n": 1.0}, page["records"].([]any)[0].(map[string]any)["data"])
	})

	t.Run("empty items answer an empty array", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		require.Empty(t, e.arr("POST", "/api/v1/push", `{"items":[]}`, http.StatusCreated))
	})

	t.Run("a full queue fails the item", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.obj("POST", "/api/v1/configure", map[string]any{"queue": "small", "options": map[string]any{"maxSize": 1}}, http.StatusOK)
		res := e.arr("POST", "/api/v1/push", `{"items":[{"queue":"small"},{"queue":"small","traceId":"5f0c7e4a-1b2c-4d3e-8f90-a1b2c3d4e5f6"}]}`,
			http.StatusCreated)
		require.Equal(t, "queued", res[0].(map[string]any)["status"])
		failed := res[1].(map[string]any)
		require.Equal(t, "failed", failed["status"])
		require.Equal(t, "queue full", failed["error"])
		require.Nil(t, failed["message_id"])
		// Ours: the partition and trace of the failed item (Queen sends neither).
		require.Equal(t, res[0].(map[string]any)["partition_id"], failed["partition_id"])
		require.Equal(t, "5f0c7e4a-1b2c-4d3e-8f90-a1b2c3d4e5f6", failed["trace_id"])
	})

	t.Run("refuses bad input and writes nothing", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		long := strings.Repeat("q", 256)
		for _, c := range []struct{ body, want string }{
			{`{}`, "items array is required"},
			{`{"items":null}`, "items array is required"},
			{`{"items":{"queue":"q"}}`, "items array is required"},
			{`{"items":[1]}`, "items[0] must be an object"},
			{`{"items":[{"queue":"ok"},{"payload":1}]}`, "items[1].queue is required"},
			{`{"items":[{"queue":7}]}`, "items[0].queue must be a string"},
			{`{"items":[{"queue":""}]}`, "items[0].queue is required"},
			{`{"items":[{"queue":"` + long + `"}]}`, "items[0].queue is longer than 255 bytes"},
			{`{"items":[{"queue":"q","partition":null}]}`, "items[0].partition must be a string"},
			{`{"items":[{"queue":"q","partition":1}]}`, "items[0].partition must be a string"},
			{`{"items":[{"queue":"q","partition":"` + long + `"}]}`, "items[0].partition is longer than 255 bytes"},
			{`{"items":[{"queue":"q","transactionId":5}]}`, "items[0].transactionId must be a string"},
			{`{"items":[{"queue":"q","transactionId":"` + long + `"}]}`, "items[0].transactionId is longer than 255 bytes"},
			{`{"items":[{"queue":"q","traceId":5}]}`, "items[0].traceId must be a string"},
			{`{"items":[{"queue":"q","traceId":"abc"}]}`, "items[0].traceId must be a UUID"},
			{`{"items":[{"queue":"q","namespace":["x"]}]}`, "items[0].namespace must be a string"},
			{`{"items":[{"queue":"q","task":"` + long + `"}]}`, "items[0].task is longer than 255 bytes"},
			{`{"items":[{"queue":"a\u0000b"}]}`, "items[0].queue contains a NUL byte"},
		} {
			e.fails("POST", "/api/v1/push", c.body, http.StatusBadRequest, c.want)
		}
		e.fails("GET", "/api/v1/fetch/queue/ok/partition/Default", nil, http.StatusNotFound, "Queue or partition not found")
	})

	t.Run("labels of a push-created queue", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.arr("POST", "/api/v1/push", `{"items":[{"queue":"billing.invoices"},{"queue":"plain","namespace":"ns","task":"tk"}]}`, http.StatusCreated)
		q := e.obj("GET", "/api/v1/resources/queues/billing.invoices", nil, http.StatusOK)
		require.Equal(t, "billing", q["namespace"])
		require.Equal(t, "invoices", q["task"])
		q = e.obj("GET", "/api/v1/resources/queues/plain", nil, http.StatusOK)
		require.Equal(t, "ns", q["namespace"])
		require.Equal(t, "tk", q["task"])
	})
}

func TestPop(t *testing.T) {
	t.Parallel()

	t.Run("answers 204 with no body when empty", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.call("GET", "/api/v1/pop/queue/none", nil, http.StatusNoContent)
		e.call("GET", "/api/v1/pop/queue/none/partition/p", nil, http.StatusNoContent)
		e.push("q", "", "a", 1)
		e.call("GET", "/api/v1/pop/queue/q/partition/nope", nil, http.StatusNoContent)
		e.call("GET", "/api/v1/pop/queue/q?wait=true&timeout=0&consumerGroup=late", nil, http.StatusNoContent)
	})

	t.Run("message shape", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		pushed := e.push("orders", "p7", "order-1", map[string]any{"orderId": 1})
		res := e.pop("/api/v1/pop/queue/orders?consumerGroup=billing&subscriptionMode=all")
		require.Equal(t, true, res["success"])
		require.Equal(t, "orders", res["queue"])
		require.Equal(t, "p7", res["partition"])
		require.Equal(t, pushed["partition_id"], res["partitionId"])
		require.Regexp(t, uuidRE, res["leaseId"])
		require.Equal(t, "billing", res["consumerGroup"])
		require.EqualValues(t, 1, res["partitionsClaimed"])
		m := msgs(t, res)[0]
		require.Equal(t, map[string]any{
			"id": pushed["message_id"], "transactionId": "order-1", "partitionId": pushed["partition_id"], "partition": "p7",
			"queue": "orders", "leaseId": res["leaseId"], "consumerGroup": "billing", "data": map[string]any{"orderId": 1.0},
			"traceId": nil, "producerSub": nil, "createdAt": itest.Stamp("2026-11-30T12:00:00.000000Z"), "offset": 0.0, "deliveryAttempt": 1.0,
		}, m)
	})

	t.Run("batch, partitions and autoAck", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		for i := range 70 {
			e.push("wide", fmt.Sprintf("p%02d", i), "t", i)
		}
		res := e.pop("/api/v1/pop/queue/wide?batch=0")
		require.Len(t, msgs(t, res), 1, "batch=0 is clamped to 1")
		res = e.pop("/api/v1/pop/queue/wide?batch=1000&partitions=1000")
		require.EqualValues(t, 64, res["partitionsClaimed"], "partitions is clamped to 64")
		require.Len(t, msgs(t, res), 64)
		res = e.pop("/api/v1/pop/queue/wide?batch=20000&partitions=64&autoAck=true&wait=false&timeout=999999")
		require.Equal(t, "", res["leaseId"])
		require.Len(t, msgs(t, res), 5)
		for _, m := range msgs(t, res) {
			require.Equal(t, "", m["leaseId"])
		}
		// Once the leases expire the 65 leased messages come back; the
		// autoAcked ones do not.
		e.clock.Advance(2 * time.Minute)
		require.Len(t, msgs(t, e.pop("/api/v1/pop/queue/wide?batch=100&partitions=64")), 64)
		require.Len(t, msgs(t, e.pop("/api/v1/pop/queue/wide?batch=100&partitions=64")), 1)
		require.Nil(t, e.pop("/api/v1/pop/queue/wide?batch=100&partitions=64"))
	})

	t.Run("a group joining past a backlog is reported", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var joins []queen.Event
		obs := queen.ObserverFunc(func(ev queen.Event) {
			if ev.Kind == queen.EventGroupJoined {
				mu.Lock()
				joins = append(joins, ev)
				mu.Unlock()
			}
		})
		logs := &itest.LogBuffer{}
		e := setup(t, &queen.Options{Observer: obs, Logger: slog.New(slog.NewTextHandler(logs, nil))}, nil)
		e.push("backlog", "", "m1", 1)
		e.push("backlog", "", "m2", 2)
		require.Nil(t, e.pop("/api/v1/pop/queue/backlog?consumerGroup=late"), "mode new, the default: nothing for it")
		require.Nil(t, e.pop("/api/v1/pop/queue/backlog?consumerGroup=late"))
		mu.Lock()
		require.Equal(t, []queen.Event{{Kind: queen.EventGroupJoined, Queue: "backlog", Group: "late", Count: 2}}, joins)
		mu.Unlock()
		require.Contains(t, logs.String(), "queue=backlog group=late skipped=2")
	})

	t.Run("subscription modes of a new group", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.push("s", "", "old", 1)
		require.Nil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g-default"), "new is the default")
		require.Nil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g-new-only&subscriptionMode=new-only"))
		require.Nil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g-now&subscriptionMode=all&subscriptionFrom=now"), "subscriptionFrom wins")
		require.NotNil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g-all&subscriptionMode=all"))
		// Any other mode means all, as on Queen's server (its JS client
		// sends from_beginning); subscriptionFrom still wins over it.
		require.NotNil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g-beginning&subscriptionMode=from_beginning"))
		require.NotNil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g-latest&subscriptionMode=latest"))
		require.Nil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g-now2&subscriptionMode=from_beginning&subscriptionFrom=now"))
		require.NotNil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g-from-new&subscriptionMode=new&subscriptionFrom="+itest.Stamp("2026-11-30T11:00:00Z")))
		require.NotNil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g-from&subscriptionFrom="+itest.Stamp("2026-11-30T11:00:00Z")))
		require.Nil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g-later&subscriptionFrom="+itest.Stamp("2026-11-30T13:00:00.000Z")))
		require.NotNil(t, e.pop("/api/v1/pop/queue/s"), "queue mode reads from the oldest message")
		e.push("s", "", "new", 2)
		for _, g := range []string{"g-default", "g-new-only", "g-now"} {
			require.Equal(t, "new", msgs(t, e.pop("/api/v1/pop/queue/s?consumerGroup="+g))[0]["transactionId"], g)
		}
		// An empty consumerGroup is queue mode.
		e.push("s2", "", "x", 1)
		res := e.pop("/api/v1/pop/queue/s2?consumerGroup=")
		require.Equal(t, queen.QueueModeGroup, res["consumerGroup"])
	})

	t.Run("leaseSeconds and redelivery", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.push("l", "", "m", 1)
		first := msgs(t, e.pop("/api/v1/pop/queue/l?leaseSeconds=10"))[0]
		require.Nil(t, e.pop("/api/v1/pop/queue/l"), "leased")
		e.clock.Advance(11 * time.Second)
		again := msgs(t, e.pop("/api/v1/pop/queue/l"))[0]
		require.EqualValues(t, 2, again["deliveryAttempt"])
		require.NotEqual(t, first["leaseId"], again["leaseId"])
		// Without leaseSeconds a push-created queue leases for 60 s.
		e.clock.Advance(59 * time.Second)
		require.Nil(t, e.pop("/api/v1/pop/queue/l"))
		e.clock.Advance(2 * time.Second)
		require.EqualValues(t, 3, msgs(t, e.pop("/api/v1/pop/queue/l"))[0]["deliveryAttempt"])
	})

	t.Run("named partition", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.push("np", "a", "ta", 1)
		e.push("np", "b", "tb", 2)
		res := e.pop("/api/v1/pop/queue/np/partition/b?partitions=5")
		require.Equal(t, "tb", msgs(t, res)[0]["transactionId"])
		require.EqualValues(t, 1, res["partitionsClaimed"])
		require.Nil(t, e.pop("/api/v1/pop/queue/np/partition/b"))
	})

	t.Run("discovery pop", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.obj("POST", "/api/v1/configure", `{"queue":"low","namespace":"shop","task":"mail","options":{"priority":1}}`, http.StatusOK)
		e.obj("POST", "/api/v1/configure", `{"queue":"high","namespace":"shop","task":"mail","options":{"priority":5}}`, http.StatusOK)
		e.push("low", "", "l", 1)
		e.push("high", "", "h", 2)
		res := e.pop("/api/v1/pop?namespace=shop&task=mail&wait=true&timeout=60000")
		m := msgs(t, res)[0]
		require.Equal(t, "high", m["queue"])
		require.Equal(t, "high", res["queue"])
		m = msgs(t, e.pop("/api/v1/pop?task=mail"))[0]
		require.Equal(t, "low", m["queue"])
		require.Nil(t, e.pop("/api/v1/pop?namespace=shop&wait=true&timeout=60000"), "never waits")
		e.fails("GET", "/api/v1/pop", nil, http.StatusBadRequest, "namespace or task is required")
		// Its lease is 60 s.
		e.clock.Advance(61 * time.Second)
		require.NotNil(t, e.pop("/api/v1/pop?namespace=shop"))
	})

	t.Run("conflation", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		for i := range 3 {
			e.push("c", "", fmt.Sprint("v", i), i)
		}
		res := e.pop("/api/v1/pop/queue/c?consumerGroup=latest&subscriptionMode=all&conflation=true&batch=10")
		got := msgs(t, res)
		require.Len(t, got, 1)
		require.Equal(t, "v2", got[0]["transactionId"])
		e.arr("POST", "/api/v1/ack", ackBody(got[0], "completed"), http.StatusOK)
		res = e.obj("GET", "/api/v1/pop/queue/c?consumerGroup=latest&conflation=true", nil, http.StatusOK)
		require.Equal(t, []any{}, res["messages"], "an empty conflating pop answers 200 with no messages")
		e.fails("GET", "/api/v1/pop/queue/c?consumerGroup=latest&autoAck=true", nil, http.StatusBadRequest, "conflates")
	})

	t.Run("refuses bad parameters", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		long := strings.Repeat("x", 256)
		for _, c := range []struct{ query, want string }{
			{"batch=abc", `batch must be a number, not "abc"`},
			{"batch=", `batch must be a number`},
			{"batch=-1", "batch must not be negative"},
			{"batch=1.5", "batch must be a number"},
			{"partitions=two", "partitions must be a number"},
			{"partitions=-3", "partitions must not be negative"},
			{"timeout=soon", "timeout must be a number"},
			{"timeout=-5", "timeout must not be negative"},
			{"wait=maybe", `wait must be true or false, not "maybe"`},
			{"autoAck=yes", "autoAck must be true or false"},
			{"autopilot=2", "autopilot must be true or false"},
			{"conflation=on", "conflation must be true or false"},
			{"leaseSeconds=x", "leaseSeconds must be a number"},
			{"leaseSeconds=-1", "leaseSeconds must not be negative"},
			{"leaseSeconds=99999999999", "leaseSeconds must be at most"},
			{"subscriptionFrom=yesterday", `subscriptionFrom must be an ISO-8601 timestamp, not "yesterday"`},
			{"consumerGroup=" + long, "consumerGroup is longer than 255 bytes"},
			{"conflation=true", "conflation needs a consumerGroup"},
			{"conflation=true&consumerGroup=g&autoAck=true", "conflation cannot be combined with autoAck"},
		} {
			e.fails("GET", "/api/v1/pop/queue/q?"+c.query, nil, http.StatusBadRequest, c.want)
		}
		e.fails("GET", "/api/v1/pop/queue/"+long, nil, http.StatusBadRequest, "queue is longer than 255 bytes")
		e.fails("GET", "/api/v1/pop/queue/q/partition/"+long, nil, http.StatusBadRequest, "partition is longer than 255 bytes")
		e.fails("GET", "/api/v1/pop?namespace="+long, nil, http.StatusBadRequest, "namespace is longer than 255 bytes")
		e.fails("GET", "/api/v1/pop/queue/%FF", nil, http.StatusBadRequest, "queue is not valid UTF-8")
		e.fails("GET", "/api/v1/pop/queue/q?consumerGroup=%00", nil, http.StatusBadRequest, "consumerGroup contains a NUL byte")
	})

	t.Run("autopilot picks the batch", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		for i := range 150 {
			e.push("auto", "", fmt.Sprint(i), i)
		}
		require.Len(t, msgs(t, e.pop("/api/v1/pop/queue/auto?autopilot=true")), 100)
		e.clock.Advance(2 * time.Minute)
		require.Len(t, msgs(t, e.pop("/api/v1/pop/queue/auto?autopilot=true&batch=3")), 3, "an explicit batch is kept")
	})
}

func TestPop_LongPoll(t *testing.T) {
	t.Parallel()

	t.Run("a push wakes a waiting pop", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		type result struct {
			rec     *httptest.ResponseRecorder
			elapsed time.Duration
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pop/queue/lp?wait=true&timeout=30000", nil))
			done <- result{rec, time.Since(start)}
		}()
		itest.AwaitWaiting(t, e.b, 1)
		e.push("lp", "", "wake", 1)
		select {
		case r := <-done:
			require.Equal(t, http.StatusOK, r.rec.Code)
			require.Contains(t, r.rec.Body.String(), `"transactionId":"wake"`)
			require.Less(t, r.elapsed, 5*time.Second, "woken by the push, not by the 30 s timeout")
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting pop was not woken by the push")
		}
	})

	t.Run("ends at its timeout with 204", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		start := time.Now()
		e.call("GET", "/api/v1/pop/queue/idle?wait=true&timeout=50", nil, http.StatusNoContent)
		require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	})

	t.Run("ends when the client goes away", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pop/queue/gone?wait=true&timeout=60000", nil).WithContext(ctx))
			done <- rec.Code
		}()
		itest.AwaitWaiting(t, e.b, 1)
		cancel()
		select {
		case code := <-done:
			require.Equal(t, http.StatusNoContent, code)
		case <-time.After(10 * time.Second):
			t.Fatal("the pop did not end with its client")
		}
	})

	t.Run("ends when the broker closes", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pop/queue/closing?wait=true&timeout=60000", nil))
			done <- rec
		}()
		itest.AwaitWaiting(t, e.b, 1)
		require.NoError(t, e.b.Close())
		select {
		case rec := <-done:
			require.Equal(t, http.StatusServiceUnavailable, rec.Code)
			require.JSONEq(t, `{"error":"broker unavailable"}`, rec.Body.String())
		case <-time.After(10 * time.Second):
			t.Fatal("the pop did not end with the broker")
		}
	})
}

func TestAck(t *testing.T) {
	t.Parallel()

	t.Run("single ack answers a one-element array", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.push("a", "p", "m1", 1)
		m := msgs(t, e.pop("/api/v1/pop/queue/a"))[0]
		res := e.arr("POST", "/api/v1/ack", ackBody(m, "completed"), http.StatusOK)
		require.Equal(t, []any{map[string]any{"index": 0.0, "transactionId": "m1", "success": true, "error": nil,
			"queueName": "a", "partitionName": "p", "leaseReleased": true, "dlq": false, "parked": false}}, res)
		// The message is settled, so a second ack is refused, per item.
		res = e.arr("POST", "/api/v1/ack", ackBody(m, "completed"), http.StatusOK)
		require.Equal(t, false, res[0].(map[string]any)["success"])
		require.Equal(t, "Message already settled", res[0].(map[string]any)["error"])
	})

	t.Run("statuses", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.obj("POST", "/api/v1/configure", `{"queue":"st","options":{"retryLimit":1,"retryDelay":0}}`, http.StatusOK)
		for _, tx := range []string{"f", "d", "k", "r"} {
			e.push("st", tx, tx, tx)
		}
		ack := func(part, status string) map[string]any {
			m := msgs(t, e.pop("/api/v1/pop/queue/st/partition/"+part))[0]
			body := ackBody(m, status)
			body["error"] = "because"
			return e.arr("POST", "/api/v1/ack", body, http.StatusOK)[0].(map[string]any)
		}
		r := ack("f", "failed")
		require.Equal(t, true, r["success"])
		require.Equal(t, false, r["dlq"])
		r = ack("f", "failed") // the budget of 1 is spent: dead-lettered
		require.Equal(t, true, r["dlq"])
		require.Equal(t, true, ack("d", "dlq")["dlq"])
		require.Equal(t, false, r["parked"])
		r = ack("k", "park")
		require.Equal(t, true, r["success"])
		require.Equal(t, false, r["dlq"])
		require.Equal(t, true, r["parked"])
		require.Equal(t, true, ack("r", "retry")["success"])
		require.Equal(t, "r", msgs(t, e.pop("/api/v1/pop/queue/st/partition/r"))[0]["transactionId"], "retry gives it back")

		dlq := e.obj("GET", "/api/v1/dlq?queue=st", nil, http.StatusOK)
		require.EqualValues(t, 2, dlq["total"])
		parked := e.obj("GET", "/api/v1/parked?queue=st", nil, http.StatusOK)
		require.EqualValues(t, 1, parked["total"])
		require.Equal(t, "because", parked["messages"].([]any)[0].(map[string]any)["errorMessage"])
	})

	t.Run("refused items keep HTTP 200", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		pushed := e.push("r", "", "m", 1)
		m := msgs(t, e.pop("/api/v1/pop/queue/r"))[0]
		item := func(body map[string]any) map[string]any {
			return e.arr("POST", "/api/v1/ack", body, http.StatusOK)[0].(map[string]any)
		}
		r := item(map[string]any{"transactionId": "ghost", "partitionId": pushed["partition_id"]})
		require.Equal(t, false, r["success"])
		require.Equal(t, "Message not found", r["error"])
		r = item(map[string]any{"transactionId": "m", "partitionId": "0190a0b0-1111-4222-8333-444455556666"})
		require.Equal(t, "Message not found", r["error"])
		require.Nil(t, r["queueName"])
		body := ackBody(m, "completed")
		body["leaseId"] = "0190a0b0-1111-7222-8333-444455556666"
		require.Equal(t, "Invalid or expired lease", item(body)["error"])
		r = item(ackBody(m, "bogus"))
		require.Equal(t, false, r["success"])
		require.Equal(t, "invalid status: bogus", r["error"])
		// nulls are accepted where the JS client sends them.
		r = item(map[string]any{"transactionId": "m", "partitionId": m["partitionId"], "status": "completed",
			"error": nil, "consumerGroup": nil, "leaseId": nil})
		require.Equal(t, true, r["success"])
	})

	t.Run("each refusal has its own text", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.push("w", "", "m1", 1)
		e.push("w", "", "m2", 2)
		bill := msgs(t, e.pop("/api/v1/pop/queue/w?consumerGroup=billing&subscriptionMode=all&batch=2"))
		audit := msgs(t, e.pop("/api/v1/pop/queue/w?consumerGroup=audit&subscriptionMode=all&batch=2"))
		require.Len(t, bill, 2)
		require.Len(t, audit, 2)
		refused := func(body map[string]any, group any, text string) {
			t.Helper()
			body["consumerGroup"] = group
			res := e.arr("POST", "/api/v1/ack", body, http.StatusOK)
			require.Equal(t, []any{map[string]any{"index": 0.0, "transactionId": body["transactionId"], "success": false, "error": text,
				"queueName": "w", "partitionName": "Default", "leaseReleased": false, "dlq": false, "parked": false}}, res)
		}
		refused(ackBody(bill[0], "completed"), "audit", "Lease belongs to another consumer group")
		refused(ackBody(bill[0], "completed"), "billng", "Consumer group not found")
		refused(ackBody(bill[0], "completed"), nil, "Consumer group not found") // queue mode never popped w
		e.arr("POST", "/api/v1/ack", map[string]any{"transactionId": "m1", "partitionId": bill[0]["partitionId"], "leaseId": bill[0]["leaseId"],
			"consumerGroup": "billing"}, http.StatusOK)
		refused(ackBody(bill[0], "completed"), "billing", "Message already settled")
		refused(ackBody(bill[0], "dlq"), "billing", "Message already settled")
		unfenced := ackBody(bill[0], "dlq")
		delete(unfenced, "leaseId")
		refused(unfenced, "billing", "Message already settled")
		require.EqualValues(t, 0, e.obj("GET", "/api/v1/dlq?queue=w", nil, http.StatusOK)["total"], "nothing dead-lettered")
		// A retry gives the batch back: the lease is released.
		r := e.arr("POST", "/api/v1/ack", map[string]any{"transactionId": "m2", "partitionId": audit[1]["partitionId"], "leaseId": audit[1]["leaseId"],
			"consumerGroup": "audit", "status": "retry"}, http.StatusOK)[0].(map[string]any)
		require.Equal(t, true, r["leaseReleased"])
		refused(ackBody(audit[0], "completed"), "audit", "Invalid or expired lease")

		// The batch route answers the same, item by item, and a transaction
		// says which ack aborted it.
		audit = msgs(t, e.pop("/api/v1/pop/queue/w?consumerGroup=audit&batch=2"))
		require.Len(t, audit, 2)
		batch := e.arr("POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": "billing", "acknowledgments": []any{
			ackBody(bill[0], "completed"), ackBody(audit[1], "completed")}}, http.StatusOK)
		require.Equal(t, "Message already settled", batch[0].(map[string]any)["error"])
		require.Equal(t, "Lease belongs to another consumer group", batch[1].(map[string]any)["error"])
		tx := e.obj("POST", "/api/v1/transaction", map[string]any{"operations": []any{map[string]any{"type": "ack",
			"transactionId": "m1", "partitionId": bill[0]["partitionId"], "consumerGroup": "billing"}}}, http.StatusOK)
		require.Equal(t, false, tx["success"])
		require.Equal(t, "ACK operation failed: Message already settled", tx["error"])
	})

	t.Run("refuses bad bodies", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		pid := "0190a0b0-1111-4222-8333-444455556666"
		for _, c := range []struct{ body, want string }{
			{`{"partitionId":"` + pid + `"}`, "transactionId is required"},
			{`{"transactionId":null,"partitionId":"` + pid + `"}`, "transactionId is required"},
			{`{"transactionId":1,"partitionId":"` + pid + `"}`, "transactionId is required"},
			{`{"transactionId":"","partitionId":"` + pid + `"}`, "transactionId is required"},
			{`{"transactionId":"t"}`, "partitionId is required to ensure message uniqueness"},
			{`{"transactionId":"t","partitionId":null}`, "partitionId is required to ensure message uniqueness"},
			{`{"transactionId":"t","partitionId":"4"}`, `partitionId must be a UUID, not "4"`},
			{`{"transactionId":"t","partitionId":"` + pid + `","leaseId":"nope"}`, "leaseId must be a UUID"},
			{`{"transactionId":"t","partitionId":"` + pid + `","status":true}`, "status must be a string"},
			{`{"transactionId":"t","partitionId":"` + pid + `","consumerGroup":5}`, "consumerGroup must be a string"},
			{`{"transactionId":"t","partitionId":"` + pid + `","error":{}}`, "error must be a string"},
			{`{"transactionId":"` + strings.Repeat("t", 256) + `","partitionId":"` + pid + `"}`, "transactionId is longer than 255 bytes"},
		} {
			e.fails("POST", "/api/v1/ack", c.body, http.StatusBadRequest, c.want)
		}
	})

	t.Run("batch", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		for i := range 3 {
			e.push("b", "", fmt.Sprint("m", i), i)
		}
		got := msgs(t, e.pop("/api/v1/pop/queue/b?batch=3&consumerGroup=g&subscriptionMode=all"))
		require.Len(t, got, 3)
		body := map[string]any{"consumerGroup": "g", "acknowledgments": []any{
			map[string]any{"transactionId": "m2", "partitionId": got[2]["partitionId"], "leaseId": got[2]["leaseId"], "status": "completed", "consumerGroup": "ignored"},
			map[string]any{"transactionId": "m0", "partitionId": got[0]["partitionId"], "leaseId": got[0]["leaseId"], "status": "completed", "error": nil},
			map[string]any{"transactionId": "m1", "partitionId": got[1]["partitionId"], "leaseId": got[1]["leaseId"], "status": "retry"},
		}}
		res := e.arr("POST", "/api/v1/ack/batch", body, http.StatusOK)
		require.Len(t, res, 3)
		for i, want := range []string{"m2", "m0", "m1"} {
			r := res[i].(map[string]any)
			require.Equal(t, want, r["transactionId"], "results follow the request order")
			require.EqualValues(t, i, r["index"])
			require.Equal(t, true, r["success"])
		}
		// The cursor stops before the retried m1: m1 and m2 come back.
		again := msgs(t, e.pop("/api/v1/pop/queue/b?batch=3&consumerGroup=g"))
		require.Equal(t, "m1", again[0]["transactionId"])
		require.Equal(t, "m2", again[1]["transactionId"])

		require.Empty(t, e.arr("POST", "/api/v1/ack/batch", `{"acknowledgments":[]}`, http.StatusOK))
		pid := got[0]["partitionId"].(string)
		for _, c := range []struct{ body, want string }{
			{`{}`, "acknowledgments array is required"},
			{`{"acknowledgments":{}}`, "acknowledgments array is required"},
			{`{"acknowledgments":[{"partitionId":"` + pid + `"}]}`, "Each acknowledgment must have a valid transactionId string"},
			{`{"acknowledgments":[{"transactionId":"x"}]}`, "Each acknowledgment must have a valid partitionId string to ensure message uniqueness"},
			{`{"acknowledgments":[{"transactionId":"x","partitionId":"p"}]}`, "acknowledgments[0].partitionId must be a UUID"},
			{`{"acknowledgments":["x"]}`, "acknowledgments[0] must be an object"},
			{`{"acknowledgments":[],"consumerGroup":1}`, "consumerGroup must be a string"},
		} {
			e.fails("POST", "/api/v1/ack/batch", c.body, http.StatusBadRequest, c.want)
		}
	})
}

func TestLeaseExtend(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("lease", "", "m", 1)
	m := msgs(t, e.pop("/api/v1/pop/queue/lease?leaseSeconds=30"))[0]
	path := "/api/v1/lease/" + m["leaseId"].(string) + "/extend"
	// One object, read by both generations: success and renewed (2.x),
	// newExpiresAt (both), lease_expires_at (1.x), expiresAt and error
	// (Queen's 1.x answer, an array of one such object).
	stamp := itest.Stamp("2026-11-30T12:01:00.000Z")
	res := e.obj("POST", path, `{}`, http.StatusOK)
	require.Equal(t, map[string]any{"leaseId": m["leaseId"], "success": true, "renewed": 1.0, "error": nil,
		"newExpiresAt": stamp, "expiresAt": stamp, "lease_expires_at": stamp}, res)
	res = e.obj("POST", path, `{"seconds":120}`, http.StatusOK)
	require.Equal(t, itest.Stamp("2026-11-30T12:02:00.000Z"), res["newExpiresAt"])

	e.clock.Advance(121 * time.Second)
	r := e.obj("POST", path, `{}`, http.StatusOK)
	require.Equal(t, map[string]any{"leaseId": m["leaseId"], "success": false, "renewed": 0.0, "error": "Lease already expired",
		"newExpiresAt": nil, "expiresAt": nil, "lease_expires_at": nil}, r)
	r = e.obj("POST", "/api/v1/lease/0190a0b0-1111-7222-8333-444455556666/extend", `{}`, http.StatusOK)
	require.Equal(t, "Lease not found", r["error"])

	e.fails("POST", "/api/v1/lease/not-a-lease/extend", `{}`, http.StatusBadRequest, "leaseId must be a UUID")
	e.fails("POST", path, `{"seconds":"60"}`, http.StatusBadRequest, "seconds must be a number")
	e.fails("POST", path, `{"seconds":-1}`, http.StatusBadRequest, "seconds must not be negative")
	e.fails("POST", path, `{"seconds":1e12}`, http.StatusBadRequest, "seconds must be at most")
}

func TestTransaction(t *testing.T) {
	t.Parallel()

	t.Run("acks and pushes commit together", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		e.push("in", "", "in-1", 1)
		m := msgs(t, e.pop("/api/v1/pop/queue/in"))[0]
		res := e.obj("POST", "/api/v1/transaction", map[string]any{
			"operations": []any{
				map[string]any{"type": "ack", "transactionId": "in-1", "partitionId": m["partitionId"], "status": "completed"},
				map[string]any{"type": "push", "items": []any{
					map[string]any{"queue": "next", "payload": map[string]any{"a": 1}, "transactionId": "out-1"},
					map[string]any{"queue": "next", "partition": "p2"},
				}},
				map[string]any{"type": "push", "queue": "next", "data": map[string]any{"flat": true}},
			},
			"requiredLeases": []any{m["leaseId"]},
		}, http.StatusOK)
		require.Equal(t, true, res["success"])
		require.NotContains(t, res, "error")
		require.Regexp(t, uuidRE, res["transactionId"])
		results := res["results"].([]any)
		require.Len(t, results, 4)
		// parked, queueName, partitionName and leaseReleased are ours on acks.
		require.Equal(t, map[string]any{"index": 0.0, "type": "ack", "success": true, "transactionId": "in-1", "error": nil, "dlq": false, "parked": false,
			"queueName": "in", "partitionName": "Default", "leaseReleased": true}, results[0])
		push := results[1].(map[string]any)
		require.Equal(t, "push", push["type"])
		require.Equal(t, "out-1", push["transactionId"])
		require.Equal(t, "queued", push["status"])
		require.Regexp(t, uuidRE, push["messageId"])
		require.Equal(t, "next", push["queueName"])
		require.Regexp(t, uuidRE, results[2].(map[string]any)["transactionId"], "generated")

		page := e.obj("GET", "/api/v1/fetch/queue/next/partition/Default", nil, http.StatusOK)
		recs := page["records"].([]any)
		require.Len(t, recs, 2)
		require.Equal(t, map[string]any{"a": 1.0}, recs[0].(map[string]any)["data"])
		require.Equal(t, map[string]any{"flat": true}, recs[1].(map[string]any)["data"])
		page = e.obj("GET", "/api/v1/fetch/queue/next/partition/p2", nil, http.StatusOK)
		require.Equal(t, map[string]any{}, page["records"].([]any)[0].(map[string]any)["data"], "payload defaults to {}")

		// A duplicate push does not abort.
		res = e.obj("POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"next","transactionId":"out-1"}]}]}`, http.StatusOK)
		require.Equal(t, true, res["success"])
		require.Equal(t, "duplicate", res["results"].([]any)[0].(map[string]any)["status"])
	})

	t.Run("a refused ack aborts everything", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		pushed := e.push("in", "", "in-1", 1)
		res := e.obj("POST", "/api/v1/transaction", map[string]any{"operations": []any{
			map[string]any{"type": "push", "items": []any{map[string]any{"queue": "out", "transactionId": "o"}}},
			map[string]any{"type": "ack", "transactionId": "missing", "partitionId": pushed["partition_id"]},
		}}, http.StatusOK)
		require.Equal(t, false, res["success"])
		require.Equal(t, "ACK operation failed: Message not found", res["error"])
		results := res["results"].([]any)
		require.Len(t, results, 2)
		require.Equal(t, map[string]any{"index": 1.0, "type": "ack", "success": false, "transactionId": "missing", "error": "Message not found",
			"dlq": false, "parked": false, "queueName": "in", "partitionName": "Default", "leaseReleased": false}, results[1])
		e.fails("GET", "/api/v1/fetch/queue/out/partition/Default", nil, http.StatusNotFound, "not found")

		res = e.obj("POST", "/api/v1/transaction", map[string]any{"operations": []any{
			map[string]any{"type": "ack", "transactionId": "in-1", "partitionId": pushed["partition_id"], "status": "weird"},
		}}, http.StatusOK)
		require.Equal(t, "ACK operation failed: invalid status: weird", res["error"])

		// A partitionId that is not a UUID names no message: the
		// transaction is aborted as a Broker aborts it, not refused.
		res = e.obj("POST", "/api/v1/transaction", map[string]any{"operations": []any{
			map[string]any{"type": "ack", "transactionId": "in-1", "partitionId": "x"},
		}}, http.StatusOK)
		require.Equal(t, false, res["success"])
		require.Equal(t, "ACK operation failed: Message not found", res["error"])
	})

	t.Run("a refused push aborts everything", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		cfg := queen.DefaultQueueConfig()
		cfg.MaxSize = 1
		_, err := e.b.ConfigureQueue(context.Background(), "full", cfg)
		require.NoError(t, err)
		e.push("full", "", "f-0", 1)
		e.push("in", "", "in-1", 1)
		m := msgs(t, e.pop("/api/v1/pop/queue/in"))[0]
		res := e.obj("POST", "/api/v1/transaction", map[string]any{"operations": []any{
			map[string]any{"type": "ack", "transactionId": "in-1", "partitionId": m["partitionId"], "leaseId": m["leaseId"]},
			map[string]any{"type": "push", "items": []any{map[string]any{"queue": "full", "transactionId": "f-1"}}},
		}}, http.StatusOK)
		require.Equal(t, false, res["success"])
		require.Equal(t, "PUSH operation failed: queue full", res["error"])
		require.Len(t, res["results"].([]any), 2)
		// Pushes are decided first: nothing was gathered for the ack (no
		// transactionId, no dlq).
		require.Equal(t, map[string]any{"index": 0.0, "type": "ack", "success": false, "transactionId": "", "error": nil}, res["results"].([]any)[0])
		// The ack was not applied: the lease still holds the message.
		ack := e.arr("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
			map[string]any{"transactionId": "in-1", "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": "completed"},
		}}, http.StatusOK)
		require.Equal(t, true, ack[0].(map[string]any)["success"])
	})

	t.Run("refuses bad bodies", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		for _, c := range []struct{ body, want string }{
			{`{}`, "operations array required"},
			{`{"operations":"x"}`, "operations array required"},
			{`{"operations":[]}`, "operations array cannot be empty"},
			{`{"operations":[{"type":"push","items":[]}]}`, "operations array cannot be empty"},
			{`{"operations":[5]}`, "operations[0] must be an object"},
			{`{"operations":[{}]}`, "operations[0].type is required"},
			{`{"operations":[{"type":3}]}`, "operations[0].type must be a string"},
			{`{"operations":[{"type":"delete"}]}`, "Unknown operation type: delete"},
			{`{"operations":[{"type":"ack","partitionId":"0190a0b0-1111-4222-8333-444455556666"}]}`, "operations[0].transactionId is required"},
			{`{"operations":[{"type":"ack","transactionId":"t"}]}`, "operations[0].partitionId is required"},
			{`{"operations":[{"type":"push","items":[{"payload":1}]}]}`, "operations[0].items[0].queue is required"},
			{`{"operations":[{"type":"push","items":[7]}]}`, "operations[0].items[0] must be an object"},
			{`{"operations":[{"type":"push","items":{}}]}`, "operations[0].items must be an array"},
			{`{"operations":[{"type":"push"}]}`, "operations[0].queue is required"},
		} {
			e.fails("POST", "/api/v1/transaction", c.body, http.StatusBadRequest, c.want)
		}
	})
}

func TestPop_ManyParkedLongPolls(t *testing.T) {
	t.Parallel()
	const n = 200
	stop := make(chan struct{})
	defer close(stop)
	e := setup(t, nil, &httpapi.Options{Shutdown: stop})
	got := make(chan string, n)
	for range n {
		go func() {
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pop/queue/many?wait=true&timeout=30000", nil))
			if rec.Code != http.StatusOK {
				got <- fmt.Sprint("status ", rec.Code)
				return
			}
			var v struct {
				Messages []struct {
					TransactionID string `json:"transactionId"`
				} `json:"messages"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &v)
			got <- v.Messages[0].TransactionID
		}()
	}
	itest.AwaitWaiting(t, e.b, n)
	items := make([]any, n)
	for i := range items {
		items[i] = map[string]any{"queue": "many", "partition": fmt.Sprint("p", i), "transactionId": fmt.Sprint("t", i)}
	}
	e.arr("POST", "/api/v1/push", map[string]any{"items": items}, http.StatusCreated)
	seen := map[string]bool{}
	deadline := time.After(20 * time.Second)
	for range n {
		select {
		case tx := <-got:
			require.True(t, strings.HasPrefix(tx, "t"), tx)
			require.False(t, seen[tx], "delivered twice: %s", tx)
			seen[tx] = true
		case <-deadline:
			t.Fatalf("only %d of %d waiting pops were served", len(seen), n)
		}
	}
}

// Options.ProducerSub stamps who pushed on every message of a push or a
// transaction; a producerSub the client sends is ignored.
func TestPush_ProducerSub(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, &httpapi.Options{ProducerSub: func(r *http.Request) string { return r.Header.Get("X-Who") }})
	req := func(method, path string, body any) {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		r := httptest.NewRequest(method, path, bytes.NewReader(data))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Who", "alice")
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		require.Less(t, w.Code, 300, w.Body.String())
	}
	req("POST", "/api/v1/push", map[string]any{"items": []any{
		map[string]any{"queue": "q", "payload": 1, "producerSub": "mallory"},
	}})
	req("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "q", "payload": 2}}},
		map[string]any{"type": "push", "queue": "q", "data": 3},
	}})
	got := msgs(t, e.pop("/api/v1/pop/queue/q?batch=10"))
	require.Len(t, got, 3)
	for _, m := range got {
		require.Equal(t, "alice", m["producerSub"])
	}
}
