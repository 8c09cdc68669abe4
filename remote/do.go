package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/verbatim"
)

// maxAnswer caps an answer's body; a larger one is a transport failure.
const maxAnswer = 256 << 20

// request is one API call.
type request struct {
	op     string // for errors: "push", "pop", ...
	method string
	path   string // escaped, from the API root: "/api/v1/push"
	query  url.Values
	body   any           // sent as JSON when not nil
	extra  time.Duration // added to the request timeout (long polls)
	safe   bool          // may be repeated after a failure past sending
	// anyStatus decodes the body whatever the status (GET /health
	// answers 503 with the same shape).
	anyStatus bool
	// notFound, when set, maps a 404 (the route or the thing is missing).
	notFound func(msg string) error
	// route is the affinity key choosing the server (see ring.go); empty
	// routes round-robin.
	route string
	// at is the server the last try went to, for error messages.
	at *server
}

// answer is what a request got back.
type answer struct {
	status     int
	body       []byte
	retryAfter string // the Retry-After header
}

// call sends req and decodes a 2xx answer's JSON body into out (when not
// nil). Error answers map to queen's sentinels (see errorFor).
func (c *Client) call(ctx context.Context, req *request, out any) error {
	a, err := c.send(ctx, req)
	if err != nil {
		return err
	}
	if (a.status < 200 || a.status > 299) && !req.anyStatus {
		return c.errorFor(req, a)
	}
	if out == nil || a.status == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return &TransportError{Op: req.op, URL: c.redacted(req), Err: fmt.Errorf("answer %d is not the API's JSON: %w", a.status, err)}
	}
	return nil
}

// send runs req with retries and returns the answer of the last try. Each
// try goes to the server the request's route picks (see servers.pick); a
// transport failure or a 5xx answer takes that server off the ring, so a
// retry goes to the next one, at once when another is healthy.
func (c *Client) send(ctx context.Context, req *request) (*answer, error) {
	if c.closed.Load() {
		return nil, queen.ErrClosed
	}
	var body []byte
	if req.body != nil {
		var err error
		if body, err = verbatim.Marshal(req.body); err != nil { // payloads byte for byte
			return nil, &queen.ArgumentError{Field: req.op, Reason: "cannot encode the request: " + err.Error()}
		}
	}
	wait := c.backoff
	var last error // the failure of the previous try
	for try := 0; ; try++ {
		srv := c.servers.pick(req.route)
		req.at = srv
		var a *answer
		err := c.checkStore(ctx, srv, req)
		if _, ok := err.(*StoreMismatchError); ok {
			return nil, err // nothing was sent: the server is of another store
		}
		if err == nil {
			a, err = c.once(ctx, srv, req, body)
		}
		retry := false
		var after time.Duration // a 503's Retry-After
		switch {
		case err == nil && a.status >= 500 && a.status != http.StatusNotImplemented:
			after = retryAfter(a, c.servers.now())
			c.servers.failed(srv, after, fmt.Sprintf("answered %d", a.status))
			retry = req.safe
		case err == nil: // 501 too: the server is up, it lacks the route
			c.servers.answered(srv)
			return a, nil
		case c.closed.Load():
			return nil, queen.ErrClosed
		case ctx.Err() != nil && last != nil: // ctx ended while retrying: the failure is the news
			return nil, &TransportError{Op: req.op, URL: c.redacted(req), Err: errors.Join(last, ctx.Err())}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			c.servers.failed(srv, 0, err.Error())
			retry = req.safe || notSent(err)
		}
		if !retry || try >= c.retries {
			if err != nil {
				return nil, &TransportError{Op: req.op, URL: c.redacted(req), Err: err}
			}
			return a, nil
		}
		last = err
		if last == nil {
			last = fmt.Errorf("server answered %d", a.status)
		}
		d := wait
		switch {
		case c.servers.anyHealthy(): // another server takes the retry
			d = 0
		case after > 0:
			if dl, ok := ctx.Deadline(); ok && dl.Sub(machineNow()) < after {
				return a, nil // it would be back after the caller stopped waiting
			}
			d = after
		default:
			wait = min(wait*2, 5*time.Second)
		}
		c.log.Debug("queen: remote: retrying", "op", req.op, "try", try+1, "wait", d, "server", srv.base.Redacted(),
			"err", err, "status", statusOf(a))
		if d == 0 {
			continue
		}
		if err := c.pause(ctx, d); err != nil {
			if errors.Is(err, queen.ErrClosed) {
				return nil, err
			}
			return nil, &TransportError{Op: req.op, URL: c.redacted(req), Err: errors.Join(last, err)}
		}
	}
}

