package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/internal/leakcheck"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// fuzzRoutes are the routes that take client input in a body or a query
// string. {seg} is replaced by a fuzzed path segment.
var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/api/v1/push"},
	{"GET", "/api/v1/pop/queue/{seg}"},
	{"GET", "/api/v1/pop/queue/fz/partition/{seg}"},
	{"POST", "/api/v1/ack"},
	{"POST", "/api/v1/ack/batch"},
	{"POST", "/api/v1/transaction"},
	{"POST", "/api/v1/configure"},
	{"POST", "/api/v1/consumer-groups/{seg}/queues/fz/seek"},
	{"POST", "/api/v1/consumer-groups/g/queues/fz/partitions/{seg}/seek"},
	{"POST", "/api/v1/lease/{seg}/extend"},
	{"GET", "/api/v1/fetch/queue/fz/partition/{seg}"},
	{"GET", "/api/v1/pop"},
	{"GET", "/api/v1/analytics/queue-ops"},
	{"GET", "/api/v1/status"},
	{"POST", "/api/v1/fetch"},
	{"POST", "/api/v1/fetch/offsets"},
	{"POST", "/api/v1/consumer-groups/positions"},
}

// FuzzHandlers sends fuzzed bodies, query strings and path segments to the
// routes that read client input, on a broker holding messages, leases and
// groups. For every request: no panic, no 500, a JSON body whenever there
// is a body, and a refused request (4xx) changes nothing the broker
// reports: no partially applied push, ack, transaction or configure.
func FuzzHandlers(f *testing.F) {
	seeds := []struct {
		route      uint8
		seg, query string
		body       string
	}{
		{0, "", "", `{"items":[{"queue":"fz","payload":{"a":1}},{"queue":"fz","partition":"p1","transactionId":"t1","payload":[1,2]}]}`},
		{0, "", "", `{"items":[{"queue":"fz","payload":1},{"queue":"","payload":2}]}`},
		{0, "", "", `{"items":[{"queue":"fz","payload":1},{"queue":"fz","partition":"` + string(bytes.Repeat([]byte("p"), 256)) + `"}]}`},
		{0, "", "", `{"items":[]}`},
		{0, "", "", `{"items":[{"queue":"fz","payload":"\ud800"}]}`},
		{0, "", "", `{"items":[{"queue":"fz","payload":` + string(bytes.Repeat([]byte("["), 20000)) + `}]}`},
		{0, "", "", `[`},
		{1, "fz", "batch=5&wait=false", ``},
		{1, "fz", "batch=-1&consumerGroup=g&subscriptionMode=all", ``},
		{1, "fz", "batch=99999999999999999999&leaseSeconds=1e9&partitions=65", ``},
		{1, "fz", "consumerGroup=c&conflation=true&autoAck=true", ``},
		{1, "fz", "subscriptionFrom=" + itest.Stamp("2026-11-30T12:00:00Z") + "&consumerGroup=late", ``},
		{1, "fz", "wait=true&timeout=20", ``},
		{1, "%00", "", ``},
		{2, "Default", "consumerGroup=g&batch=3", ``},
		{3, "", "", `{"transactionId":"t1","partitionId":"00000000-0000-8000-8000-000000000001","status":"completed"}`},
		{3, "", "", `{"transactionId":"t1","partitionId":"x","status":"bogus","consumerGroup":"g"}`},
		{4, "", "", `{"acknowledgments":[{"transactionId":"t1","partitionId":"x","status":"failed","error":"e"},{"transactionId":""}]}`},
		{4, "", "", `{"acknowledgments":[]}`},
		{5, "", "", `{"operations":[{"type":"push","items":[{"queue":"fz","payload":1}]},{"type":"ack","transactionId":"nope","partitionId":"x"}]}`},
		{5, "", "", `{"operations":[{"type":"push","items":[{"queue":"fz","payload":1}]}]}`},
		{5, "", "", `{"operations":[{"type":"ack"}]}`},
		{6, "", "", `{"queue":"fz2","options":{"leaseTime":10,"retryLimit":2,"retentionSeconds":-1}}`},
		{6, "", "", `{"queue":"fz2","options":{"leaseTime":"x"}}`},
		{6, "", "", `{"queue":"","options":{}}`},
		{7, "g", "", `{"toEnd":true}`},
		{7, "g", "", `{"timestamp":"not a time"}`},
		{8, "Default", "", `{"timestamp":"` + itest.Stamp("2026-11-30T12:00:00Z") + `"}`},
		{9, "00000000-0000-7000-8000-000000000000", "", `{"seconds":30}`},
		{9, "x", "", `{"seconds":-5}`},
		{10, "Default", "from=0&limit=5", ``},
		{10, "Default", "from=-1&limit=abc", ``},
		{11, "", "namespace=fz&task=", ``},
		{12, "", "from=" + itest.Stamp("2026-11-30T11:00:00Z") + "&to=" + itest.Stamp("2026-11-30T12:00:00Z") + "&queue=fz", ``},
		{12, "", "from=" + itest.Stamp("2026-11-30T12:00:00Z") + "&to=" + itest.Stamp("2026-11-30T11:00:00Z"), ``},
		{13, "", "from=yesterday&queue=%00", ``},
		{14, "", "", `{"entries":[{"queue":"fz","partition":"Default","offset":0,"maxBytes":1},{"queue":"fz","partition":7,"offset":99},{"queue":"none","offset":0}]}`},
		{14, "", "", `{"entries":[{"queue":"fz","offset":-1}],"maxWaitMs":50,"minBytes":-3}`},
		{14, "", "", `{"entries":[{"queue":"fz","offset":1e300}],"maxWaitMs":1e99}`},
		{15, "", "", `{"entries":[{"queue":"fz","timestamp":0},{"queue":"fz","timestamp":"` + itest.Stamp("2026-11-30T12:00:00Z") + `"},{"queue":"fz","timestamp":-1}]}`},
		{16, "", "", `{"consumerGroup":"g","entries":[{"queue":"fz","partition":"Default"},{"queue":"x"}]}`},
		{16, "", "", `{"consumerGroup":"","entries":5}`},
		{5, "", "", `{"positions":[{"queue":"fz","partition":"Default","consumerGroup":"g","offset":1,"metadata":"m"}]}`},
		{5, "", "", `{"operations":[{"type":"push","items":[{"queue":"fz","payload":1}]}],"positions":[{"queue":"fz","consumerGroup":"g","offset":999}]}`},
		{5, "", "", `{"operations":[],"positions":[{"queue":"fz","consumerGroup":"g","offset":null}],"requiredLeases":["a","a"]}`},
	}
	for _, s := range seeds {
		f.Add(s.route, s.seg, s.query, []byte(s.body))
	}
	e := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, route uint8, seg, query string, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		u := &url.URL{Path: rt.path, RawQuery: query}
		if seg != "" {
			u.Path = replaceSeg(rt.path, seg)
			u.RawPath = replaceSeg(rt.path, url.PathEscape(seg))
		} else {
			u.Path = replaceSeg(rt.path, "fz")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, rt.method, "http://queen.test"+u.RequestURI(), bytes.NewReader(body))
		if err != nil {
			t.Skip("not a request a client can send")
		}
		if len(body) > 0 {
			req.Header.Set("Content-Type", "application/json")
		}
		e.mu.Lock() // requests one at a time, so the state comparison is exact
		defer e.mu.Unlock()
		where := rt.method + " " + u.RequestURI() + " " + string(body)
		res, data, ok := itest.Serve(t, e.b, e.h, req, where)
		if !ok {
			return // a long-poll outlived the client; nothing to judge
		}
		require.NotEqual(t, http.StatusInternalServerError, res.StatusCode, "%s: %s", where, data)
		if len(data) > 0 {
			require.True(t, json.Valid(data), "%s answered a body that is not JSON: %q", where, data)
		}
	})
}

