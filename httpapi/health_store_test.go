package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// healthOf is GET /health's status and answer.
func healthOf(t *testing.T, h http.Handler) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	var v map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v), rec.Body.String())
	return rec.Code, v
}

// GET /health names the store behind the broker, beside Queen's fields
// (unchanged), healthy or not; every front of one broker names the same.
func TestHealth_StoreID(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	id := b.Facts().StoreID
	require.Len(t, id, 36, "a UUID")
	h1, h2 := httpapi.New(b, nil), httpapi.New(b, nil)
	code, v := healthOf(t, h1)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, map[string]any{"status": "healthy", "database": "connected", "server": "queen (Go, Badger)",
		"worker_id": 0.0, "version": queen.Version, "shared_state": map[string]any{"enabled": false},
		"queen": map[string]any{"worker_id": 0.0, "status": "active"}, "storeId": id}, v)
	_, v2 := healthOf(t, h2)
	require.Equal(t, id, v2["storeId"])

	other := queentest.NewBroker(t, nil)
	require.NotEqual(t, id, other.Facts().StoreID, "another store, another id")
	_, v3 := healthOf(t, httpapi.New(other, nil))
	require.Equal(t, other.Facts().StoreID, v3["storeId"])

	require.NoError(t, b.Close())
	code, v = healthOf(t, h1)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, id, v["storeId"], "still the same store")
}

// noFacts is a broker that cannot tell its store (as a remote client
// mounted behind httpapi): queen.Client only.
type noFacts struct{ queen.Client }

func TestHealth_NoStoreIDWithoutFacts(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	code, v := healthOf(t, httpapi.New(noFacts{b}, nil))
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, v, "storeId")
	require.Equal(t, "healthy", v["status"])
}

// A store keeps its id across reopens; two new stores differ; a restored
// store is a store of its own, whose id it keeps too.
func TestHealth_StoreIDAcrossReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, dir2 := t.TempDir(), t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	id := b.Facts().StoreID
	require.NotEmpty(t, id)
	_, v := healthOf(t, httpapi.New(b, nil))
	require.Equal(t, id, v["storeId"])
	var backup bytes.Buffer
	_, err := b.Backup(ctx, &backup, 0)
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b = itest.OpenDir(t, dir, nil)
	require.Equal(t, id, b.Facts().StoreID, "reopened: the same store")
	_, v = healthOf(t, httpapi.New(b, nil))
	require.Equal(t, id, v["storeId"])
	require.NoError(t, b.Close())

	fresh := itest.OpenDir(t, dir2, nil)
	require.NotEqual(t, id, fresh.Facts().StoreID, "another new store")
	require.NoError(t, fresh.Close())

	restored := filepath.Join(t.TempDir(), "restored")
	require.NoError(t, queen.Restore(ctx, restored, nil, &backup))
	r := itest.OpenDir(t, restored, nil)
	rid := r.Facts().StoreID
	require.NotEmpty(t, rid)
	require.NotEqual(t, id, rid, "a restored store is one of its own")
	require.NoError(t, r.Close())
	r = itest.OpenDir(t, restored, nil)
	require.Equal(t, rid, r.Facts().StoreID, "and keeps its id")
}
