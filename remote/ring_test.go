package remote

import (
	"fmt"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// The canonical FNV-1a 32-bit vectors: a drift here and a Go worker's ring
// no longer agrees with those of Queen's other SDKs.
func TestFNV1a_Vectors(t *testing.T) {
	t.Parallel()
	require.Equal(t, uint32(2166136261), fnv1a(""))
	require.Equal(t, uint32(0xe40c292c), fnv1a("a"))
	require.Equal(t, uint32(0xbf9cf968), fnv1a("foobar"))
	require.Equal(t, uint32(4149210757), fnv1a("orders:*:__QUEUE_MODE__"))
}

var (
	q1 = "http://queen-1:6632"
	q2 = "http://queen-2:6632"
	q3 = "http://queen-3:6632"
)

// ringVectors are (servers, key) → server with 128 virtual nodes, computed
// by an independent implementation of the construction in the package
// doc (docs/cluster.md lists them for other SDKs to check against).
var ringVectors = []struct {
	servers []string
	key     string
	want    string
}{
	{[]string{q1, q2, q3}, "orders:*:__QUEUE_MODE__", q3},
	{[]string{q1, q2, q3}, "orders:*:billing", q2},
	{[]string{q1, q2, q3}, "orders:eu:billing", q2},
	{[]string{q1, q2, q3}, "emails:*:__QUEUE_MODE__", q1},
	{[]string{q1, q2, q3}, "events:p7:analytics", q2},
	{[]string{q1, q2, q3}, "jobs:*:workers", q3},
	// Above every point: the last point's server, not the first's (the
	// ring does not wrap; wrapping would give queen-3).
	{[]string{q1, q2, q3}, "q145:*:__QUEUE_MODE__", q1},
	// queen-3 out of the ring: only its keys move.
	{[]string{q1, q2}, "orders:*:__QUEUE_MODE__", q1},
	{[]string{q1, q2}, "orders:*:billing", q2},
	{[]string{q1, q2}, "jobs:*:workers", q1},
	// queen-2 out of the ring.
	{[]string{q1, q3}, "orders:*:billing", q1},
	{[]string{q1, q3}, "events:p7:analytics", q1},
	{[]string{q1, q3}, "jobs:*:workers", q3},
}

func TestRing_Vectors(t *testing.T) {
	t.Parallel()
	for _, v := range ringVectors {
		members := make([]int, len(v.servers))
		for i := range members {
			members[i] = i
		}
		r := newRing(v.servers, members, DefaultVirtualNodes)
		require.Len(t, r, len(v.servers)*DefaultVirtualNodes)
		require.Equal(t, v.want, v.servers[r.owner(v.key)], "%v %q", v.servers, v.key)
	}
	require.Equal(t, -1, ring(nil).owner("k"), "an empty ring owns nothing")
}

// The ring of the healthy servers, as a client keeps it: a server that
// fails leaves it, its keys go to the next server and no other key moves;
// back on the ring, every key goes home.
func TestServers_RingFollowsHealth(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	list, err := parseServers([]string{q1 + "/", q2, q3 + "//"}, "baseURL")
	require.NoError(t, err)
	ss := newServers(list, DefaultVirtualNodes, time.Second, 8*time.Second, clock.Now)
	for _, v := range ringVectors[:7] {
		require.Equal(t, v.want, ss.pick(v.key).base.String(), "trailing slashes are not part of a server's name: %q", v.key)
	}
	home := map[string]*server{}
	for i := range 500 {
		k := fmt.Sprintf("q%d:*:g", i)
		home[k] = ss.pick(k)
	}
	down := list[2]
	ss.failed(down, 0, "answered 502")
	moved := 0
	for k, h := range home {
		got := ss.pick(k)
		require.NotSame(t, down, got, k)
		if h != down {
			require.Same(t, h, got, "%s moved though its server is healthy", k)
		} else {
			moved++
		}
	}
	require.Positive(t, moved, "queen-3 owned none of 500 keys")
	require.Equal(t, q1, ss.pick("orders:*:__QUEUE_MODE__").base.String(), "vector: queen-3 out")

	clock.Advance(time.Second - time.Millisecond)
	require.NotSame(t, down, ss.pick("orders:*:__QUEUE_MODE__"), "back before its back-off ran out")
	clock.Advance(time.Millisecond)
	for k, h := range home {
		require.Same(t, h, ss.pick(k), "%s did not go home after the re-admission", k)
	}
}

// The back-off doubles for each failure in a row up to its cap, is at least
// a Retry-After, and is forgotten when the server answers.
func TestServers_BackoffDoublesToItsCap(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	list, err := parseServers([]string{q1, q2}, "baseURL")
	require.NoError(t, err)
	ss := newServers(list, 4, time.Second, 5*time.Second, clock.Now)
	s := list[0]
	for i, want := range []time.Duration{1, 2, 4, 5, 5} {
		ss.failed(s, 0, "answered 500")
		ss.failed(s, 0, "answered 502") // in flight when it went down: the same failure
		st := ss.states()[0]
		require.False(t, st.Healthy)
		require.Equal(t, i+1, st.Failures)
		require.Equal(t, want*time.Second, st.ReadmitAt.Sub(clock.Now()), "failure %d", st.Failures)
		require.Equal(t, "answered 502", st.LastError)
		clock.Advance(want * time.Second)
		require.True(t, ss.states()[0].Healthy, "re-admitted after %s", want*time.Second)
	}
	ss.failed(s, time.Minute, "answered 503")
	require.Equal(t, time.Minute, ss.states()[0].ReadmitAt.Sub(clock.Now()), "a Retry-After beyond the back-off")
	ss.failed(s, 2*time.Minute, "answered 503")
	require.Equal(t, 2*time.Minute, ss.states()[0].ReadmitAt.Sub(clock.Now()), "a later Retry-After off the ring")
	ss.failed(s, 0, "answered 500")
	require.Equal(t, 2*time.Minute, ss.states()[0].ReadmitAt.Sub(clock.Now()), "never brought forward")
	ss.answered(s)
	st := ss.states()[0]
	require.Equal(t, ServerState{URL: q1, Healthy: true}, st, "an answer readmits at once and forgets the failures")
	ss.failed(s, 0, "answered 500")
	require.Equal(t, time.Second, ss.states()[0].ReadmitAt.Sub(clock.Now()), "the back-off starts over")
}

// Calls with no key take the healthy servers in turn; with none healthy,
// the one due back first gets the call rather than none.
func TestServers_RoundRobinOverHealthy(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	list, err := parseServers([]string{q1, q2, q3}, "baseURL")
	require.NoError(t, err)
	ss := newServers(list, DefaultVirtualNodes, time.Second, time.Minute, clock.Now)
	count := func() map[string]int {
		n := map[string]int{}
		for range 6 {
			n[ss.pick("").base.String()]++
		}
		return n
	}
	require.Equal(t, map[string]int{q1: 2, q2: 2, q3: 2}, count())
	ss.failed(list[1], 0, "dial: connection refused")
	require.Equal(t, map[string]int{q1: 3, q3: 3}, count())
	clock.Advance(200 * time.Millisecond)
	ss.failed(list[0], 0, "x") // due back 200 ms after list[1]
	clock.Advance(300 * time.Millisecond)
	ss.failed(list[2], 0, "x") // 500 ms after
	clock.Advance(100 * time.Millisecond)
	require.Same(t, list[1], ss.pick(""), "none healthy: the one due back first")
	require.Same(t, list[1], ss.pick("orders:*:g"))
}

func TestAffinityKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ queue, partition, group, want string }{
		{"orders", "", "", "orders:*:__QUEUE_MODE__"},
		{"orders", queen.DefaultPartition, "billing", "orders:*:billing"},
		{"orders", "eu", "billing", "orders:eu:billing"},
		{"orders", "eu", queen.QueueModeGroup, "orders:eu:__QUEUE_MODE__"},
		{"", "eu", "billing", ""},
	} {
		require.Equal(t, c.want, affinityKey(c.queue, c.partition, c.group), "%+v", c)
	}
	require.Equal(t, "orders:eu:billing", popRoute(&queen.PopRequest{Queue: "orders", Partition: "eu", Group: "billing"}))
	require.Equal(t, "orders:*:__QUEUE_MODE__", pushRoute([]queen.PushItem{{Queue: "orders"}, {Queue: "orders", Partition: queen.DefaultPartition}}))
	require.Equal(t, "orders:eu:__QUEUE_MODE__", pushRoute([]queen.PushItem{{Queue: "orders", Partition: "eu"}}))
	require.Empty(t, pushRoute([]queen.PushItem{{Queue: "orders"}, {Queue: "orders", Partition: "eu"}}), "two lanes: round-robin")
	require.Empty(t, pushRoute([]queen.PushItem{{Queue: "orders"}, {Queue: "emails"}}), "two queues: round-robin")
	require.Empty(t, pushRoute(nil))
}

// What choosing a server adds to each request: one server, three with a
// key, three without.
func BenchmarkServers_Pick(b *testing.B) {
	for _, c := range []struct {
		name string
		urls []string
		key  string
	}{{"one", []string{q1}, "orders:*:g"}, {"three-keyed", []string{q1, q2, q3}, "orders:*:g"}, {"three-round-robin", []string{q1, q2, q3}, ""}} {
		b.Run(c.name, func(b *testing.B) {
			list, err := parseServers(c.urls, "baseURL")
			require.NoError(b, err)
			ss := newServers(list, DefaultVirtualNodes, time.Second, time.Minute, time.Now)
			b.ReportAllocs()
			for b.Loop() {
				_ = ss.pick(c.key)
			}
		})
	}
}
