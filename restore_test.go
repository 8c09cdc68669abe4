package queen_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"

	"log/slog"

	"sync"

	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// backupChain returns a full backup of a small store and two increments
// after it, and the broker. The first increment only changes records the
// full backup has (a cursor), so only the chain's versions tell a restore
// that it is missing; the second adds a partition. Transaction ids are
// fixed, so two stores built by backupChain hold the same keys.
func backupChain(t *testing.T) (b *queen.Broker, full, inc1, inc2 []byte) {
	t.Helper()
	b = openStore(t, t.TempDir(), itest.NewClock())
	for _, p := range []string{"a", "b"} {
		for i := range 3 {
			pushOne(t, b, "q", p, fmt.Sprintf("%s-%d", p, i), fmt.Sprintf(`{"i":%d}`, i))
		}
	}
	consume := func() {
		r := pop(t, b, queen.PopRequest{Queue: "q", Partition: "a", Group: "g", Batch: 1, SubscriptionMode: queen.SubscriptionModeAll})
		require.Len(t, r.Messages, 1)
		ackAll(t, b, r.Messages, queen.AckCompleted)
	}
	consume()
	var w bytes.Buffer
	next, err := b.Backup(bg, &w, 0)
	require.NoError(t, err)
	full = bytes.Clone(w.Bytes())
	consume()
	w.Reset()
	next, err = b.Backup(bg, &w, next)
	require.NoError(t, err)
	inc1 = bytes.Clone(w.Bytes())
	pushOne(t, b, "q", "c", "c-0", `{"c":0}`)
	w.Reset()
	_, err = b.Backup(bg, &w, next)
	require.NoError(t, err)
	inc2 = bytes.Clone(w.Bytes())
	return b, full, inc1, inc2
}

func readers(bks ...[]byte) []io.Reader {
	rs := make([]io.Reader, len(bks))
	for i, bk := range bks {
		rs[i] = bytes.NewReader(bk)
	}
	return rs
}

// requireNothingRestored checks that a failed restore left no directory
// at dir and nothing else beside it.
func requireNothingRestored(t *testing.T, dir string) {
	t.Helper()
	_, err := os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed restore left %s", dir)
	left, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Empty(t, left, "a failed restore left its temporary directory")
}

func TestRestore_Chain(t *testing.T) {
	t.Parallel()
	b, full, inc1, inc2 := backupChain(t)
	want := observe(t, b)

	dir := filepath.Join(t.TempDir(), "ok")
	require.NoError(t, queen.Restore(bg, dir, nil, readers(full, inc1, inc2)...))
	require.Equal(t, want, observe(t, openStore(t, dir, itest.NewClock())))

	for name, bks := range map[string][][]byte{
		"increment without its base": {inc1},
		"out of order":               {full, inc2, inc1},
		"a gap":                      {full, inc2},
		"a full backup as increment": {full, full},
		"an increment twice":         {full, inc1, inc1},       // since behind the chain's next
		"an older increment last":    {full, inc1, inc2, inc1}, // since far behind
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			err := queen.Restore(bg, dir, nil, readers(bks...)...)
			require.ErrorIs(t, err, queen.ErrBackupChain)
			requireNothingRestored(t, dir)
		})
	}
	t.Run("an increment of another store", func(t *testing.T) {
		_, otherFull, otherInc, _ := backupChain(t)
		require.NotEqual(t, otherFull, full)
		dir := filepath.Join(t.TempDir(), "store")
		err := queen.Restore(bg, dir, nil, readers(full, otherInc)...)
		require.ErrorIs(t, err, queen.ErrBackupChain)
		requireNothingRestored(t, dir)
	})
}

func TestRestore_CorruptOrTruncatedIsRefused(t *testing.T) {
	t.Parallel()
	_, full, inc1, _ := backupChain(t)
	for _, at := range []int{0, 9, 20, 51, 55, len(full) / 2, len(full) - 30, len(full) - 1} {
		bad := bytes.Clone(full)
		bad[at] ^= 0x20
		dir := filepath.Join(t.TempDir(), "store")
		err := queen.Restore(bg, dir, nil, readers(bad)...)
		require.ErrorIs(t, err, queen.ErrCorruptBackup, "byte %d of %d flipped", at, len(full))
		requireNothingRestored(t, dir)
	}
	for _, n := range []int{0, 10, 52, 60, len(full) / 2, len(full) - 25, len(full) - 1} {
		dir := filepath.Join(t.TempDir(), "store")
		err := queen.Restore(bg, dir, nil, readers(full[:n])...)
		require.ErrorIs(t, err, queen.ErrCorruptBackup, "cut to %d of %d bytes", n, len(full))
		requireNothingRestored(t, dir)
	}
	// A corrupt increment fails the restore as a whole: no store from the
	// full backup alone is left.
	bad := bytes.Clone(inc1)
	bad[len(bad)/2] ^= 1
	dir := filepath.Join(t.TempDir(), "store")
	require.ErrorIs(t, queen.Restore(bg, dir, nil, readers(full, bad)...), queen.ErrCorruptBackup)
	requireNothingRestored(t, dir)
	// Bytes after the end record.
	require.ErrorIs(t, queen.Restore(bg, dir, nil, readers(append(bytes.Clone(full), 0))...), queen.ErrCorruptBackup)
	requireNothingRestored(t, dir)
}

