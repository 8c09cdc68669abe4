package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// env is a handler over a real in-memory broker.
type env struct {
	t     *testing.T
	b     *queen.Broker
	h     http.Handler
	clock *queentest.Clock
}

// setup opens a broker (with a fake clock unless opts has a clock) and a
// handler on it.
func setup(t *testing.T, opts *queen.Options, hopts *httpapi.Options) *env {
	t.Helper()
	o := queen.Options{}
	if opts != nil {
		o = *opts
	}
	e := &env{t: t}
	if o.Clock == nil {
		e.clock = itest.NewClock()
		o.Clock = e.clock
	}
	e.b = queentest.NewBroker(t, &o)
	e.h = httpapi.New(e.b, hopts)
	return e
}

// do sends a request; body is sent as is when it is a string, else as JSON.
func (e *env) do(method, path string, body any) *httptest.ResponseRecorder {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(e.t, err)
		rd = bytes.NewReader(data)
	}
	req := httptest.NewRequest(method, path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// call sends a request, requires the status and decodes the JSON reply.
func (e *env) call(method, path string, body any, status int) any {
	e.t.Helper()
	rec := e.do(method, path, body)
	require.Equal(e.t, status, rec.Code, "%s %s: %s", method, path, rec.Body.String())
	if status == http.StatusNoContent {
		require.Zero(e.t, rec.Body.Len(), "204 must have no body")
		return nil
	}
	require.Equal(e.t, "application/json", rec.Header().Get("Content-Type"))
	var v any
	require.NoError(e.t, json.Unmarshal(rec.Body.Bytes(), &v), rec.Body.String())
	return v
}

// obj is call for an object reply.
func (e *env) obj(method, path string, body any, status int) map[string]any {
	e.t.Helper()
	v, ok := e.call(method, path, body, status).(map[string]any)
	require.True(e.t, ok, "reply is not an object")
	return v
}

// arr is call for an array reply.
func (e *env) arr(method, path string, body any, status int) []any {
	e.t.Helper()
	v, ok := e.call(method, path, body, status).([]any)
	require.True(e.t, ok, "reply is not an array")
	return v
}

// fails requires an error reply with status and a message containing want.
func (e *env) fails(method, path string, body any, status int, want string) {
	e.t.Helper()
	v := e.obj(method, path, body, status)
	require.Len(e.t, v, 1, "error bodies have only an error field: %v", v)
	require.Contains(e.t, v["error"], want)
}

// push pushes one message with a JSON payload and returns its result.
func (e *env) push(queue, partition, txid string, payload any) map[string]any {
	e.t.Helper()
	item := map[string]any{"queue": queue, "transactionId": txid, "payload": payload}
	if partition != "" {
		item["partition"] = partition
	}
	res := e.arr("POST", "/api/v1/push", map[string]any{"items": []any{item}}, http.StatusCreated)
	require.Len(e.t, res, 1)
	r := res[0].(map[string]any)
	require.Equal(e.t, "queued", r["status"], "%v", r)
	return r
}

// pop pops and returns the reply, or nil for a 204.
func (e *env) pop(path string) map[string]any {
	e.t.Helper()
	rec := e.do("GET", path, nil)
	if rec.Code == http.StatusNoContent {
		require.Zero(e.t, rec.Body.Len())
		return nil
	}
	require.Equal(e.t, http.StatusOK, rec.Code, rec.Body.String())
	var v map[string]any
	require.NoError(e.t, json.Unmarshal(rec.Body.Bytes(), &v))
	return v
}

// msgs returns the messages of a pop reply.
func msgs(t *testing.T, pop map[string]any) []map[string]any {
	t.Helper()
	require.NotNil(t, pop, "pop returned no content")
	var out []map[string]any
	for _, m := range pop["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// ackBody is the body acking m with status.
func ackBody(m map[string]any, status string) map[string]any {
	return map[string]any{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": status}
}

func TestNew_PanicsOnNilBroker(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { httpapi.New(nil, nil) })
}

func TestHandler_CORSAndOptions(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	rec := e.do("OPTIONS", "/api/v1/push", nil)
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Zero(t, rec.Body.Len())
	require.Equal(t, "*", rec.Header().Get("Access-Control-Allow-Origin"))
	require.Equal(t, "GET, POST, PUT, DELETE, OPTIONS", rec.Header().Get("Access-Control-Allow-Methods"))
	require.Equal(t, "Content-Type, Authorization", rec.Header().Get("Access-Control-Allow-Headers"))
	require.Equal(t, "86400", rec.Header().Get("Access-Control-Max-Age"))

	rec = e.do("GET", "/health", nil)
	require.Equal(t, "*", rec.Header().Get("Access-Control-Allow-Origin"))

	off := setup(t, nil, &httpapi.Options{NoCORS: true})
	rec = off.do("GET", "/health", nil)
	require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"))
	off.fails("OPTIONS", "/api/v1/push", nil, http.StatusMethodNotAllowed, "method not allowed")
}

func TestHandler_UnknownAndUnsupportedRoutes(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.fails("GET", "/api/v1/nope", nil, http.StatusNotFound, "not found")
	e.fails("GET", "/elsewhere", nil, http.StatusNotFound, "not found")
	for _, r := range [][2]string{
		{"GET", "/"}, {"GET", "/api/v1/status/analytics"}, {"GET", "/api/v1/status/buffers"},
		{"GET", "/api/v1/analytics/workload"}, {"GET", "/api/v1/system/shared-state"},
		{"POST", "/streams/v1/queries"}, {"POST", "/streams/v1/cycle"},
		{"POST", "/internal/api/notify"}, {"POST", "/api/v1/stream/define"}, {"DELETE", "/api/v1/queues/q/clear"},
		{"GET", "/api/v1/resources/partitions"}, {"POST", "/api/v1/messages/p/t/retry"}, {"POST", "/api/v1/messages/p/t/dlq"},
	} {
		v := e.obj(r[0], r[1], nil, http.StatusNotFound)
		require.Equal(t, map[string]any{"error": "not supported"}, v, "%s %s", r[0], r[1])
	}
	// PostgreSQL's own analytics and the migration say why.
	for _, r := range [][2]string{
		{"GET", "/api/v1/analytics/postgres-stats"}, {"GET", "/api/v1/migration/status"}, {"POST", "/api/v1/migration/start"},
		{"POST", "/api/v1/migration/test-connection"}, {"POST", "/api/v1/migration/validate"}, {"POST", "/api/v1/migration/reset"},
	} {
		v := e.obj(r[0], r[1], nil, http.StatusNotFound)
		require.Equal(t, "postgresql-only", v["reason"], "%s %s", r[0], r[1])
		require.Contains(t, v["error"], "PostgreSQL", "%s %s", r[0], r[1])
		require.Contains(t, v["error"], "Badger", "%s %s", r[0], r[1])
	}
	rec := e.do("GET", "/api/v1/push", nil)
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, []string{"POST"}, rec.Header().Values("Allow"))
	require.JSONEq(t, `{"error":"method not allowed"}`, rec.Body.String())
	rec = e.do("PUT", "/api/v1/resources/queues/q", nil)
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.ElementsMatch(t, []string{"GET", "DELETE"}, rec.Header().Values("Allow"))
	rec = e.do("DELETE", "/api/v1/system/maintenance", nil)
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.ElementsMatch(t, []string{"GET", "POST"}, rec.Header().Values("Allow"))
}

func TestHandler_Bodies(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, &httpapi.Options{MaxBodyBytes: 64})
	for _, path := range []string{"/api/v1/push", "/api/v1/ack", "/api/v1/ack/batch", "/api/v1/transaction", "/api/v1/configure",
		"/api/v1/lease/0190a0b0-0000-7000-8000-000000000000/extend", "/api/v1/traces",
		"/api/v1/consumer-groups/g/subscription", "/api/v1/consumer-groups/g/queues/q/seek"} {
		e.fails("POST", path, "", http.StatusBadRequest, "Empty request body")
		e.fails("POST", path, "  \n", http.StatusBadRequest, "Empty request body")
		e.fails("POST", path, "{", http.StatusBadRequest, "Invalid JSON: ")
		e.fails("POST", path, `{"a":1}x`, http.StatusBadRequest, "Invalid JSON: ")
		e.fails("POST", path, "[]", http.StatusBadRequest, "request body must be a JSON object")
		e.fails("POST", path, "null", http.StatusBadRequest, "request body must be a JSON object")
		e.fails("POST", path, `"x"`, http.StatusBadRequest, "request body must be a JSON object")
		e.fails("POST", path, `{"items":"`+strings.Repeat("x", 100)+`"}`, http.StatusRequestEntityTooLarge, "larger than 64 bytes")
	}
	// The default limit is 16 MiB.
	d := setup(t, nil, nil)
	big := `{"items":[{"queue":"q","payload":"` + strings.Repeat("x", 16<<20) + `"}]}`
	d.fails("POST", "/api/v1/push", big, http.StatusRequestEntityTooLarge, "larger than 16777216 bytes")
}

func TestHandler_Authorize(t *testing.T) {
	t.Parallel()
	var seen []string
	e := setup(t, nil, &httpapi.Options{Authorize: func(r *http.Request, level httpapi.Access) error {
		seen = append(seen, r.Method+" "+r.URL.Path+" "+level.String())
		switch r.Header.Get("Authorization") {
		case "Bearer admin":
			return nil
		case "Bearer reader":
			if level <= httpapi.AccessReadOnly {
				return nil
			}
			return httpapi.ErrForbidden
		case "":
			if level == httpapi.AccessPublic {
				return nil
			}
			return httpapi.ErrUnauthorized
		}
		return errors.Join(httpapi.ErrUnauthorized, errors.New("bad token"))
	}})
	send := func(method, path, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		return rec
	}
	require.Equal(t, http.StatusOK, send("GET", "/health", "").Code)
	rec := send("GET", "/api/v1/resources/queues", "")
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.JSONEq(t, `{"error":"authentication required"}`, rec.Body.String())
	rec = send("GET", "/api/v1/resources/queues", "junk")
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, rec.Body.String(), "bad token")
	require.Equal(t, http.StatusOK, send("GET", "/api/v1/resources/queues", "reader").Code)
	rec = send("GET", "/api/v1/pop/queue/q", "reader")
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.JSONEq(t, `{"error":"insufficient permissions"}`, rec.Body.String())
	require.Equal(t, http.StatusForbidden, send("DELETE", "/api/v1/resources/queues/q", "reader").Code)
	require.Equal(t, http.StatusOK, send("DELETE", "/api/v1/resources/queues/q", "admin").Code)
	// Preflights and unsupported routes do not ask.
	n := len(seen)
	require.Equal(t, http.StatusNoContent, send("OPTIONS", "/api/v1/push", "").Code)
	require.Equal(t, http.StatusNotFound, send("GET", "/api/v1/status/analytics", "").Code)
	require.Len(t, seen, n)
	require.Contains(t, seen, "GET /health public")
	require.Contains(t, seen, "GET /api/v1/resources/queues read-only")
	require.Contains(t, seen, "GET /api/v1/pop/queue/q read-write")
	require.Contains(t, seen, "DELETE /api/v1/resources/queues/q admin")
}

