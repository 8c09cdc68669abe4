package remote

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/clientrt"
)

// Server names the kind of server a [Client] talks to.
type Server int

const (
	// ServerDetect asks the server once, with GET /health, when a call
	// first depends on the answer. The default.
	ServerDetect Server = iota
	// ServerQueenLite is cmd/queen or any server mounting package httpapi.
	ServerQueenLite
	// ServerQueen is Queen MQ's own server (see the package doc).
	ServerQueen
)

// String names the server kind.
func (s Server) String() string {
	switch s {
	case ServerDetect:
		return "detect"
	case ServerQueenLite:
		return "queenlite"
	case ServerQueen:
		return "queen"
	}
	return fmt.Sprintf("Server(%d)", int(s))
}

// Options configures a [Client]. A nil *Options and zero fields mean the
// defaults.
type Options struct {
	// HTTPClient sends the requests. Its Timeout, if any, applies on top of
	// RequestTimeout and must leave room for long polls. Defaults to a
	// client on Transport.
	HTTPClient *http.Client

	// Transport is the round tripper of the default HTTPClient; ignored
	// when HTTPClient is set. Defaults to a clone of
	// [http.DefaultTransport] with more idle connections per host.
	Transport http.RoundTripper

	// Token, when set, is sent as "Authorization: Bearer <Token>" (see
	// cmd/queen's QUEEN_TOKEN and JWT_SECRET). Defaults to none.
	Token string

	// RequestTimeout bounds each request. A waiting pop gets its wait on
	// top of it, so a long poll is never cut short. Defaults to 30
	// seconds.
	RequestTimeout time.Duration

	// Retries is how many times a failed request is tried again (see the
	// package doc for which are). Negative means never. Defaults to 3.
	Retries int

	// RetryBackoff is the wait before the first retry; it doubles for
	// each further one, up to 5 seconds. Defaults to 100 ms.
	RetryBackoff time.Duration

	// DrainTimeout bounds how long [Client.Close] waits for the consume
	// loops started on the client, in total, and is the drain timeout of
	// loops that set none. Defaults to 20 seconds.
	DrainTimeout time.Duration

	// Logger receives retries (debug) and the consume loops' warnings.
	// Defaults to discarding them.
	Logger *slog.Logger

	// Observer receives the consume loops' events: outcomes and handlers
	// in flight. Defaults to none.
	Observer queen.Observer

	// Clock is the client's time source: what [Client.Now] reports (and a
	// server fronting the client with package httpapi measures lag
	// against) and what retry policies measure message ages against.
	// Defaults to the system clock; tests inject a fake one.
	Clock queen.Clock

	// Server says which kind of server BaseURL is (all of them, for
	// several). Defaults to [ServerDetect].
	Server Server

	// URLs lists the servers' base URLs, for a [Dial] given "" as its
	// baseURL; naming them in both places is an [*queen.ArgumentError].
	// Defaults to the servers of Dial's baseURL.
	URLs []string

	// VirtualNodes is how many points each server has on the affinity ring
	// (see the package doc, "Several servers"). Clients that must agree on
	// where a key goes must use the same number. Defaults to
	// [DefaultVirtualNodes].
	VirtualNodes int

	// ReadmitBackoff is how long a server that failed (a transport error
	// or a 5xx answer) stays off the ring before calls are sent to it
	// again; it doubles for each further failure in a row, up to
	// ReadmitBackoffMax, and is at least a 503's Retry-After. Defaults to
	// 1 second.
	ReadmitBackoff time.Duration

	// ReadmitBackoffMax caps ReadmitBackoff's doubling. Defaults to 30
	// seconds, and is never below ReadmitBackoff.
	ReadmitBackoffMax time.Duration
}

// Client is a [queen.Client] over HTTP. Make one with [Dial]; it is safe
// for concurrent use and holds idle connections until [Client.Close].
type Client struct {
	base    *url.URL // the first server's
	servers *servers
	sleep   func(ctx context.Context, d time.Duration) // a test's, instead of waiting
	pausing func(d time.Duration)                      // a test's, told when a real wait starts
	hc      *http.Client
	ownHC   bool
	token   string
	timeout time.Duration
	retries int
	backoff time.Duration
	log     *slog.Logger
	rt      runtime

	server atomic.Int32 // a Server; ServerDetect until known
	detect sync.Mutex   // one /health probe at a time

	closed atomic.Bool
	stop   context.Context // cancelled by Close: aborts requests in flight
	cancel context.CancelFunc
}

var _ queen.Client = (*Client)(nil)

