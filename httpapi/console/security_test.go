package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/httpapi/console"
	"github.com/stretchr/testify/require"
)

// dlqTotal is how many dead letters the broker holds.
func (e *env) dlqTotal() int {
	e.t.Helper()
	page, err := e.b.DeadLetters(context.Background(), queen.LetterFilter{})
	require.NoError(e.t, err)
	return page.Total
}

// replayed counts the replayed copies in queue's Default partition.
func (e *env) replayed(queue string) int {
	e.t.Helper()
	res, err := e.b.Fetch(context.Background(), queue, queen.DefaultPartition, 0, 1000)
	require.NoError(e.t, err)
	n := 0
	for _, r := range res.Records {
		if strings.HasPrefix(r.TransactionID, "dlq:") {
			n++
		}
	}
	return n
}

func TestConsole_ForgedPostsAreRefused(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.deadLetters("orders", "billing", 1)
	id := rows(t, e.ok("/deadletters"), "deadletters")[0]
	good := e.csrf

	for name, tc := range map[string]struct {
		form    url.Values
		headers []string
	}{
		"no token":                 {form("one", id, "csrf", "", "confirm", "1"), nil},
		"a made-up token":          {form("one", id, "csrf", "AAAA", "confirm", "1"), nil},
		"a cross-site fetch":       {form("one", id, "confirm", "1"), []string{"Sec-Fetch-Site: cross-site"}},
		"a same-site fetch":        {form("one", id, "confirm", "1"), []string{"Sec-Fetch-Site: same-site"}},
		"another origin":           {form("one", id, "confirm", "1"), []string{"Origin: https://evil.example"}},
		"an opaque origin":         {form("one", id, "confirm", "1"), []string{"Origin: null"}},
		"another origin, same tok": {form("one", id, "csrf", good, "confirm", "1"), []string{"Origin: http://evil.example:80"}},
	} {
		t.Run(name, func(t *testing.T) {
			p := e.post("/deadletters/replay", tc.form, tc.headers...)
			require.Equal(t, http.StatusForbidden, p.status, p.body)
			require.Contains(t, p.body, `data-page="error"`)
			require.Equal(t, 0, e.replayed("orders"))
			p = e.post("/deadletters/delete", tc.form, tc.headers...)
			require.Equal(t, http.StatusForbidden, p.status, p.body)
			require.Equal(t, 1, e.dlqTotal())
		})
	}

	// Another browser's token is not this one's: it belongs to its session.
	other := newEnvOn(t, e.b, e.clock, "/", nil)
	other.srv.Config.Handler = e.srv.Config.Handler
	other.srv.URL = e.srv.URL
	other.ok("/deadletters")
	require.NotEqual(t, good, other.csrf)
	p := e.post("/deadletters/replay", form("one", id, "csrf", other.csrf, "confirm", "1"))
	require.Equal(t, http.StatusForbidden, p.status)
	require.Equal(t, 0, e.replayed("orders"))

	// A same-origin POST with the token goes through.
	p = e.post("/deadletters/replay", form("one", id, "confirm", "1"), "Origin: "+e.srv.URL, "Sec-Fetch-Site: same-origin")
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, 1, e.replayed("orders"))

	// Actions are POSTs only.
	require.Equal(t, http.StatusMethodNotAllowed, e.get("/deadletters/replay?one="+id).status)
}

