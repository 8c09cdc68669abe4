package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// scripted is a server that answers each request of a path with the next
// of the answers the test scripted for it (the last one again once they
// run out), and counts the requests.
type scripted struct {
	mu      sync.Mutex
	answers map[string][]scriptedAnswer
	calls   map[string]int
}

type scriptedAnswer struct {
	status int
	body   string
}

func newScripted(t *testing.T) (*scripted, *remote.Client) {
	s := &scripted{answers: map[string][]scriptedAnswer{}, calls: map[string]int{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := remote.Dial(srv.URL, &remote.Options{Retries: 3, RetryBackoff: time.Microsecond, Server: remote.ServerQueenLite})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return s, c
}

// script sets the answers of path.
func (s *scripted) script(path string, answers ...scriptedAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[path], s.calls[path] = answers, 0
}

func (s *scripted) callsOf(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	as := s.answers[r.URL.Path]
	n := s.calls[r.URL.Path]
	s.calls[r.URL.Path]++
	s.mu.Unlock()
	a := scriptedAnswer{http.StatusNotFound, `{"error":"not scripted"}`}
	if len(as) > 0 {
		a = as[min(n, len(as)-1)]
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = w.Write([]byte(a.body))
}

const pushAnswer = `[{"status":"queued","queue":"q","partition":"Default","partitionId":"00000000-0000-8000-8000-000000000001","transactionId":"t","messageId":"0190e4a4-0b1c-7a3e-8f00-5d1a2b3c4d5e","offset":0}]`

// A 500 is retried like a 502 or a 503 on the calls the client may
// repeat, and not on the others; a 501 is never retried.
func TestBehaviour_Retries500LikeOther5xx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newScripted(t)
	for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable} {
		fail := scriptedAnswer{status, `{"error":"storage hiccup"}`}
		s.script("/api/v1/push", fail, fail, scriptedAnswer{http.StatusCreated, pushAnswer})
		res, err := c.Push(ctx, []queen.PushItem{{Queue: "q", TransactionID: "t", Payload: json.RawMessage(`1`)}})
		require.NoError(t, err, "status %d", status)
		require.Equal(t, queen.PushQueued, res[0].Status)
		require.Equal(t, 3, s.callsOf("/api/v1/push"), "status %d: two failures, then the answer", status)

		// Past the retries, the last answer's error comes back.
		s.script("/api/v1/push", fail)
		_, err = c.Push(ctx, []queen.PushItem{{Queue: "q", TransactionID: "t"}})
		var se *remote.ServerError
		require.ErrorAs(t, err, &se)
		require.Equal(t, status, se.StatusCode)
		require.ErrorIs(t, err, queen.ErrUnavailable)
		require.Equal(t, 4, s.callsOf("/api/v1/push"), "status %d: one try and three retries", status)

		// An ack is not repeated.
		s.script("/api/v1/ack", fail, scriptedAnswer{http.StatusOK, `[{"transactionId":"t","success":true}]`})
		_, err = c.AckBatch(ctx, []queen.AckItem{{TransactionID: "t", PartitionID: "00000000-0000-8000-8000-000000000001"}})
		require.ErrorAs(t, err, &se)
		require.Equal(t, status, se.StatusCode)
		require.Equal(t, 1, s.callsOf("/api/v1/ack"))
	}
	s.script("/api/v1/push", scriptedAnswer{http.StatusNotImplemented, `{"error":"not implemented"}`}, scriptedAnswer{http.StatusCreated, pushAnswer})
	_, err := c.Push(ctx, []queen.PushItem{{Queue: "q", TransactionID: "t"}})
	var se *remote.ServerError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusNotImplemented, se.StatusCode)
	require.Equal(t, 1, s.callsOf("/api/v1/push"), "a 501 will not change")
}

// A refusal that names a lease maps to queen.ErrLeaseExpired whatever the
// case of its text: in an ack item's result and in a 409 answer.
func TestBehaviour_LeaseErrorsWhateverTheirCase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newScripted(t)
	item := queen.AckItem{TransactionID: "t", PartitionID: "00000000-0000-8000-8000-000000000001", LeaseID: "0190e4a4-0b1c-7a3e-8f00-5d1a2b3c4d60"}
	for _, text := range []string{"Lease expired", "lease expired", "LEASE EXPIRED", "Invalid Lease", "leaseId no longer holds the message"} {
		s.script("/api/v1/ack", scriptedAnswer{http.StatusOK, `[{"transactionId":"t","success":false,"error":` + quote(text) + `}]`})
		res, err := c.AckBatch(ctx, []queen.AckItem{item})
		require.NoError(t, err)
		require.False(t, res[0].Success)
		require.ErrorIs(t, res[0].Err, queen.ErrLeaseExpired, "item error %q", text)

		s.script("/api/v1/ack", scriptedAnswer{http.StatusConflict, `{"error":` + quote(text) + `}`})
		_, err = c.AckBatch(ctx, []queen.AckItem{item})
		require.ErrorIs(t, err, queen.ErrLeaseExpired, "409 %q", text)
	}
	// A text that names no lease is not a lease error.
	s.script("/api/v1/ack", scriptedAnswer{http.StatusOK, `[{"transactionId":"t","success":false,"error":"Message already settled"}]`})
	res, err := c.AckBatch(ctx, []queen.AckItem{item})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, queen.ErrAlreadySettled)
	require.NotErrorIs(t, res[0].Err, queen.ErrLeaseExpired)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// countingTransport counts the requests handed to it and passes them to
// next.
type countingTransport struct {
	n    atomic.Int32
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// A closed client sends nothing: every call is queen.ErrClosed before it
// reaches the transport.
func TestBehaviour_ClosedClientSendsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &scripted{answers: map[string][]scriptedAnswer{}, calls: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ct := &countingTransport{next: http.DefaultTransport}
	c, err := remote.Dial(srv.URL, &remote.Options{Transport: ct, Server: remote.ServerQueenLite})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = c.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
	require.ErrorIs(t, err, queen.ErrClosed)
	_, err = c.AckBatch(ctx, []queen.AckItem{{TransactionID: "t", PartitionID: "00000000-0000-8000-8000-000000000001"}})
	require.ErrorIs(t, err, queen.ErrClosed)
	_, err = c.DescribeQueue(ctx, "q")
	require.ErrorIs(t, err, queen.ErrClosed)
	require.Zero(t, ct.n.Load(), "nothing was sent")
}

// A request that failed to connect was not sent, so even a call the
// client does not repeat after a failure past sending (an ack) is tried
// again, whatever the dial error is.
func TestBehaviour_UnsentRequestsAreRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var dials atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("no route to the broker")}
	}}
	c, err := remote.Dial("http://queen.test", &remote.Options{Transport: tr, Retries: 2, RetryBackoff: time.Microsecond, Server: remote.ServerQueenLite})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.AckBatch(ctx, []queen.AckItem{{TransactionID: "t", PartitionID: "00000000-0000-8000-8000-000000000001"}})
	var te *remote.TransportError
	require.ErrorAs(t, err, &te)
	require.EqualValues(t, 3, dials.Load(), "one try and two retries")
}
