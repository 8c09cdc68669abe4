package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

var errDisk = errors.New("storage: disk on fire")

// failing is an httpapi.Broker whose every call fails with err.
type failing struct{ err error }

var _ httpapi.Broker = failing{}

func (failing) Now() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }

func (f failing) Push(context.Context, []queen.PushItem) ([]queen.PushResult, error) {
	return nil, f.err
}
func (f failing) Pop(context.Context, queen.PopRequest) (*queen.PopResult, error) { return nil, f.err }
func (f failing) AckBatch(context.Context, []queen.AckItem) ([]queen.AckResult, error) {
	return nil, f.err
}
func (f failing) RenewLease(context.Context, string, time.Duration) (queen.LeaseRenewal, error) {
	return queen.LeaseRenewal{}, f.err
}
func (f failing) ExecTransaction(context.Context, []queen.TxOp) (*queen.TxResult, error) {
	return nil, f.err
}
func (f failing) ConfigureQueue(context.Context, string, queen.QueueConfig) (*queen.QueueInfo, error) {
	return nil, f.err
}
func (f failing) DescribeQueue(context.Context, string) (*queen.QueueInfo, error) { return nil, f.err }
func (f failing) Ping(context.Context) error                                      { return f.err }
func (f failing) DeleteQueue(context.Context, string) (bool, error)               { return false, f.err }
func (f failing) Fetch(context.Context, string, string, int64, int) (*queen.FetchResult, error) {
	return nil, f.err
}
func (f failing) FetchPartitions(context.Context, queen.FetchRequest) ([]queen.PartitionRead, error) {
	return nil, f.err
}
func (f failing) OffsetForTime(context.Context, string, string, time.Time) (queen.TimeOffset, error) {
	return queen.TimeOffset{}, f.err
}
func (f failing) GroupPositions(context.Context, string, []queen.PartitionRef) ([]queen.Position, error) {
	return nil, f.err
}
func (f failing) SetPosition(context.Context, queen.Position) error { return f.err }
func (f failing) DeadLetters(context.Context, queen.LetterFilter) (*queen.LetterPage, error) {
	return nil, f.err
}
func (f failing) ReplayDeadLetter(context.Context, string) (*queen.ReplayResult, error) {
	return nil, f.err
}
func (f failing) DeleteDeadLetter(context.Context, string) error { return f.err }
func (f failing) ParkedMessages(context.Context, queen.LetterFilter) (*queen.LetterPage, error) {
	return nil, f.err
}
func (f failing) ReplayParked(context.Context, string) (*queen.ReplayResult, error) {
	return nil, f.err
}
func (f failing) DeleteParked(context.Context, string) error { return f.err }
func (f failing) QueueStats(context.Context, string) (*queen.QueueStats, error) {
	return nil, f.err
}
func (f failing) ListQueues(context.Context) ([]queen.QueueStats, error) { return nil, f.err }
func (f failing) ListGroups(context.Context, queen.GroupFilter) ([]queen.GroupStats, error) {
	return nil, f.err
}
func (f failing) DeleteGroup(context.Context, string, string, bool) (int, error) { return 0, f.err }
func (f failing) SetMaintenanceMode(context.Context, bool) error                 { return f.err }
func (f failing) MaintenanceMode() bool                                          { return false }
func (f failing) SetGroupSubscription(context.Context, string, time.Time) (int, error) {
	return 0, f.err
}
func (f failing) SeekGroup(context.Context, string, string, queen.SeekOptions) (*queen.SeekResult, error) {
	return nil, f.err
}
func (f failing) SeekPartition(context.Context, string, string, string, queen.SeekOptions) (*queen.SeekResult, error) {
	return nil, f.err
}
func (f failing) ListMessages(context.Context, queen.MessageFilter) (*queen.MessagePage, error) {
	return nil, f.err
}
func (f failing) GetMessage(context.Context, string, string) (*queen.MessageInfo, error) {
	return nil, f.err
}
func (f failing) DeleteMessage(context.Context, string, string) error { return f.err }
func (f failing) RecordTrace(context.Context, queen.TraceEvent) (*queen.TraceEvent, error) {
	return nil, f.err
}
func (f failing) Traces(context.Context, string, string) ([]queen.TraceEvent, error) {
	return nil, f.err
}
func (f failing) TracesByName(context.Context, string, int, int) (*queen.TracePage, error) {
	return nil, f.err
}
func (f failing) TraceNames(context.Context, int, int) (*queen.TraceNamePage, error) {
	return nil, f.err
}
func (f failing) Counters() queen.Counters { return queen.Counters{} }