func TestConsole_Roles(t *testing.T) {
	var seen []string
	auth := func(r *http.Request, level httpapi.Access) error {
		seen = append(seen, r.Header.Get("Authorization"))
		return roles(r, level)
	}
	e := newEnv(t, "/", &console.Options{Authorize: auth})
	e.deadLetters("orders", "billing", 3)

	// No token: pages send the browser to the login page, actions refuse.
	p := e.get("/deadletters")
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/login", p.location)
	require.NotContains(t, e.ok("/login"), "<nav>", "a visitor still to log in sees no page links")
	p = e.post("/deadletters/replay", form("one", "x", "confirm", "1"))
	require.Equal(t, http.StatusUnauthorized, p.status)

	// A wrong token is refused at the login and kept nowhere.
	p = e.post("/login", form("token", "guess"))
	require.Equal(t, http.StatusUnauthorized, p.status)
	require.Contains(t, p.body, "token refused")
	u, _ := url.Parse(e.srv.URL)
	require.Empty(t, cookieNamed(e, u, "queen_console_token"))

	actions := []string{`data-action="replay"`, `data-action="delete"`, `data-action="replay-selected"`, `data-action="delete-matching"`, `data-select="`}
	id := ""
	for i, tc := range []struct {
		token      string
		see        []string // actions shown
		replay, rm int      // status of a replay and of a delete
	}{
		{"read-only", nil, http.StatusForbidden, http.StatusForbidden},
		{"read-write", actions[:1], http.StatusSeeOther, http.StatusForbidden},
		{"admin", actions, http.StatusSeeOther, http.StatusSeeOther},
	} {
		t.Run(tc.token, func(t *testing.T) {
			e.login(tc.token)
			require.Contains(t, e.ok("/login"), "<nav>", "logged in, the login page links the pages")
			body := e.ok("/deadletters")
			id = rows(t, body, "deadletters")[i]
			for _, a := range actions {
				shown := false
				for _, s := range tc.see {
					shown = shown || s == a
				}
				if a == `data-action="replay-selected"` || a == `data-select="` {
					shown = tc.token != "read-only"
				}
				require.Equal(t, shown, strings.Contains(body, a), "%s sees %s", tc.token, a)
			}
			require.Equal(t, tc.token != "read-only", strings.Contains(e.ok("/groups/orders/billing"), `data-action="seek-end"`))
			require.Equal(t, tc.token == "admin", strings.Contains(e.ok("/groups/orders/billing"), `data-action="delete-group"`))
			require.Equal(t, tc.token == "admin", strings.Contains(e.ok("/"), `data-action="maintenance-on"`))
			require.Equal(t, tc.token != "read-only", strings.Contains(e.ok("/queues/orders"), `data-action="save-config"`))

			before := e.replayed("orders")
			p := e.post("/deadletters/replay", form("one", id, "confirm", "1"))
			require.Equal(t, tc.replay, p.status, p.body)
			if tc.replay == http.StatusSeeOther {
				require.Equal(t, before+1, e.replayed("orders"))
			} else {
				require.Equal(t, before, e.replayed("orders"))
			}
			for path, f := range map[string]url.Values{
				"/maintenance": form("mode", "on", "confirm", "1"), "/groups/orders/billing/delete": form("confirm", "1"),
			} {
				p := e.post(path, f)
				if tc.token != "admin" {
					require.Equal(t, http.StatusForbidden, p.status, path)
				}
			}
			if tc.token != "admin" {
				require.False(t, e.b.MaintenanceMode())
				require.NotEmpty(t, rows(t, e.ok("/groups"), "groups"))
			}
			p = e.post("/deadletters/delete", form("one", id, "confirm", "1"))
			require.Equal(t, tc.rm, p.status, p.body)
			require.Equal(t, tc.rm != http.StatusSeeOther, e.dlqTotal() == 3)
		})
	}

	// The hook saw the cookie's token as a bearer token, never an empty
	// header once logged in.
	require.Contains(t, seen, "Bearer admin")
	c := cookieNamed(e, u, "queen_console_token")
	require.Equal(t, "admin", c)

	// Logging out forgets the token.
	p = e.post("/logout", nil)
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Empty(t, cookieNamed(e, u, "queen_console_token"))
	require.Equal(t, http.StatusSeeOther, e.get("/").status)
}

