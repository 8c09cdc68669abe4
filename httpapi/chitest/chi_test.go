// Package chitest checks that httpapi works under chi's Mount. It is a
// module of its own so that chi stays out of the library's go.mod.
package chitest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// call sends a request and decodes the JSON reply, if any.
func call(t *testing.T, method, url, body string, status int) any {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, "%s %s: %s", method, url, data)
	if len(data) == 0 {
		return nil
	}
	var v any
	require.NoError(t, json.Unmarshal(data, &v), string(data))
	return v
}

// pushPopAck pushes, pops and acks one message under base.
func pushPopAck(t *testing.T, base string) {
	t.Helper()
	res := call(t, "POST", base+"/api/v1/push", `{"items":[{"queue":"orders","transactionId":"o-1","payload":{"n":1}}]}`, http.StatusCreated)
	require.Equal(t, "queued", res.([]any)[0].(map[string]any)["status"])
	pop := call(t, "GET", base+"/api/v1/pop/queue/orders", "", http.StatusOK).(map[string]any)
	m := pop["messages"].([]any)[0].(map[string]any)
	require.Equal(t, "o-1", m["transactionId"])
	require.Equal(t, map[string]any{"n": 1.0}, m["data"])
	ack := call(t, "POST", base+"/api/v1/ack", `{"transactionId":"o-1","partitionId":"`+m["partitionId"].(string)+
		`","leaseId":"`+m["leaseId"].(string)+`","status":"completed"}`, http.StatusOK)
	require.Equal(t, true, ack.([]any)[0].(map[string]any)["success"])
	call(t, "GET", base+"/api/v1/pop/queue/orders", "", http.StatusNoContent)
}

// TestChiMount_Prefix mounts the handler with chi's Mount, which passes
// the whole path on, and lets Options.Prefix strip it.
func TestChiMount_Prefix(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	r := chi.NewRouter()
	r.Get("/hello", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hi") })
	r.Mount("/mq", httpapi.New(b, &httpapi.Options{Prefix: "/mq"}))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	pushPopAck(t, srv.URL+"/mq")
	health := call(t, "GET", srv.URL+"/mq/health", "", http.StatusOK).(map[string]any)
	require.Equal(t, queen.Version, health["version"])
	call(t, "GET", srv.URL+"/mq/api/v1/push", "", http.StatusMethodNotAllowed)
	require.Equal(t, map[string]any{"error": "not found"}, call(t, "GET", srv.URL+"/mq/api/v1/nope", "", http.StatusNotFound))

	resp, err := http.Get(srv.URL + "/hello")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "hi", string(body), "the router's own routes still work")
}

// TestChiMount_StripPrefix is the other way: chi's Mount with
// http.StripPrefix and no Options.Prefix.
func TestChiMount_StripPrefix(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	r := chi.NewRouter()
	r.Mount("/mq", http.StripPrefix("/mq", httpapi.New(b, nil)))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	pushPopAck(t, srv.URL+"/mq")
}

// TestChiMount_NoPrefix records why Options.Prefix exists: under chi's
// Mount, a handler without it sees /mq/api/v1/push and answers 404.
func TestChiMount_NoPrefix(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	r := chi.NewRouter()
	r.Mount("/mq", httpapi.New(b, nil))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	call(t, "POST", srv.URL+"/mq/api/v1/push", `{"items":[{"queue":"orders","payload":1}]}`, http.StatusNotFound)
}
