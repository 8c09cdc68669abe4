package queen_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

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

var (
	soakSeeds  = flag.Int("backupsoak.seeds", 0, "TestBackup_ChainSoak: seeds (stores) to run; 0 skips it")
	soakRounds = flag.Int("backupsoak.rounds", 3, "TestBackup_ChainSoak: increments per store")
	soakOps    = flag.Int("backupsoak.ops", 60, "TestBackup_ChainSoak: operations between two backups")
	soakSeed   = flag.Uint64("backupsoak.seed", 0, "TestBackup_ChainSoak: first seed (0: from the clock)")
)

// TestBackup_ChainSoak builds backup chains over random work: per seed, a
// store under SyncPushes with an encrypted queue and a plain one, random
// pushes, pops acked completed, failed (to dead letters) or parked, dead
// letters deleted and replayed, a full backup and then increments, the
// broker closed and reopened between two backups. After each backup the
// chain so far is restored and must answer as the store did at that
// backup, and the store's version must not go back across a reopen; at the
// end a fresh full backup restores to the same store as the whole chain.
// On demand only: -backupsoak.seeds=N runs it (docs/long-runs.md).
func TestBackup_ChainSoak(t *testing.T) {
	if testing.Short() || *soakSeeds == 0 {
		t.Skip("a soak, on demand: -backupsoak.seeds=N (docs/long-runs.md)")
	}
	t.Parallel()
	first := *soakSeed
	if first == 0 {
		first = uint64(time.Now().UnixNano())
	}
	t.Logf("seeds %d.. (rerun one with -backupsoak.seed=N -backupsoak.seeds=1)", first)
	start := time.Now()
	var backups, bytesWritten, messages, restores int
	for s := range *soakSeeds {
		seed := first + uint64(s)
		n, m, bw, rs := soakChain(t, seed)
		backups, bytesWritten, messages, restores = backups+n, bytesWritten+bw, messages+m, restores+rs
		if t.Failed() {
			t.Fatalf("seed %d failed (rerun with -backupsoak.seed=%d -backupsoak.seeds=1)", seed, seed)
		}
	}
	t.Logf("%d seeds x %d increments: %d backups (%d bytes), %d restores compared, %d messages pushed, %s",
		*soakSeeds, *soakRounds, backups, bytesWritten, restores, messages, time.Since(start).Round(time.Millisecond))
}

// soakChain runs one seed of TestBackup_ChainSoak and returns its figures.
func soakChain(t *testing.T, seed uint64) (backups, pushed, written, restores int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(rng.IntN(256))
	}
	clock := itest.NewClock()
	opts := &queen.Options{Clock: clock, Durability: queen.SyncPushes, EncryptionKey: key, MaintenanceInterval: time.Hour}
	dir := t.TempDir()
	b, err := queen.Open(dir, opts)
	require.NoError(t, err)
	defer func() { _ = b.Close() }()
	configureWith(t, b, "enc", func(c *queen.QueueConfig) { c.EncryptionEnabled, c.RetryLimit, c.DeadLetterQueue = true, 1, true })
	configureWith(t, b, "plain", func(c *queen.QueueConfig) { c.RetryLimit, c.DeadLetterQueue = 1, true })
	queues := []string{"enc", "plain"}
	var chain [][]byte
	var next uint64
	for round := 0; round <= *soakRounds; round++ {
		for range *soakOps {
			q := queues[rng.IntN(2)]
			switch op := rng.IntN(10); {
			case op < 5:
				items := make([]queen.PushItem, 1+rng.IntN(4))
				for i := range items {
					items[i] = queen.PushItem{Queue: q, Partition: fmt.Sprint("p", rng.IntN(3)), TransactionID: fmt.Sprintf("s%d-%d", seed, pushed),
						Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":%q}`, pushed, strings.Repeat("x", rng.IntN(600))))}
					pushed++
				}
				_, err := b.Push(bg, items)
				require.NoError(t, err)
			case op < 8:
				req := queen.PopRequest{Queue: q, Batch: 1 + rng.IntN(3)}
				if rng.IntN(2) == 0 {
					req.Group, req.SubscriptionMode = "g", queen.SubscriptionModeAll
				}
				r := pop(t, b, req)
				st := []queen.AckStatus{queen.AckCompleted, queen.AckCompleted, queen.AckFailed, queen.AckDLQ, queen.AckPark}[rng.IntN(5)]
				if len(r.Messages) > 0 {
					ackAll(t, b, r.Messages, st)
				}
				clock.Advance(2 * time.Second) // past retry delays
			default:
				page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: q, Limit: 5})
				require.NoError(t, err)
				if len(page.Letters) > 0 {
					l := page.Letters[rng.IntN(len(page.Letters))]
					if rng.IntN(2) == 0 {
						require.NoError(t, b.DeleteDeadLetter(bg, l.ID))
					} else {
						_, err := b.ReplayDeadLetter(bg, l.ID)
						require.NoError(t, err)
					}
				}
			}
		}
		var w bytes.Buffer
		since := next
		next, err = b.Backup(bg, &w, since)
		require.NoError(t, err)
		chain = append(chain, w.Bytes())
		backups, written = backups+1, written+w.Len()
		want := observe(t, b)
		got := restoredWith(t, opts, chain...)
		require.Equal(t, want, observe(t, got), "seed %d: the chain of %d backups restores otherwise", seed, len(chain))
		require.NoError(t, got.Close())
		restores++
		// Reopen between two backups: versions go on across it.
		require.NoError(t, b.Close())
		b, err = queen.Open(dir, opts)
		require.NoError(t, err)
		reopened, err := b.Backup(bg, io.Discard, 0)
		require.NoError(t, err)
		require.GreaterOrEqual(t, reopened, next, "seed %d: the store's version went back across a reopen", seed)
	}
	var w bytes.Buffer
	_, err = b.Backup(bg, &w, 0)
	require.NoError(t, err)
	one, all := restoredWith(t, opts, w.Bytes()), restoredWith(t, opts, chain...)
	require.Equal(t, observe(t, one), observe(t, all), "seed %d: a full backup and the chain differ", seed)
	require.NoError(t, one.Close())
	require.NoError(t, all.Close())
	return backups, pushed, written, restores + 1
}