// TestConsole_Cookies checks the login cookie's attributes, and that the
// token never appears in a URL.
func TestConsole_Cookies(t *testing.T) {
	e := newEnv(t, "/ops/console/", &console.Options{Authorize: roles})
	e.get("/login")
	req, err := http.NewRequest(http.MethodPost, e.url("/login"), strings.NewReader(form("token", "admin", "csrf", e.csrf).Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := e.client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/ops/console/", res.Header.Get("Location"))
	var tok *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "queen_console_token" {
			tok = c
		}
	}
	require.NotNil(t, tok)
	require.True(t, tok.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, tok.SameSite)
	require.Equal(t, "/ops/console/", tok.Path)
	body := e.ok("/")
	require.NotContains(t, body, "admin\"")
	require.NotContains(t, res.Header.Get("Location"), "admin")

	// Every page forbids framing and inline script.
	res, err = e.client.Get(e.url("/"))
	require.NoError(t, err)
	res.Body.Close()
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
}

// cookieNamed is the value of the jar's cookie name for u, "" if none.
func cookieNamed(e *env, u *url.URL, name string) string {
	for _, c := range e.client.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

func TestConsole_Escaping(t *testing.T) {
	e := newEnv(t, "/", nil)
	evil := `<script>alert(1)</script>`
	e.push(evil, evil, `{"html":"<script>alert(2)</script><img src=x onerror=alert(3)>"}`)
	res, err := e.b.Pop(context.Background(), queen.PopRequest{Queue: evil, Group: `<b onmouseover=alert(4)>g</b>`, SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(t, err)
	m := res.Messages[0]
	_, err = e.b.AckBatch(context.Background(), []queen.AckItem{{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: m.ConsumerGroup, Status: queen.AckDLQ, Error: `<script>alert(5)</script>`}})
	require.NoError(t, err)
	_, err = e.b.RecordTrace(context.Background(), queen.TraceEvent{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Names: []string{evil}, Data: []byte(`{"x":"<script>alert(6)</script>"}`)})
	require.NoError(t, err)

	esc := url.PathEscape(evil)
	for _, path := range []string{"/", "/queues/" + esc, "/queues/" + esc + "?partition=" + url.QueryEscape(evil), "/groups",
		"/groups/" + esc + "/" + url.PathEscape(`<b onmouseover=alert(4)>g</b>`), "/deadletters", "/traces",
		"/traces?name=" + url.QueryEscape(evil), "/traces?partition_id=" + m.PartitionID + "&transaction_id=" + m.TransactionID,
		"/queues/" + url.PathEscape("<i>nope</i>")} {
		p := e.get(path)
		require.Contains(t, []int{200, 404}, p.status, path)
		require.NotContains(t, p.body, "<script>alert", path)
		require.NotContains(t, p.body, "<img", path)
		require.NotContains(t, p.body, "<b onmouseover", path)
		require.NotContains(t, p.body, "<i>nope", path)
	}
	// Shown, as text.
	require.Equal(t, []string{evil}, rows(t, e.ok("/"), "queues"))
	require.Contains(t, e.ok("/"), "&lt;script&gt;alert(1)&lt;/script&gt;")
	dl := e.ok("/deadletters")
	require.Contains(t, dl, "&lt;script&gt;alert(5)&lt;/script&gt;")
	require.Contains(t, dl, "&lt;script&gt;alert(2)&lt;/script&gt;&lt;img src=x onerror=alert(3)&gt;")
	tr := e.ok("/traces?name=" + url.QueryEscape(evil))
	require.Len(t, rows(t, tr, "traces"), 1)
	require.Contains(t, tr, "alert(6)")

	// The links the pages draw lead to the pages of those names.
	for _, link := range []struct{ from, table string }{{"/", "queues"}, {"/groups", "groups"}, {"/traces", "traces"}} {
		row := rowHTML(t, e.ok(link.from), link.table, htmlEscape(rows(t, e.ok(link.from), link.table)[0]))
		href := regexp.MustCompile(`href="([^"]+)"`).FindStringSubmatch(row)[1]
		p := e.get(htmlUnescape(href))
		require.Equal(t, http.StatusOK, p.status, "%s: %s", href, p.body)
		require.Contains(t, p.body, "&lt;script&gt;alert(1)&lt;/script&gt;", href)
	}
}
