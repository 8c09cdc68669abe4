package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
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

// front is one stateless server in front of a shared broker, as one of a
// Queen deployment's servers over its database. A test can script its
// answers, or kill it: its listener closes and its connections drop.
type front struct {
	url  string
	srv  *http.Server
	next http.Handler

	status     atomic.Int32  // when not 0, every request gets this status
	retryAfter atomic.Value  // string: the scripted answer's Retry-After
	calls      atomic.Int32  // requests that reached it
	delivered  atomic.Int32  // messages its pops delivered
	dead       atomic.Bool   // killed
	losePop    atomic.Bool   // the next pop that leases messages kills it before it answers
	lost       chan []string // the transactionIds of that pop's messages

	// mu serialises its requests, so that a kill falls between two of
	// them: each one was answered in full or never reached the broker,
	// but for the pop that was meant to be lost.
	mu sync.Mutex
}

func newFront(t *testing.T, next http.Handler) *front {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &front{url: "http://" + ln.Addr().String(), next: next, lost: make(chan []string, 1)}
	f.retryAfter.Store("")
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: within}
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(f.kill)
	return f
}

// kill stops the front as a crash would: refused connections from now on,
// the open ones dropped.
func (f *front) kill() {
	f.dead.Store(true)
	_ = f.srv.Close()
}

