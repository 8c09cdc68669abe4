// Package console serves an operator console for a [queen.Client]: HTML
// pages that show queues, partitions, consumer groups, dead letters,
// parked messages and traces, and act on them (replay, delete, seek,
// change a subscription, edit a queue's configuration, toggle
// maintenance mode).
//
// [New] returns an [http.Handler]; mount it under any prefix on any mux,
// with the prefix stripped:
//
//	mux.Handle("/ops/console/", http.StripPrefix("/ops/console", console.New(b, nil)))
//
// or let the handler strip it with [Options.Prefix]. Links are derived
// from the path the request came in on, so both ways work.
//
// Everything the pages need is in the binary: templates, CSS and a small
// script (embedded), charts drawn as inline SVG. Nothing is fetched from
// elsewhere, so the console works offline.
//
// # Access control
//
// [Options.Authorize] has the meaning and levels of httpapi's hook: pages
// need [httpapi.AccessReadOnly], replays, seeks, subscriptions and
// configuration [httpapi.AccessReadWrite], deletions and maintenance mode
// [httpapi.AccessAdmin]. A user whose level is too low sees no button for
// the action, and the server refuses the action anyway. The login page
// keeps the token a user types in an HttpOnly, SameSite=Strict cookie;
// every later request reaches the hook as if it carried the token in
// "Authorization: Bearer <token>", so a hook written for httpapi works
// unchanged.
//
// # Cross-site requests
//
// Only POSTs change anything. Each must carry the form field csrf, a
// token bound to the browser's session cookie, and must not come from
// another site: a Sec-Fetch-Site other than same-origin, or an Origin
// whose host is not the request's, is refused with 403.
//
// # Large stores
//
// Every list is paged on the server. A queue's partitions are read a page
// at a time through [queen.Broker.ListPartitions] when the client has it
// (a remote client pages a full listing instead).
package console

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/httpapi/history"
)

// Options configures the console. A nil *Options and zero fields mean
// the defaults.
type Options struct {
	// Prefix is a path prefix the handler strips itself, for routers that
	// pass the whole path on (chi's Mount). Defaults to none: mount the
	// handler with http.StripPrefix, or at the root.
	Prefix string

	// Authorize, when set, is called for every page with
	// [httpapi.AccessReadOnly] and for every action with its level (see
	// the package documentation), with the request carrying the login
	// cookie's token as its Authorization header. An error wrapping
	// [httpapi.ErrUnauthorized] sends a browser to the login page; any
	// other error refuses with 403. Defaults to letting everything
	// through.
	Authorize func(r *http.Request, level httpapi.Access) error

	// Refresh is how often the live parts of a page reload (at least a
	// second: each reload renders the page). Defaults to 5 seconds; a
	// negative value turns live refresh off.
	Refresh time.Duration

	// History, when set, supplies the throughput charts and the queues'
	// rates: the recorder of the broker's counters that cmd/queen (or the
	// application) starts once and shares with httpapi. Defaults to none:
	// the pages say there is no chart.
	History *history.Recorder

	// Logger receives failures of the client that a page reports as
	// "internal error". Defaults to discarding them.
	Logger *slog.Logger
}

// Names of the cookies the console sets, scoped to its mount path.
const (
	sessionCookie = "queen_console_session"
	tokenCookie   = "queen_console_token"
	resultCookie  = "queen_console_result"
)

// maxForm caps the body of a POST: forms of ids and settings only.
const maxForm = 1 << 20

type handler struct {
	c      queen.Client
	opts   Options
	log    *slog.Logger
	mux    *http.ServeMux
	secret []byte // HMAC key of the CSRF tokens, new for each handler
	pages  *pages
	// now is the client's clock (both queen.Client implementations have
	// one, a fake clock included), so ages and charts agree with the
	// broker's timestamps.
	now func() time.Time
}

// New returns the console of c. It panics if c is nil.
func New(c queen.Client, opts *Options) http.Handler {
	if c == nil {
		panic("console: New with a nil client")
	}
	h := &handler{c: c, log: slog.New(slog.DiscardHandler), mux: http.NewServeMux(), secret: make([]byte, 32), pages: loadPages()}
	if opts != nil {
		h.opts = *opts
	}
	h.opts.Prefix = strings.TrimRight(h.opts.Prefix, "/")
	h.now = time.Now // a client of someone else's without a clock: the machine's
	if n, ok := c.(interface{ Now() time.Time }); ok {
		h.now = n.Now
	}
	if h.opts.Logger != nil {
		h.log = h.opts.Logger
	}
	if h.opts.Refresh == 0 {
		h.opts.Refresh = 5 * time.Second
	}
	if h.opts.Refresh > 0 && h.opts.Refresh < time.Second {
		h.opts.Refresh = time.Second // each refresh renders the page again
	}
	_, _ = rand.Read(h.secret) // never fails (crypto/rand panics instead)
	h.routes()
	return h
}

