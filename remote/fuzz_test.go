package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// answerServer answers every request with the status and body set last.
type answerServer struct {
	mu     sync.Mutex
	status int
	body   []byte
}

func (s *answerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	status, body := s.status, s.body
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusNoContent || status == http.StatusNotModified {
		w.WriteHeader(status)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// fuzzStatuses are the statuses the fake server answers with.
var fuzzStatuses = []int{200, 201, 202, 204, 206, 301, 400, 401, 403, 404, 409, 410, 413, 422, 429, 500, 502, 503, 504}

// fuzzCalls are client calls, each returning its error and whether its
// result is usable (a nil pointer result with a nil error is a defect).
var fuzzCalls = []func(ctx context.Context, c *remote.Client) (ok bool, err error){
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`{"a":1}`)}, {Queue: "q", Partition: "p", TransactionID: "t"}})
		return len(r) == 2, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.Pop(ctx, queen.PopRequest{Queue: "q", Group: "g", Batch: 3})
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.Pop(ctx, queen.PopRequest{Queue: "q", Partition: "p", Batch: 1})
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.AckBatch(ctx, []queen.AckItem{
			{TransactionID: "a", PartitionID: "p", LeaseID: "l", Status: queen.AckCompleted},
			{TransactionID: "b", PartitionID: "p", LeaseID: "l", Status: queen.AckFailed, Error: "boom"},
			{TransactionID: "c", PartitionID: "p", LeaseID: "l", Status: queen.AckCompleted},
		})
		return len(r) == 3, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		_, err := c.RenewLease(ctx, "lease", time.Minute)
		return true, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.DescribeQueue(ctx, "q")
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.QueueStats(ctx, "q")
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		_, err := c.ListQueues(ctx)
		return true, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		_, err := c.ListGroups(ctx, queen.GroupFilter{})
		return true, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.ConfigureQueue(ctx, "q", queen.DefaultQueueConfig())
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		_, err := c.DeleteQueue(ctx, "q")
		return true, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.Fetch(ctx, "q", "p", 0, 10)
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.SeekGroup(ctx, "g", "q", queen.SeekOptions{ToEnd: true})
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.SeekPartition(ctx, "g", "q", "p", queen.SeekOptions{Timestamp: time.Unix(2e9, 0)})
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		_, err := c.DeleteGroup(ctx, "g", "q", true)
		return true, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		_, err := c.SetGroupSubscription(ctx, "g", time.Unix(2e9, 0))
		return true, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.DeadLetters(ctx, queen.LetterFilter{Queue: "q", Limit: 5})
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.ParkedMessages(ctx, queen.LetterFilter{Limit: 5})
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.ReplayDeadLetter(ctx, "id")
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		return true, c.DeleteParked(ctx, "id")
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		r, err := c.ExecTransaction(ctx, []queen.TxOp{
			{Push: &queen.PushItem{Queue: "q", Payload: json.RawMessage(`1`)}},
			{Ack: &queen.AckItem{TransactionID: "a", PartitionID: "p", LeaseID: "l", Status: queen.AckCompleted}},
		})
		return r != nil, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		_, err := c.MaintenanceMode(ctx)
		return true, err
	},
	func(ctx context.Context, c *remote.Client) (bool, error) {
		_, err := c.Backup(ctx, io.Discard, 0)
		return true, err
	},
}

// documented reports whether err is one of the errors the client's calls
// are documented to return: a sentinel of package queen or one of the
// typed errors.
func documented(err error) bool {
	for _, s := range []error{queen.ErrClosed, queen.ErrNotFound, queen.ErrGroupNotFound, queen.ErrLeaseExpired,
		queen.ErrAlreadySettled, queen.ErrWrongGroup, queen.ErrInvalidArgument, queen.ErrQueueFull, queen.ErrTooLarge,
		queen.ErrUnsupported, queen.ErrUnavailable, queen.ErrTransactionAborted, queen.ErrCorruptBackup} {
		if errors.Is(err, s) {
			return true
		}
	}
	var te *remote.TransportError
	var se *remote.ServerError
	var ae *queen.ArgumentError
	return errors.As(err, &te) || errors.As(err, &se) || errors.As(err, &ae)
}