// popAnswer is the part of a pop's answer the front looks at.
type popAnswer struct {
	Messages []struct {
		TransactionID string `json:"transactionId"`
	} `json:"messages"`
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead.Load() {
		drop(w)
		return
	}
	f.calls.Add(1)
	if s := f.status.Load(); s != 0 {
		if ra := f.retryAfter.Load().(string); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(s))
		_, _ = w.Write([]byte(`{"error":"scripted"}`))
		return
	}
	rec := httptest.NewRecorder()
	f.next.ServeHTTP(rec, r)
	if strings.HasPrefix(r.URL.Path, "/api/v1/pop") && rec.Code == http.StatusOK {
		var a popAnswer
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err == nil && len(a.Messages) > 0 {
			if f.losePop.CompareAndSwap(true, false) {
				ids := make([]string, len(a.Messages))
				for i, m := range a.Messages {
					ids[i] = m.TransactionID
				}
				f.lost <- ids
				drop(w) // the broker leased them; the answer never leaves
				f.kill()
				return
			}
			f.delivered.Add(int32(len(a.Messages)))
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	w.(http.Flusher).Flush() // on the wire before a kill can follow
}

// drop closes the request's connection without an answer.
func drop(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// fronts starts n fronts over b and a client of them all.
func fronts(t *testing.T, b http.Handler, n int, opts *remote.Options) ([]*front, *remote.Client) {
	fs := make([]*front, n)
	urls := make([]string, n)
	for i := range fs {
		fs[i] = newFront(t, b)
		urls[i] = fs[i].url
	}
	c, err := remote.Dial(strings.Join(urls, ","), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return fs, c
}

func TestDial_SeveralServers(t *testing.T) {
	t.Parallel()
	c, err := remote.Dial(" http://q1:6632/ ,http://u:secret@q2:6632/queen", nil)
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, "http://q1:6632", c.BaseURL(), "the first server")
	require.Equal(t, []remote.ServerState{{URL: "http://q1:6632", Healthy: true}, {URL: "http://u:xxxxx@q2:6632/queen", Healthy: true}},
		c.Servers())

	c2, err := remote.Dial("", &remote.Options{URLs: []string{"http://q1:6632", "http://q2:6632"}})
	require.NoError(t, err)
	defer c2.Close()
	require.Len(t, c2.Servers(), 2)
	require.Equal(t, "http://q1:6632", c2.BaseURL())
	require.Empty(t, c2.ServerFor(""), "no key, no route")
	require.Contains(t, []string{"http://q1:6632", "http://q2:6632"}, c2.ServerFor("orders:*:g"))

	for _, bad := range []struct {
		base  string
		opts  *remote.Options
		field string
	}{
		{"http://q1:6632", &remote.Options{URLs: []string{"http://q2:6632"}}, "Options.URLs"},
		{"http://q1:6632,", nil, "baseURL"},
		{"http://q1:6632,q2:6632", nil, "baseURL"},
		{"http://q1:6632,http://q1:6632/", nil, "baseURL"},
		{"http://q1:6632,http://q2:6632/?x=1", nil, "baseURL"},
		{"", &remote.Options{URLs: []string{"http://q1:6632", "ftp://q2"}}, "Options.URLs"},
		{"", &remote.Options{URLs: []string{}}, "baseURL"},
		{"http://q1:6632", &remote.Options{VirtualNodes: -1}, "Options.VirtualNodes"},
		{"http://q1:6632", &remote.Options{ReadmitBackoff: -1}, "Options.ReadmitBackoff"},
		{"http://q1:6632", &remote.Options{ReadmitBackoffMax: -1}, "Options.ReadmitBackoffMax"},
	} {
		_, err := remote.Dial(bad.base, bad.opts)
		var ae *queen.ArgumentError
		require.ErrorAs(t, err, &ae, "%q %+v", bad.base, bad.opts)
		require.Equal(t, bad.field, ae.Field, "%q: %v", bad.base, err)
	}
}

// A transport failure or a 5xx takes a server off the ring and a
// repeatable call goes on to the next one; a 4xx or a 429 is an answer,
// and the server stays.
func TestCluster_HealthMarking(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	for _, c := range []struct {
		name    string
		status  int // of the first server; 0: it is down
		healthy bool
		why     string
	}{
		{"502", http.StatusBadGateway, false, "answered 502"},
		{"500", http.StatusInternalServerError, false, "answered 500"},
		{"503", http.StatusServiceUnavailable, false, "answered 503"},
		{"down", 0, false, ""}, // a transport error: its words are the OS's
		{"404", http.StatusNotFound, true, ""},
		{"400", http.StatusBadRequest, true, ""},
		{"429", http.StatusTooManyRequests, true, ""},
		{"501", http.StatusNotImplemented, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := itest.NewClock()
			fs, cl := fronts(t, httpapi.New(b, nil), 2, &remote.Options{Clock: clock, Server: remote.ServerQueenLite, RetryBackoff: time.Millisecond})
			if c.status == 0 {
				fs[0].kill()
			} else {
				fs[0].status.Store(int32(c.status))
			}
			err := cl.Ping(context.Background()) // round-robin: the first server first
			st := cl.Servers()
			require.Equal(t, c.healthy, st[0].Healthy, "%+v", st[0])
			require.True(t, st[1].Healthy)
			if c.healthy {
				require.Error(t, err, "the first server's answer is the call's")
				require.Equal(t, int32(1), fs[0].calls.Load())
				require.Zero(t, fs[1].calls.Load(), "an answer is not retried elsewhere")
				return
			}
			require.NoError(t, err, "the second server took the retry")
			require.Equal(t, int32(1), fs[1].calls.Load())
			if c.why == "" {
				// Refused, or reset when another listener took the port
				// meanwhile: either names the server.
				c.why = strings.TrimPrefix(fs[0].url, "http://")
			}
			require.Contains(t, st[0].LastError, c.why)
			require.Equal(t, 1, st[0].Failures)
			require.Equal(t, time.Second, st[0].ReadmitAt.Sub(clock.Now()), "the default back-off")
			for range 4 {
				require.NoError(t, cl.Ping(context.Background()))
			}
			require.Equal(t, int32(5), fs[1].calls.Load(), "off the ring: every call goes to the other")
		})
	}
}

// A pop whose server is down goes to the next server on the ring, with its
// messages; once the back-off has run out the key goes home, and a server
// that answers again stays there.
func TestCluster_RoutedPopFailsOverAndComesBack(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	fs, c := fronts(t, httpapi.New(b, nil), 3, &remote.Options{Clock: clock, Server: remote.ServerQueenLite,
		ReadmitBackoff: 10 * time.Second})
	ctx := context.Background()
	_, err := b.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}, {Queue: "q", Payload: json.RawMessage(`2`)}})
	require.NoError(t, err)
	byURL := map[string]*front{}
	for _, f := range fs {
		byURL[f.url] = f
	}
	home := byURL[c.ServerFor("q:*:g")]
	require.NotNil(t, home)

	req := queen.PopRequest{Queue: "q", Group: "g", Batch: 1, SubscriptionMode: queen.SubscriptionModeAll}
	res, err := c.Pop(ctx, req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	require.Equal(t, int32(1), home.calls.Load(), "the pop went to the key's owner")

	_, err = c.Ack(ctx, res.Messages[0], true, queen.AckOptions{})
	require.NoError(t, err)

	home.status.Store(http.StatusBadGateway)
	res, err = c.Pop(ctx, req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1, "the next server on the ring delivered")
	next := c.ServerFor("q:*:g")
	require.NotEqual(t, home.url, next)
	require.Equal(t, int32(1), byURL[next].delivered.Load())

	home.status.Store(0)
	clock.Advance(10*time.Second - time.Millisecond)
	require.Equal(t, next, c.ServerFor("q:*:g"), "still backing off")
	clock.Advance(time.Millisecond)
	require.Equal(t, home.url, c.ServerFor("q:*:g"), "re-admitted: the key is home")
	_, err = c.Ack(ctx, res.Messages[0], true, queen.AckOptions{})
	require.NoError(t, err)
	res, err = c.Pop(ctx, req)
	require.NoError(t, err)
	require.Empty(t, res.Messages)
	require.Equal(t, remote.ServerState{URL: home.url, Healthy: true}, c.Servers()[indexOf(fs, home)], "it answered: failures forgotten")
}

