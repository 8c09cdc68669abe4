package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestServer_DefaultListensOnLoopback: with no -host and no HOST, the
// server listens on 127.0.0.1 (the README's `go run ./cmd/queen`), on the
// port asked for.
func TestServer_DefaultListensOnLoopback(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig(nil, envOf(nil), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", cfg.host)
	require.Equal(t, 6632, cfg.port)

	base, logs, stop := startRun(t, nil, nil)
	require.Contains(t, logs.String(), `msg="queen: listening" addr=127.0.0.1:`)
	resp, err := http.Get(base + "/api/v1/resources/queues")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "open on loopback, as before")
	require.Equal(t, 0, stop())
	require.NotContains(t, logs.String(), "non-loopback")
}

// runToStart runs the server with args and env until it either exits or
// logs that it listens; it returns the exit code (-1 if it started, after
// stopping it) and the log.
func runToStart(t *testing.T, args []string, env map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &lockedBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, envOf(env), io.Discard, logs) }()
	tick := time.NewTicker(2 * time.Millisecond) // poll interval: the conditions are the exit and the log line
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case code := <-done:
			return code, logs.String()
		case <-tick.C:
			if strings.Contains(logs.String(), `msg="queen: listening"`) {
				cancel()
				<-done
				return -1, logs.String()
			}
		case <-deadline:
			t.Fatalf("the server neither exited nor listened: %s", logs.String())
		}
	}
}

// TestServer_OpenNetworkNeedsAuth: listening beyond loopback with no
// QUEEN_TOKEN or JWT_SECRET is refused at start (exit 2, a message that
// says what to do, the data directory not even created) unless
// -allow-unauthenticated (QUEEN_ALLOW_UNAUTHENTICATED) says it is meant;
// with a token or a JWT secret it starts.
func TestServer_OpenNetworkNeedsAuth(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"-host", "0.0.0.0"}, nil},
		{nil, map[string]string{"HOST": "0.0.0.0"}},
		{[]string{"-host", "::"}, nil},
		{[]string{"-host", ""}, nil}, // every interface
		{[]string{"-host", "0.0.0.0", "-allow-unauthenticated=false"}, map[string]string{"QUEEN_ALLOW_UNAUTHENTICATED": "true"}},
		{[]string{"-host", "0.0.0.0"}, map[string]string{"QUEEN_ALLOW_UNAUTHENTICATED": "false"}},
	} {
		data := filepath.Join(t.TempDir(), "data")
		code, logs := runToStart(t, append([]string{"-port", "0", "-data", data}, c.args...), c.env)
		require.Equal(t, 2, code, "%v %v: %s", c.args, c.env, logs)
		require.Contains(t, logs, "queen: refusing to listen on ", "%v %v", c.args, c.env)
		require.Contains(t, logs, "no QUEEN_TOKEN or JWT_SECRET")
		require.Contains(t, logs, "-allow-unauthenticated")
		_, err := os.Stat(data)
		require.ErrorIs(t, err, os.ErrNotExist, "the store was opened before the refusal")
	}

	for _, c := range []struct {
		args []string
		env  map[string]string
		warn bool
	}{
		{[]string{"-host", "0.0.0.0", "-allow-unauthenticated"}, nil, true},
		{[]string{"-host", "0.0.0.0"}, map[string]string{"QUEEN_ALLOW_UNAUTHENTICATED": "1"}, true},
		{[]string{"-host", "0.0.0.0"}, map[string]string{"QUEEN_TOKEN": "tok"}, false},
		{[]string{"-host", "0.0.0.0"}, map[string]string{"JWT_SECRET": testSecret}, false},
		{[]string{"-host", "localhost"}, nil, false},
	} {
		code, logs := runToStart(t, append([]string{"-port", "0", "-data", t.TempDir()}, c.args...), c.env)
		require.Equal(t, -1, code, "%v %v: %s", c.args, c.env, logs)
		require.NotContains(t, logs, "refusing")
		require.Equal(t, c.warn, strings.Contains(logs, "level=WARN msg=\"queen: listening on a non-loopback address with no QUEEN_TOKEN or JWT_SECRET"),
			"%v %v: %s", c.args, c.env, logs)
	}

	_, err := parseConfig(nil, envOf(map[string]string{"QUEEN_ALLOW_UNAUTHENTICATED": "yes"}), io.Discard)
	require.ErrorContains(t, err, "QUEEN_ALLOW_UNAUTHENTICATED must be true or false")
}

