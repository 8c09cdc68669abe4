package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/queenlite/queen"
)

// Backup streams a backup of the server's store to w, as
// [queen.Broker.Backup] writes it (GET /api/v1/system/backup, an admin
// route of httpapi): since 0 for a full backup, the next of an earlier
// one for an increment. It returns the next version, which the server
// sends in the X-Queen-Backup-Next trailer once the backup is complete; a
// stream that ends without it (the server failed midway, or a proxy cut
// the connection or dropped trailers) is an error, and what reached w is
// then not a valid backup ([queen.Restore] refuses it).
//
// The request has no timeout but ctx (a backup takes as long as the store
// is big) and is never retried. A server without the route (Queen's own)
// is [queen.ErrUnsupported]; a refused token, as for any call.
func (c *Client) Backup(ctx context.Context, w io.Writer, since uint64) (uint64, error) {
	if c.closed.Load() {
		return 0, queen.ErrClosed
	}
	if w == nil {
		return 0, &queen.ArgumentError{Field: "w", Reason: "must not be nil"}
	}
	req := &request{op: "backup", method: http.MethodGet, path: "/api/v1/system/backup",
		query: url.Values{"since": {strconv.FormatUint(since, 10)}},
		notFound: func(string) error {
			return fmt.Errorf("%w: backup", queen.ErrUnsupported)
		}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.stop, cancel)()
	// Any server will do: the servers of a client share one store (see
	// Options.URLs). A backup is not retried on another, though: what
	// reached w cannot be taken back.
	srv := c.servers.pick(req.route)
	req.at = srv
	hr, err := http.NewRequestWithContext(ctx, req.method, urlOf(srv, req), nil)
	if err != nil {
		return 0, &TransportError{Op: req.op, URL: c.redacted(req), Err: err}
	}
	hr.Header.Set("Accept", "application/octet-stream")
	hr.Header.Set("User-Agent", "queen-remote/"+queen.Version)
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.hc.Do(hr)
	if err != nil {
		if c.closed.Load() {
			return 0, queen.ErrClosed
		}
		if ctx.Err() == nil {
			c.servers.failed(srv, 0, err.Error())
		}
		return 0, &TransportError{Op: req.op, URL: c.redacted(req), Err: err}
	}
	if res.StatusCode < 500 || res.StatusCode == http.StatusNotImplemented {
		c.servers.answered(srv)
	} else {
		c.servers.failed(srv, 0, fmt.Sprintf("answered %d", res.StatusCode))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return 0, c.errorFor(req, &answer{status: res.StatusCode, body: body})
	}
	if _, err := io.Copy(w, res.Body); err != nil {
		if ctx.Err() != nil && c.closed.Load() {
			return 0, queen.ErrClosed
		}
		if cerr := ctx.Err(); cerr != nil {
			return 0, cerr
		}
		return 0, &TransportError{Op: req.op, URL: c.redacted(req), Err: err}
	}
	if msg := res.Trailer.Get("X-Queen-Backup-Error"); msg != "" {
		return 0, fmt.Errorf("queen: remote: backup failed on the server: %s", msg)
	}
	next, err := strconv.ParseUint(res.Trailer.Get("X-Queen-Backup-Next"), 10, 64)
	if err != nil {
		return 0, &TransportError{Op: req.op, URL: c.redacted(req), Err: errors.New("the backup ended without its X-Queen-Backup-Next trailer: incomplete")}
	}
	return next, nil
}