// TestHandler_MetricsNeedReadAccess: /metrics and /metrics/prometheus
// (which names every queue and its depth) are read-only routes, so a hook
// that lets public routes through without credentials refuses them;
// with Options.PublicMetrics they are public, as in Queen. /health is
// public either way.
func TestHandler_MetricsNeedReadAccess(t *testing.T) {
	t.Parallel()
	for _, public := range []bool{false, true} {
		var seen []string
		e := setup(t, nil, &httpapi.Options{PublicMetrics: public, Authorize: func(r *http.Request, level httpapi.Access) error {
			seen = append(seen, r.URL.Path+" "+level.String())
			if level == httpapi.AccessPublic || r.Header.Get("Authorization") == "Bearer reader" && level <= httpapi.AccessReadOnly {
				return nil
			}
			return httpapi.ErrUnauthorized
		}})
		_, err := e.b.Push(t.Context(), []queen.PushItem{{Queue: "secret-orders"}})
		require.NoError(t, err)
		for _, path := range []string{"/metrics", "/metrics/prometheus"} {
			rec := e.do("GET", path, nil)
			if !public {
				require.Equal(t, http.StatusUnauthorized, rec.Code, path)
				require.JSONEq(t, `{"error":"authentication required"}`, rec.Body.String())
				require.NotContains(t, rec.Body.String(), "secret-orders")
				require.Contains(t, seen, path+" read-only")
				req := httptest.NewRequest("GET", path, nil)
				req.Header.Set("Authorization", "Bearer reader")
				rec = httptest.NewRecorder()
				e.h.ServeHTTP(rec, req)
			} else {
				require.Contains(t, seen, path+" public")
			}
			require.Equal(t, http.StatusOK, rec.Code, "%s, PublicMetrics %v", path, public)
			if path == "/metrics/prometheus" {
				require.Contains(t, rec.Body.String(), `queue="secret-orders"`)
			}
		}
		require.Equal(t, http.StatusOK, e.do("GET", "/health", nil).Code)
		require.Contains(t, seen, "/health public")
	}
}

