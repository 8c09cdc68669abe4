package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/stretchr/testify/require"
)

// corsEnv is a handler whose Authorize counts its calls.
type corsEnv struct {
	*env
	authorized *atomic.Int64
}

func setupCORS(t *testing.T, hopts httpapi.Options) corsEnv {
	t.Helper()
	n := new(atomic.Int64)
	hopts.Authorize = func(*http.Request, httpapi.Access) error {
		n.Add(1)
		return nil
	}
	return corsEnv{setup(t, nil, &hopts), n}
}

// send serves one request with the given headers ("Name: value"), from
// http://example.com, httptest's default Host.
func (e corsEnv) send(method, path, body string, headers ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ": ")
		require.True(e.t, ok, h)
		req.Header.Set(name, value)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// refused requires the answer of a request from an origin that is not
// allowed: 403, no CORS grant, and Authorize never asked.
func (e corsEnv) refused(rec *httptest.ResponseRecorder) {
	e.t.Helper()
	require.Equal(e.t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.JSONEq(e.t, `{"error":"origin not allowed"}`, rec.Body.String())
	for _, h := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers"} {
		require.Empty(e.t, rec.Header().Get(h), h)
	}
	require.Contains(e.t, rec.Header().Values("Vary"), "Origin")
	require.Zero(e.t, e.authorized.Load(), "Authorize was called for a refused origin")
}

// queueExists reports whether the broker has queue q.
func (e corsEnv) queueExists(q string) bool {
	_, err := e.b.DescribeQueue(context.Background(), q)
	if err != nil {
		require.ErrorIs(e.t, err, queen.ErrNotFound)
	}
	return err == nil
}

const (
	dash = "https://dash.example.com"
	evil = "https://evil.example"
)

// TestCORS_AllowedOrigins: with an allowlist, an allowed origin gets its
// own origin back (never "*") and its preflights 204; any other origin
// is refused 403 with no grant, preflights included, before Authorize
// and before anything is read or changed; requests without Origin
// (Queen's clients, curl) and from the handler's own origin are served
// without CORS headers.
func TestCORS_AllowedOrigins(t *testing.T) {
	t.Parallel()
	e := setupCORS(t, httpapi.Options{AllowedOrigins: []string{dash, " http://localhost:5173/ "}})
	_, err := e.b.ConfigureQueue(context.Background(), "orders", queen.QueueConfig{})
	require.NoError(t, err)

	// Refused: every method, preflights, simple requests (a text/plain
	// push), a sandboxed page's "null", and no-cors requests a browser
	// marks cross-site or same-site (an <img> pop) without an Origin.
	e.refused(e.send("OPTIONS", "/api/v1/resources/queues/orders", "", "Origin: "+evil, "Access-Control-Request-Method: DELETE"))
	e.refused(e.send("DELETE", "/api/v1/resources/queues/orders", "", "Origin: "+evil))
	require.True(t, e.queueExists("orders"), "a refused DELETE deleted the queue")
	e.refused(e.send("POST", "/api/v1/push", `{"items":[{"queue":"evil","payload":1}]}`, "Origin: "+evil, "Content-Type: text/plain"))
	require.False(t, e.queueExists("evil"), "a refused push was stored")
	e.refused(e.send("GET", "/api/v1/resources/queues", "", "Origin: "+evil))
	e.refused(e.send("GET", "/api/v1/resources/queues", "", "Origin: null"))
	e.refused(e.send("GET", "/api/v1/resources/queues", "", "Origin: http://localhost:5174"))
	e.refused(e.send("GET", "/api/v1/resources/queues", "", "Origin: "+dash+".evil.example"))
	e.refused(e.send("GET", "/health", "", "Origin: "+evil))
	e.refused(e.send("GET", "/api/v1/pop/queue/orders?autoAck=true", "", "Sec-Fetch-Site: cross-site"))
	e.refused(e.send("GET", "/api/v1/pop/queue/orders?autoAck=true", "", "Sec-Fetch-Site: same-site"))

	// Allowed: the origin echoed, with Vary, methods and headers.
	for _, origin := range []string{dash, "http://localhost:5173"} {
		rec := e.send("OPTIONS", "/api/v1/resources/queues/orders", "", "Origin: "+origin, "Access-Control-Request-Method: DELETE",
			"Access-Control-Request-Headers: authorization")
		require.Equal(t, http.StatusNoContent, rec.Code)
		require.Equal(t, origin, rec.Header().Get("Access-Control-Allow-Origin"))
		require.Contains(t, rec.Header().Get("Access-Control-Allow-Methods"), "DELETE")
		require.Equal(t, "Content-Type, Authorization", rec.Header().Get("Access-Control-Allow-Headers"))
		require.Contains(t, rec.Header().Values("Vary"), "Origin")
		require.Zero(t, e.authorized.Load(), "a preflight is answered without Authorize")
	}
	rec := e.send("GET", "/api/v1/resources/queues", "", "Origin: "+dash, "Sec-Fetch-Site: cross-site")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, dash, rec.Header().Get("Access-Control-Allow-Origin"))
	require.Contains(t, rec.Header().Values("Vary"), "Origin")
	require.EqualValues(t, 1, e.authorized.Load())

	// No Origin (Queen's clients, remote, curl), a navigation typed by
	// the user, the handler's own origin (by Host, or by the browser's
	// word behind a proxy that rewrote Host): served, with no grant.
	for _, headers := range [][]string{nil, {"Sec-Fetch-Site: none"}, {"Sec-Fetch-Site: same-origin"}, {"Origin: http://example.com"},
		{"Origin: http://example.com", "Sec-Fetch-Site: same-origin"}, {"Origin: https://public.example", "Sec-Fetch-Site: same-origin"}} {
		rec := e.send("GET", "/api/v1/resources/queues", "", headers...)
		require.Equal(t, http.StatusOK, rec.Code, "%v: %s", headers, rec.Body.String())
		require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"), headers)
	}
	rec = e.send("DELETE", "/api/v1/resources/queues/orders", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.False(t, e.queueExists("orders"))
}

