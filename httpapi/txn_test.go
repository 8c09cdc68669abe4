package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// txRecorder is a broker whose ExecTransaction records what it was asked
// and runs nothing (it answers ErrUnavailable).
type txRecorder struct {
	*queen.Broker
	mu    sync.Mutex
	calls [][]queen.TxOp
}

func (r *txRecorder) ExecTransaction(_ context.Context, ops []queen.TxOp) (*queen.TxResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, ops)
	return nil, queen.ErrUnavailable
}

func (r *txRecorder) asked() [][]queen.TxOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// A transaction is refused whole, with a 413 naming queen.MaxTxOps and
// before the broker is asked anything, as soon as its operations, counting
// each item of a push operation's items array and each entry of the
// positions rider as one, are one more than the cap, wherever the one too
// many comes from: never run with the items past the cap dropped. At the
// cap, every operation reaches the broker.
func TestTransaction_OneOverTheCapIsRefusedWhole(t *testing.T) {
	t.Parallel()
	const most = queen.MaxTxOps
	item := `{"queue":"capped","payload":1}`
	flat := `{"type":"push","queue":"capped","payload":1}`
	items := func(n int) string { return `{"type":"push","items":` + repeatJSON(item, n) + `}` }
	positions := func(n int) string {
		return repeatJSON(`{"queue":"capped","consumerGroup":"g","offset":0}`, n)
	}
	ops := func(o ...string) string { return `[` + strings.Join(o, ",") + `]` }
	serve := func(t *testing.T, body string) (*httptest.ResponseRecorder, *txRecorder) {
		rec := &txRecorder{Broker: queentest.NewBroker(t, nil)}
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/api/v1/transaction", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		httpapi.New(rec, nil).ServeHTTP(w, r)
		return w, rec
	}
	for _, c := range []struct {
		name string
		body string
	}{
		{"one items array over the cap", `{"operations":` + ops(items(most+1)) + `}`},
		{"the last items array after a flat push", `{"operations":` + ops(flat, items(most)) + `}`},
		{"the last items array after another", `{"operations":` + ops(items(most/2), items(most/2+1)) + `}`},
		{"the last items array after flat pushes", `{"operations":` + ops(items(most-2), flat, items(2)) + `}`},
		{"the last items array of one item", `{"operations":` + ops(items(most), items(1)) + `}`},
		{"a flat push after items arrays", `{"operations":` + ops(items(most/2), items(most/2), flat) + `}`},
		{"one position after the operations", `{"operations":` + ops(items(most)) + `,"positions":` + positions(1) + `}`},
		{"positions after half the operations", `{"operations":` + ops(items(most/2)) + `,"positions":` + positions(most/2+1) + `}`},
		{"positions alone", `{"positions":` + positions(most+1) + `}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w, rec := serve(t, c.body)
			require.Equal(t, http.StatusRequestEntityTooLarge, w.Code, "answer: %.300s", w.Body.String())
			var v map[string]any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
			require.Contains(t, v["error"], "at most 10000 operations (queen.MaxTxOps)")
			require.Empty(t, rec.asked(), "the broker was asked to run a transaction over the cap")
		})
	}

	for _, c := range []struct {
		name      string
		body      string
		positions int
	}{
		{"items arrays and a flat push", `{"operations":` + ops(items(most/2), flat, items(most/2-1)) + `}`, 0},
		{"operations and positions", `{"operations":` + ops(items(most-2), flat) + `,"positions":` + positions(1) + `}`, 1},
	} {
		t.Run("at the cap: "+c.name, func(t *testing.T) {
			t.Parallel()
			_, rec := serve(t, c.body)
			calls := rec.asked()
			require.Len(t, calls, 1, "the broker runs a transaction at the cap")
			require.Len(t, calls[0], most, "every operation reaches the broker")
			n := 0
			for _, op := range calls[0] {
				if op.Position != nil {
					n++
				}
			}
			require.Equal(t, c.positions, n)
		})
	}
}
