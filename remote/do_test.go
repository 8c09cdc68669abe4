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
	"github.com/queenlite/queen/httpapi"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
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
func TestRetry_500LikeOther5xx(t *testing.T) {
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

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A request that failed to connect was not sent, so even a call the
// client does not repeat after a failure past sending (an ack) is tried
// again, whatever the dial error is.
func TestRetry_UnsentRequests(t *testing.T) {
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

// sleeps records the waits a client's retries would make (see
// remote.SetSleep).
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

func (s *sleeps) list() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// A call that fails on one server (a 5xx, a 503 with a Retry-After, a
// connection closed under it, a connection refused) is retried at once on
// the other, healthy one: no back-off is waited, however long it is.
func TestRetry_OnAnotherHealthyServerAtOnce(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	for _, c := range []struct {
		name   string
		breaks func(f *front)
		call   func(ctx context.Context, c *remote.Client) error
	}{
		{"500", func(f *front) { f.status.Store(http.StatusInternalServerError) }, ping},
		{"503", func(f *front) { f.status.Store(http.StatusServiceUnavailable) }, ping},
		{"503 with Retry-After", func(f *front) {
			f.status.Store(http.StatusServiceUnavailable)
			f.retryAfter.Store("120")
		}, ping},
		{"connection closed", func(f *front) { f.dead.Store(true) }, ping},
		{"connection refused", (*front).kill, ping},
		{"connection refused, a push", (*front).kill, func(ctx context.Context, c *remote.Client) error {
			// Two partitions: no affinity, the first server first.
			_, err := c.Push(ctx, []queen.PushItem{{Queue: "q", Partition: "a", Payload: []byte(`1`)},
				{Queue: "q", Partition: "b", Payload: []byte(`2`)}})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := itest.NewClock()
			fs, cl := fronts(t, httpapi.New(b, nil), 2, &remote.Options{Clock: clock, Server: remote.ServerQueenLite,
				RetryBackoff: time.Hour, ReadmitBackoff: time.Hour})
			var waits sleeps
			remote.SetSleep(cl, waits.add)
			c.breaks(fs[0])
			require.NoError(t, c.call(context.Background(), cl), "the other server took the retry")
			require.Empty(t, waits.list(), "a retry on a healthy server waits nothing")
			require.NotZero(t, fs[1].calls.Load())
			st := cl.Servers()
			require.False(t, st[0].Healthy, "the call went to the first server first: %+v", st[0])
			require.True(t, st[1].Healthy)
		})
	}
}

func ping(ctx context.Context, c *remote.Client) error { return c.Ping(ctx) }

// A 503's Retry-After keeps a call waiting and its server off the ring for
// at most 5 minutes (remote's doc, "Several servers"): a day's header, in
// seconds or as a date, does not keep a server out for a day, nor makes a
// call whose ctx has 10 minutes left give up at once.
func TestRetry_RetryAfterIsCapped(t *testing.T) {
	t.Parallel()
	const cap_ = 5 * time.Minute
	b := queentest.NewBroker(t, nil)
	aDay := map[string]func(now time.Time) string{
		"seconds": func(time.Time) string { return "86400" },
		"date":    func(now time.Time) string { return now.Add(24 * time.Hour).UTC().Format(http.TimeFormat) },
	}
	for form, header := range aDay {
		t.Run("one server, "+form, func(t *testing.T) {
			t.Parallel()
			clock := itest.NewClock()
			fs, c := fronts(t, httpapi.New(b, nil), 1, &remote.Options{Clock: clock, Server: remote.ServerQueenLite, Retries: 1})
			fs[0].status.Store(http.StatusServiceUnavailable)
			fs[0].retryAfter.Store(header(clock.Now()))
			var waits sleeps
			var readmit time.Duration
			remote.SetSleep(c, func(d time.Duration) {
				waits.add(d)
				readmit = c.Servers()[0].ReadmitAt.Sub(clock.Now())
				fs[0].status.Store(0) // back when the wait is over
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			require.NoError(t, c.Ping(ctx), "waited the capped Retry-After, within its ctx, and tried again")
			require.Equal(t, []time.Duration{cap_}, waits.list())
			require.Equal(t, cap_, readmit, "off the ring for the capped Retry-After")
			require.Equal(t, int32(2), fs[0].calls.Load())
		})
		t.Run("two servers, "+form, func(t *testing.T) {
			t.Parallel()
			clock := itest.NewClock()
			fs, c := fronts(t, httpapi.New(b, nil), 2, &remote.Options{Clock: clock, Server: remote.ServerQueenLite})
			fs[0].status.Store(http.StatusServiceUnavailable)
			fs[0].retryAfter.Store(header(clock.Now()))
			var waits sleeps
			remote.SetSleep(c, waits.add)
			require.NoError(t, c.Ping(context.Background()))
			require.Empty(t, waits.list())
			st := c.Servers()[0]
			require.False(t, st.Healthy)
			require.Equal(t, cap_, st.ReadmitAt.Sub(clock.Now()), "a day's Retry-After keeps it out 5 minutes")
			fs[0].status.Store(0)
			clock.Advance(cap_ - time.Second)
			require.False(t, c.Servers()[0].Healthy)
			clock.Advance(time.Second)
			require.True(t, c.Servers()[0].Healthy, "back on the ring after 5 minutes")
		})
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	f := &flaky{next: httpapi.New(b, nil)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := remote.Dial(srv.URL, &remote.Options{Retries: 3, RetryBackoff: time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()

	// A push is safe to repeat: retried through two 502s.
	f.path = "/api/v1/push"
	f.n.Store(2)
	res, err := c.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`{"n":1}`)}})
	require.NoError(t, err)
	require.Equal(t, queen.PushQueued, res[0].Status)
	require.NotEmpty(t, res[0].TransactionID, "a transactionId was given before the first try")
	require.EqualValues(t, 3, f.calls.Load())

	// Past the retries, the server's error comes back.
	f.calls.Store(0)
	f.n.Store(10)
	_, err = c.Push(ctx, []queen.PushItem{{Queue: "q"}})
	var se *remote.ServerError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusBadGateway, se.StatusCode)
	require.Equal(t, "upstream restarting", se.Message)
	require.ErrorIs(t, err, queen.ErrUnavailable, "a 5xx: try again later")
	require.EqualValues(t, 4, f.calls.Load())

	// An ack is not repeated.
	msgs, err := c.Queue("q").Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	f.path, f.calls = "/api/v1/ack", atomic.Int32{}
	f.n.Store(1)
	_, err = c.Ack(ctx, msgs[0], true, queen.AckOptions{})
	require.ErrorAs(t, err, &se)
	require.EqualValues(t, 1, f.calls.Load())
	_, err = c.Ack(ctx, msgs[0], true, queen.AckOptions{})
	require.NoError(t, err)
}
