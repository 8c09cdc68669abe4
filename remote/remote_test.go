package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// within bounds every wait; reaching it is a failure.
const within = 10 * time.Second

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestDial_Validates(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "queen:6632", "ftp://h", "http://", "http://h/?x=1", "http://h/#f", "http://h:bad"} {
		_, err := remote.Dial(u, nil)
		var ae *queen.ArgumentError
		require.ErrorAs(t, err, &ae, u)
		require.Equal(t, "baseURL", ae.Field)
	}
	_, err := remote.Dial("http://h", &remote.Options{RequestTimeout: -1})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = remote.Dial("http://h", &remote.Options{Server: 9})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	c, err := remote.Dial("http://h:6632/queen/", nil)
	require.NoError(t, err)
	require.Equal(t, "http://h:6632/queen", c.BaseURL())
	require.NoError(t, c.Close())
}

// An unreachable server fails the call within the caller's ctx, with a
// transport error naming the cause, never an empty result.
func TestUnreachable_FailsFast(t *testing.T) {
	t.Parallel()
	c, err := remote.Dial("http://"+freeAddr(t), nil)
	require.NoError(t, err)
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Push(ctx, []queen.PushItem{{Queue: "q"}})
	require.Less(t, time.Since(start), 2*time.Second)
	var te *remote.TransportError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "push", te.Op)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)

	// Without a deadline, the retries run out and the transport error
	// comes back. A refused connection is retried for every call, an ack
	// included: nothing reached the server.
	logs := &itest.LogBuffer{}
	c2, err := remote.Dial("http://"+freeAddr(t), &remote.Options{Retries: 2, RetryBackoff: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.AckBatch(context.Background(), []queen.AckItem{{TransactionID: "t", PartitionID: "p"}})
	require.ErrorAs(t, err, &te)
	require.Equal(t, 2, strings.Count(logs.String(), "retrying"), logs.String())
	msgs, err := c2.Queue("q").Wait(false).Pop(context.Background())
	require.Nil(t, msgs)
	require.ErrorAs(t, err, &te)
	require.Equal(t, "pop", te.Op)
	require.ErrorIs(t, err, queen.ErrUnavailable)

	// A consume loop outlives the outage: it pops again until its ctx ends.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- c2.Queue("q").Consume(ctx, func(context.Context, *queen.Message) error { return nil }).Execute(ctx)
	}()
	require.Eventually(t, func() bool { return strings.Count(logs.String(), "popping again") >= 2 }, 20*time.Second, time.Millisecond, logs.String())
	select {
	case err := <-done:
		t.Fatalf("the consume loop stopped: %v", err)
	default:
	}
	cancel()
	require.NoError(t, <-done, "stopped by its ctx")
}

// flaky answers 503 to the first n requests of the path, then passes
// them to next, counting every request.
type flaky struct {
	next  http.Handler
	path  string
	n     atomic.Int32
	calls atomic.Int32
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == f.path {
		f.calls.Add(1)
		if f.n.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(`{"error":"upstream restarting"}`))
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

func TestErrClosed(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	h := httpapi.New(b, nil)
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/v1/pop/") {
			arrived <- struct{}{}
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := remote.Dial(srv.URL, nil)
	require.NoError(t, err)
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Queue("q").TimeoutMillis(30000).Pop(ctx)
		errc <- err
	}()
	select {
	case <-arrived:
	case <-time.After(within):
		t.Fatal("the pop did not reach the server")
	}
	require.NoError(t, c.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, queen.ErrClosed, "Close aborts the request in flight")
	case <-time.After(within):
		t.Fatal("the waiting pop outlived Close")
	}
	_, err = c.Push(ctx, []queen.PushItem{{Queue: "q"}})
	require.ErrorIs(t, err, queen.ErrClosed)
	_, err = c.DescribeQueue(ctx, "q")
	require.ErrorIs(t, err, queen.ErrClosed)
	require.ErrorIs(t, c.Ping(ctx), queen.ErrClosed)
	require.NoError(t, c.Close())
}

// A server whose broker has closed answers 503; the client reports
// ErrClosed.
func TestServerBrokerClosed(t *testing.T) {
	t.Parallel()
	c, b := served(t, nil, nil)
	require.NoError(t, b.Close())
	_, err := c.Push(context.Background(), []queen.PushItem{{Queue: "q"}})
	require.ErrorIs(t, err, queen.ErrClosed)
	var se *remote.ServerError
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, c.Ping(context.Background()), queen.ErrClosed)
}

