package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// onlyClient hides every method of a broker but those of queen.Client, as
// a remote client has them.
type onlyClient struct{ queen.Client }

func TestNew_AnyClient(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	e := &env{t: t, h: httpapi.New(onlyClient{b}, nil)}

	e.arr("POST", "/api/v1/push", `{"items":[{"queue":"q","payload":{"n":1}}]}`, http.StatusCreated)
	pop := e.obj("GET", "/api/v1/pop/queue/q?batch=1", nil, http.StatusOK)
	require.Len(t, pop["messages"], 1)
	e.obj("GET", "/api/v1/resources/queues/q", nil, http.StatusOK)

	// Routes past queen.Client answer as Queen's unsupported routes do.
	e.fails("GET", "/api/v1/messages", nil, http.StatusNotFound, "not supported")
	e.fails("GET", "/api/v1/traces/names", nil, http.StatusNotFound, "not supported")
	e.fails("POST", "/api/v1/system/maintenance", `{"enabled":true}`, http.StatusNotFound, "not supported")
}

func TestAck_DelayMs(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.arr("POST", "/api/v1/push", `{"items":[{"queue":"d","payload":{"n":1}}]}`, http.StatusCreated)
	pop := e.obj("GET", "/api/v1/pop/queue/d", nil, http.StatusOK)
	m := pop["messages"].([]any)[0].(map[string]any)
	ack := map[string]any{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
		"status": "retry", "delayMs": 5000}
	res := e.arr("POST", "/api/v1/ack", ack, http.StatusOK)
	require.Equal(t, true, res[0].(map[string]any)["success"])

	e.call("GET", "/api/v1/pop/queue/d", nil, http.StatusNoContent) // held back
	e.clock.Advance(5 * time.Second)
	e.obj("GET", "/api/v1/pop/queue/d", nil, http.StatusOK)

	e.fails("POST", "/api/v1/ack", map[string]any{"transactionId": "t", "partitionId": m["partitionId"], "delayMs": -1},
		http.StatusBadRequest, "delayMs must not be negative")
}
