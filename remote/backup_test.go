package remote_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// adminOnly lets the admin token through everywhere and the reader token
// to read-only routes.
func adminOnly(r *http.Request, level httpapi.Access) error {
	switch r.Header.Get("Authorization") {
	case "Bearer admin":
		return nil
	case "Bearer reader":
		if level <= httpapi.AccessReadOnly {
			return nil
		}
		return httpapi.ErrForbidden
	}
	return httpapi.ErrUnauthorized
}

func TestClient_BackupRestores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := itest.NewClock()
	opts := &queen.Options{Clock: clock, Durability: queen.SyncNever}
	b := itest.OpenDir(t, t.TempDir(), opts)
	srv := httptest.NewServer(httpapi.New(b, &httpapi.Options{Authorize: adminOnly}))
	defer srv.Close()
	c, err := remote.Dial(srv.URL, &remote.Options{Token: "admin"})
	require.NoError(t, err)
	defer c.Close()

	_, err = b.Push(ctx, []queen.PushItem{{Queue: "q", TransactionID: "a", Payload: []byte(`{"n":1}`)}})
	require.NoError(t, err)
	var full bytes.Buffer
	next, err := c.Backup(ctx, &full, 0)
	require.NoError(t, err)
	require.Equal(t, next, binary.BigEndian.Uint64(full.Bytes()[24:32]), "the trailer's next is the backup's own")
	_, err = b.Push(ctx, []queen.PushItem{{Queue: "q", TransactionID: "b", Payload: []byte(`{"n":2}`)}})
	require.NoError(t, err)
	var inc bytes.Buffer
	next2, err := c.Backup(ctx, &inc, next)
	require.NoError(t, err)
	require.Greater(t, next2, next)

	dir := filepath.Join(t.TempDir(), "restored")
	require.NoError(t, queen.Restore(ctx, dir, nil, bytes.NewReader(full.Bytes()), bytes.NewReader(inc.Bytes())))
	r := itest.OpenDir(t, dir, opts)
	res, err := r.Fetch(ctx, "q", "", 0, 10)
	require.NoError(t, err)
	require.Len(t, res.Records, 2)
	require.Equal(t, "a", res.Records[0].TransactionID)
	require.Equal(t, "b", res.Records[1].TransactionID)

	// Admin only; a since ahead of the store is a bad request.
	reader, err := remote.Dial(srv.URL, &remote.Options{Token: "reader"})
	require.NoError(t, err)
	defer reader.Close()
	var none bytes.Buffer
	_, err = reader.Backup(ctx, &none, 0)
	var se *remote.ServerError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusForbidden, se.StatusCode)
	require.Zero(t, none.Len())
	_, err = c.Backup(ctx, &none, next2+1000)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	require.Zero(t, none.Len())
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/system/backup?since=-1", nil)
	req.Header.Set("Authorization", "Bearer admin")
	hres, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	hres.Body.Close()
	require.Equal(t, http.StatusBadRequest, hres.StatusCode)
}

// A server without backups (httpapi serving a remote client) answers not
// supported; a stream without its trailer is an incomplete backup.
func TestClient_BackupFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inner, _ := served(t, nil, nil)
	srv := httptest.NewServer(httpapi.New(inner, nil))
	defer srv.Close()
	c, err := remote.Dial(srv.URL, nil)
	require.NoError(t, err)
	defer c.Close()
	var w bytes.Buffer
	_, err = c.Backup(ctx, &w, 0)
	require.ErrorIs(t, err, queen.ErrUnsupported)

	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte("QUEENBAK and then nothing"))
	}))
	defer cut.Close()
	c2, err := remote.Dial(cut.URL, &remote.Options{RequestTimeout: time.Second})
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.Backup(ctx, &w, 0)
	var te *remote.TransportError
	require.ErrorAs(t, err, &te)
	require.Contains(t, err.Error(), "incomplete")
}

// TestClient_BackupFailedOnTheServer: a backup the server says failed
// midway (its X-Queen-Backup-Error trailer) is an error naming the
// server's reason, even beside a next version.
func TestClient_BackupFailedOnTheServer(t *testing.T) {
	t.Parallel()
	for _, withNext := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Trailer", httpapi.HeaderBackupNext+", "+httpapi.HeaderBackupError)
			_, _ = w.Write([]byte("QUEENBAK and then the disk"))
			w.Header().Set(httpapi.HeaderBackupError, "disk on fire")
			if withNext {
				w.Header().Set(httpapi.HeaderBackupNext, "42")
			}
		}))
		c, err := remote.Dial(srv.URL, nil)
		require.NoError(t, err)
		var w bytes.Buffer
		next, err := c.Backup(context.Background(), &w, 0)
		require.ErrorContains(t, err, "disk on fire", "with a next trailer too: %v", withNext)
		require.Zero(t, next)
		require.NoError(t, c.Close())
		srv.Close()
	}
}
