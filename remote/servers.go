package remote

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenlite/queen"
)

// ServerState is what a [Client] knows of one of its servers, as
// [Client.Servers] reports it.
type ServerState struct {
	// URL is the server's base URL as dialled, without a trailing slash,
	// a password in it replaced by "xxxxx".
	URL string
	// Healthy is false from a transport failure or a 5xx answer until the
	// server is re-admitted: at ReadmitAt, or when it answers a call sent
	// to it because no server was healthy.
	Healthy bool
	// Failures is how many times in a row the server failed since it last
	// answered: once each time it was on the ring (the calls in flight to
	// it when it went down are one failure).
	Failures int
	// ReadmitAt is when an unhealthy server goes back on the ring; zero
	// for a healthy one.
	ReadmitAt time.Time
	// LastError is the last failure seen on the server, empty once it
	// answered again.
	LastError string
}

// server is one of a client's servers.
type server struct {
	base *url.URL // what requests go to
	name string   // its name on the ring: the URL as given, no trailing "/"

	// Guarded by servers.mu.
	healthy  bool
	failures int
	readmit  time.Time
	lastErr  string

	// The store behind it, learned once from its GET /health (see
	// Client.checkStore and servers.noteStore). check is held while it is
	// asked (a lock a waiter's ctx can give up on); checked is set once
	// the answer is in, refused before it when calls to it must fail.
	check   chan struct{}
	checked atomic.Bool
	refused *StoreMismatchError // Op left empty: see refusal
}

// refusal is the error of a call op routed to s: a *StoreMismatchError
// when s holds another store than its list's, else nil.
func (s *server) refusal(op string) error {
	if s.refused == nil {
		return nil
	}
	e := *s.refused
	e.Op = op
	return &e
}

// servers is a client's servers, their health and the ring of the healthy
// ones.
type servers struct {
	list       []*server
	names      []string // list's names, for newRing
	replicas   int
	backoff    time.Duration // the first time out of the ring
	backoffMax time.Duration
	now        func() time.Time

	mu   sync.Mutex
	ring ring   // of the healthy servers
	next uint64 // round-robin counter

	storeMu sync.Mutex
	store   string  // the list's store: the first storeId a server named
	storeAt *server // the server that named it
}

// parseServers validates the servers' base URLs: each is "http" or
// "https", has a host, no query nor fragment, and appears once.
func parseServers(raws []string, field string) ([]*server, error) {
	var list []*server
	seen := map[string]bool{}
	for _, raw := range raws {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw)
		if err != nil {
			return nil, &queen.ArgumentError{Field: field, Reason: err.Error()}
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, &queen.ArgumentError{Field: field, Reason: fmt.Sprintf("scheme must be http or https, not %q", u.Scheme)}
		}
		if u.Host == "" {
			return nil, &queen.ArgumentError{Field: field, Reason: fmt.Sprintf("%q has no host", u.Redacted())}
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, &queen.ArgumentError{Field: field, Reason: "must not have a query or fragment"}
		}
		u.Path = strings.TrimRight(u.Path, "/")
		u.RawPath = ""
		s := &server{base: u, name: strings.TrimRight(raw, "/"), healthy: true, check: make(chan struct{}, 1)}
		if seen[s.base.String()] {
			return nil, &queen.ArgumentError{Field: field, Reason: fmt.Sprintf("%q is listed twice", u.Redacted())}
		}
		seen[s.base.String()] = true
		list = append(list, s)
	}
	if len(list) == 0 {
		return nil, &queen.ArgumentError{Field: field, Reason: "names no server"}
	}
	return list, nil
}

func newServers(list []*server, replicas int, backoff, backoffMax time.Duration, now func() time.Time) *servers {
	ss := &servers{list: list, replicas: replicas, backoff: backoff, backoffMax: backoffMax, now: now}
	for _, s := range list {
		ss.names = append(ss.names, s.name)
	}
	ss.rebuildLocked()
	return ss
}

// rebuildLocked places the healthy servers on the ring.
func (ss *servers) rebuildLocked() {
	var members []int
	for i, s := range ss.list {
		if s.healthy {
			members = append(members, i)
		}
	}
	ss.ring = newRing(ss.names, members, ss.replicas)
}

