package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// counted is a server that counts the requests reaching it: GET /health
// apart from the rest.
type counted struct {
	url    string
	health atomic.Int32
	other  atomic.Int32
	next   http.Handler
}

func (s *counted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		s.health.Add(1)
	} else {
		s.other.Add(1)
	}
	s.next.ServeHTTP(w, r)
}

// serve starts a counted server over h.
func serve(t *testing.T, h http.Handler) *counted {
	s := &counted{next: h}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// laneOn returns a partition of queue q whose pushes c sends to url.
func laneOn(t *testing.T, c *remote.Client, q, url string) string {
	for i := range 1000 {
		p := fmt.Sprintf("p%d", i)
		if c.ServerFor(q+":"+p+":"+queen.QueueModeGroup) == url {
			return p
		}
	}
	t.Fatalf("no partition of %s goes to %s", q, url)
	return ""
}

func pushTo(ctx context.Context, c *remote.Client, q, p, id string) error {
	res, err := c.Push(ctx, []queen.PushItem{{Queue: q, Partition: p, TransactionID: id, Payload: json.RawMessage(`{}`)}})
	if err == nil && res[0].Err != nil {
		err = res[0].Err
	}
	return err
}

// stored is how many messages b holds in queue q (0 when it has no such
// queue).
func stored(t *testing.T, b *queen.Broker, q string) int64 {
	st, err := b.QueueStats(context.Background(), q)
	if errors.Is(err, queen.ErrNotFound) {
		return 0
	}
	require.NoError(t, err)
	return st.Messages
}

// Two independent stores behind one URL list (the ring would split the
// pushes between them, and one store's messages would never be popped): the first
// push routed to the second store is refused, with the URLs and stores
// named, before anything of it reaches that server; the first store keeps
// serving the pushes and pops routed to it.
func TestStores_TwoStoresRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b1, b2 := queentest.NewBroker(t, nil), queentest.NewBroker(t, nil)
	require.NotEqual(t, b1.Facts().StoreID, b2.Facts().StoreID)
	s1, s2 := serve(t, httpapi.New(b1, nil)), serve(t, httpapi.New(b2, nil))
	c, err := remote.Dial(s1.url+","+"http://user:secret@"+s2.url[len("http://"):], nil)
	require.NoError(t, err)
	defer c.Close()
	redacted2 := "http://user:xxxxx@" + s2.url[len("http://"):]
	p1, p2 := laneOn(t, c, "q", s1.url), laneOn(t, c, "q", redacted2)
	require.Zero(t, s1.health.Load()+s2.health.Load(), "Dial asks nothing")

	require.NoError(t, pushTo(ctx, c, "q", p1, "a"), "the first store's server: the list's store")
	err = pushTo(ctx, c, "q", p2, "b")
	require.ErrorIs(t, err, remote.ErrMixedStores)
	var me *remote.StoreMismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, remote.StoreMismatchError{Op: "push", URL: redacted2, StoreID: b2.Facts().StoreID,
		ListURL: s1.url, ListStoreID: b1.Facts().StoreID}, *me)
	require.ErrorContains(t, err, "different stores")
	require.ErrorContains(t, err, "a URL list must name fronts of one store")
	require.NotContains(t, err.Error(), "secret")
	require.NotErrorIs(t, err, queen.ErrUnavailable, "not a failure a consume loop rides out")

	require.Zero(t, s2.other.Load(), "nothing but GET /health reached the second server")
	require.EqualValues(t, 1, s2.health.Load())
	require.Zero(t, stored(t, b2, "q"), "the refused push is not stored there")
	require.Zero(t, b2.Counters().Pushed)

	// Refused again without asking; the first store still serves.
	require.ErrorIs(t, pushTo(ctx, c, "q", p2, "c"), remote.ErrMixedStores)
	mixed := 0
	for range 2 { // acks go round-robin: one to each server
		_, err = c.Ack(ctx, &queen.Message{Queue: "q", Partition: p2, TransactionID: "x", PartitionID: "x", LeaseID: "l"}, true, queen.AckOptions{})
		if errors.Is(err, remote.ErrMixedStores) {
			mixed++
		}
	}
	require.Equal(t, 1, mixed, "the ack routed there is refused too")
	require.EqualValues(t, 1, s2.health.Load())
	require.Zero(t, s2.other.Load())
	require.NoError(t, pushTo(ctx, c, "q", p1, "d"))
	require.EqualValues(t, 2, stored(t, b1, "q"))
	res, err := c.Pop(ctx, queen.PopRequest{Queue: "q", Partition: p1, Batch: 10})
	require.NoError(t, err)
	require.Len(t, res.Messages, 2)
}