// restoredWith restores backups into a new directory and opens it with
// opts (the encryption key: the restored payloads are as stored).
func restoredWith(t *testing.T, opts *queen.Options, backups ...[]byte) *queen.Broker {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	require.NoError(t, queen.Restore(bg, dir, nil, readers(backups...)...))
	r, err := queen.Open(dir, opts)
	require.NoError(t, err)
	return r
}

// TestBackup_IncrementAfterAReopenThatFollowedADeleteOnlyCommit (found by
// TestBackup_ChainSoak, 9 seeds of 20): when the last commit before a
// backup only deleted (here a dead letter), Badger keeps no entry of that
// version through a close, so a reopened store gave its next commit the
// backup's own next version again; the following increment then named
// that commit's keys without their values (a stale cursor, or
// ErrBackupChain for a new key). Each backup now leaves a write after its
// snapshot, so the store's versions stay ahead of every next it returned.
func TestBackup_IncrementAfterAReopenThatFollowedADeleteOnlyCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := itest.NewClock()
	opts := &queen.Options{Clock: clock, Durability: queen.SyncPushes, MaintenanceInterval: time.Hour}
	b, err := queen.Open(dir, opts)
	require.NoError(t, err)
	configureWith(t, b, "q", func(c *queen.QueueConfig) { c.DeadLetterQueue = true })
	pushN(t, b, "q", "", 3)
	r := pop(t, b, queen.PopRequest{Queue: "q", Batch: 1})
	ackAll(t, b, r.Messages, queen.AckDLQ)
	dead, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "q"})
	require.NoError(t, err)
	require.NoError(t, b.DeleteDeadLetter(bg, dead.Letters[0].ID)) // the last commit only deletes
	var full bytes.Buffer
	next, err := b.Backup(bg, &full, 0)
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b, err = queen.Open(dir, opts)
	require.NoError(t, err)
	defer b.Close()
	r = pop(t, b, queen.PopRequest{Queue: "q", Batch: 1}) // moves the cursor: a key the base has
	ackAll(t, b, r.Messages, queen.AckCompleted)
	pushOne(t, b, "q", "p2", "new", `{"new":1}`) // a partition the base lacks
	var inc bytes.Buffer
	_, err = b.Backup(bg, &inc, next)
	require.NoError(t, err)
	got := restoredWith(t, opts, full.Bytes(), inc.Bytes())
	defer got.Close()
	require.Equal(t, observe(t, b), observe(t, got))
}