func TestRestore_RefusesANonEmptyDirectory(t *testing.T) {
	t.Parallel()
	_, full, _, _ := backupChain(t)
	dir := filepath.Join(t.TempDir(), "store")
	require.NoError(t, os.Mkdir(dir, 0o755))
	keep := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(keep, []byte("mine"), 0o600))
	err := queen.Restore(bg, dir, nil, readers(full)...)
	require.ErrorIs(t, err, queen.ErrDirNotEmpty)
	got, err := os.ReadFile(keep)
	require.NoError(t, err)
	require.Equal(t, "mine", string(got))
	entries, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the directory itself, no temporary one beside it")

	// An existing empty directory is fine.
	empty := t.TempDir()
	require.NoError(t, queen.Restore(bg, empty, nil, readers(full)...))
	r := openStore(t, empty, itest.NewClock())
	qs, err := r.QueueStats(bg, "q")
	require.NoError(t, err)
	require.Equal(t, int64(6), qs.Messages)
}

func TestRestore_Arguments(t *testing.T) {
	t.Parallel()
	_, full, _, _ := backupChain(t)
	require.ErrorIs(t, queen.Restore(bg, "", nil, readers(full)...), queen.ErrInvalidArgument)
	require.ErrorIs(t, queen.Restore(bg, filepath.Join(t.TempDir(), "x"), nil), queen.ErrInvalidArgument)
	require.ErrorIs(t, queen.Restore(bg, filepath.Join(t.TempDir(), "x"), &queen.Options{InMemory: true}, readers(full)...), queen.ErrInvalidArgument)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	dir := filepath.Join(t.TempDir(), "store")
	require.ErrorIs(t, queen.Restore(ctx, dir, nil, readers(full)...), context.Canceled)
	requireNothingRestored(t, dir)
}

// TestRestore_NewerFormatIsRefused restores a backup whose header says it
// is of a newer store format (its checksum fixed up): the error names both.
func TestRestore_NewerFormatIsRefused(t *testing.T) {
	t.Parallel()
	_, full, _, _ := backupChain(t)
	bad := bytes.Clone(full)
	binary.BigEndian.PutUint32(bad[12:], queen.StoreFormat+1)
	binary.BigEndian.PutUint32(bad[48:], crc32.Checksum(bad[:48], crc32.MakeTable(crc32.Castagnoli)))
	dir := filepath.Join(t.TempDir(), "store")
	err := queen.Restore(bg, dir, nil, readers(bad)...)
	var ie *queen.IncompatibleStoreError
	require.True(t, errors.As(err, &ie), "%v", err)
	require.ErrorIs(t, err, queen.ErrIncompatibleStore)
	require.Equal(t, queen.StoreFormat+1, ie.Found)
	require.Equal(t, queen.StoreFormat, ie.Supported)
	requireNothingRestored(t, dir)
}

// TestRestore_MissingChunkIsRefused cuts a whole chunk, checksum and all,
// out of a backup of several: only the end record's count tells.
func TestRestore_MissingChunkIsRefused(t *testing.T) {
	t.Parallel()
	b := openStore(t, t.TempDir(), itest.NewClock())
	pushPadded(t, b, "big", 3, 200, 4000)
	var w bytes.Buffer
	_, err := b.Backup(bg, &w, 0)
	require.NoError(t, err)
	full := w.Bytes()
	var starts []int // offsets of the chunks
	for at := 52; at < len(full); {
		starts = append(starts, at)
		at += 1 + 4 + int(binary.BigEndian.Uint32(full[at+1:])) + 4
	}
	require.GreaterOrEqual(t, len(starts), 3, "the test needs a backup of several chunks")
	cut := append(bytes.Clone(full[:starts[1]]), full[starts[2]:]...)
	dir := filepath.Join(t.TempDir(), "store")
	require.ErrorIs(t, queen.Restore(bg, dir, nil, readers(cut)...), queen.ErrCorruptBackup)
	requireNothingRestored(t, dir)
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

// TestRestore_ClearsWhatAKilledRestoreLeft: a restore
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
	// A directory of the user's that merely starts like a restore's
	// (MkdirTemp's suffix is digits only) is not a restore's to remove.
	mine := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".restore-notes")
	require.NoError(t, os.Mkdir(mine, 0o700))

	var logs itest.LogBuffer
	opts := &queen.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	require.NoError(t, queen.Restore(bg, dir, opts, readers(full, inc1)...))
	require.Equal(t, []string{mine}, restoreLeftovers(t, dir), "the restore removed what the killed ones left, and only that")
	require.DirExists(t, other)
	require.DirExists(t, mine, "a user's look-alike directory is left alone")
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

	var logs itest.LogBuffer
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
