package browsertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// pages are the console's pages a reader can visit, with their names.
func (c *consoleServer) pages() [][2]string {
	return [][2]string{
		{"", "overview"},
		{queuePath(qOrders), "queue"},
		{queuePath(qOrders) + "?partition=eu&offset=0", "queue"},
		{"groups", "groups"},
		{"groups/" + qOrders + "/" + gBilling, "group"},
		{"deadletters", "deadletters"},
		{"parked", "parked"},
		{"traces?name=" + traceName, "traces"},
	}
}

// actionsShown lists the data-action names on the page that act on the
// broker (everything but logging in and out).
func (tb *tab) actionsShown() []string {
	tb.t.Helper()
	var names []string
	tb.eval(`Array.prototype.map.call(document.querySelectorAll("[data-action]"), function (e) { return e.getAttribute("data-action"); }).filter(function (n) { return n !== "logout" && n !== "login" && n !== "browse"; })`, &names)
	return names
}

// post sends a form POST from the page with fetch (the session's cookies
// go along) and returns the response's status: 0 for a redirect (the
// answer to an accepted action) or an opaque cross-origin response, -1 if
// the request failed.
func (tb *tab) post(target string, form url.Values, mode string) int {
	tb.t.Helper()
	var status int
	redirect := "manual"
	if mode == "no-cors" {
		redirect = "follow" // the only one no-cors allows
	}
	js := fmt.Sprintf(`fetch(%s, {method: "POST", credentials: "include", mode: %s, redirect: %s,
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: %s}).then(function (r) { return r.status; }, function () { return -1; })`,
		jsString(target), jsString(mode), jsString(redirect), jsString(form.Encode()))
	tb.run(evalAwait(js, &status))
	return status
}

// csrf is the session's CSRF token as the page's forms carry it.
func (tb *tab) csrf() string {
	tb.t.Helper()
	tok := tb.value(`input[name="csrf"]`)
	if tok == "" {
		tb.t.Fatal("the page carries no csrf token")
	}
	return tok
}

// TestReadOnly_NoActionsAndActionsRefused logs in with the reader's token:
// no page shows an action, and the actions, posted from the page with the
// session's CSRF token, are refused and change nothing.
func TestReadOnly_NoActionsAndActionsRefused(t *testing.T) {
	c := startConsole(t)
	tb := c.login(t, readerToken)
	for _, p := range c.pages() {
		tb.open(p[0], p[1])
		if a := tb.actionsShown(); len(a) != 0 {
			t.Errorf("a reader sees actions %q on %s", a, p[0])
		}
		if n := tb.count(`[data-select]`); n != 0 {
			t.Errorf("a reader sees %d selection boxes on %s", n, p[0])
		}
		tb.clean("read-only " + p[1])
	}

	tb.open("deadletters", "deadletters")
	tok := tb.csrf()
	id := c.dead[0].ID
	forms := map[string]url.Values{
		"deadletters/replay": {"csrf": {tok}, "one": {id}, "confirm": {"1"}},
		"deadletters/delete": {"csrf": {tok}, "one": {id}, "confirm": {"1"}},
		"maintenance":        {"csrf": {tok}, "mode": {"on"}, "confirm": {"1"}},
		"groups/" + qOrders + "/" + gBilling + "/seek":   {"csrf": {tok}, "to": {"end"}, "confirm": {"1"}},
		"groups/" + qOrders + "/" + gBilling + "/delete": {"csrf": {tok}, "forget": {"1"}, "confirm": {"1"}},
		queuePath(qOrders) + "/config":                   {"csrf": {tok}, "RetryLimit": {"9"}, "confirm": {"1"}},
	}
	for path, form := range forms {
		if st := tb.post(c.base+path, form, "same-origin"); st != http.StatusForbidden {
			t.Errorf("a reader's POST %s answered %d, want 403", path, st)
		}
	}
	c.expectUntouched(t)
	tb.clean("read-only posts")
}