func TestToken(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	h := httpapi.New(b, &httpapi.Options{Authorize: func(r *http.Request, _ httpapi.Access) error {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			return httpapi.ErrUnauthorized
		}
		return nil
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()

	bad, err := remote.Dial(srv.URL, &remote.Options{Token: "wrong"})
	require.NoError(t, err)
	defer bad.Close()
	_, err = bad.Push(ctx, []queen.PushItem{{Queue: "q"}})
	var se *remote.ServerError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusUnauthorized, se.StatusCode)
	require.NotErrorIs(t, err, queen.ErrUnavailable, "a 4xx will not go away by trying again")

	good, err := remote.Dial(srv.URL, &remote.Options{Token: "s3cret"})
	require.NoError(t, err)
	defer good.Close()
	_, err = good.Push(ctx, []queen.PushItem{{Queue: "q"}})
	require.NoError(t, err)
}

// A long poll outlives RequestTimeout: its deadline is the wait plus the
// timeout, so a pop that waits its whole time out comes back empty, not
// cut short with an error.
func TestLongPollDeadline(t *testing.T) {
	t.Parallel()
	c, _ := served(t, nil, &remote.Options{RequestTimeout: 500 * time.Millisecond, Retries: -1})
	msgs, err := c.Queue("never").TimeoutMillis(1500).Pop(context.Background())
	require.NoError(t, err)
	require.Empty(t, msgs)
}

// A server fronting a remote client serves it again: httpapi takes any
// queen.Client.
func TestServeRemoteClient(t *testing.T) {
	t.Parallel()
	inner, b := served(t, nil, nil)
	srv := httptest.NewServer(httpapi.New(inner, nil))
	defer srv.Close()
	outer, err := remote.Dial(srv.URL, nil)
	require.NoError(t, err)
	defer outer.Close()
	ctx := context.Background()
	_, err = outer.Queue("relay").Push(ctx, map[string]int{"n": 1})
	require.NoError(t, err)
	qs, err := b.QueueStats(ctx, "relay")
	require.NoError(t, err)
	require.EqualValues(t, 1, qs.Messages)
	var got []int
	err = outer.Queue("relay").Each().Limit(1).Consume(ctx, func(ctx context.Context, m *queen.Message) error {
		got = append(got, int(m.Data["n"].(float64)))
		return nil
	}).Execute(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{1}, got)
	res, err := http.Get(srv.URL + "/api/v1/messages")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode, "the inspection routes need a broker")
}

// Error answers that say nothing of the API become transport errors, not
// empty results.
func TestGarbageAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("<html>proxy login</html>"))
	}))
	defer srv.Close()
	c, err := remote.Dial(srv.URL, &remote.Options{Server: remote.ServerQueenLite})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	var te *remote.TransportError
	_, err = c.Queue("q").Wait(false).Pop(ctx)
	require.ErrorAs(t, err, &te)
	_, err = c.Push(ctx, []queen.PushItem{{Queue: "q"}})
	require.ErrorAs(t, err, &te)
	_, err = c.DeadLetters(ctx, queen.LetterFilter{})
	require.ErrorAs(t, err, &te)
	require.True(t, strings.Contains(err.Error(), "not the API's JSON"), err.Error())
	_, err = c.AckBatch(ctx, []queen.AckItem{{TransactionID: "t", PartitionID: "p"}})
	require.ErrorAs(t, err, &te)
	require.False(t, errors.Is(err, queen.ErrNotFound))
}

// TestClient_NowIsItsClock: a remote client reports the time of the clock
// it was given, never the machine's, so a server fronting it measures lag
// consistently with a fake clock whatever today's date is.
func TestClient_NowIsItsClock(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	c, err := remote.Dial("http://h:6632", &remote.Options{Clock: clock})
	require.NoError(t, err)
	defer c.Close()
	require.True(t, clock.Now().Equal(c.Now()))
	clock.Advance(90 * time.Minute)
	require.True(t, clock.Now().Equal(c.Now()), "the client follows its clock")
}