func (h *handler) routes() {
	h.mux.HandleFunc("GET /static/{file}", h.static)
	h.mux.HandleFunc("GET /login", h.loginPage)
	h.mux.HandleFunc("POST /login", h.login)
	h.mux.HandleFunc("POST /logout", h.logout)

	h.page("GET /{$}", h.overview)
	h.action("POST /maintenance", httpapi.AccessAdmin, h.maintenance)

	h.page("GET /queues/{queue}", h.queuePage)
	h.action("POST /queues/{queue}/config", httpapi.AccessReadWrite, h.saveConfig)

	h.page("GET /groups", h.groupsPage)
	h.page("GET /groups/{queue}/{group}", h.groupPage)
	h.action("POST /groups/{queue}/{group}/seek", httpapi.AccessReadWrite, h.seek)
	h.action("POST /groups/{queue}/{group}/subscription", httpapi.AccessReadWrite, h.subscription)
	h.action("POST /groups/{queue}/{group}/delete", httpapi.AccessAdmin, h.deleteGroup)

	for _, k := range []letterKind{deadLetters, parked} {
		h.page("GET /"+k.path, h.lettersPage(k))
		h.action("POST /"+k.path+"/replay", httpapi.AccessReadWrite, h.lettersAction(k, true))
		h.action("POST /"+k.path+"/delete", httpapi.AccessAdmin, h.lettersAction(k, false))
	}

	h.page("GET /traces", h.tracesPage)
}

// ServeHTTP serves the console.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := h.opts.Prefix; p != "" {
		if r.URL.Path != p && !strings.HasPrefix(r.URL.Path, p+"/") {
			http.NotFound(w, r)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path = strings.TrimPrefix(r.URL.Path, p)
		if u.RawPath != "" {
			u.RawPath = strings.TrimPrefix(u.RawPath, p)
		}
		r2.URL = &u
		r = r2
	}
	base := baseOf(r)
	if base == "" && r.RequestURI == "" {
		base = h.opts.Prefix
	}
	r = r.WithContext(context.WithValue(r.Context(), baseKey{}, base))
	if r.URL.Path == "" {
		http.Redirect(w, r, base+"/", http.StatusMovedPermanently)
		return
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	if r.Method == http.MethodPost {
		// Read the form here, so that one over maxForm is refused as that,
		// not as a form without its CSRF token.
		if err := r.ParseForm(); err != nil {
			var big *http.MaxBytesError
			if errors.As(err, &big) {
				h.fail(w, r, http.StatusRequestEntityTooLarge, "form refused: over 1 MiB")
				return
			}
			h.fail(w, r, http.StatusBadRequest, "malformed form")
			return
		}
	}
	h.mux.ServeHTTP(w, withToken(r))
}

// baseOf is the path the console is mounted at, without the final slash:
// what the request's original path has before the path the handler sees.
func baseOf(r *http.Request) string {
	orig := r.RequestURI
	if i := strings.IndexAny(orig, "?#"); i >= 0 {
		orig = orig[:i]
	}
	if strings.HasPrefix(orig, "http://") || strings.HasPrefix(orig, "https://") { // a proxy request
		if i := strings.Index(orig[8:], "/"); i >= 0 {
			orig = orig[8+i:]
		}
	}
	seen := r.URL.EscapedPath()
	if orig == "" || !strings.HasSuffix(orig, seen) {
		return ""
	}
	return strings.TrimRight(orig[:len(orig)-len(seen)], "/")
}

type baseKey struct{}

// base is the console's mount path for r (see baseOf), "" at the root.
func base(r *http.Request) string {
	b, _ := r.Context().Value(baseKey{}).(string)
	return b
}

// authorize asks the hook for level.
func (h *handler) authorize(r *http.Request, level httpapi.Access) error {
	if h.opts.Authorize == nil {
		return nil
	}
	return h.opts.Authorize(r, level)
}

// can reports whether the request has level, to show or hide buttons.
func (h *handler) can(r *http.Request, level httpapi.Access) bool {
	return h.authorize(r, level) == nil
}

// page registers a read-only page.
func (h *handler) page(pattern string, fn func(w http.ResponseWriter, r *http.Request)) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := h.authorize(r, httpapi.AccessReadOnly); err != nil {
			h.refuse(w, r, err)
			return
		}
		fn(w, r)
	})
}

// action registers a state change: a POST with a valid CSRF token from
// this site, by a user with level.
func (h *handler) action(pattern string, level httpapi.Access, fn func(w http.ResponseWriter, r *http.Request)) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := h.checkPost(r); err != nil {
			h.fail(w, r, http.StatusForbidden, err.Error())
			return
		}
		if err := h.authorize(r, level); err != nil {
			h.refuse(w, r, err)
			return
		}
		fn(w, r)
	})
}

// refuse answers a refused authorization: the login page for a browser
// with no or a bad token, 403 otherwise.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, httpapi.ErrUnauthorized) {
		if r.Method == http.MethodGet {
			http.Redirect(w, r, base(r)+"/login", http.StatusSeeOther)
			return
		}
		h.fail(w, r, http.StatusUnauthorized, "log in first: "+err.Error())
		return
	}
	h.fail(w, r, http.StatusForbidden, "not allowed: "+err.Error())
}