// Dial returns a client of the server at baseURL (scheme, host, and the
// prefix the API is mounted under, if any: "http://host:6632" or
// "https://host/queen"), or of several servers, their base URLs separated
// by commas (the form of a QUEEN_URL variable:
// "http://q1:6632,http://q2:6632"), which may instead be listed in
// [Options].URLs with baseURL "". Each is validated; see the package doc,
// "Several servers", for which server a call goes to. Dial does not
// contact any server: the first call does, so an unreachable server fails
// that call within its ctx. opts may be nil.
func Dial(baseURL string, opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	raws, field := strings.Split(baseURL, ","), "baseURL"
	switch {
	case baseURL != "" && len(o.URLs) > 0:
		return nil, &queen.ArgumentError{Field: "Options.URLs", Reason: "name the servers in baseURL or in Options.URLs, not both"}
	case len(o.URLs) > 0:
		raws, field = o.URLs, "Options.URLs"
	}
	list, err := parseServers(raws, field)
	if err != nil {
		return nil, err
	}
	for _, d := range []struct {
		field string
		d     time.Duration
	}{{"RequestTimeout", o.RequestTimeout}, {"RetryBackoff", o.RetryBackoff}, {"DrainTimeout", o.DrainTimeout},
		{"ReadmitBackoff", o.ReadmitBackoff}, {"ReadmitBackoffMax", o.ReadmitBackoffMax}} {
		if d.d < 0 {
			return nil, &queen.ArgumentError{Field: "Options." + d.field, Reason: "must not be negative"}
		}
	}
	switch {
	case o.Server < ServerDetect || o.Server > ServerQueen:
		return nil, &queen.ArgumentError{Field: "Options.Server", Reason: fmt.Sprintf("unknown value %d", int(o.Server))}
	case o.VirtualNodes < 0:
		return nil, &queen.ArgumentError{Field: "Options.VirtualNodes", Reason: "must not be negative"}
	}
	c := &Client{base: list[0].base, hc: o.HTTPClient, token: o.Token, timeout: o.RequestTimeout, retries: o.Retries,
		backoff: o.RetryBackoff, log: o.Logger}
	if c.hc == nil {
		tr := o.Transport
		if tr == nil {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.MaxIdleConnsPerHost = 64
			tr = t
		}
		c.hc, c.ownHC = &http.Client{Transport: tr}, true
	}
	if c.timeout == 0 {
		c.timeout = 30 * time.Second
	}
	switch {
	case c.retries == 0:
		c.retries = 3
	case c.retries < 0:
		c.retries = 0
	}
	if c.backoff == 0 {
		c.backoff = 100 * time.Millisecond
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.server.Store(int32(o.Server))
	c.servers = newServers(list, cmp.Or(o.VirtualNodes, DefaultVirtualNodes), cmp.Or(o.ReadmitBackoff, time.Second),
		max(cmp.Or(o.ReadmitBackoffMax, 30*time.Second), cmp.Or(o.ReadmitBackoff, time.Second)), nowOf(o.Clock))
	c.stop, c.cancel = context.WithCancel(context.Background())
	c.rt = clientrt.New(c, clientrt.Options{DrainTimeout: o.DrainTimeout, Logger: c.log, Observer: o.Observer, Clock: o.Clock}).(runtime)
	return c, nil
}

// runtime is what c's builders, consume loops and transactions share,
// kept by package queen (see internal/clientrt).
type runtime interface {
	Queue(name string) *queen.QueueBuilder
	Transaction() *queen.Transaction
	Admin() *queen.Admin
	Settled(items []queen.AckItem, results []queen.AckResult)
	Close() error
	Now() time.Time
}

// Close drains the consume loops started on c (see
// [queen.Consumer.Stop]), within Options.DrainTimeout in total, then
// aborts the requests still in flight and closes idle connections. Every
// later call returns [queen.ErrClosed]. It returns what the drains left
// unsettled ([*queen.DrainError]s joined). Close is idempotent.
func (c *Client) Close() error {
	if c.closed.Load() {
		return nil
	}
	err := c.rt.Close()
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	if c.ownHC {
		c.hc.CloseIdleConnections()
	}
	return err
}

// Queue starts a builder on the named queue, with the defaults and
// semantics of [queen.Broker.Queue].
func (c *Client) Queue(name string) *queen.QueueBuilder { return c.rt.Queue(name) }

// Transaction starts a transaction builder, as [queen.Broker.Transaction].
func (c *Client) Transaction() *queen.Transaction { return c.rt.Transaction() }

// Admin returns the administrative calls under Queen's names, as
// [queen.Broker.Admin].
func (c *Client) Admin() *queen.Admin { return c.rt.Admin() }

// Now returns the time on the client's clock ([Options.Clock], the system
// clock by default): the clock a server fronting the client with package
// httpapi reports against.
func (c *Client) Now() time.Time { return c.rt.Now() }

// BaseURL returns the URL the client was dialled with, without a trailing
// slash: the first one, when it was dialled with several (see
// [Client.Servers]).
func (c *Client) BaseURL() string { return c.base.String() }

// nowOf returns the time source of the servers' health: the client's
// clock.
func nowOf(clock queen.Clock) func() time.Time {
	if clock == nil {
		return time.Now
	}
	return clock.Now
}

// serverKind returns the kind of server, asking GET /health once if it is
// not known yet. A server that cannot be asked is taken for ours until it
// answers.
func (c *Client) serverKind(ctx context.Context) Server {
	if s := Server(c.server.Load()); s != ServerDetect {
		return s
	}
	c.detect.Lock()
	defer c.detect.Unlock()
	if s := Server(c.server.Load()); s != ServerDetect {
		return s
	}
	var h struct {
		Server  string `json:"server"`
		StoreID string `json:"storeId"`
	}
	req := &request{op: "health", method: http.MethodGet, path: "/health", safe: true, anyStatus: true}
	if err := c.call(ctx, req, &h); err != nil {
		return ServerQueenLite
	}
	if h.StoreID != "" && len(c.servers.list) > 1 { // the answer checks that server's store too (see checkStore)
		c.servers.noteStore(req.at, h.StoreID)
	}
	s := ServerQueenLite
	if h.Server != "" && !strings.HasPrefix(h.Server, "queen (Go") {
		s = ServerQueen
	}
	c.server.Store(int32(s))
	return s
}

// unsupportedOn returns ErrUnsupported when the server is Queen's.
func (c *Client) unsupportedOn(ctx context.Context, what string) error {
	if c.serverKind(ctx) == ServerQueen {
		return fmt.Errorf("%w: %s on Queen's server", queen.ErrUnsupported, what)
	}
	return nil
}