// FuzzAnswers has every client call read fuzzed answers (any status, any
// body) from a server of either dialect. For every answer: no panic, an
// answer within the call's time, an error the package documents, or a
// usable result.
func FuzzAnswers(f *testing.F) {
	for _, s := range []struct {
		call, status uint8
		queen        bool
		body         string
	}{
		{0, 1, false, `[{"transactionId":"x","status":"queued","messageId":"m","partitionId":"p","offset":1},{"status":"duplicate"}]`},
		{0, 1, true, `[{"transaction_id":"x","status":"queued"}]`},
		{1, 0, false, `{"messages":[{"transactionId":"t","partitionId":"p","leaseId":"l","data":{"a":1},"createdAt":"2026-01-01T00:00:00Z"}]}`},
		{1, 0, true, `{"success":true,"messages":[{"id":"i","transactionId":"t","partitionId":"p","data":null}]}`},
		{2, 3, false, ``},
		{3, 0, false, `[{"transactionId":"a","success":true},{"transactionId":"b","success":false,"error":"lease expired"}]`},
		{3, 0, true, `{"processed":3,"results":[{"transactionId":"a","status":"completed"}]}`},
		{4, 0, false, `{"leaseExpiresAt":"not a time"}`},
		{5, 0, true, `{"error":"Queue not found"}`},
		{6, 0, false, `{"queue":{"name":"q"},"totals":{"pending":-1}}`},
		{7, 0, false, `{"queues":[{"name":"q","partitions":"x"}]}`},
		{8, 0, true, `[{"name":"g","queueName":"q","members":1}]`},
		{9, 0, false, `{"configured":true,"options":{"leaseTime":-5}}`},
		{11, 0, false, `{"messages":[{"offset":9007199254740993}],"nextOffset":-1}`},
		{12, 0, true, `{"success":true,"partitionsUpdated":"two"}`},
		{13, 0, true, `{"success":false,"error":"Partition not found"}`},
		{13, 0, false, `{"cursorMovedTo":"2026-01-01T00:00:00Z"}`},
		{16, 0, false, `{"messages":[{"id":"x","retryCount":-3}],"total":1e400}`},
		{20, 0, true, `{"success":false,"error":"canceling statement due to statement timeout"}`},
		{20, 0, false, `{"results":[{"push":null}]}`},
		{21, 0, true, `{"maintenanceMode":"yes"}`},
		{22, 0, false, `QNBK garbage`},
		{1, 14, false, `{"error":"slow down"}`},
		{0, 17, false, `{"error":"broker unavailable"}`},
		{0, 6, false, `{"error":"invalid Items[0].Queue: must not be empty"}`},
		{0, 0, false, `{`},
		{0, 0, false, `null`},
		{1, 0, false, `[]`},
	} {
		f.Add(s.call, s.status, s.queen, []byte(s.body))
	}
	srv := &answerServer{}
	ts := httptest.NewServer(srv)
	f.Cleanup(ts.Close)
	f.Fuzz(func(t *testing.T, call, status uint8, queenDialect bool, body []byte) {
		kind := remote.ServerQueenLite
		if queenDialect {
			kind = remote.ServerQueen
		}
		c, err := remote.Dial(ts.URL, &remote.Options{Server: kind, Retries: -1, RequestTimeout: 2 * time.Second})
		require.NoError(t, err)
		defer c.Close()
		srv.mu.Lock()
		srv.status, srv.body = fuzzStatuses[int(status)%len(fuzzStatuses)], body
		srv.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		i := int(call) % len(fuzzCalls)
		ok, err := fuzzCalls[i](ctx, c)
		require.NoError(t, ctx.Err(), "call %d did not return within 5 s", i)
		if err != nil {
			require.True(t, documented(err), "call %d, %d %q: an undocumented error %T: %v", i, srv.status, body, err, err)
			return
		}
		require.True(t, ok, "call %d, %d %q: no error and no result", i, srv.status, body)
	})
}
