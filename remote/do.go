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
}

// answer is what a request got back.
type answer struct {
	status int
	body   []byte
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

// send runs req with retries and returns the answer of the last try.
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
		a, err := c.once(ctx, req, body)
		retry := false
		switch {
		case err == nil && a.status >= 500 && a.status != http.StatusNotImplemented:
			retry = req.safe
		case err == nil:
			return a, nil
		case c.closed.Load():
			return nil, queen.ErrClosed
		case ctx.Err() != nil && last != nil: // ctx ended while retrying: the failure is the news
			return nil, &TransportError{Op: req.op, URL: c.redacted(req), Err: errors.Join(last, ctx.Err())}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
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
		c.log.Debug("queen: remote: retrying", "op", req.op, "try", try+1, "wait", wait, "err", err, "status", statusOf(a))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done(): // the failure that made us wait is the news
			t.Stop()
			return nil, &TransportError{Op: req.op, URL: c.redacted(req), Err: errors.Join(last, ctx.Err())}
		case <-c.stop.Done():
			t.Stop()
			return nil, queen.ErrClosed
		}
		wait = min(wait*2, 5*time.Second)
	}
}

func statusOf(a *answer) int {
	if a == nil {
		return 0
	}
	return a.status
}

// once sends one try of req.
func (c *Client) once(ctx context.Context, req *request, body []byte) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+req.extra)
	defer cancel()
	defer context.AfterFunc(c.stop, cancel)()
	u := c.urlOf(req)
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
	return &answer{status: res.StatusCode, body: data}, nil
}

func (c *Client) urlOf(req *request) string {
	s := c.base.String() + req.path
	if len(req.query) > 0 {
		s += "?" + req.query.Encode()
	}
	return s
}

// redacted is the request's URL for error messages.
func (c *Client) redacted(req *request) string {
	return req.method + " " + c.base.Redacted() + req.path
}

// notSent reports a failure before the request reached the server: it is
// safe to repeat whatever the call.
func notSent(err error) bool {
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
