package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/stretchr/testify/require"
)

// getBackup reads the whole answer of the backup route of the server at
// url, trailers included.
func getBackup(t *testing.T, url string) (*http.Response, *bytes.Buffer) {
	t.Helper()
	res, err := http.Get(url + "/api/v1/system/backup")
	require.NoError(t, err)
	defer res.Body.Close()
	var body bytes.Buffer
	_, err = body.ReadFrom(res.Body)
	require.NoError(t, err)
	return res, &body
}

func TestBackupRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("q", "", "a", map[string]int{"n": 1})
	srv := httptest.NewServer(e.h)
	defer srv.Close()

	res, body := getBackup(t, srv.URL)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "application/octet-stream", res.Header.Get("Content-Type"))
	require.Equal(t, "0", res.Header.Get(httpapi.HeaderBackupSince))
	next, err := strconv.ParseUint(res.Trailer.Get(httpapi.HeaderBackupNext), 10, 64)
	require.NoError(t, err, "trailer %v", res.Trailer)
	require.Positive(t, next)
	require.Empty(t, res.Trailer.Get(httpapi.HeaderBackupError))

	dir := filepath.Join(t.TempDir(), "r")
	require.NoError(t, queen.Restore(context.Background(), dir, nil, bytes.NewReader(body.Bytes())))
	b, err := queen.Open(dir, nil)
	require.NoError(t, err)
	defer b.Close()
	qs, err := b.QueueStats(context.Background(), "q")
	require.NoError(t, err)
	require.Equal(t, int64(1), qs.Messages)

	e.fails("GET", "/api/v1/system/backup?since=x", nil, http.StatusBadRequest, "since must be a non-negative integer")
	e.fails("GET", "/api/v1/system/backup?since="+strconv.FormatUint(next+99, 10), nil, http.StatusBadRequest, "ahead of this store")
}

func TestBackupRoute_IsAdmin(t *testing.T) {
	t.Parallel()
	var level httpapi.Access = -1
	e := setup(t, nil, &httpapi.Options{Authorize: func(r *http.Request, l httpapi.Access) error {
		if r.URL.Path == "/api/v1/system/backup" {
			level = l
		}
		return httpapi.ErrForbidden
	}})
	rec := e.do("GET", "/api/v1/system/backup", nil)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Equal(t, httpapi.AccessAdmin, level)
}

func TestStatus_ReportsTheStore(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	for i := range 5 {
		e.push("q", "", strconv.Itoa(i), map[string]string{"pad": "0123456789012345678901234567890123456789"})
	}
	st := e.obj("GET", "/api/v1/status", nil, http.StatusOK)
	store, ok := st["store"].(map[string]any)
	require.True(t, ok, "%v", st)
	require.EqualValues(t, queen.StoreFormat, store["format"])
	require.EqualValues(t, 0, store["diskBytes"], "in memory")
	queues := store["queues"].([]any)
	require.Len(t, queues, 1)
	q := queues[0].(map[string]any)
	require.Equal(t, "q", q["name"])
	require.EqualValues(t, 5, q["messages"])
	require.Greater(t, q["approxBytes"].(float64), float64(5*50))
}

// TestBackupRoute_OutlivesServerTimeouts: a server whose write timeout
// passed before the handler ran (1 ns) still streams the whole backup, as
// a long backup outlives cmd/queen's 2-minute timeouts.
func TestBackupRoute_OutlivesServerTimeouts(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("q", "", "a", map[string]int{"n": 1})
	srv := httptest.NewUnstartedServer(e.h)
	srv.Config.WriteTimeout = time.Nanosecond
	srv.Start()
	defer srv.Close()
	res, body := getBackup(t, srv.URL)
	require.NotEmpty(t, res.Trailer.Get(httpapi.HeaderBackupNext))
	require.NoError(t, queen.Restore(context.Background(), filepath.Join(t.TempDir(), "r"), nil, bytes.NewReader(body.Bytes())))
}

// failingBackup is a broker whose backups write data and then fail.
type failingBackup struct {
	*queen.Broker
	data []byte
}

var errBackupBroke = errors.New("disk on fire")

func (f failingBackup) Backup(ctx context.Context, w io.Writer, since uint64) (uint64, error) {
	if _, err := w.Write(f.data); err != nil {
		return 0, err
	}
	return 0, errBackupBroke
}

// TestBackupRoute_FailureMidStreamIsInTheTrailer: a backup that fails
// after its first bytes went out says so in the X-Queen-Backup-Error
// trailer, sends no next version, and its body is exactly the bytes the
// backup wrote, no JSON error after them (restore refuses them: no end
// record). One that fails before its first byte is an ordinary JSON error
// answer, with no trailers announced.
func TestBackupRoute_FailureMidStreamIsInTheTrailer(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("q", "", "a", map[string]int{"n": 1})
	var full bytes.Buffer
	_, err := e.b.Backup(context.Background(), &full, 0)
	require.NoError(t, err)
	n := full.Len() - 10 // all but part of the end record

	srv := httptest.NewServer(httpapi.New(failingBackup{e.b, full.Bytes()[:n]}, nil))
	defer srv.Close()
	res, body := getBackup(t, srv.URL)
	require.Equal(t, http.StatusOK, res.StatusCode, "the status went out with the first byte")
	require.Equal(t, "application/octet-stream", res.Header.Get("Content-Type"))
	require.Equal(t, full.Bytes()[:n], body.Bytes(), "the body is the backup's bytes and nothing else")
	require.Contains(t, res.Trailer.Get(httpapi.HeaderBackupError), errBackupBroke.Error())
	require.Empty(t, res.Trailer.Get(httpapi.HeaderBackupNext), "a failed backup has no next version")
	err = queen.Restore(context.Background(), filepath.Join(t.TempDir(), "r"), nil, bytes.NewReader(body.Bytes()))
	require.ErrorIs(t, err, queen.ErrCorruptBackup)

	// Failing before the first byte: a JSON error, no trailer announced.
	srv0 := httptest.NewServer(httpapi.New(failingBackup{e.b, nil}, nil))
	defer srv0.Close()
	res, body = getBackup(t, srv0.URL)
	require.Equal(t, http.StatusInternalServerError, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Type"), "json")
	require.Empty(t, res.Header.Get("Trailer"))
	require.Empty(t, res.Header.Get("Content-Disposition"))
	var answer map[string]any
	require.NoError(t, json.Unmarshal(body.Bytes(), &answer), body.String())
	require.Empty(t, res.Trailer)
}
