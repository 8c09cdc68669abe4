package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// queenServer is a fake of Queen's own server: a broker behind httpapi
// whose answers are rewritten the way Queen's server differs from ours
// (wire contract, Part C): a push answers 200 with snake_case ids and no
// offset (a failed item no partition_id nor trace_id), an empty pop 200
// with {"success":false,...}, a pop has no conflating field and its
// messages no offset, deliveryAttempt or queue, the DLQ listing has no
// total nor ids, ack answers have no parked field (nor a transaction's
// acks queueName, partitionName or leaseReleased), queue listings and
// status only Queen's counters (no counts), the listings no
// defaultPartitionId nor groups, conflation is ignored, and there is no
// fetch, replay, delete or parked route. Where Queen's answers mean
// something else it does the same: an unknown queue's status and an
// unknown partition's seek answer 200 with an error, a partition seek
// names a time in cursorMovedTo, a pop's leaseSeconds is ignored (the
// queue's LeaseTime holds), a failed or retry item of an ack batch behind
// which a completed one of the same partition and group follows is
// applied as completed (its message is lost for that group, as Queen's
// cursor jumps past it), and the counts of the status and listing routes
// are those of the last POST /api/v1/stats/refresh (the first read of a
// route computes them).
type queenServer struct {
	*httptest.Server
	health  atomic.Int32 // GET /health calls
	refresh atomic.Int32 // POST /api/v1/stats/refresh calls
	busy    atomic.Int32 // refreshes still to answer "another_instance_running"
	mu      sync.Mutex
	counted map[string][]byte  // counts as of the last refresh, by path
	batches [][]map[string]any // the items of each ack batch received
	singles []map[string]any   // each single ack received
}

var letterRoute = regexp.MustCompile(`^/api/v1/dlq/[^/]+(/replay)?$`)