func TestAccess_String(t *testing.T) {
	t.Parallel()
	require.Equal(t, "public", httpapi.AccessPublic.String())
	require.Equal(t, "read-only", httpapi.AccessReadOnly.String())
	require.Equal(t, "read-write", httpapi.AccessReadWrite.String())
	require.Equal(t, "admin", httpapi.AccessAdmin.String())
	require.Equal(t, "Access(9)", httpapi.Access(9).String())
}

func TestHandler_Mounted(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	mux := http.NewServeMux()
	mux.Handle("/queen/", http.StripPrefix("/queen", e.h))
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hi") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	resp, err := http.Post(srv.URL+"/queen/api/v1/push", "application/json",
		strings.NewReader(`{"items":[{"queue":"a b/c","payload":{"n":1}}]}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp.Body.Close()
	// Path segments are percent-decoded, slashes included.
	resp, err = http.Get(srv.URL + "/queen/api/v1/pop/queue/a%20b%2Fc")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"queue":"a b/c"`)
	resp, err = http.Get(srv.URL + "/hello")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "hi", string(body))
}

func TestHandler_Health(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	var logs bytes.Buffer
	h := httpapi.New(b, &httpapi.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var v map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v))
	require.Equal(t, "healthy", v["status"])
	require.Equal(t, "connected", v["database"])
	// The module's version, next to Queen's other fields.
	require.Equal(t, queen.Version, v["version"])
	require.Regexp(t, `^\d+\.\d+\.\d+`, v["version"])
	require.Equal(t, "queen (Go, Badger)", v["server"])
	require.Equal(t, 0.0, v["worker_id"])
	require.Equal(t, map[string]any{"enabled": false}, v["shared_state"])
	require.Equal(t, map[string]any{"worker_id": 0.0, "status": "active"}, v["queen"])

	require.NoError(t, b.Close())
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), `"status":"unhealthy"`)
	// A closed broker is 503 everywhere, without noise in the log.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/resources/queues", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.JSONEq(t, `{"error":"broker unavailable"}`, rec.Body.String())
	require.Empty(t, logs.String())
}