// A consume loop whose pops get 5xx answers (a server restarting behind a
// proxy) pops again and handles what comes once the server answers.
func TestConsume_OutlivesServerErrors(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	f := &flaky{next: httpapi.New(b, nil), path: "/api/v1/pop/queue/q"}
	f.n.Store(3)
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := remote.Dial(srv.URL, &remote.Options{Retries: 1, RetryBackoff: time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Push(context.Background(), []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err)
	handled := 0
	err = c.Queue("q").Wait(false).Limit(1).Consume(context.Background(), func(context.Context, *queen.Message) error {
		handled++
		return nil
	}).Execute(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, handled)
	require.GreaterOrEqual(t, f.calls.Load(), int32(4), "three 502s, then the pop that delivered")
}

// settledLog collects a consume loop's settlements.
type settledLog struct {
	mu  sync.Mutex
	all []queen.Settlement
}

func (l *settledLog) add(s queen.Settlement) {
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
}

func (l *settledLog) list() []queen.Settlement {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]queen.Settlement(nil), l.all...)
}

// holdPop is a transport that, on the first pop the server answers with
// messages, reads the answer in full, says so on answered, and hands it
// to the client only once the pop's ctx has ended: the client gets the
// messages just as its consume loop is asked to stop.
type holdPop struct {
	next     http.RoundTripper
	once     sync.Once
	answered chan struct{}
}

func (h *holdPop) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := h.next.RoundTrip(req)
	if err != nil || req.URL.Path != "/api/v1/pop" && !strings.HasPrefix(req.URL.Path, "/api/v1/pop/") || res.StatusCode != http.StatusOK {
		return res, err
	}
	held := false
	h.once.Do(func() { held = true })
	if !held {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	close(h.answered)
	select {
	case <-req.Context().Done():
	case <-time.After(within): // the test fails: the loop never stopped
	}
	return res, nil
}