// A server out of reach when a push is routed to it is asked which store
// it holds when it answers again, still before any push goes to it.
func TestStores_CheckedWhenItComesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b1, b2 := queentest.NewBroker(t, nil), queentest.NewBroker(t, nil)
	s1 := serve(t, httpapi.New(b1, nil))
	addr := freeAddr(t)
	clock := itest.NewClock()
	c, err := remote.Dial(s1.url+",http://"+addr, &remote.Options{Server: remote.ServerQueenLite, Clock: clock})
	require.NoError(t, err)
	defer c.Close()
	p2 := laneOn(t, c, "q", "http://"+addr)

	require.NoError(t, pushTo(ctx, c, "q", p2, "a"), "its owner is down: the next server took it")
	require.EqualValues(t, 1, stored(t, b1, "q"))
	require.False(t, c.Servers()[1].Healthy)

	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	s2 := &counted{next: httpapi.New(b2, nil)}
	srv := &http.Server{Handler: s2, ReadHeaderTimeout: within}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	clock.Advance(time.Second) // the default ReadmitBackoff
	require.Equal(t, "http://"+addr, c.ServerFor("q:"+p2+":"+queen.QueueModeGroup), "readmitted")

	err = pushTo(ctx, c, "q", p2, "b")
	require.ErrorIs(t, err, remote.ErrMixedStores)
	require.Zero(t, s2.other.Load(), "only asked")
	require.EqualValues(t, 1, s2.health.Load())
	require.Zero(t, stored(t, b2, "q"))
}

// A server that cannot be asked fails the try before the call is sent:
// even an ack, which is never repeated once sent, goes on to the next
// server.
func TestStores_UnaskedIsUnsent(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	s := serve(t, httpapi.New(b, nil))
	c, err := remote.Dial("http://"+freeAddr(t)+","+s.url, &remote.Options{Server: remote.ServerQueenLite, Retries: 1})
	require.NoError(t, err)
	defer c.Close()
	// Round-robin: the first call goes to the first server, which is down.
	_, err = c.Ack(context.Background(), &queen.Message{Queue: "q", TransactionID: "t", PartitionID: "p", LeaseID: "l"}, true, queen.AckOptions{})
	require.NotErrorIs(t, err, queen.ErrUnavailable, "answered by the second server: %v", err)
	require.EqualValues(t, 1, s.other.Load())
	require.False(t, c.Servers()[0].Healthy)
	require.Contains(t, c.Servers()[0].LastError, "GET /health")
}

// Pushes from many goroutines over two stores, as in the trial:
// every push is either stored in the list's store or refused with
// ErrMixedStores; none reaches the other store.
func TestStores_NothingStrandedUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b1, b2 := queentest.NewBroker(t, nil), queentest.NewBroker(t, nil)
	s1, s2 := serve(t, httpapi.New(b1, nil)), serve(t, httpapi.New(b2, nil))
	c, err := remote.Dial(s1.url+","+s2.url, nil)
	require.NoError(t, err)
	defer c.Close()
	const workers, each = 8, 40
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				err := pushTo(ctx, c, "q", fmt.Sprintf("p%d", (w*each+i)%64), fmt.Sprintf("m-%d-%d", w, i))
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, remote.ErrMixedStores):
					refused.Add(1)
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n1, n2 := stored(t, b1, "q"), stored(t, b2, "q")
	require.True(t, n1 == 0 || n2 == 0, "one store only: %d and %d", n1, n2)
	require.Equal(t, ok.Load(), n1+n2, "every accepted push is in the list's store")
	require.Positive(t, ok.Load())
	require.Positive(t, refused.Load(), "the ring sends some lanes to the other store")
	require.EqualValues(t, workers*each, ok.Load()+refused.Load())
}

// Several httpapi fronts of one broker name one store: pushes go to both,
// and every message is popped.
func TestStores_FrontsOfOneStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	s1, s2 := serve(t, httpapi.New(b, nil)), serve(t, httpapi.New(b, nil))
	c, err := remote.Dial(s1.url+","+s2.url, nil)
	require.NoError(t, err)
	defer c.Close()
	const n = 60
	for i := range n {
		require.NoError(t, pushTo(ctx, c, "q", fmt.Sprintf("p%d", i%12), fmt.Sprintf("m%d", i)))
	}
	require.Positive(t, s1.other.Load())
	require.Positive(t, s2.other.Load(), "the ring sent pushes to both")
	require.EqualValues(t, 1, s1.health.Load(), "each asked once")
	require.EqualValues(t, 1, s2.health.Load())
	require.EqualValues(t, n, stored(t, b, "q"))

	seen := map[string]bool{}
	for len(seen) < n {
		res, err := c.Pop(ctx, queen.PopRequest{Queue: "q", Batch: 10})
		require.NoError(t, err)
		require.NotEmpty(t, res.Messages, "popped %d of %d", len(seen), n)
		for _, m := range res.Messages {
			require.False(t, seen[m.TransactionID])
			seen[m.TransactionID] = true
			_, err := c.Ack(ctx, m, true, queen.AckOptions{})
			require.NoError(t, err)
		}
	}
	queentest.WaitDrained(t, b, "q", "")
}

