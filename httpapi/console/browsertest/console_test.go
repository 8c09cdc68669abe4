package browsertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/httpapi/console"
)

// The console under test is mounted below a prefix, as an application
// would mount it, behind an Authorize hook with two tokens: one for an
// administrator and one for a reader.

const (
	mount       = "/ops/console"
	adminToken  = "admin-secret"
	readerToken = "reader-secret"
	// refresh is the live-refresh period of the console under test: short,
	// so a test waiting for a live change (with a deadline) is quick.
	refresh = 150 * time.Millisecond
)

// authorize grants every level to the admin token and read-only to the
// reader's; anything else must log in.
func authorize(r *http.Request, level httpapi.Access) error {
	if level == httpapi.AccessPublic {
		return nil
	}
	switch strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") {
	case adminToken:
		return nil
	case readerToken:
		if level <= httpapi.AccessReadOnly {
			return nil
		}
		return httpapi.ErrForbidden
	}
	return httpapi.ErrUnauthorized
}

type consoleServer struct {
	*seeded
	srv  *httptest.Server
	base string // the console's root URL, ending in "/"

	mu    sync.Mutex
	posts []post // every POST the console answered, in order
}

// post is a POST as the console received and answered it.
type post struct {
	path, origin, fetchSite string
	cookies                 int
	status                  int
}

// recorded returns the POSTs answered so far.
func (c *consoleServer) recorded() []post {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]post(nil), c.posts...)
}

// statusWriter reports the status a handler answers with, before any of
// the answer is sent: a client that has the answer finds it recorded.
type statusWriter struct {
	http.ResponseWriter
	answered func(status int)
	done     bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.done {
		w.done = true
		w.answered(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// record wraps h to log its POSTs.
func (c *consoleServer) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		p := post{path: r.URL.Path, origin: r.Header.Get("Origin"), fetchSite: r.Header.Get("Sec-Fetch-Site"), cookies: len(r.Cookies())}
		sw := &statusWriter{ResponseWriter: w, answered: func(status int) {
			p.status = status
			c.mu.Lock()
			c.posts = append(c.posts, p)
			c.mu.Unlock()
		}}
		h.ServeHTTP(sw, r)
		if !sw.done {
			sw.WriteHeader(http.StatusOK)
		}
	})
}

// startConsole seeds a broker and serves its console on a test server.
func startConsole(t *testing.T) *consoleServer {
	t.Helper()
	s := seed(t)
	c := &consoleServer{seeded: s}
	mux := http.NewServeMux()
	h := console.New(s.b, &console.Options{Authorize: authorize, Refresh: refresh, History: s.history})
	mux.Handle(mount+"/", c.record(http.StripPrefix(mount, h)))
	c.srv = httptest.NewServer(mux)
	t.Cleanup(c.srv.Close)
	c.base = c.srv.URL + mount + "/"
	return c
}

// login opens the console, which sends a visitor without a session to its
// login page, types token and submits, and waits for the overview.
func (c *consoleServer) login(t *testing.T, token string) *tab {
	t.Helper()
	tb := newTab(t, c.base)
	tb.open("", "login")
	tb.run(
		chromedp.SendKeys(`form[data-form="login"] input[name="token"]`, token, chromedp.ByQuery),
		chromedp.Click(`form[data-form="login"] [data-action="login"]`, chromedp.ByQuery),
	)
	tb.waitPage("overview")
	tb.clean("login")
	return tb
}

// row is the selector of the body row KEY of table NAME.
func row(table, key string) string {
	return fmt.Sprintf(`table[data-table=%q] tr[data-row=%s]`, table, cssString(key))
}

// markOld marks the document shown now, so that a wait after a click that
// submits a form looks at the next document only, not at this one (which
// may still show the previous action's result).
func (tb *tab) markOld() {
	tb.t.Helper()
	tb.eval(`window.__queenOld = true`, nil)
}

// fresh is a JavaScript condition true on a document not marked old.
const fresh = `!window.__queenOld && document.readyState !== "loading"`

// confirm checks that the confirmation shown says what will happen (every
// one of want appears in its text), confirms, and returns the result the
// page then shows.
func (tb *tab) confirm(want ...string) string {
	tb.t.Helper()
	text := strings.Join(strings.Fields(tb.text(`[data-confirm]`)), " ")
	for _, w := range want {
		if !strings.Contains(text, w) {
			tb.t.Errorf("confirmation %q does not say %q", text, w)
		}
	}
	tb.markOld()
	tb.click(`[data-confirm] [data-action="confirm"]`)
	return tb.result()
}

// result waits for the next document's result of an action and returns
// its text; an error shown instead fails the test.
func (tb *tab) result() string {
	tb.t.Helper()
	var kind string
	tb.waitJS("the result of an action", fresh+` && (document.querySelector("[data-result]") ? "result" : (document.querySelector("[data-error]") ? "error" : ""))`, &kind)
	if kind == "error" {
		tb.t.Fatalf("the action failed: %s (page %s)", strings.TrimSpace(tb.text(`[data-error]`)), tb.location())
	}
	return strings.TrimSpace(tb.text(`[data-result]`))
}