// The rest of queen.Client, which no route calls.
func (f failing) Ack(context.Context, *queen.Message, bool, queen.AckOptions) (*queen.AckResult, error) {
	return nil, f.err
}
func (f failing) Renew(context.Context, *queen.Message) (time.Time, error) { return time.Time{}, f.err }
func (f failing) Queue(string) *queen.QueueBuilder                         { return nil }
func (f failing) Transaction() *queen.Transaction                          { return nil }
func (f failing) Admin() *queen.Admin                                      { return nil }
func (f failing) Close() error                                             { return nil }

func fakeEnv(t *testing.T, b queen.Client) (*env, *itest.LogBuffer) {
	logs := &itest.LogBuffer{}
	e := &env{t: t, h: httpapi.New(b, &httpapi.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})}
	return e, logs
}

const (
	someUUID = "0190a0b0-1111-4222-8333-444455556666"
	leaseID  = "0190a0b0-1111-7222-8333-444455556666"
)

func TestStorageFailures(t *testing.T) {
	t.Parallel()
	ack := `{"transactionId":"t","partitionId":"` + someUUID + `"}`
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/v1/push", `{"items":[{"queue":"q"}]}`},
		{"GET", "/api/v1/pop/queue/q?wait=true&timeout=10", ""},
		{"GET", "/api/v1/pop/queue/q/partition/p", ""},
		{"GET", "/api/v1/pop?namespace=n", ""},
		{"POST", "/api/v1/ack", ack},
		{"POST", "/api/v1/ack/batch", `{"acknowledgments":[` + ack + `]}`},
		{"POST", "/api/v1/lease/" + leaseID + "/extend", `{}`},
		{"POST", "/api/v1/transaction", `{"operations":[{"type":"ack","transactionId":"t","partitionId":"` + someUUID + `"}]}`},
		{"POST", "/api/v1/configure", `{"queue":"q"}`},
		{"DELETE", "/api/v1/resources/queues/q", ""},
		{"GET", "/api/v1/fetch/queue/q/partition/p", ""},
		{"GET", "/api/v1/resources/overview", ""},
		{"GET", "/api/v1/resources/queues", ""},
		{"GET", "/api/v1/resources/queues/q", ""},
		{"GET", "/api/v1/resources/namespaces", ""},
		{"GET", "/api/v1/resources/tasks", ""},
		{"GET", "/api/v1/status", ""},
		{"POST", "/api/v1/system/maintenance", `{"enabled":true}`},
		{"POST", "/api/v1/system/maintenance/pop", `{"enabled":false}`},
		{"GET", "/api/v1/status/queues", ""},
		{"GET", "/api/v1/status/queues/q", ""},
		{"GET", "/api/v1/status/queues/q/messages", ""},
		{"GET", "/api/v1/messages", ""},
		{"GET", "/api/v1/messages/" + someUUID + "/t", ""},
		{"DELETE", "/api/v1/messages/" + someUUID + "/t", ""},
		{"GET", "/api/v1/dlq", ""},
		{"POST", "/api/v1/dlq/" + someUUID + "/replay", ""},
		{"DELETE", "/api/v1/dlq/" + someUUID, ""},
		{"GET", "/api/v1/parked", ""},
		{"POST", "/api/v1/parked/" + someUUID + "/replay", ""},
		{"DELETE", "/api/v1/parked/" + someUUID, ""},
		{"GET", "/api/v1/consumer-groups", ""},
		{"GET", "/api/v1/consumer-groups/lagging", ""},
		{"GET", "/api/v1/consumer-groups/g", ""},
		{"DELETE", "/api/v1/consumer-groups/g", ""},
		{"DELETE", "/api/v1/consumer-groups/g/queues/q", ""},
		{"POST", "/api/v1/consumer-groups/g/subscription", `{"subscriptionTimestamp":"2026-01-01T00:00:00Z"}`},
		{"POST", "/api/v1/consumer-groups/g/queues/q/seek", `{"toEnd":true}`},
		{"POST", "/api/v1/fetch", `{"entries":[{"queue":"q","offset":0}]}`},
		{"POST", "/api/v1/fetch/offsets", `{"entries":[{"queue":"q","timestamp":0}]}`},
		{"POST", "/api/v1/consumer-groups/positions", `{"consumerGroup":"g"}`},
		{"POST", "/api/v1/consumer-groups/g/queues/q/partitions/p/seek", ""},
		{"POST", "/api/v1/traces", `{"transactionId":"t","partitionId":"` + someUUID + `","data":{}}`},
		{"GET", "/api/v1/traces/" + someUUID + "/t", ""},
		{"GET", "/api/v1/traces/by-name/n", ""},
		{"GET", "/api/v1/traces/names", ""},
		{"GET", "/metrics/prometheus", ""},
	} {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			t.Parallel()
			e, logs := fakeEnv(t, failing{fmt.Errorf("queen: write: %w", errDisk)})
			var body any
			if r.body != "" {
				body = r.body
			}
			require.Equal(t, map[string]any{"error": "internal error"}, e.obj(r.method, r.path, body, http.StatusInternalServerError))
			require.Contains(t, logs.String(), "disk on fire", "the detail is logged")
			path, _, _ := strings.Cut(r.path, "?")
			require.Contains(t, logs.String(), "path="+path)
		})
	}

	t.Run("health answers 503", func(t *testing.T) {
		t.Parallel()
		e, logs := fakeEnv(t, failing{errDisk})
		res := e.obj("GET", "/health", nil, http.StatusServiceUnavailable)
		require.Equal(t, "unhealthy", res["status"])
		require.Contains(t, logs.String(), "disk on fire")
		require.Equal(t, http.StatusOK, e.do("GET", "/metrics", nil).Code)
	})
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    error
		status int
		msg    string
		logged bool
	}{
		{queen.ErrNotFound, 404, "not found", false},
		{fmt.Errorf("queen: x: %w", queen.ErrTooLarge), 413, "request too large", false},
		{queen.ErrQueueFull, 409, "queue full", false},
		{queen.ErrLeaseExpired, 409, "Invalid or expired lease", false},
		{queen.ErrClosed, 503, "broker unavailable", false},
		{fmt.Errorf("%w: storage failure: %v", queen.ErrClosed, errDisk), 503, "broker unavailable", true},
		{context.Canceled, 503, "request cancelled", false},
		{&queen.ArgumentError{Field: "X", Reason: "is odd"}, 400, "invalid X: is odd", false},
		{fmt.Errorf("%w: bad", queen.ErrInvalidArgument), 400, "invalid argument: bad", false},
		{errDisk, 500, "internal error", true},
	} {
		e, logs := fakeEnv(t, failing{c.err})
		require.Equal(t, map[string]any{"error": c.msg}, e.obj("GET", "/api/v1/resources/queues", nil, c.status), "%v", c.err)
		require.Equal(t, c.logged, strings.Contains(logs.String(), "disk on fire"), "%v", c.err)
	}
}

