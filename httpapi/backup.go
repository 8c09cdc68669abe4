package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/queenlite/queen"
)

// Backup headers. The next version travels twice: in the backup's own
// header (bytes 24 to 32, see queen.Broker.Backup), which a client reads
// as the stream starts, and in a trailer once the backup is complete.
const (
	// HeaderBackupSince echoes the since the backup was taken from.
	HeaderBackupSince = "X-Queen-Backup-Since"
	// HeaderBackupNext is the trailer with the next version (the since of
	// the following increment), set once the whole backup was written.
	HeaderBackupNext = "X-Queen-Backup-Next"
	// HeaderBackupError is the trailer set instead when the backup failed
	// after its first byte went out; the body then has no end record, so
	// queen.Restore refuses it too.
	HeaderBackupError = "X-Queen-Backup-Error"
)

// backuper is the method of [*queen.Broker] the backup route calls.
type backuper interface {
	Backup(ctx context.Context, w io.Writer, since uint64) (uint64, error)
}

// storeReporter is the method of [*queen.Broker] that gives /api/v1/status
// its store figures.
type storeReporter interface {
	StoreReport(ctx context.Context) (*queen.StoreReport, error)
}

// backup streams a backup (GET /api/v1/system/backup?since=N, admin): the
// file queen.Restore reads, as application/octet-stream. A broker without
// backups (a remote client) answers 404 not supported.
func (h *handler) backup(w http.ResponseWriter, r *http.Request) {
	bk, ok := h.b.(backuper)
	if !ok {
		h.writeError(w, r, queen.ErrUnsupported)
		return
	}
	var since uint64
	if s, ok := newParams(r).str("since"); ok {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			h.writeError(w, r, badRequest("since must be a non-negative integer, not %q", s))
			return
		}
		since = n
	}
	// A backup takes as long as the store is big: the server's timeouts
	// (cmd/queen's are 2 minutes) must not cut it. The read deadline
	// would cancel the request's context; the write deadline is moved
	// forward at each chunk, so a client that stops reading still ends it.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // where the ResponseWriter cannot, the server's timeouts stand
	cw := &countingWriter{w: w, rc: rc}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="queen.backup"`)
	w.Header().Set(HeaderBackupSince, strconv.FormatUint(since, 10))
	w.Header().Set("Trailer", HeaderBackupNext+", "+HeaderBackupError)
	next, err := bk.Backup(r.Context(), cw, since)
	if err != nil {
		if cw.n == 0 { // nothing sent yet: an ordinary error answer
			w.Header().Del("Trailer")
			w.Header().Del("Content-Disposition")
			w.Header().Del(HeaderBackupSince)
			h.writeError(w, r, err)
			return
		}
		h.log.Warn("httpapi: backup failed while streaming", "err", err)
		w.Header().Set(HeaderBackupError, err.Error())
		return
	}
	w.Header().Set(HeaderBackupNext, strconv.FormatUint(next, 10))
}

// netNow is the machine's clock, for connection deadlines only: those are
// the network's, which the broker's clock (Broker.Now) knows nothing of.
var netNow = time.Now

// backupWriteIdle is how long a write of the backup may wait for the
// client to read.
const backupWriteIdle = time.Minute

// countingWriter counts the bytes written through it and moves the write
// deadline before each write. While it counts 0, nothing was sent: it
// passes no empty write on.
type countingWriter struct {
	w  io.Writer
	rc *http.ResponseController
	n  int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		// An empty write would send the status and headers all the same,
		// and the route would then take n == 0 for nothing sent.
		return 0, nil
	}
	_ = c.rc.SetWriteDeadline(netNow().Add(backupWriteIdle))
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