func newQueenServer(t *testing.T, opts *queen.Options) (*queenServer, *queen.Broker) {
	b := queentest.NewBroker(t, opts)
	stop := make(chan struct{})
	inner := httpapi.New(b, &httpapi.Options{Shutdown: stop})
	qs := &queenServer{counted: map[string][]byte{}}
	qs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		counted := path == "/api/v1/resources/queues" || strings.HasPrefix(path, "/api/v1/status/queues")
		switch {
		case path == "/health":
			qs.health.Add(1)
			writeRaw(w, http.StatusOK, `{"status":"healthy","database":"connected","server":"C++ Queen Server (libqueen)","version":"1.0.0"}`)
			return
		case path == "/api/v1/stats/refresh":
			qs.refresh.Add(1)
			if qs.busy.Add(-1) >= 0 {
				writeRaw(w, http.StatusOK, `{"skipped":true,"reason":"another_instance_running"}`)
				return
			}
			qs.busy.Store(0)
			qs.mu.Lock()
			clear(qs.counted)
			qs.mu.Unlock()
			writeRaw(w, http.StatusOK, `{"partition":{"dirtyPartitionsScanned":1},"queue":{"queuesUpdated":1}}`)
			return

		case strings.HasPrefix(path, "/api/v1/fetch/"), strings.HasPrefix(path, "/api/v1/parked"), letterRoute.MatchString(path):
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("Not Found"))
			return
		}
		q := r.URL.Query()
		q.Del("conflation")   // ignored
		q.Del("leaseSeconds") // ignored: the queue's LeaseTime holds
		r.URL.RawQuery = q.Encode()
		if path == "/api/v1/ack/batch" || path == "/api/v1/ack" {
			qs.rewriteAcks(t, r)
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		status, body := rec.Code, rec.Body.Bytes()
		switch {
		case path == "/api/v1/push" && status == http.StatusCreated:
			var items []map[string]any
			require.NoError(t, json.Unmarshal(body, &items))
			for _, it := range items {
				for _, k := range []string{"transactionId", "offset", "partition"} {
					delete(it, k)
				}
				if it["status"] == "failed" {
					delete(it, "partition_id")
					delete(it, "trace_id")
				}
			}
			status, body = http.StatusOK, mustJSON(t, items)
		case strings.HasPrefix(path, "/api/v1/pop") && status == http.StatusNoContent:
			status, body = http.StatusOK, []byte(`{"success":false,"error":"no_available_partition","messages":[]}`)
		case strings.HasPrefix(path, "/api/v1/pop") && status == http.StatusOK:
			var pop map[string]any
			require.NoError(t, json.Unmarshal(body, &pop))
			delete(pop, "conflating")
			msgs, _ := pop["messages"].([]any)
			for _, m := range msgs {
				for _, k := range []string{"offset", "deliveryAttempt", "queue"} {
					delete(m.(map[string]any), k)
				}
			}
			body = mustJSON(t, pop)
		case (path == "/api/v1/ack" || path == "/api/v1/ack/batch") && status == http.StatusOK:
			var items []map[string]any
			require.NoError(t, json.Unmarshal(body, &items))
			for _, it := range items {
				delete(it, "parked")
			}
			body = mustJSON(t, items)
		case path == "/api/v1/transaction" && status == http.StatusOK:
			var reply map[string]any
			require.NoError(t, json.Unmarshal(body, &reply))
			for _, it := range reply["results"].([]any) {
				it := it.(map[string]any)
				delete(it, "parked")
				if it["type"] == "ack" {
					for _, k := range []string{"queueName", "partitionName", "leaseReleased"} {
						delete(it, k)
					}
				}
			}
			body = mustJSON(t, reply)
		case strings.HasPrefix(path, "/api/v1/status/queues/") && status == http.StatusNotFound:
			status, body = http.StatusOK, []byte(`{"error":"Queue not found"}`)
		case strings.HasSuffix(path, "/seek") && strings.Contains(path, "/partitions/") && status == http.StatusNotFound &&
			strings.Contains(string(body), "artition"):
			status, body = http.StatusOK, []byte(`{"error":"Partition not found","success":false}`)
		case strings.HasSuffix(path, "/seek") && strings.Contains(path, "/partitions/") && status == http.StatusOK:
			var seek map[string]any
			require.NoError(t, json.Unmarshal(body, &seek))
			seek["cursorMovedTo"] = "2026-12-01T15:26:46.055Z"
			body = mustJSON(t, seek)
		case counted && status == http.StatusOK:
			var v any
			require.NoError(t, json.Unmarshal(body, &v))
			dropKey(v, "counts")
			if list, ok := v.(map[string]any)["queues"].([]any); ok {
				for _, q := range list {
					for _, k := range []string{"defaultPartitionId", "groups"} {
						delete(q.(map[string]any), k)
					}
				}
			}
			body = mustJSON(t, v)
			qs.mu.Lock()
			if old, ok := qs.counted[path]; ok {
				body = old // the counts of the last refresh (the rest with them: the fake's simplification)
			} else {
				qs.counted[path] = body
			}
			qs.mu.Unlock()
		case path == "/api/v1/dlq" && status == http.StatusOK:
			var page map[string]any
			require.NoError(t, json.Unmarshal(body, &page))
			delete(page, "total")
			for _, m := range page["messages"].([]any) {
				for _, k := range []string{"deadLetterId", "offset"} {
					delete(m.(map[string]any), k)
				}
			}
			body = mustJSON(t, page)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(func() {
		close(stop)
		qs.Close()
	})
	return qs, b
}

// rewriteAcks records an ack request and, for a batch, applies as
// completed each failed or retry item that a completed item of the same
// partition and group follows, and reads every item's group from the
// batch's (queue mode without one), as Queen's server does.
func (qs *queenServer) rewriteAcks(t *testing.T, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(data, &body))
	qs.mu.Lock()
	defer qs.mu.Unlock()
	items, ok := body["acknowledgments"].([]any)
	if !ok {
		qs.singles = append(qs.singles, body)
		r.Body = io.NopCloser(bytes.NewReader(data))
		return
	}
	var batch []map[string]any
	for i, it := range items {
		it := it.(map[string]any)
		// The batch's group stands for every item's (queue mode without it).
		if g, ok := body["consumerGroup"]; ok {
			it["consumerGroup"] = g
		} else {
			delete(it, "consumerGroup")
		}
		batch = append(batch, it)
		if it["status"] != "failed" && it["status"] != "retry" {
			continue
		}
		for _, later := range items[i+1:] {
			later := later.(map[string]any)
			if later["partitionId"] == it["partitionId"] && later["consumerGroup"] == it["consumerGroup"] &&
				(later["status"] == nil || later["status"] == "completed") {
				it["status"] = "completed"
				break
			}
		}
	}
	qs.batches = append(qs.batches, batch)
	r.Body = io.NopCloser(bytes.NewReader(mustJSON(t, body)))
	r.ContentLength = -1
}

// dropKey deletes key from every object in v.
func dropKey(v any, key string) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, key)
		for _, e := range v {
			dropKey(e, key)
		}
	case []any:
		for _, e := range v {
			dropKey(e, key)
		}
	}
}

