package remote_test

import (
	"context"
	"net/http"
	"sync"
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