// A server whose /health names no store (Queen's: its servers share one
// database) is never refused, beside one of ours or first.
func TestStores_QueenHealthNotRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	api := httpapi.New(b, nil)
	queenLike := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"server":"C++ Queen Server (libqueen)","version":"1.0.0","status":"healthy","database":"connected"}`))
			return
		}
		api.ServeHTTP(w, r)
	})
	for _, queenFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("queen first ", queenFirst), func(t *testing.T) {
			q, ours := serve(t, queenLike), serve(t, api)
			c, err := remote.Dial(q.url+","+ours.url, &remote.Options{Server: remote.ServerQueenLite})
			require.NoError(t, err)
			defer c.Close()
			queue := fmt.Sprint("q-", queenFirst)
			first, second := laneOn(t, c, queue, q.url), laneOn(t, c, queue, ours.url)
			if !queenFirst {
				first, second = second, first
			}
			require.NoError(t, pushTo(ctx, c, queue, first, "a"))
			require.NoError(t, pushTo(ctx, c, queue, second, "b"))
			require.NoError(t, pushTo(ctx, c, queue, first, "c"))
			require.EqualValues(t, 1, q.health.Load())
			require.EqualValues(t, 1, ours.health.Load())
			if queenFirst {
				require.Equal(t, []int32{2, 1}, []int32{q.other.Load(), ours.other.Load()})
			} else {
				require.Equal(t, []int32{1, 2}, []int32{q.other.Load(), ours.other.Load()})
			}
			require.EqualValues(t, 3, stored(t, b, queue))
		})
	}
}

// A client of one server asks nothing more than before: no GET /health
// for pushes, pops and acks when it is told the server's kind, and the
// one question of the kind when it is not.
func TestStores_OneServerAsksNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, kind := range []remote.Server{remote.ServerQueenLite, remote.ServerDetect} {
		t.Run(kind.String(), func(t *testing.T) {
			b := queentest.NewBroker(t, nil)
			s := serve(t, httpapi.New(b, nil))
			c, err := remote.Dial(s.url, &remote.Options{Server: kind})
			require.NoError(t, err)
			defer c.Close()
			for i := range 5 {
				require.NoError(t, pushTo(ctx, c, "q", "p", fmt.Sprint(i)))
			}
			res, err := c.Pop(ctx, queen.PopRequest{Queue: "q", Partition: "p", Batch: 5})
			require.NoError(t, err)
			_, err = c.AckBatch(ctx, ackAll(res.Messages))
			require.NoError(t, err)
			require.EqualValues(t, 7, s.other.Load())
			if kind == remote.ServerDetect {
				require.LessOrEqual(t, s.health.Load(), int32(1), "the kind, asked once")
			} else {
				require.Zero(t, s.health.Load())
			}
		})
	}
}

func ackAll(ms []*queen.Message) []queen.AckItem {
	items := make([]queen.AckItem, len(ms))
	for i, m := range ms {
		items[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: queen.AckCompleted}
	}
	return items
}

// The answer to the client's one question of which kind of server it talks
// to also names that server's store: the first push routed there asks
// nothing more.
func TestStores_KindAnswerReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	s1, s2 := serve(t, httpapi.New(b, nil)), serve(t, httpapi.New(b, nil))
	c, err := remote.Dial(s1.url+","+s2.url, nil) // ServerDetect
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Fetch(ctx, "q", "p", 0, 1) // depends on the kind: asks the first server in turn
	require.ErrorIs(t, err, queen.ErrNotFound)
	require.EqualValues(t, 1, s1.health.Load()+s2.health.Load())
	asked := s1
	if s2.health.Load() == 1 {
		asked = s2
	}
	require.NoError(t, pushTo(ctx, c, "q", laneOn(t, c, "q", asked.url), "a"))
	require.EqualValues(t, 1, asked.health.Load(), "not asked again")
}