// checkStore makes sure, before req is sent to srv, that srv holds the
// store of the client's URL list (see servers.noteStore): the first time a
// request other than a GET (a push, an ack, a transaction, a change of
// configuration) is routed to srv, srv is asked GET /health and the
// storeId of its answer noted. A server of another store refuses the call
// with a *StoreMismatchError. A server that cannot be asked (a transport
// failure or a 5xx) fails the try with a storeCheckError, as if req had
// not been sent, and is asked again at the next. With a single server,
// and for reads (pops included: a pop takes what a store holds and strands
// nothing; the ack of what it took is checked), nothing is asked.
func (c *Client) checkStore(ctx context.Context, srv *server, req *request) error {
	if len(c.servers.list) == 1 || req.method == http.MethodGet {
		return nil
	}
	if srv.checked.Load() {
		return srv.refusal(req.op)
	}
	select {
	case srv.check <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop.Done():
		return queen.ErrClosed
	}
	defer func() { <-srv.check }()
	if srv.checked.Load() { // asked meanwhile
		return srv.refusal(req.op)
	}
	a, err := c.once(ctx, srv, &request{op: "health", method: http.MethodGet, path: "/health"}, nil)
	switch {
	case err != nil:
		return &storeCheckError{err}
	case a.status >= 500 && a.status != http.StatusNotImplemented:
		return &storeCheckError{fmt.Errorf("answered %d", a.status)}
	}
	var h struct {
		StoreID string `json:"storeId"`
	}
	if a.status >= 200 && a.status <= 299 {
		_ = json.Unmarshal(a.body, &h) // an answer not ours names no store
	}
	c.servers.noteStore(srv, h.StoreID)
	return srv.refusal(req.op)
}

// storeCheckError is a failure of the GET /health that checkStore sends
// before a request: the request itself was not sent.
type storeCheckError struct{ err error }

func (e *storeCheckError) Error() string {
	return "asking GET /health which store the server holds: " + e.err.Error()
}

func (e *storeCheckError) Unwrap() error { return e.err }

// pause waits d, or until ctx ends (its error) or the client closes
// (ErrClosed).
func (c *Client) pause(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		c.sleep(ctx, d)
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	if c.pausing != nil {
		c.pausing(d)
	}
	select {
	case <-t.C:
		return nil
	case <-ctx.Done(): // the failure that made us wait is the news
		return ctx.Err()
	case <-c.stop.Done():
		return queen.ErrClosed
	}
}

// maxRetryAfter caps how long a Retry-After keeps a call waiting (within
// its ctx) and a server off the ring.
const maxRetryAfter = 5 * time.Minute

// retryAfter reads a 503 answer's Retry-After, in seconds or as an HTTP
// date; zero when there is none, it is not one of those, or it is past.
func retryAfter(a *answer, now time.Time) time.Duration {
	if a.status != http.StatusServiceUnavailable || a.retryAfter == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseUint(a.retryAfter, 10, 32); err == nil {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(a.retryAfter); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

func statusOf(a *answer) int {
	if a == nil {
		return 0
	}
	return a.status
}

// once sends one try of req to srv.
func (c *Client) once(ctx context.Context, srv *server, req *request, body []byte) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+req.extra)
	defer cancel()
	defer context.AfterFunc(c.stop, cancel)()
	u := urlOf(srv, req)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set("User-Agent", "queen-remote/"+queen.Version)
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.hc.Do(hr)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(data) > maxAnswer {
		return nil, fmt.Errorf("answer larger than %d bytes", maxAnswer)
	}
	return &answer{status: res.StatusCode, body: data, retryAfter: res.Header.Get("Retry-After")}, nil
}

func urlOf(srv *server, req *request) string {
	s := srv.base.String() + req.path
	if len(req.query) > 0 {
		s += "?" + req.query.Encode()
	}
	return s
}

// redacted is the request's URL for error messages, on the server its
// last try went to.
func (c *Client) redacted(req *request) string {
	base := c.base
	if req.at != nil {
		base = req.at.base
	}
	return req.method + " " + base.Redacted() + req.path
}

// notSent reports a failure before the request reached the server (or
// before it was sent at all: see checkStore): it is safe to repeat
// whatever the call.
func notSent(err error) bool {
	if _, ok := err.(*storeCheckError); ok {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// pathOf joins escaped path segments.
func pathOf(segs ...string) string {
	var sb strings.Builder
	for i, s := range segs {
		if i%2 == 0 {
			sb.WriteString(s) // literal
		} else {
			sb.WriteString(url.PathEscape(s))
		}
	}
	return sb.String()
}

// machineNow is the machine's clock. A context's deadline is on it, not on
// the broker's clock (Options.Clock), so it is read only to compare with one.
var machineNow = time.Now