func writeRaw(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func mustJSON(t *testing.T, v any) []byte {
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

func dialQueen(t *testing.T, opts *queen.Options) (*remote.Client, *queenServer, *queen.Broker) {
	qs, b := newQueenServer(t, opts)
	c, err := remote.Dial(qs.URL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, qs, b
}

func TestQueenServer_PushPopAck(t *testing.T) {
	t.Parallel()
	c, qs, _ := dialQueen(t, nil)
	ctx := context.Background()
	res, err := c.Queue("orders").Partition("p1").Push(ctx, map[string]int{"n": 1}, map[string]int{"n": 2})
	require.NoError(t, err)
	require.Len(t, res, 2)
	for _, r := range res {
		require.Equal(t, queen.PushQueued, r.Status)
		require.NotEmpty(t, r.MessageID, "read from message_id")
		require.NotEmpty(t, r.PartitionID, "read from partition_id")
		require.NotEmpty(t, r.TransactionID, "read from transaction_id")
		require.Equal(t, "orders", r.Queue)
		require.Equal(t, "p1", r.Partition, "not sent: the item's")
		require.Zero(t, r.Offset, "not sent")
	}
	_, err = c.Fetch(ctx, "orders", "p1", 0, 1)
	require.ErrorIs(t, err, queen.ErrUnsupported)
	require.EqualValues(t, 1, qs.health.Load(), "asked once, from /health, by the first call that depends on it: not guessed from the push's 200")
	dup, err := c.Push(ctx, []queen.PushItem{{Queue: "orders", Partition: "p1", TransactionID: res[0].TransactionID}})
	require.NoError(t, err)
	require.Equal(t, queen.PushDuplicate, dup[0].Status)
	require.Equal(t, res[0].MessageID, dup[0].MessageID)

	msgs, err := c.Queue("orders").Batch(10).Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	for i, m := range msgs {
		require.Equal(t, res[i].MessageID, m.ID)
		require.Equal(t, "orders", m.Queue, "not sent: the pop's")
		require.Equal(t, "p1", m.Partition)
		require.NotEmpty(t, m.LeaseID)
		require.Zero(t, m.Offset, "not sent")
		require.Zero(t, m.DeliveryAttempt, "not sent")
		require.EqualValues(t, i+1, m.Data["n"])
	}
	// An empty pop answered 200 {"success":false,...} is an empty result.
	empty, err := c.Queue("orders").Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Empty(t, empty)
	empty, err = c.Queue("nothing").TimeoutMillis(50).Pop(ctx)
	require.NoError(t, err)
	require.Empty(t, empty)

	r, err := c.AckBatch(ctx, []queen.AckItem{
		{TransactionID: msgs[0].TransactionID, PartitionID: msgs[0].PartitionID, LeaseID: msgs[0].LeaseID},
		{TransactionID: msgs[1].TransactionID, PartitionID: msgs[1].PartitionID, LeaseID: msgs[1].LeaseID},
	})
	require.NoError(t, err)
	require.True(t, r[0].Success && r[1].Success)
}

func TestQueenServer_Unsupported(t *testing.T) {
	t.Parallel()
	c, qs, b := dialQueen(t, nil)
	ctx := context.Background()
	_, err := c.Fetch(ctx, "q", queen.DefaultPartition, 0, 10)
	require.ErrorIs(t, err, queen.ErrUnsupported)
	require.EqualValues(t, 1, qs.health.Load(), "asked what the server is, once")
	_, err = c.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`{"n":1}`)}})
	require.NoError(t, err)

	_, err = c.Queue("q").Fetch(ctx, []string{queen.DefaultPartition})
	require.ErrorIs(t, err, queen.ErrUnsupported)
	_, err = c.ParkedMessages(ctx, queen.LetterFilter{})
	require.ErrorIs(t, err, queen.ErrUnsupported)
	_, err = c.ReplayParked(ctx, "01900000-0000-4000-8000-000000000000")
	require.ErrorIs(t, err, queen.ErrUnsupported)
	require.ErrorIs(t, c.DeleteParked(ctx, "01900000-0000-4000-8000-000000000000"), queen.ErrUnsupported)
	_, err = c.ReplayDeadLetter(ctx, "01900000-0000-4000-8000-000000000000")
	require.ErrorIs(t, err, queen.ErrUnsupported)
	require.ErrorIs(t, c.DeleteDeadLetter(ctx, "01900000-0000-4000-8000-000000000000"), queen.ErrUnsupported)
	_, err = c.Queue("q").Group("g").Conflation(true).Wait(false).Pop(ctx)
	require.ErrorIs(t, err, queen.ErrUnsupported, "the server would ignore it and deliver every message")

	msgs, err := c.Queue("q").Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	_, err = c.Ack(ctx, msgs[0], false, queen.AckOptions{Status: queen.AckPark})
	require.ErrorIs(t, err, queen.ErrUnsupported)
	_, err = c.Transaction().Ack(msgs[0], queen.AckPark, queen.AckOptions{}).Commit(ctx)
	require.ErrorIs(t, err, queen.ErrUnsupported)
	// Nothing of that reached the broker: the message is still leased.
	st, err := b.QueueStats(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 1, st.InFlight)
	require.Zero(t, st.Parked)
	require.EqualValues(t, 1, qs.health.Load())
}