func (h *holdPop) CloseIdleConnections() {
	if c, ok := h.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// A pop over remote that returns its messages just as the loop is asked
// to stop does not leave them to their lease: the loop gives them back at
// once (an ack retry on the first message of each partition the pop
// claimed, spending no retry), reports them released, and never hands
// them to the handler; the group pops them again at once.
func TestConsume_PopReturningAtTheStopIsGivenBack(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock() // never advanced: no lease runs out
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	srv := httptest.NewServer(httpapi.New(b, nil))
	t.Cleanup(srv.Close)
	tr := &holdPop{next: http.DefaultTransport.(*http.Transport).Clone(), answered: make(chan struct{})}
	c, err := remote.Dial(srv.URL, &remote.Options{Transport: tr, Clock: clock, Server: remote.ServerQueenLite})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	var items []queen.PushItem
	for _, p := range []string{"a", "b"} {
		for i := range 3 {
			items = append(items, queen.PushItem{Queue: "q", Partition: p, TransactionID: fmt.Sprintf("%s%d", p, i), Payload: []byte(`{}`)})
		}
	}
	_, err = b.Push(ctx, items)
	require.NoError(t, err)

	var log settledLog
	var ran atomic.Int32
	cons := c.Queue("q").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(10).Partitions(2).Each().
		Consume(ctx, func(context.Context, *queen.Message) error { ran.Add(1); return nil }).
		OnSettled(log.add)
	require.NoError(t, cons.Start(ctx))
	select {
	case <-tr.answered:
	case <-time.After(within):
		t.Fatal("the loop never popped")
	}
	require.NoError(t, cons.Stop(ctx))

	require.Zero(t, ran.Load(), "a message popped at the stop went to the handler")
	all := log.list()
	var released []string
	for _, s := range all {
		id := s.Message.TransactionID
		released = append(released, id)
		require.Equal(t, queen.OutcomeReleased, s.Outcome, "%s", id)
		require.NoError(t, s.AckErr, "%s", id)
		require.False(t, s.Handled, "%s", id)
		if strings.HasSuffix(id, "0") {
			require.Equal(t, queen.AckRetry, s.Status, "%s: a partition's first message is acked retry", id)
		}
	}
	require.ElementsMatch(t, []string{"a0", "a1", "a2", "b0", "b1", "b2"}, released, "one pop of both partitions")
	st, err := b.QueueStats(ctx, "q")
	require.NoError(t, err)
	require.Len(t, st.Partitions, 2)
	for _, p := range st.Partitions {
		require.Len(t, p.Cursors, 1)
		require.Zero(t, p.Cursors[0].Retries, "%s: giving back spends no retry", p.Name)
		res, err := b.Pop(ctx, queen.PopRequest{Queue: "q", Partition: p.Name, Group: "g", Batch: 10})
		require.NoError(t, err)
		var got []string
		for _, m := range res.Messages {
			got = append(got, m.TransactionID)
		}
		require.Equal(t, []string{p.Name + "0", p.Name + "1", p.Name + "2"}, got, "given back: delivered again at once, not after the lease")
	}
}

// A consume loop over remote whose AckBatch is partly refused, because
// the lease no longer holds one partition of a pop (the front gives that
// partition back under the loop, before passing the batch on), reports
// the refused messages released with ErrLeaseExpired and the others
// accepted; the refused ones come back and are handled again, the
// accepted ones never do.
func TestConsume_AckBatchPartlyRefusedAfterALostLease(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock() // never advanced: no lease runs out
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	api := httpapi.New(b, nil)
	lost := make(chan string, 1) // the partition id taken from the loop
	var once sync.Once
	var hookErr atomic.Value
	// Once the partition is given back, pop answers wait until the first
	// ack batch has been answered: the refused messages cannot be
	// delivered, handled and acked again before the server judges the
	// batch that carries their first ack.
	var gaveBack atomic.Bool
	served := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/v1/pop") {
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, r)
			if gaveBack.Load() {
				<-served
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		if r.URL.Path == "/api/v1/ack/batch" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				hookErr.Store(err)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			first := false
			once.Do(func() {
				var req struct {
					Acks []struct {
						TransactionID string `json:"transactionId"`
						PartitionID   string `json:"partitionId"`
						LeaseID       string `json:"leaseId"`
					} `json:"acknowledgments"`
				}
				if err := json.Unmarshal(body, &req); err != nil || len(req.Acks) == 0 {
					hookErr.Store(fmt.Errorf("first ack batch %s: %v", body, err))
					return
				}
				a := req.Acks[0]
				gaveBack.Store(true)
				first = true
				res, err := b.AckBatch(r.Context(), []queen.AckItem{{TransactionID: a.TransactionID, PartitionID: a.PartitionID,
					LeaseID: a.LeaseID, Group: "g", Status: queen.AckRetry}})
				if err == nil && res[0].Err != nil {
					err = res[0].Err
				}
				if err != nil {
					hookErr.Store(fmt.Errorf("giving back %s: %w", a.TransactionID, err))
				}
				lost <- a.PartitionID
			})
			api.ServeHTTP(w, r)
			if first {
				close(served)
			}
			return
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := remote.Dial(srv.URL, &remote.Options{Clock: clock, Server: remote.ServerQueenLite})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var items []queen.PushItem
	for _, p := range []string{"a", "b"} {
		for i := range 2 {
			items = append(items, queen.PushItem{Queue: "q", Partition: p, TransactionID: fmt.Sprintf("%s%d", p, i), Payload: []byte(`{}`)})
		}
	}
	_, err = b.Push(ctx, items)
	require.NoError(t, err)

	var log settledLog
	var mu sync.Mutex
	var batches [][]string
	err = c.Queue("q").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(4).Partitions(2).Limit(6).
		ConsumeBatch(ctx, func(_ context.Context, msgs []*queen.Message) error {
			var ids []string
			for _, m := range msgs {
				ids = append(ids, m.TransactionID)
			}
			mu.Lock()
			batches = append(batches, ids)
			mu.Unlock()
			return nil
		}).
		OnSettled(log.add).
		Execute(ctx)
	require.NoError(t, err)
	require.Nil(t, hookErr.Load())
	require.NoError(t, ctx.Err(), "the loop ended by its Limit")

	var part string
	select {
	case part = <-lost:
	default:
		t.Fatal("no ack batch reached the server")
	}
	names := map[string]string{} // partition id -> name
	all := log.list()
	for _, s := range all {
		names[s.Message.PartitionID] = s.Message.Partition
	}
	gone, kept := names[part], "a"
	if gone == "a" {
		kept = "b"
	}
	require.Contains(t, []string{"a", "b"}, gone)
	mu.Lock()
	require.Len(t, batches, 2, "handled: %v", batches)
	require.ElementsMatch(t, []string{"a0", "a1", "b0", "b1"}, batches[0], "one pop of both partitions under one lease")
	require.Equal(t, []string{gone + "0", gone + "1"}, batches[1], "the refused messages came back; the accepted ones did not")
	mu.Unlock()

	// The settlements are counted, not read in order: the server gives
	// the refused partition back before it answers the batch, so the
	// second delivery may settle before the loop hears of the first's
	// refusal.
	require.Len(t, all, 6)
	seen := map[string]int{} // "id outcome" -> settlements
	for _, s := range all {
		id := s.Message.TransactionID
		seen[id+" "+string(s.Outcome)]++
		require.True(t, s.Handled, "%s", id)
		require.Equal(t, queen.AckCompleted, s.Status, "%s", id)
		if s.Outcome == queen.OutcomeReleased {
			require.ErrorIs(t, s.AckErr, queen.ErrLeaseExpired, "%s: its ack was refused", id)
			continue
		}
		require.Equal(t, queen.OutcomeAccepted, s.Outcome, "%s", id)
		require.NoError(t, s.AckErr, "%s", id)
	}
	require.Equal(t, map[string]int{
		gone + "0 released": 1, gone + "0 accepted": 1, gone + "1 released": 1, gone + "1 accepted": 1,
		kept + "0 accepted": 1, kept + "1 accepted": 1,
	}, seen, "the refused partition's messages released once and accepted on their return; the other's accepted once")
	gs, err := b.ListGroups(ctx, queen.GroupFilter{Group: "g"})
	require.NoError(t, err)
	require.Len(t, gs, 1)
	require.Zero(t, gs[0].Lag, "everything settled in the end")
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
func TestClose_ClientSendsNothing(t *testing.T) {
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

// A handler's own ack that finds the message already settled (here by
// another client of the same broker) tells the loop the message is
// settled: when the handler then fails, the loop does not try to settle
// it again as a failure (which would be refused and reported released).
func TestConsume_HandlerAckFindsMessageSettled(t *testing.T) {
	t.Parallel()
	c, b := served(t, nil, nil)
	ctx := context.Background()
	_, err := b.Push(ctx, []queen.PushItem{{Queue: "twice", Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	boom := errors.New("boom")
	var mu sync.Mutex
	var got []queen.Settlement
	var handlerErr error
	err = c.Queue("twice").AutoAck(false).Limit(1).Each().
		Consume(ctx, func(ctx context.Context, m *queen.Message) error {
			_, err := b.Ack(ctx, m, true, queen.AckOptions{}) // another client settles it
			require.NoError(t, err)
			_, handlerErr = c.Ack(ctx, m, false, queen.AckOptions{})
			return boom
		}).OnSettled(func(s queen.Settlement) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	}).Execute(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, handlerErr, queen.ErrAlreadySettled)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	require.Equal(t, queen.OutcomeHandled, got[0].Outcome)
	require.ErrorIs(t, got[0].Err, boom)
	require.NoError(t, got[0].AckErr)
	require.Empty(t, got[0].Status, "the loop sent no ack of its own")
}

// The consume loop over remote settles a lane's accepted messages with
// batched acks, not one request per message. The server holds the first
// ack request until the handler has seen the lane's last message: a loop
// that waited for each ack before the next message would never get there
// (the hold gives up after 10 s and the count then fails).
func TestConsume_LoopBatchesAcks(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	var mu sync.Mutex
	var requests []string
	lastSeen := make(chan struct{})
	var hold sync.Once
	api := httpapi.New(b, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/v1/ack") {
			mu.Lock()
			requests = append(requests, r.URL.Path)
			mu.Unlock()
			hold.Do(func() {
				select {
				case <-lastSeen:
				case <-time.After(10 * time.Second):
				}
			})
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := remote.Dial(srv.URL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	ctx := context.Background()
	push := make([]queen.PushItem, 100)
	for i := range push {
		push[i] = queen.PushItem{Queue: "q", Partition: "p", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	_, err = b.Push(ctx, push)
	require.NoError(t, err)

	var smu sync.Mutex
	accepted, seen := 0, 0
	err = c.Queue("q").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(100).Concurrency(1).Each().Limit(100).
		Consume(ctx, func(context.Context, *queen.Message) error {
			smu.Lock()
			defer smu.Unlock()
			if seen++; seen == 100 {
				close(lastSeen)
			}
			return nil
		}).
		OnSettled(func(s queen.Settlement) {
			smu.Lock()
			defer smu.Unlock()
			if s.Outcome == queen.OutcomeAccepted && s.AckErr == nil {
				accepted++
			}
		}).
		Execute(ctx)
	require.NoError(t, err)
	require.Equal(t, 100, accepted)
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, len(requests), 2, "ack requests for 100 messages of one lane: %v", requests)
	gs, err := b.ListGroups(ctx, queen.GroupFilter{Group: "g"})
	require.NoError(t, err)
	require.Len(t, gs, 1)
	require.Zero(t, gs[0].Lag)
}