// itemFailing returns per-item storage failures and panics on Pop.
type itemFailing struct{ failing }

func (itemFailing) Push(_ context.Context, items []queen.PushItem) ([]queen.PushResult, error) {
	return []queen.PushResult{{Status: queen.PushFailed, Queue: items[0].Queue, TransactionID: "t", Err: errDisk}}, nil
}

func (itemFailing) AckBatch(context.Context, []queen.AckItem) ([]queen.AckResult, error) {
	return []queen.AckResult{{TransactionID: "t", Err: errDisk}}, nil
}

func (itemFailing) Pop(context.Context, queen.PopRequest) (*queen.PopResult, error) {
	panic("boom")
}

func TestItemFailures(t *testing.T) {
	t.Parallel()
	e, logs := fakeEnv(t, itemFailing{failing{errDisk}})
	res := e.arr("POST", "/api/v1/push", `{"items":[{"queue":"q"}]}`, http.StatusCreated)
	require.Equal(t, "failed", res[0].(map[string]any)["status"])
	require.Equal(t, "internal error", res[0].(map[string]any)["error"])
	res = e.arr("POST", "/api/v1/ack", `{"transactionId":"t","partitionId":"`+someUUID+`"}`, http.StatusOK)
	require.Equal(t, "internal error", res[0].(map[string]any)["error"])
	require.Equal(t, 2, strings.Count(logs.String(), "disk on fire"))

	require.Equal(t, map[string]any{"error": "internal error"}, e.obj("GET", "/api/v1/pop/queue/q", nil, http.StatusInternalServerError))
	require.Contains(t, logs.String(), "boom")
}