// corsSend serves one request through the server's handler for cfg,
// from a browser page of origin ("" for none) at Host 127.0.0.1:6632.
func corsSend(t *testing.T, h http.Handler, method, path, origin string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	req.Host = "127.0.0.1:6632"
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for _, hd := range headers {
		name, value, _ := strings.Cut(hd, ": ")
		req.Header.Set(name, value)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestServer_CORS: by default no other origin is granted anything: a page
// of another origin gets no Access-Control-Allow-Origin, its preflight
// for DELETE is refused, and its DELETE (or a simple request) is refused
// 403 with nothing changed; Queen's clients (no Origin) and the server's
// own origin are served as before. -cors-origins (QUEEN_CORS_ORIGINS)
// grants exactly the origins it lists.
func TestServer_CORS(t *testing.T) {
	t.Parallel()
	const page = "http://attacker.example"
	handler := func(args []string, env map[string]string) (http.Handler, *queen.Broker) {
		cfg, err := parseConfig(args, envOf(env), io.Discard)
		require.NoError(t, err, "%v %v", args, env)
		b := queentest.NewBroker(t, nil)
		_, err = b.ConfigureQueue(context.Background(), "orders", queen.QueueConfig{})
		require.NoError(t, err)
		return cfg.handler(b, newAuthorizer(cfg, time.Now), nil, nil, nil), b
	}
	exists := func(b *queen.Broker) bool {
		_, err := b.DescribeQueue(context.Background(), "orders")
		return err == nil
	}

	h, b := handler(nil, nil)
	rec := corsSend(t, h, "OPTIONS", "/api/v1/resources/queues/orders", page, "Access-Control-Request-Method: DELETE")
	require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"))
	require.NotContains(t, rec.Header().Get("Access-Control-Allow-Methods"), "DELETE")
	require.Equal(t, http.StatusForbidden, rec.Code)
	rec = corsSend(t, h, "DELETE", "/api/v1/resources/queues/orders", page)
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"))
	require.True(t, exists(b), "a page of another origin deleted a queue")
	for _, origin := range []string{page, "http://localhost:6632", "http://127.0.0.1:5173", "null"} {
		rec = corsSend(t, h, "GET", "/api/v1/resources/queues", origin)
		require.Equal(t, http.StatusForbidden, rec.Code, origin)
		require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"), origin)
	}
	rec = corsSend(t, h, "GET", "/api/v1/pop/queue/orders?autoAck=true", "", "Sec-Fetch-Site: cross-site")
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	// Queen's clients send no Origin; the console and same-origin pages
	// send the server's own.
	for _, origin := range []string{"", "http://127.0.0.1:6632"} {
		rec = corsSend(t, h, "GET", "/api/v1/resources/queues", origin)
		require.Equal(t, http.StatusOK, rec.Code, "%q: %s", origin, rec.Body.String())
		require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"), origin)
	}
	rec = corsSend(t, h, "DELETE", "/api/v1/resources/queues/orders", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.False(t, exists(b))

	// Configured origins, by flag or variable, exactly.
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"-cors-origins", "https://dash.example.com, http://localhost:5173"}, nil},
		{nil, map[string]string{"QUEEN_CORS_ORIGINS": "HTTPS://Dash.Example.com:443/,http://localhost:5173"}},
	} {
		h, b := handler(c.args, c.env)
		rec = corsSend(t, h, "OPTIONS", "/api/v1/resources/queues/orders", "https://dash.example.com", "Access-Control-Request-Method: DELETE")
		require.Equal(t, http.StatusNoContent, rec.Code, "%v %v", c.args, c.env)
		require.Equal(t, "https://dash.example.com", rec.Header().Get("Access-Control-Allow-Origin"))
		require.Contains(t, rec.Header().Get("Access-Control-Allow-Methods"), "DELETE")
		rec = corsSend(t, h, "GET", "/api/v1/resources/queues", "http://localhost:5173")
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "http://localhost:5173", rec.Header().Get("Access-Control-Allow-Origin"))
		rec = corsSend(t, h, "DELETE", "/api/v1/resources/queues/orders", page)
		require.Equal(t, http.StatusForbidden, rec.Code)
		require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"))
		require.True(t, exists(b))
	}

	// "*" is every origin, as Queen does, asked for explicitly.
	h, _ = handler(nil, map[string]string{"QUEEN_CORS_ORIGINS": "*"})
	rec = corsSend(t, h, "GET", "/api/v1/resources/queues", page)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "*", rec.Header().Get("Access-Control-Allow-Origin"))

	for _, bad := range []string{"dash.example.com", "ftp://dash.example.com", "https://dash.example.com/app", "https://", "null",
		"https://dash.example.com?x=1", "https://user@dash.example.com", "*,https://dash.example.com", "https://dash.example.com:99999", ","} {
		_, err := parseConfig([]string{"-cors-origins", bad}, envOf(nil), io.Discard)
		require.ErrorContains(t, err, "CORS origin", bad)
	}
}