// TestCORS_RestrictOriginsAlone: RestrictOrigins with no AllowedOrigins
// grants no origin at all, and serves what comes without one.
func TestCORS_RestrictOriginsAlone(t *testing.T) {
	t.Parallel()
	e := setupCORS(t, httpapi.Options{RestrictOrigins: true})
	_, err := e.b.ConfigureQueue(context.Background(), "orders", queen.QueueConfig{})
	require.NoError(t, err)
	e.refused(e.send("OPTIONS", "/api/v1/resources/queues/orders", "", "Origin: "+dash, "Access-Control-Request-Method: DELETE"))
	e.refused(e.send("DELETE", "/api/v1/resources/queues/orders", "", "Origin: http://localhost:5173"))
	require.True(t, e.queueExists("orders"))
	e.refused(e.send("GET", "/metrics", "", "Origin: "+dash))

	rec := e.send("GET", "/api/v1/resources/queues", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"))
	require.Empty(t, rec.Header().Get("Access-Control-Allow-Methods"))
	require.Contains(t, rec.Header().Values("Vary"), "Origin")
}

// TestCORS_AllowedOriginsWildcard: "*" is Queen's behaviour, asked for
// explicitly: every origin, "*" in the grant.
func TestCORS_AllowedOriginsWildcard(t *testing.T) {
	t.Parallel()
	e := setupCORS(t, httpapi.Options{AllowedOrigins: []string{"*"}, RestrictOrigins: true})
	rec := e.send("OPTIONS", "/api/v1/push", "", "Origin: "+evil, "Access-Control-Request-Method: POST")
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Equal(t, "*", rec.Header().Get("Access-Control-Allow-Origin"))
	rec = e.send("GET", "/api/v1/resources/queues", "", "Origin: "+evil, "Sec-Fetch-Site: cross-site")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "*", rec.Header().Get("Access-Control-Allow-Origin"))
}

// TestCORS_DefaultIsQueens: without AllowedOrigins or RestrictOrigins
// the handler keeps Queen's "*" for every origin (Queen's dashboard and
// browser clients served from elsewhere depend on it).
func TestCORS_DefaultIsQueens(t *testing.T) {
	t.Parallel()
	e := setupCORS(t, httpapi.Options{})
	rec := e.send("DELETE", "/api/v1/resources/queues/nope", "", "Origin: "+evil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "*", rec.Header().Get("Access-Control-Allow-Origin"))
	rec = e.send("OPTIONS", "/api/v1/resources/queues/nope", "", "Origin: "+evil, "Access-Control-Request-Method: DELETE")
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Equal(t, "*", rec.Header().Get("Access-Control-Allow-Origin"))
}

// TestCORS_PrefixAndOrigins: the origin check comes before the prefix,
// so a foreign origin is refused inside and outside it alike.
func TestCORS_PrefixAndOrigins(t *testing.T) {
	t.Parallel()
	e := setupCORS(t, httpapi.Options{Prefix: "/mq", AllowedOrigins: []string{dash}})
	e.refused(e.send("GET", "/mq/api/v1/resources/queues", "", "Origin: "+evil))
	e.refused(e.send("GET", "/elsewhere", "", "Origin: "+evil))
	rec := e.send("GET", "/mq/api/v1/resources/queues", "", "Origin: "+dash)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, dash, rec.Header().Get("Access-Control-Allow-Origin"))
}