func replaceSeg(path, seg string) string {
	return string(bytes.Replace([]byte(path), []byte("{seg}"), []byte(seg), 1))
}

type fuzzEnv struct {
	mu sync.Mutex
	b  *queen.Broker
	h  http.Handler
}

// newFuzzEnv opens a broker with a queue "fz" holding messages, a leased
// batch, a dead letter and two groups.
func newFuzzEnv(tb testing.TB) *fuzzEnv {
	clock := itest.NewClock()
	b := queentest.NewBroker(tb, &queen.Options{Clock: clock})
	e := &fuzzEnv{b: b, h: httpapi.New(b, nil)}
	ctx := context.Background()
	items := make([]queen.PushItem, 20)
	for i := range items {
		items[i] = queen.PushItem{Queue: "fz", TransactionID: "t" + string(rune('a'+i)), Payload: json.RawMessage(`{"i":1}`), Namespace: "fz"}
	}
	_, err := b.Push(ctx, items)
	require.NoError(tb, err)
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "fz", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 2})
	require.NoError(tb, err)
	_, err = b.AckBatch(ctx, []queen.AckItem{{TransactionID: res.Messages[0].TransactionID, PartitionID: res.Messages[0].PartitionID, LeaseID: res.LeaseID, Group: "g", Status: queen.AckDLQ}})
	require.NoError(tb, err)
	_, err = b.Pop(ctx, queen.PopRequest{Queue: "fz", Batch: 3})
	require.NoError(tb, err)
	return e
}

// TestMain fails the package if a handler, a long-poll or a broker leaves
// a goroutine running after the tests.
func TestMain(m *testing.M) { leakcheck.Main(m, nil) }
