package queen_test

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a log sink the restore may write from any goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// deadRestore leaves beside dir what a restore killed with SIGKILL leaves:
// its hidden temporary directory, holding a half-built Badger database and
// Badger's LOCK file (the kernel let go of the lock, the file stays).
func deadRestore(t *testing.T, dir string) string {
	t.Helper()
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".restore-")
	require.NoError(t, err)
	db, err := badger.Open(badger.DefaultOptions(tmp).WithLogger(nil))
	require.NoError(t, err)
	require.NoError(t, db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte("half"), bytes.Repeat([]byte("x"), 64<<10))
	}))
	require.NoError(t, db.Close())
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "LOCK"), []byte("4242\n"), 0o600))
	return tmp
}

// restoreLeftovers lists the temporary directories of restores beside dir.
func restoreLeftovers(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".restore-*"))
	require.NoError(t, err)
	return m
}

// TestRestore_ClearsWhatAKilledRestoreLeft (issue 27, defect 3): a restore
// killed midway leaves its .NAME.restore-* directory; the next restore into
// NAME removes it, and says so in its log, but never removes the directory
// of a restore still running.
func TestRestore_ClearsWhatAKilledRestoreLeft(t *testing.T) {
	t.Parallel()
	_, full, inc1, _ := backupChain(t)
	dir := filepath.Join(t.TempDir(), "store")
	dead1, dead2 := deadRestore(t, dir), deadRestore(t, dir)
	other := deadRestore(t, filepath.Join(filepath.Dir(dir), "other")) // another target's: not ours to judge
	require.Len(t, restoreLeftovers(t, dir), 2)

	var logs lockedBuffer
	opts := &queen.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	require.NoError(t, queen.Restore(bg, dir, opts, readers(full, inc1)...))
	require.Empty(t, restoreLeftovers(t, dir), "the restore left what the killed ones left")
	require.DirExists(t, other)
	for _, d := range []string{dead1, dead2} {
		require.Contains(t, logs.String(), filepath.Base(d), "the log names each leftover it removed")
	}
	require.Contains(t, logs.String(), "killed restore")
	qs, err := openStore(t, dir, itest.NewClock()).QueueStats(bg, "q")
	require.NoError(t, err)
	require.Equal(t, int64(6), qs.Messages)
}

// blockingReader hands out data up to at, then waits for release.
type blockingReader struct {
	data    []byte
	at      int
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func (r *blockingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	if r.at == 0 {
		r.once.Do(func() { close(r.reached) })
		<-r.release
		r.at = -1
	}
	n := min(len(p), len(r.data))
	if r.at > 0 {
		n = min(n, r.at)
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	if r.at > 0 {
		r.at -= n
	}
	return n, nil
}

// TestRestore_LeavesARunningRestoreAlone: a restore that finds the
// temporary directory of another one still running leaves it alone; the
// running one then ends as it would have (here refused: the target was
// filled meanwhile) and removes its own.
func TestRestore_LeavesARunningRestoreAlone(t *testing.T) {
	t.Parallel()
	_, full, _, _ := backupChain(t)
	dir := filepath.Join(t.TempDir(), "store")
	slow := &blockingReader{data: full, at: len(full) - 20, reached: make(chan struct{}), release: make(chan struct{})}
	first := make(chan error, 1)
	go func() { first <- queen.Restore(bg, dir, nil, slow) }()
	select {
	case <-slow.reached:
	case err := <-first:
		t.Fatalf("the first restore ended early: %v", err)
	}
	running := restoreLeftovers(t, dir)
	require.Len(t, running, 1)

	var logs lockedBuffer
	require.NoError(t, queen.Restore(bg, dir, &queen.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, readers(full)...))
	require.DirExists(t, running[0], "a running restore's directory was removed")
	require.Contains(t, logs.String(), "in use", "the log says why it was left")

	close(slow.release)
	select {
	case err := <-first:
		require.ErrorIs(t, err, queen.ErrDirNotEmpty)
	case <-time.After(time.Minute):
		t.Fatal("the first restore did not end")
	}
	require.Empty(t, restoreLeftovers(t, dir))
	entries, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the restored store")
	qs, err := openStore(t, dir, itest.NewClock()).QueueStats(bg, "q")
	require.NoError(t, err)
	require.Equal(t, int64(6), qs.Messages)
}

// TestRestore_GivesTheStoreAnIdentityOfItsOwn: a restored store's id (the
// format record's, Facts().StoreID) is new, not its source's, and is the
// one its own backups carry: an increment of the source does not apply
// over a backup of the restored store.
func TestRestore_GivesTheStoreAnIdentityOfItsOwn(t *testing.T) {
	t.Parallel()
	src, full, inc1, _ := backupChain(t)
	r := restored(t, itest.NewClock(), full)
	srcID, rID := src.Facts().StoreID, r.Facts().StoreID
	require.NotEmpty(t, srcID)
	require.NotEmpty(t, rID)
	require.NotEqual(t, srcID, rID, "the restored store took its source's identity")
	rep, err := r.StoreReport(bg)
	require.NoError(t, err)
	require.Equal(t, rID, rep.StoreID)

	// Two restores of one backup are two stores.
	r2 := restored(t, itest.NewClock(), full)
	require.NotEqual(t, rID, r2.Facts().StoreID)

	// The restored store's backups are of the restored store.
	var own bytes.Buffer
	_, err = r.Backup(bg, &own, 0)
	require.NoError(t, err)
	err = queen.Restore(bg, filepath.Join(t.TempDir(), "x"), nil, readers(own.Bytes(), inc1)...)
	require.ErrorIs(t, err, queen.ErrBackupChain)
}
