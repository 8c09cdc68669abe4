package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/console"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// consoleFuzzRoutes are the console's pages and actions; {seg} is
// replaced by a fuzzed path segment. POSTs carry a valid CSRF token, so
// the fuzzed form reaches the action itself.
var consoleFuzzRoutes = []struct{ method, path string }{
	{"GET", "/"},
	{"GET", "/queues/{seg}"},
	{"GET", "/groups"},
	{"GET", "/groups/fz/{seg}"},
	{"GET", "/deadletters"},
	{"GET", "/parked"},
	{"GET", "/traces"},
	{"GET", "/login"},
	{"POST", "/maintenance"},
	{"POST", "/queues/{seg}/config"},
	{"POST", "/groups/fz/{seg}/seek"},
	{"POST", "/groups/fz/{seg}/subscription"},
	{"POST", "/groups/fz/{seg}/delete"},
	{"POST", "/deadletters/replay"},
	{"POST", "/deadletters/delete"},
	{"POST", "/parked/replay"},
	{"POST", "/parked/delete"},
	{"POST", "/login"},
}

// FuzzConsole sends fuzzed path segments, query strings and forms to every
// page and action of the console over a broker holding messages, groups,
// a dead letter and a parked message. For every request: no panic, no
// 5xx, an HTML page for every page answered, and a refused action (4xx)
// changes nothing the broker reports.
func FuzzConsole(f *testing.F) {
	seeds := []struct {
		route     uint8
		seg, form string
	}{
		{0, "", "refresh=1"},
		{1, "fz", "from=3&limit=2&q=p"},
		{1, "fz", "partition=p1&offset=-1&limit=99999999999999999999"},
		{1, "%00", "partition=%ff"},
		{2, "", "queue=fz&from=x"},
		{3, "g", "from=-5&q=%3Cscript%3E"},
		{3, "__QUEUE_MODE__", ""},
		{4, "", "queue=fz&group=g&partition=p1&from_time=2031-05-06T00:00:00Z&to_time=yesterday"},
		{5, "", "limit=0&from=-1"},
		{6, "", "transactionId=x&partitionId=y&name=%00"},
		{8, "", "mode=on"},
		{8, "", "mode=maybe"},
		{9, "fz", "LeaseTime=10s&RetryLimit=2&RetryDelay=1s"},
		{9, "fz", "LeaseTime=-1s&RetryLimit=x"},
		{9, "fz", "LeaseTime=5m&MaxSize=99999999999999999999"},
		{9, "new", "LeaseTime=1m"},
		{10, "g", "to=end"},
		{10, "g", "to=time&time=2031-05-06T07:00:00Z&confirm=1"},
		{10, "g", "to=time&time=not%20a%20time&confirm=1"},
		{11, "g", "from=2031-05-06T07:00:00Z&confirm=1"},
		{11, "g", "from=&confirm=1"},
		{12, "nosuch", "confirm=1&forget=1"},
		{13, "", "one=nope&confirm=1"},
		{13, "", "scope=matching&queue=fz&confirm=1"},
		{14, "", "scope=selected&id=a&id=b&confirm=1"},
		{14, "", "scope=selected&confirm=1"},
		{15, "", "scope=matching&group=g&from_time=x&confirm=1"},
		{16, "", "scope=everything&confirm=1"},
		{17, "", "token=abc&remember=1"},
	}
	for _, s := range seeds {
		f.Add(s.route, s.seg, s.form)
	}
	e := newConsoleFuzzEnv(f)
	f.Fuzz(func(t *testing.T, route uint8, seg, form string) {
		rt := consoleFuzzRoutes[int(route)%len(consoleFuzzRoutes)]
		if seg == "" {
			seg = "fz"
		}
		u := &url.URL{Path: strings.Replace(rt.path, "{seg}", seg, 1), RawPath: strings.Replace(rt.path, "{seg}", url.PathEscape(seg), 1)}
		var body io.Reader
		if rt.method == http.MethodGet {
			u.RawQuery = form
		} else {
			body = strings.NewReader(form + "&csrf=" + url.QueryEscape(e.csrf))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, rt.method, "http://console.test"+u.RequestURI(), body)
		if err != nil {
			t.Skip("not a request a browser can send")
		}
		req.AddCookie(e.cookie)
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		e.mu.Lock() // one request at a time, so the state comparison is exact
		defer e.mu.Unlock()
		where := rt.method + " " + u.RequestURI() + " " + form
		res, data, ok := itest.Serve(t, e.b, e.h, req, where)
		require.True(t, ok, "%s outlived its 2 s", where)
		require.Less(t, res.StatusCode, 500, "%s: %s", where, data)
		if res.StatusCode == http.StatusOK {
			require.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), "text/html"), "%s: %s", where, res.Header.Get("Content-Type"))
			require.Contains(t, string(data), "</html>", "%s: a page cut short", where)
		}
	})
}

type consoleFuzzEnv struct {
	mu     sync.Mutex
	b      *queen.Broker
	h      http.Handler
	cookie *http.Cookie
	csrf   string
}

// newConsoleFuzzEnv opens a broker with a queue "fz" holding messages in
// two partitions, a group "g" with a dead letter and a parked message, a
// queue-mode reader, and a console session with its CSRF token.
func newConsoleFuzzEnv(tb testing.TB) *consoleFuzzEnv {
	clock := queentest.NewClock(start)
	b := queentest.NewBroker(tb, &queen.Options{Clock: clock})
	e := &consoleFuzzEnv{b: b, h: console.New(b, nil)}
	ctx := context.Background()
	var items []queen.PushItem
	for i := range 12 {
		items = append(items, queen.PushItem{Queue: "fz", Partition: "p" + string(rune('1'+i%2)), Payload: json.RawMessage(`{"i":1}`)})
	}
	_, err := b.Push(ctx, items)
	require.NoError(tb, err)
	for _, st := range []queen.AckStatus{queen.AckDLQ, queen.AckPark} {
		res, err := b.Pop(ctx, queen.PopRequest{Queue: "fz", Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
		require.NoError(tb, err)
		m := res.Messages[0]
		_, err = b.AckBatch(ctx, []queen.AckItem{{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: "g", Status: st, Error: "boom"}})
		require.NoError(tb, err)
	}
	_, err = b.Pop(ctx, queen.PopRequest{Queue: "fz", Batch: 3})
	require.NoError(tb, err)

	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(tb, http.StatusOK, rec.Code)
	for _, c := range rec.Result().Cookies() {
		e.cookie = c
	}
	require.NotNil(tb, e.cookie, "the console sets a session cookie")
	m := csrfField.FindStringSubmatch(rec.Body.String())
	require.NotNil(tb, m, "the overview carries a CSRF token")
	e.csrf = htmlUnescape(m[1])
	return e
}
