package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/ack/batch" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				hookErr.Store(err)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
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

	require.Len(t, all, 6)
	seen := map[string]int{}
	for _, s := range all {
		id := s.Message.TransactionID
		seen[id]++
		require.True(t, s.Handled, "%s", id)
		require.Equal(t, queen.AckCompleted, s.Status, "%s", id)
		if s.Message.Partition == gone && seen[id] == 1 {
			require.Equal(t, queen.OutcomeReleased, s.Outcome, "%s: its ack was refused", id)
			require.ErrorIs(t, s.AckErr, queen.ErrLeaseExpired, "%s", id)
			continue
		}
		require.Equal(t, queen.OutcomeAccepted, s.Outcome, "%s (delivery %d)", id, seen[id])
		require.NoError(t, s.AckErr, "%s", id)
	}
	require.Equal(t, map[string]int{gone + "0": 2, gone + "1": 2, kept + "0": 1, kept + "1": 1}, seen)
	gs, err := b.ListGroups(ctx, "g")
	require.NoError(t, err)
	require.Len(t, gs, 1)
	require.Zero(t, gs[0].Lag, "everything settled in the end")
}