func indexOf(fs []*front, f *front) int {
	for i := range fs {
		if fs[i] == f {
			return i
		}
	}
	return -1
}

// A 503 with Retry-After keeps a repeatable call waiting that long (in
// seconds or to an HTTP date), within its ctx: a deadline sooner than
// that gets the 503 at once. A call that is not repeatable never waits.
func TestCluster_RetryAfter(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	clock := itest.NewClock()
	setup := func(t *testing.T, retryAfter string) (*front, *remote.Client, *[]time.Duration) {
		fs, c := fronts(t, httpapi.New(b, nil), 1, &remote.Options{Clock: clock, Server: remote.ServerQueenLite, Retries: 1})
		fs[0].status.Store(http.StatusServiceUnavailable)
		fs[0].retryAfter.Store(retryAfter)
		var waits []time.Duration
		remote.SetSleep(c, func(d time.Duration) {
			waits = append(waits, d)
			fs[0].status.Store(0) // back when the wait is over
		})
		return fs[0], c, &waits
	}

	t.Run("seconds", func(t *testing.T) {
		f, c, waits := setup(t, "7")
		require.NoError(t, c.Ping(context.Background()))
		require.Equal(t, []time.Duration{7 * time.Second}, *waits)
		require.Equal(t, int32(2), f.calls.Load())
	})
	t.Run("date", func(t *testing.T) {
		f, c, waits := setup(t, clock.Now().Add(90*time.Second).UTC().Format(http.TimeFormat))
		require.NoError(t, c.Ping(context.Background()))
		require.Len(t, *waits, 1)
		require.InDelta(t, 90*time.Second, (*waits)[0], float64(time.Second), "to the date, on the client's clock (whole seconds)")
		require.Equal(t, int32(2), f.calls.Load())
	})
	t.Run("none or unreadable: the retry back-off", func(t *testing.T) {
		for _, ra := range []string{"", "soon", "-3"} {
			_, c, waits := setup(t, ra)
			require.NoError(t, c.Ping(context.Background()))
			require.Equal(t, []time.Duration{100 * time.Millisecond}, *waits, "%q", ra)
		}
	})
	t.Run("sooner deadline", func(t *testing.T) {
		f, c, waits := setup(t, "7")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		err := c.Ping(ctx)
		require.Less(t, time.Since(start), 4*time.Second, "returned before its deadline")
		require.ErrorIs(t, err, queen.ErrClosed, "ping's reading of a 503") // Ping maps a 503 to ErrClosed
		var se *remote.ServerError
		require.ErrorAs(t, err, &se)
		require.Equal(t, http.StatusServiceUnavailable, se.StatusCode)
		require.Empty(t, *waits)
		require.Equal(t, int32(1), f.calls.Load())
	})
	t.Run("not repeatable", func(t *testing.T) {
		f, c, waits := setup(t, "7")
		_, err := c.Ack(context.Background(), &queen.Message{Queue: "q", TransactionID: "t", PartitionID: "p", LeaseID: "l"},
			true, queen.AckOptions{})
		require.ErrorIs(t, err, queen.ErrUnavailable)
		require.Empty(t, *waits)
		require.Equal(t, int32(1), f.calls.Load())
	})
}

// A Retry-After wait is real time, ends with the caller's ctx, and with
// Close.
func TestCluster_RetryAfterWaitEnds(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	fs, c := fronts(t, httpapi.New(b, nil), 1, &remote.Options{Server: remote.ServerQueenLite})
	fs[0].status.Store(http.StatusServiceUnavailable)
	fs[0].retryAfter.Store("120")
	waiting := make(chan time.Duration, 2)
	remote.SetPausing(c, func(d time.Duration) { waiting <- d })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Ping(ctx) }()
	waited := func() time.Duration {
		select {
		case d := <-waiting:
			return d
		case <-time.After(within):
			t.Fatal("no wait began")
			return 0
		}
	}
	require.Equal(t, 120*time.Second, waited(), "waits the Retry-After")
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorContains(t, err, "answered 503", "the failure that made it wait is the news")
	case <-time.After(within):
		t.Fatal("the wait outlived its ctx")
	}
	go func() { errc <- c.Ping(context.Background()) }()
	waited()
	require.NoError(t, c.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, queen.ErrClosed)
	case <-time.After(within):
		t.Fatal("the wait outlived Close")
	}
	require.Equal(t, int32(2), fs[0].calls.Load(), "no try after the waits")
}