// TestFakeShapes checks the JSON of values a real broker rarely produces.
func TestFakeShapes(t *testing.T) {
	t.Parallel()
	e, _ := fakeEnv(t, emptyBroker{failing{errDisk}})
	rec := e.do("GET", "/api/v1/pop/queue/q", nil)
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Zero(t, rec.Body.Len())
	var v []any
	require.NoError(t, json.Unmarshal(e.do("POST", "/api/v1/push", `{"items":[]}`).Body.Bytes(), &v))
	require.Empty(t, v)
}

// emptyBroker pops nothing.
type emptyBroker struct{ failing }

func (emptyBroker) Pop(context.Context, queen.PopRequest) (*queen.PopResult, error) {
	return &queen.PopResult{Messages: []*queen.Message{}}, nil
}

func TestShutdownEndsLongPolls(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	e := setup(t, nil, &httpapi.Options{Shutdown: stop})
	done := make(chan int, 2)
	for range 2 {
		go func() {
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pop/queue/idle?wait=true&timeout=60000", nil))
			done <- rec.Code
		}()
	}
	itest.AwaitWaiting(t, e.b, 2)
	close(stop)
	for range 2 {
		select {
		case code := <-done:
			require.Equal(t, http.StatusNoContent, code)
		case <-time.After(10 * time.Second):
			t.Fatal("shutdown did not end the long-poll")
		}
	}
	// Later pops do not wait.
	start := time.Now()
	e.call("GET", "/api/v1/pop/queue/idle?wait=true&timeout=60000", nil, http.StatusNoContent)
	require.Less(t, time.Since(start), 5*time.Second)
}

// recordingPop records the PopRequest the handler built and pops nothing.
type recordingPop struct {
	failing
	got *queen.PopRequest
}

func (r recordingPop) Pop(_ context.Context, req queen.PopRequest) (*queen.PopResult, error) {
	*r.got = req
	return &queen.PopResult{Messages: []*queen.Message{}}, nil
}

// The wire clamps a pop's batch, partitions and timeout to the broker's
// caps, as Queen's contract says (A12), where a Go caller is refused; the
// defaults are Queen's, and the values Queen's clients send pass as they
// are.
func TestPop_WireClampsToTheCaps(t *testing.T) {
	t.Parallel()
	var got queen.PopRequest
	e, _ := fakeEnv(t, recordingPop{got: &got})
	for _, c := range []struct {
		query       string
		batch, part int
		timeout     time.Duration
	}{
		{"", 1, 1, 30 * time.Second},
		{"?batch=1&wait=false&timeout=30000", 1, 1, 30 * time.Second}, // Queen's Go client's Pop
		{"?batch=1&wait=true&timeout=30000", 1, 1, 30 * time.Second},  // its consume loop
		{"?batch=10000&partitions=64&wait=true&timeout=60000", 10000, 64, 60 * time.Second},
		{"?batch=100000000&partitions=1000&wait=true&timeout=600000", 10000, 64, 60 * time.Second},
		{"?batch=0&partitions=0", 1, 1, 30 * time.Second},
	} {
		got = queen.PopRequest{}
		e.call("GET", "/api/v1/pop/queue/q"+c.query, nil, http.StatusNoContent)
		require.Equal(t, c.batch, got.Batch, c.query)
		require.Equal(t, c.part, got.Partitions, c.query)
		require.Equal(t, c.timeout, got.Timeout, c.query)
	}
	// What has no cap in Queen's contract is refused with the limit.
	e.fails("GET", "/api/v1/pop/queue/q?leaseSeconds=31536001", nil, http.StatusBadRequest, "leaseSeconds must be at most 31536000")
	e.fails("GET", "/api/v1/pop/queue/q?batch=-1", nil, http.StatusBadRequest, "batch must not be negative")
}
