package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/stretchr/testify/require"
)

// mountFull is a router that, like chi's Mount, hands every request under
// prefix to h with its path untouched, and answers anything else itself.
func mountFull(prefix string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == prefix || strings.HasPrefix(r.URL.Path, prefix+"/") {
			h.ServeHTTP(w, r)
			return
		}
		http.Error(w, "router: no route", http.StatusTeapot)
	})
}

// client sends requests to a test server and decodes JSON replies.
type client struct {
	t    *testing.T
	base string
}

func (c client) call(method, path, body string, status int) any {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	require.Equal(c.t, status, resp.StatusCode, "%s %s: %s", method, path, data)
	if len(data) == 0 {
		return nil
	}
	var v any
	require.NoError(c.t, json.Unmarshal(data, &v), string(data))
	return v
}

// pushPopAck runs a push of a message with transaction id tx, a pop and
// an ack on the queue "a b/c" through c, and checks every reply.
func pushPopAck(t *testing.T, c client, root, tx string) {
	t.Helper()
	res := c.call("POST", root+"/api/v1/push", `{"items":[{"queue":"a b/c","transactionId":"`+tx+`","payload":{"n":1}}]}`, http.StatusCreated)
	require.Equal(t, "queued", res.([]any)[0].(map[string]any)["status"])
	// The queue name is percent-encoded, a slash included: the raw path
	// must be stripped along with the path.
	pop := c.call("GET", root+"/api/v1/pop/queue/a%20b%2Fc", "", http.StatusOK).(map[string]any)
	m := pop["messages"].([]any)[0].(map[string]any)
	require.Equal(t, "a b/c", m["queue"])
	require.Equal(t, map[string]any{"n": 1.0}, m["data"])
	require.Equal(t, tx, m["transactionId"])
	ack := c.call("POST", root+"/api/v1/ack", `{"transactionId":"`+tx+`","partitionId":"`+m["partitionId"].(string)+
		`","leaseId":"`+m["leaseId"].(string)+`","status":"completed"}`, http.StatusOK)
	require.Equal(t, true, ack.([]any)[0].(map[string]any)["success"])
	c.call("GET", root+"/api/v1/pop/queue/a%20b%2Fc", "", http.StatusNoContent)
}

func TestHandler_Prefix(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	e := setup(t, nil, &httpapi.Options{Prefix: "mq/", Authorize: func(r *http.Request, level httpapi.Access) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.URL.Path)
		return nil
	}})

	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"a router that keeps the prefix, like chi's Mount", mountFull("/mq", e.h)},
		{"a ServeMux pattern without StripPrefix", func() http.Handler {
			mux := http.NewServeMux()
			mux.Handle("/mq/", e.h)
			return mux
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.h)
			t.Cleanup(srv.Close)
			cl := client{t, srv.URL}
			pushPopAck(t, cl, "/mq", c.name)
			health := cl.call("GET", "/mq/health", "", http.StatusOK).(map[string]any)
			require.Equal(t, queen.Version, health["version"])
			cl.call("GET", "/mq/api/v1/nope", "", http.StatusNotFound)
			cl.call("GET", "/mq/api/v1/push", "", http.StatusMethodNotAllowed)
			cl.call("OPTIONS", "/mq/api/v1/push", "", http.StatusNoContent)
		})
	}
	mu.Lock()
	require.Contains(t, seen, "/api/v1/push", "the authorizer sees the path without the prefix")
	require.Contains(t, seen, "/health")
	require.NotContains(t, strings.Join(seen, " "), "/mq")
	mu.Unlock()

	// Outside the prefix: 404, and nothing reaches the broker.
	for _, p := range []string{"/api/v1/push", "/mqx/api/v1/push", "/m/api/v1/push", "/"} {
		e.fails("POST", p, `{"items":[{"queue":"outside","payload":1}]}`, http.StatusNotFound, "not found")
	}
	_, err := e.b.DescribeQueue(t.Context(), "outside")
	require.ErrorIs(t, err, queen.ErrNotFound)
	// The prefix alone is the root: Queen's dashboard, not served.
	require.Equal(t, map[string]any{"error": "not supported"}, e.obj("GET", "/mq", nil, http.StatusNotFound))

	// The caller's request is left as it was.
	req := httptest.NewRequest("GET", "/mq/health", nil)
	e.h.ServeHTTP(httptest.NewRecorder(), req)
	require.Equal(t, "/mq/health", req.URL.Path)
}

func TestHandler_PrefixNormalized(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil).b
	get := func(prefix, path string) int {
		rec := httptest.NewRecorder()
		httpapi.New(b, &httpapi.Options{Prefix: prefix}).ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code
	}
	for _, p := range []string{"/mq", "/mq/", "mq", "mq//"} {
		require.Equal(t, http.StatusOK, get(p, "/mq/health"), "prefix %q", p)
		require.Equal(t, http.StatusNotFound, get(p, "/health"), "prefix %q", p)
	}
	// "/" and "" are no prefix at all; a deeper prefix works the same.
	for _, p := range []string{"", "/"} {
		require.Equal(t, http.StatusOK, get(p, "/health"), "prefix %q", p)
	}
	require.Equal(t, http.StatusOK, get("/svc/queen", "/svc/queen/health"))
	require.Equal(t, http.StatusNotFound, get("/svc/queen", "/svc/health"))
}

// TestHandler_PrefixOrStripPrefix pins the documented rule: use
// Options.Prefix or http.StripPrefix. Either one serves the API under the
// prefix; with both, the stripped path is outside the prefix.
func TestHandler_PrefixOrStripPrefix(t *testing.T) {
	t.Parallel()
	strip := setup(t, nil, nil)
	mux := http.NewServeMux()
	mux.Handle("/mq/", http.StripPrefix("/mq", strip.h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	pushPopAck(t, client{t, srv.URL}, "/mq", "t-1")

	prefixed := setup(t, nil, &httpapi.Options{Prefix: "/mq"})
	srv = httptest.NewServer(mountFull("/mq", prefixed.h))
	t.Cleanup(srv.Close)
	pushPopAck(t, client{t, srv.URL}, "/mq", "t-1")

	both := setup(t, nil, &httpapi.Options{Prefix: "/mq"})
	mux = http.NewServeMux()
	mux.Handle("/mq/", http.StripPrefix("/mq", both.h))
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	v := client{t, srv.URL}.call("GET", "/mq/health", "", http.StatusNotFound)
	require.Equal(t, map[string]any{"error": "not found"}, v)
}

// ExampleOptions_prefix mounts the API under /mq on a router that passes
// the whole path on, as chi's Mount does; the handler strips the prefix.
func ExampleOptions_prefix() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	h := httpapi.New(b, &httpapi.Options{Prefix: "/mq"})
	for _, path := range []string{"/mq/api/v1/resources/queues", "/api/v1/resources/queues"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil)) // as a router that keeps the prefix would
		fmt.Println(path, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// /mq/api/v1/resources/queues 200 {"queues":[]}
	// /api/v1/resources/queues 404 {"error":"not found"}
}