// pick returns the server a request with the affinity key goes to: the
// key's owner on the ring of healthy servers, or the next healthy server in
// turn for no key. With no server healthy it returns the one due back
// first: trying a server that may be back beats refusing to send.
func (ss *servers) pick(key string) *server {
	if len(ss.list) == 1 {
		return ss.list[0]
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.readmitLocked()
	if len(ss.ring) == 0 {
		first := ss.list[0]
		for _, s := range ss.list[1:] {
			if s.readmit.Before(first.readmit) {
				first = s
			}
		}
		return first
	}
	if key != "" {
		return ss.list[ss.ring.owner(key)]
	}
	n := uint64(len(ss.ring) / ss.replicas) // healthy servers
	i := ss.next % n
	ss.next++
	for _, s := range ss.list {
		if s.healthy {
			if i == 0 {
				return s
			}
			i--
		}
	}
	return ss.list[0] // not reached: the ring has n healthy servers
}

// anyHealthy reports whether a server is on the ring (or due back): with
// one server, never, so its retries wait.
func (ss *servers) anyHealthy() bool {
	if len(ss.list) == 1 {
		return false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.readmitLocked()
	return len(ss.ring) > 0
}

// readmitLocked puts back on the ring the servers whose back-off is over.
func (ss *servers) readmitLocked() {
	now, changed := ss.now(), false
	for _, s := range ss.list {
		if !s.healthy && !now.Before(s.readmit) {
			s.healthy, changed = true, true
		}
	}
	if changed {
		ss.rebuildLocked()
	}
}

// failed takes s off the ring after a transport failure or a 5xx answer,
// for the back-off (doubled for each failure in a row since it last
// answered, up to backoffMax) or for at least the answer's Retry-After. A
// server already off the ring does not fail again: the other calls that
// were in flight to it when it went down (or that went to it because no
// server was healthy) are the same outage, and only a Retry-After can
// keep it off longer.
func (ss *servers) failed(s *server, retryAfter time.Duration, why string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.lastErr = why
	if !s.healthy {
		if t := ss.now().Add(retryAfter); t.After(s.readmit) {
			s.readmit = t
		}
		return
	}
	s.failures++
	d := ss.backoff
	for i := 1; i < s.failures && d < ss.backoffMax; i++ {
		d *= 2
	}
	d = max(min(d, ss.backoffMax), retryAfter)
	s.readmit, s.healthy = ss.now().Add(d), false
	ss.rebuildLocked()
}

// answered records that s answered (any status but a 5xx): it is healthy
// and its failures are forgotten.
func (ss *servers) answered(s *server) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s.healthy && s.failures == 0 {
		return
	}
	s.failures, s.readmit, s.lastErr = 0, time.Time{}, ""
	if !s.healthy {
		s.healthy = true
		ss.rebuildLocked()
	}
}

// noteStore records, once, the store s named on GET /health (id, "" for
// none). The first id a server of the list names is the list's store; a
// server naming another one is refused from then on (see refusal), and
// one naming none (Queen's server, whose servers share a database) never
// is.
func (ss *servers) noteStore(s *server, id string) {
	ss.storeMu.Lock()
	defer ss.storeMu.Unlock()
	if s.checked.Load() {
		return
	}
	switch {
	case id == "":
	case ss.store == "":
		ss.store, ss.storeAt = id, s
	case id != ss.store:
		s.refused = &StoreMismatchError{URL: s.base.Redacted(), StoreID: id, ListURL: ss.storeAt.base.Redacted(), ListStoreID: ss.store}
	}
	s.checked.Store(true)
}

// states reports every server, in the order dialled.
func (ss *servers) states() []ServerState {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.readmitLocked()
	out := make([]ServerState, len(ss.list))
	for i, s := range ss.list {
		out[i] = ServerState{URL: s.base.Redacted(), Healthy: s.healthy, Failures: s.failures, LastError: s.lastErr}
		if !s.healthy {
			out[i].ReadmitAt = s.readmit
		}
	}
	return out
}

// Servers reports the client's servers in the order they were dialled,
// with what the client knows of their health (see the package doc,
// "Several servers").
func (c *Client) Servers() []ServerState { return c.servers.states() }

// ServerFor returns the base URL (password redacted) of the server a call
// routed by the affinity key would go to now: the key's owner on the ring
// of the healthy servers. Pops are routed by "queue:partition:group" (see
// the package doc, "Several servers"). An empty key, which routes nothing,
// returns "".
func (c *Client) ServerFor(key string) string {
	if key == "" {
		return ""
	}
	return c.servers.pick(key).base.Redacted()
}
