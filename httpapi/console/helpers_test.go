package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/httpapi/console"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// env is a console served over HTTP at prefix, and a browser for it: an
// HTTP client with a cookie jar that keeps the CSRF token of the last page.
type env struct {
	t      *testing.T
	b      *queen.Broker
	srv    *httptest.Server
	prefix string
	client *http.Client
	csrf   string
	clock  *queentest.Clock
}

// start is 2031-05-06 (not today: tests never depend on the date).
var start = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// newEnv mounts the console of a fresh in-memory broker under prefix
// ("/" for the root) with opts.
func newEnv(t *testing.T, prefix string, opts *console.Options) *env {
	t.Helper()
	clock := queentest.NewClock(start)
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	return newEnvOn(t, b, clock, prefix, opts)
}

func newEnvOn(t *testing.T, c queen.Client, clock *queentest.Clock, prefix string, opts *console.Options) *env {
	t.Helper()
	mux := http.NewServeMux()
	h := console.New(c, opts)
	if prefix == "/" {
		mux.Handle("/", h)
	} else {
		mux.Handle(prefix, http.StripPrefix(strings.TrimSuffix(prefix, "/"), h))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	e := &env{t: t, srv: srv, prefix: strings.TrimSuffix(prefix, "/"), clock: clock,
		client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if b, ok := c.(*queen.Broker); ok {
		e.b = b
	}
	return e
}

// url is the absolute URL of a console path ("/queues/x").
func (e *env) url(path string) string { return e.srv.URL + e.prefix + path }

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// page is a fetched page.
type page struct {
	status   int
	body     string
	location string
}

// get fetches a page and remembers its CSRF token.
func (e *env) get(path string) page {
	e.t.Helper()
	res, err := e.client.Get(e.url(path))
	require.NoError(e.t, err)
	return e.read(res)
}

func (e *env) read(res *http.Response) page {
	e.t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	p := page{status: res.StatusCode, body: string(b), location: res.Header.Get("Location")}
	if m := csrfField.FindStringSubmatch(p.body); m != nil {
		e.csrf = m[1]
	}
	return p
}

// ok fetches a page that must answer 200.
func (e *env) ok(path string) string {
	e.t.Helper()
	p := e.get(path)
	require.Equal(e.t, http.StatusOK, p.status, "GET %s: %s", path, p.body)
	return p.body
}

// post sends a form with the current CSRF token (unless the form sets
// csrf) and extra headers as "Name: value" strings.
func (e *env) post(path string, form url.Values, headers ...string) page {
	e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, set := form["csrf"]; !set {
		form.Set("csrf", e.csrf)
	}
	req, err := http.NewRequest(http.MethodPost, e.url(path), strings.NewReader(form.Encode()))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	res, err := e.client.Do(req)
	require.NoError(e.t, err)
	return e.read(res)
}

// act posts an action that must succeed (a redirect) and returns the
// result shown on the page it redirects to.
func (e *env) act(path string, form url.Values) string {
	e.t.Helper()
	p := e.post(path, form)
	require.Equal(e.t, http.StatusSeeOther, p.status, "POST %s: %s", path, p.body)
	u, err := url.Parse(p.location)
	require.NoError(e.t, err)
	next := e.get(strings.TrimPrefix(u.RequestURI(), e.prefix))
	require.Equal(e.t, http.StatusOK, next.status, next.body)
	return resultOf(e.t, next.body)
}

var resultRE = regexp.MustCompile(`(?s)<p class="result" data-result role="status">(.*?)</p>`)

// resultOf is the text of a page's data-result element, "" without one.
func resultOf(t *testing.T, body string) string {
	m := resultRE.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// rows returns the data-row keys of a page's table, in order.
func rows(t *testing.T, body, table string) []string {
	t.Helper()
	i := strings.Index(body, `data-table="`+table+`"`)
	require.GreaterOrEqual(t, i, 0, "no table %s in %s", table, body)
	rest := body[i:]
	if j := strings.Index(rest, "</table>"); j >= 0 {
		rest = rest[:j]
	}
	var keys []string
	for _, m := range regexp.MustCompile(`<tr data-row="([^"]*)"`).FindAllStringSubmatch(rest, -1) {
		keys = append(keys, htmlUnescape(m[1]))
	}
	return keys
}

func htmlUnescape(s string) string {
	r := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&amp;", "&", "&quot;", `"`)
	return r.Replace(s)
}

// push stores messages with the given payloads in queue's partition.
func (e *env) push(queue, partition string, payloads ...string) []queen.PushResult {
	e.t.Helper()
	items := make([]queen.PushItem, len(payloads))
	for i, p := range payloads {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(p)}
	}
	res, err := e.b.Push(context.Background(), items)
	require.NoError(e.t, err)
	for _, r := range res {
		require.Equal(e.t, queen.PushQueued, r.Status, "%+v", r)
	}
	return res
}

// settle pops one message of queue for group and acks it with status.
func (e *env) settle(queue, group string, status queen.AckStatus, errText string) *queen.Message {
	e.t.Helper()
	ctx := context.Background()
	res, err := e.b.Pop(ctx, queen.PopRequest{Queue: queue, Group: group, Batch: 1, SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(e.t, err)
	require.Len(e.t, res.Messages, 1)
	m := res.Messages[0]
	ack, err := e.b.AckBatch(ctx, []queen.AckItem{{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: group, Status: status, Error: errText}})
	require.NoError(e.t, err)
	require.True(e.t, ack[0].Success, "%+v", ack[0])
	return m
}

// deadLetters makes n dead letters on queue for group.
func (e *env) deadLetters(queue, group string, n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		e.push(queue, "", fmt.Sprintf(`{"n":%d}`, i))
		e.settle(queue, group, queen.AckDLQ, fmt.Sprintf("boom %d", i))
	}
}

// roles is an Authorize hook: the bearer token names the level
// ("read-only", "read-write", "admin"); no token is 401.
func roles(r *http.Request, level httpapi.Access) error {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	have := map[string]httpapi.Access{"read-only": httpapi.AccessReadOnly, "read-write": httpapi.AccessReadWrite, "admin": httpapi.AccessAdmin}
	l, ok := have[tok]
	if !ok {
		return httpapi.ErrUnauthorized
	}
	if l < level {
		return httpapi.ErrForbidden
	}
	return nil
}

// login logs the browser in with token.
func (e *env) login(token string) {
	e.t.Helper()
	e.get("/login")
	p := e.post("/login", url.Values{"token": {token}})
	require.Equal(e.t, http.StatusSeeOther, p.status, p.body)
}

// rowHTML is the HTML of the row of table keyed key.
func rowHTML(t *testing.T, body, table, key string) string {
	t.Helper()
	i := strings.Index(body, `data-table="`+table+`"`)
	require.GreaterOrEqual(t, i, 0)
	rest := body[i:]
	j := strings.Index(rest, `<tr data-row="`+key+`"`)
	require.GreaterOrEqual(t, j, 0, "no row %s in table %s", key, table)
	rest = rest[j:]
	return rest[:strings.Index(rest, "</tr>")]
}

var tags = regexp.MustCompile(`<[^>]*>`)

func stripTags(s string) string { return htmlUnescape(tags.ReplaceAllString(s, "")) }

// form builds url.Values from name, value pairs.
func form(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v
}

// htmlEscape escapes s as html/template writes an attribute value.
func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

// inputRE finds a form's named inputs: text ones with their value, and
// checkboxes ("true" when checked).
var inputRE = regexp.MustCompile(`<input (?:type="checkbox" )?name="([^"]+)" value="([^"]*)"`)