func TestQueenServer_DeadLetters(t *testing.T) {
	t.Parallel()
	c, _, _ := dialQueen(t, nil)
	ctx := context.Background()
	_, err := c.Push(ctx, []queen.PushItem{{Queue: "mail", Payload: json.RawMessage(`{"to":"x"}`)}})
	require.NoError(t, err)
	msgs, err := c.Queue("mail").Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	_, err = c.Transaction().Ack(msgs[0], queen.AckDLQ, queen.AckOptions{}).Commit(ctx)
	require.NoError(t, err)
	page, err := c.DeadLetters(ctx, queen.LetterFilter{Queue: "mail"})
	require.NoError(t, err)
	require.Len(t, page.Letters, 1)
	require.Zero(t, page.Total, "not sent")
	l := page.Letters[0]
	require.Empty(t, l.ID, "not sent")
	require.Equal(t, msgs[0].ID, l.MessageID)
	require.Equal(t, msgs[0].TransactionID, l.TransactionID)
	require.JSONEq(t, `{"to":"x"}`, string(l.Payload))
}

// A retry policy counts the attempts this process saw when the server
// does not say (no deliveryAttempt), so it still gives up.
func TestQueenServer_RetryPolicyCountsLocally(t *testing.T) {
	t.Parallel()
	c, _, _ := dialQueen(t, nil)
	ctx := context.Background()
	_, err := c.Push(ctx, []queen.PushItem{{Queue: "flaky", Payload: json.RawMessage(`{"n":1}`)}})
	require.NoError(t, err)
	var mu sync.Mutex
	var got []queen.Settlement
	err = c.Queue("flaky").RetryPolicy(queen.FixedRetry(3, 0)).Each().Limit(3).
		Consume(ctx, func(context.Context, *queen.Message) error { return errors.New("boom") }).
		OnSettled(func(s queen.Settlement) {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		}).Execute(ctx)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, queen.OutcomeRetried, got[0].Outcome)
	require.Equal(t, queen.OutcomeRetried, got[1].Outcome)
	require.Equal(t, queen.OutcomeDeadLettered, got[2].Outcome, "the third attempt was the last")
	page, err := c.DeadLetters(ctx, queen.LetterFilter{Queue: "flaky"})
	require.NoError(t, err)
	require.Len(t, page.Letters, 1)
	require.Equal(t, "boom", page.Letters[0].Error)
}

// Options.Server says what the server is: no /health probe.
func TestQueenServer_Declared(t *testing.T) {
	t.Parallel()
	qs, _ := newQueenServer(t, nil)
	c, err := remote.Dial(qs.URL, &remote.Options{Server: remote.ServerQueen})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Fetch(context.Background(), "q", "p", 0, 1)
	require.ErrorIs(t, err, queen.ErrUnsupported)
	require.Zero(t, qs.health.Load())

	// Told it is ours, the client still reads the route's absence as
	// unsupported, not as an unknown queue.
	ours, err := remote.Dial(qs.URL, &remote.Options{Server: remote.ServerQueenLite})
	require.NoError(t, err)
	defer ours.Close()
	_, err = ours.Fetch(context.Background(), "q", "p", 0, 1)
	require.ErrorIs(t, err, queen.ErrUnsupported)
	require.False(t, errors.Is(err, queen.ErrNotFound))
	_, err = ours.ParkedMessages(context.Background(), queen.LetterFilter{})
	require.ErrorIs(t, err, queen.ErrUnsupported)
	require.Zero(t, qs.health.Load())
}

// A server that does not say whether an ack parked the message (Queen's
// own, or an httpapi older than the parked field) gets Parked false: the
// client does not guess it from the status it sent. Here the client is
// told the server is ours, so it sends the park.
func TestQueenServer_ParkedNotGuessed(t *testing.T) {
	t.Parallel()
	qs, b := newQueenServer(t, nil)
	c, err := remote.Dial(qs.URL, &remote.Options{Server: remote.ServerQueenLite})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	_, err = c.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`{}`)}, {Queue: "q", Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	msgs, err := c.Queue("q").Batch(2).Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	r, err := c.Ack(ctx, msgs[0], false, queen.AckOptions{Status: queen.AckPark})
	require.NoError(t, err)
	require.True(t, r.Success)
	require.False(t, r.Parked, "not said")
	tx, err := c.Transaction().Ack(msgs[1], queen.AckPark, queen.AckOptions{}).Commit(ctx)
	require.NoError(t, err)
	require.False(t, tx.Results[0].Ack.Parked, "not said")
	st, err := b.QueueStats(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Parked, "the broker parked both")
}