// A consume loop over three stateless servers in front of one broker keeps
// going when the server its pops go to dies mid-drain, with a lease taken
// through it and never answered: nothing is lost, the lost lease's
// messages come back when it runs out (on the fake clock), and the other
// servers deliver the rest.
func TestCluster_ConsumeSurvivesLosingAServer(t *testing.T) {
	t.Parallel()
	const parts, perPart, lease = 8, 30, 30 * time.Second
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	fs, c := fronts(t, httpapi.New(b, nil), 3, &remote.Options{Clock: clock, Server: remote.ServerQueenLite,
		RetryBackoff: time.Millisecond})
	ctx := context.Background()
	partOf := map[string]string{}
	var items []queen.PushItem
	for p := range parts {
		for i := range perPart {
			id := fmt.Sprintf("m-%d-%d", p, i)
			partOf[id] = fmt.Sprintf("p%d", p)
			items = append(items, queen.PushItem{Queue: "q", Partition: partOf[id], TransactionID: id, Payload: json.RawMessage(`{}`)})
		}
	}
	_, err := b.Push(ctx, items)
	require.NoError(t, err)

	var victim *front
	for _, f := range fs {
		if f.url == c.ServerFor("q:*:g") {
			victim = f // every pop of the loop goes there
		}
	}
	require.NotNil(t, victim)

	var mu sync.Mutex
	handled := map[string]int{}
	blocked := map[string]bool{} // partitions held by a lease the loop lost
	total := 0
	cons := c.Queue("q").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(5).Concurrency(3).Lease(lease).Wait(false).
		Consume(ctx, func(_ context.Context, m *queen.Message) error {
			mu.Lock()
			defer mu.Unlock()
			handled[m.TransactionID]++
			if total++; total == 60 {
				victim.losePop.Store(true) // mid-drain
			}
			return nil
		}).
		OnSettled(func(s queen.Settlement) {
			if s.AckErr != nil { // its lease stays until it runs out
				mu.Lock()
				blocked[s.Message.Partition] = true
				mu.Unlock()
			}
		})
	require.NoError(t, cons.Start(ctx))
	defer func() { _ = cons.Stop(ctx) }()

	var lost []string
	select {
	case lost = <-victim.lost:
	case <-time.After(within):
		t.Fatal("the victim never leased a batch")
	}
	mu.Lock()
	for _, id := range lost {
		blocked[partOf[id]] = true
	}
	mu.Unlock()
	// Every partition no lost lease holds drains through the two others.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id, p := range partOf {
			if !blocked[p] && handled[id] == 0 {
				return false
			}
		}
		return true
	}, within, 5*time.Millisecond)
	mu.Lock()
	for _, id := range lost {
		require.Zero(t, handled[id], "%s was delivered while leased through the dead server", id)
	}
	mu.Unlock()
	st := c.Servers()
	require.False(t, st[indexOf(fs, victim)].Healthy, "%+v", st)
	var others int32
	for _, f := range fs {
		if f != victim {
			others += f.delivered.Load()
		}
	}
	require.Positive(t, others, "the others delivered after the kill")

	clock.Advance(lease + time.Second) // the lost lease runs out
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id := range partOf {
			if handled[id] == 0 {
				return false
			}
		}
		return true
	}, within, 5*time.Millisecond, "a message was lost")
	require.NoError(t, cons.Stop(ctx))
	queentest.WaitDrained(t, b, "q", "g")
	dups := 0
	for _, n := range handled {
		dups += n - 1
	}
	t.Logf("%d messages, %d leased through the dead server and delivered again, %d duplicates", len(partOf), len(lost), dups)
}

// A call the caller gave up on says nothing of the server; one the server
// did not answer within RequestTimeout does.
func TestCluster_OnlyTheServersFailuresMark(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 4)
	hold := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer hold.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"healthy"}`))
	}))
	defer ok.Close()
	c, err := remote.Dial(hold.URL+","+ok.URL, &remote.Options{Server: remote.ServerQueenLite, RequestTimeout: time.Minute})
	require.NoError(t, err)
	defer c.Close()

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	require.ErrorIs(t, c.Ping(ctx), context.Canceled) // round-robin: the holding server first
	require.True(t, c.Servers()[0].Healthy, "the caller's cancel is not the server's failure")

	// The timeout must outlast the other server's answer however loaded
	// the machine is (50 ms did not, beside CPU burners); the holding
	// server never answers, so it still runs out.
	c2, err := remote.Dial(hold.URL+","+ok.URL, &remote.Options{Server: remote.ServerQueenLite, RequestTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, c2.Ping(context.Background()), "the other server answered the retry")
	<-arrived
	st := c2.Servers()[0]
	require.False(t, st.Healthy, "no answer within RequestTimeout")
	require.Contains(t, st.LastError, "deadline exceeded")
}
