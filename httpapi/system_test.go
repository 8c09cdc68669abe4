package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen/httpapi"
	"github.com/stretchr/testify/require"
)

func TestSystem_Maintenance(t *testing.T) {
	t.Parallel()
	var levels []string
	e := setup(t, nil, &httpapi.Options{Authorize: func(r *http.Request, level httpapi.Access) error {
		if strings.HasPrefix(r.URL.Path, "/api/v1/system/") {
			levels = append(levels, r.Method+" "+r.URL.Path+" "+level.String())
		}
		return nil
	}})
	require.Equal(t, map[string]any{"maintenanceMode": false, "popMaintenanceMode": false, "bufferedMessages": 0.0, "bufferHealthy": true,
		"bufferStats": map[string]any{"pending": 0.0, "failed": 0.0}}, e.obj("GET", "/api/v1/system/maintenance", nil, http.StatusOK))
	e.push("m", "", "before", 0)
	e.arr("POST", "/api/v1/ack", ackBody(msgs(t, e.pop("/api/v1/pop/queue/m"))[0], "completed"), http.StatusOK)

	res := e.obj("POST", "/api/v1/system/maintenance", `{"enabled":true}`, http.StatusOK)
	require.Equal(t, true, res["maintenanceMode"])
	require.Equal(t, 0.0, res["bufferedMessages"])
	require.Equal(t, true, res["bufferHealthy"])
	require.Contains(t, res["message"], "Maintenance mode is on")
	require.True(t, e.b.MaintenanceMode())
	require.Equal(t, false, res["popMaintenanceMode"])
	require.Equal(t, map[string]any{"popMaintenanceMode": false, "message": res["message"]},
		e.obj("GET", "/api/v1/system/maintenance/pop", nil, http.StatusOK), "two flags: push on, pop off")

	// The pop flag on too, then the push flag off: still in maintenance.
	res = e.obj("POST", "/api/v1/system/maintenance/pop", `{"enabled":true}`, http.StatusOK)
	require.Equal(t, true, res["popMaintenanceMode"])
	res = e.obj("POST", "/api/v1/system/maintenance", `{"enabled":false}`, http.StatusOK)
	require.Equal(t, false, res["maintenanceMode"])
	require.Equal(t, true, res["popMaintenanceMode"])
	require.Contains(t, res["message"], "Maintenance mode is on", "the pop flag keeps it on")
	require.True(t, e.b.MaintenanceMode())
	got := e.obj("GET", "/api/v1/system/maintenance", nil, http.StatusOK)
	require.Equal(t, false, got["maintenanceMode"])
	require.Equal(t, true, got["popMaintenanceMode"])

	// Pushes are stored; pops deliver nothing, at once.
	e.push("m", "", "a", 1)
	e.push("m", "p2", "b", 2)
	require.Nil(t, e.pop("/api/v1/pop/queue/m?batch=10&partitions=2"))
	require.Nil(t, e.pop("/api/v1/pop/queue/m/partition/p2"))
	require.Nil(t, e.pop("/api/v1/pop/queue/m?consumerGroup=g&subscriptionMode=all"))
	require.Equal(t, 3.0, e.obj("GET", "/api/v1/resources/queues/m", nil, http.StatusOK)["totals"].(map[string]any)["total"])

	// A long-poll is served once the last flag is turned off, with
	// everything pushed meanwhile, once.
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- e.do("GET", "/api/v1/pop/queue/m?wait=true&timeout=30000&batch=10&partitions=2", nil) }()
	res = e.obj("POST", "/api/v1/system/maintenance/pop", `{"enabled":false}`, http.StatusOK)
	require.Equal(t, map[string]any{"popMaintenanceMode": false, "message": "Maintenance mode is off: pops deliver"}, res)
	require.False(t, e.b.MaintenanceMode())
	var rec *httptest.ResponseRecorder
	select {
	case rec = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll was not served after maintenance mode was turned off")
	}
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var polled map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &polled))
	var ids []string
	for _, m := range msgs(t, polled) {
		ids = append(ids, m["transactionId"].(string))
	}
	require.ElementsMatch(t, []string{"a", "b"}, ids)
	ids = nil
	for _, m := range msgs(t, e.pop("/api/v1/pop/queue/m?consumerGroup=g&batch=10&partitions=2")) {
		ids = append(ids, m["transactionId"].(string))
	}
	require.ElementsMatch(t, []string{"before", "a", "b"}, ids, "the group that joined in maintenance mode reads from the start")
	require.Nil(t, e.pop("/api/v1/pop/queue/m?batch=10&partitions=2"), "nothing is handed out twice")
	require.Equal(t, map[string]any{"maintenanceMode": false, "popMaintenanceMode": false, "bufferedMessages": 0.0, "bufferHealthy": true,
		"bufferStats": map[string]any{"pending": 0.0, "failed": 0.0}}, e.obj("GET", "/api/v1/system/maintenance", nil, http.StatusOK))

	// The flags follow the broker's switch turned from elsewhere.
	require.NoError(t, e.b.SetMaintenanceMode(bg, true))
	got = e.obj("GET", "/api/v1/system/maintenance", nil, http.StatusOK)
	require.Equal(t, true, got["maintenanceMode"])
	require.Equal(t, true, got["popMaintenanceMode"])
	res = e.obj("POST", "/api/v1/system/maintenance/pop", `{"enabled":false}`, http.StatusOK)
	require.Equal(t, false, res["popMaintenanceMode"])
	require.Contains(t, res["message"], "Maintenance mode is on", "the push flag keeps the mode on")
	require.True(t, e.b.MaintenanceMode(), "the push flag is still on")
	e.obj("POST", "/api/v1/system/maintenance", `{"enabled":false}`, http.StatusOK)
	require.False(t, e.b.MaintenanceMode())
	e.obj("POST", "/api/v1/system/maintenance", `{"enabled":true}`, http.StatusOK)
	require.NoError(t, e.b.SetMaintenanceMode(bg, false))
	got = e.obj("GET", "/api/v1/system/maintenance", nil, http.StatusOK)
	require.Equal(t, false, got["maintenanceMode"], "turned off elsewhere: both flags off")
	require.Equal(t, false, got["popMaintenanceMode"])

	// Bad bodies.
	for _, path := range []string{"/api/v1/system/maintenance", "/api/v1/system/maintenance/pop"} {
		for _, body := range []string{`{}`, `{"enabled":"true"}`, `{"enabled":1}`, `{"enabled":null}`} {
			e.fails("POST", path, body, http.StatusBadRequest, "enabled (boolean) is required")
		}
		e.fails("POST", path, `{"enabled":`, http.StatusBadRequest, "Invalid JSON")
	}
	require.False(t, e.b.MaintenanceMode())
	require.Contains(t, levels, "POST /api/v1/system/maintenance admin")
	require.Contains(t, levels, "GET /api/v1/system/maintenance admin")
	require.Contains(t, levels, "POST /api/v1/system/maintenance/pop admin")
	require.Contains(t, levels, "GET /api/v1/system/maintenance/pop admin")
}