// Against a server that sends only Queen's counters, QueueStats and
// ListQueues read them back: Messages is total, InFlight processing, and
// Pending pending + processing, never above Messages even when several
// groups lease the same messages (where the counters cannot say more).
func TestQueenServer_StatsFromQueenCounters(t *testing.T) {
	t.Parallel()
	c, _, b := dialQueen(t, nil)
	ctx := context.Background()
	_, err := b.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`{}`)}, {Queue: "q", Payload: json.RawMessage(`{}`)},
		{Queue: "q", Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	check := func(pending, inFlight int64, why string) {
		t.Helper()
		st, err := c.QueueStats(ctx, "q")
		require.NoError(t, err)
		all, err := c.ListQueues(ctx)
		require.NoError(t, err)
		require.Len(t, all, 1)
		for _, got := range []*queen.QueueStats{st, &all[0]} {
			require.EqualValues(t, 3, got.Messages, why)
			require.Equal(t, pending, got.Pending, why)
			require.Equal(t, inFlight, got.InFlight, why)
		}
		require.EqualValues(t, 3, st.Partitions[0].Messages, why)
		require.Equal(t, pending, st.Partitions[0].Pending, why)
		require.Equal(t, inFlight, st.Partitions[0].InFlight, why)
	}
	pop := func(group string, n int) {
		t.Helper()
		msgs, err := b.Queue("q").Group(group).SubscriptionMode(queen.SubscriptionModeAll).Batch(n).Wait(false).Pop(ctx)
		require.NoError(t, err)
		require.Len(t, msgs, n)
	}
	check(3, 0, "nothing leased")
	pop("g1", 2)
	check(3, 2, "one group: exact")
	pop("g2", 3)
	st, err := b.QueueStats(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Pending)
	require.EqualValues(t, 5, st.InFlight)
	check(3, 5, "two groups over the same messages: Pending bounded by Messages")
}

// Against Queen's server, what only cmd/queen sends falls back: a failed
// push item has no PartitionID and the item's TraceID, a transaction's
// acks no Queue, Partition nor LeaseReleased, ListQueues no
// DefaultPartitionID nor Groups.
func TestQueenServer_FieldsOnlyOursSend(t *testing.T) {
	t.Parallel()
	c, _, _ := dialQueen(t, nil)
	ctx := context.Background()
	_, err := c.ConfigureQueue(ctx, "full", queen.QueueConfig{MaxSize: 1})
	require.NoError(t, err)
	const trace = "5f0c7e4a-1b2c-4d3e-8f90-a1b2c3d4e5f6"
	res, err := c.Push(ctx, []queen.PushItem{
		{Queue: "full", Payload: json.RawMessage(`1`)},
		{Queue: "full", TraceID: trace, Payload: json.RawMessage(`2`)},
	})
	require.NoError(t, err)
	require.ErrorIs(t, res[1].Err, queen.ErrQueueFull)
	require.Empty(t, res[1].PartitionID, "not sent")
	require.Equal(t, trace, res[1].TraceID, "the item's")

	p, err := c.Pop(ctx, queen.PopRequest{Queue: "full", Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(t, err)
	require.Len(t, p.Messages, 1)
	require.False(t, p.Conflating, "not sent: as asked")
	m := p.Messages[0]
	tx, err := c.ExecTransaction(ctx, []queen.TxOp{{Ack: &queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID,
		LeaseID: p.LeaseID, Group: "g"}}})
	require.NoError(t, err)
	a := tx.Results[0].Ack
	require.True(t, a.Success)
	require.Empty(t, a.Queue, "not sent")
	require.Empty(t, a.Partition, "not sent")
	require.False(t, a.LeaseReleased, "not sent")

	qs, err := c.ListQueues(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Empty(t, qs[0].DefaultPartitionID, "not sent")
	require.Equal(t, []string{"g"}, qs[0].Groups, "not sent: read from the group listing")
	st, err := c.QueueStats(ctx, "full")
	require.NoError(t, err)
	require.Equal(t, []string{"g"}, st.Groups, "not sent: read from the group listing")
}