// expectUntouched checks that no action reached the broker: no replay, no
// deletion, no seek, no configuration, no maintenance mode.
func (c *consoleServer) expectUntouched(t *testing.T) {
	t.Helper()
	if n := c.copies(t, "dlq:", c.dead[0].ID); n != 0 {
		t.Errorf("a refused replay pushed %d copies", n)
	}
	if n := c.letterTotal(t, false); n != deadCount {
		t.Errorf("%d dead letters after refused actions, want %d", n, deadCount)
	}
	if c.b.MaintenanceMode() {
		t.Error("a refused action turned maintenance mode on")
	}
	if got := c.nextPop(t, gBilling, "eu"); got != `{"order":"eu-3"}` {
		t.Errorf("after refused actions billing's next pop on eu is %s, want eu-3", got)
	}
}

// TestForgedPosts_Refused logs in as the administrator and forges actions:
// from the console's own page without the CSRF token, and from another
// origin (another port of the same host, so the same site: the session
// cookie goes along) with the right token. Both are refused and change
// nothing; the same request with the token from the console's page is
// accepted, so the refusals are not of a malformed request.
func TestForgedPosts_Refused(t *testing.T) {
	c := startConsole(t)
	tb := c.login(t, adminToken)
	tb.open("deadletters", "deadletters")
	tok := tb.csrf()
	id := c.dead[0].ID
	replay := c.base + "deadletters/replay"
	withToken := url.Values{"csrf": {tok}, "one": {id}, "confirm": {"1"}}
	without := url.Values{"one": {id}, "confirm": {"1"}}
	wrong := url.Values{"csrf": {tok + "x"}, "one": {id}, "confirm": {"1"}}

	if st := tb.post(replay, without, "same-origin"); st != http.StatusForbidden {
		t.Errorf("a POST without the csrf token answered %d, want 403", st)
	}
	if st := tb.post(replay, wrong, "same-origin"); st != http.StatusForbidden {
		t.Errorf("a POST with a wrong csrf token answered %d, want 403", st)
	}
	if st := tb.post(c.base+"maintenance", url.Values{"mode": {"on"}, "confirm": {"1"}}, "same-origin"); st != http.StatusForbidden {
		t.Errorf("a maintenance POST without the csrf token answered %d, want 403", st)
	}

	// Another origin serves a page; from it, the browser posts to the
	// console with the session's cookie and the right token.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>elsewhere</title><main data-page="elsewhere">elsewhere</main>`)
	}))
	t.Cleanup(evil.Close)
	if !strings.Contains(evil.URL, "127.0.0.1") || !strings.Contains(c.srv.URL, "127.0.0.1") {
		t.Fatalf("both servers should be on 127.0.0.1: %s, %s", evil.URL, c.srv.URL)
	}
	tb.run(navigate(evil.URL + "/"))
	before := len(c.recorded())
	tb.post(replay, withToken, "no-cors")
	tb.post(c.base+"maintenance", url.Values{"csrf": {tok}, "mode": {"on"}, "confirm": {"1"}}, "no-cors")
	// Both reached the console, from the other origin, with the session's
	// cookies: refused for where they came from, not for a lost cookie.
	forged := c.recorded()[before:]
	if len(forged) != 2 {
		t.Fatalf("the console received %d of the 2 cross-origin posts: %+v", len(forged), forged)
	}
	for _, p := range forged {
		if p.cookies == 0 || p.origin != evil.URL || p.status != http.StatusForbidden {
			t.Errorf("cross-origin post %s: origin %q, %d cookies, Sec-Fetch-Site %q, answered %d; want from %s with the cookies, 403", p.path, p.origin, p.cookies, p.fetchSite, p.status, evil.URL)
		}
	}
	c.expectUntouched(t)
	tb.clean("forged posts")

	// Control: the same replay from the console's page goes through.
	tb.open("deadletters", "deadletters")
	if st := tb.post(replay, withToken, "same-origin"); st >= 400 {
		t.Errorf("the replay with the page's token answered %d", st)
	}
	if n := c.copies(t, "dlq:", id); n != 1 {
		t.Errorf("the replay with the page's token pushed %d copies, want 1", n)
	}
	tb.clean("control post")
}
