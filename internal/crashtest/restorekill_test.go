package crashtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// restoreChildEnv names the directory the test binary, run as a child by
// TestCrash_KilledRestoreIsCleared, restores into from its standard input.
const restoreChildEnv = "QUEEN_CRASHTEST_RESTORE_INTO"

// TestCrash_RestoreChild is the child of TestCrash_KilledRestoreIsCleared,
// not a test of its own: it restores the backup on its standard input into
// the directory restoreChildEnv names, and is killed midway.
func TestCrash_RestoreChild(t *testing.T) {
	dir := os.Getenv(restoreChildEnv)
	if dir == "" {
		t.Skip("run by TestCrash_KilledRestoreIsCleared")
	}
	err := queen.Restore(context.Background(), dir, nil, os.Stdin)
	fmt.Fprintf(os.Stderr, "restore ended: %v\n", err)
	os.Exit(3) // it should have been killed before
}

// killableRestore is a restore running in a child process.
type killableRestore struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// startRestore starts a child restoring into dir, feeds it the first
// half of backup and waits until its temporary directory holds a Badger
// database: the restore is then midway, waiting for the rest.
func startRestore(t *testing.T, dir string, backup []byte) *killableRestore {
	t.Helper()
	before := leftovers(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash_RestoreChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), restoreChildEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	k := &killableRestore{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(k.done) }()
	t.Cleanup(func() { k.kill(t) })
	_, err = stdin.Write(backup[:len(backup)/2])
	require.NoError(t, err, "the child: %s", &stderr)
	deadline := time.Now().Add(time.Minute)
	for {
		for d := range leftovers(t, dir) {
			if !before[d] && fileExists(filepath.Join(d, "store", "MANIFEST")) {
				return k
			}
		}
		select {
		case <-k.done:
			t.Fatalf("the child ended before it was killed: %s", &stderr)
		case <-time.After(5 * time.Millisecond): // polls another process's files: nothing to wait on
		}
		require.True(t, time.Now().Before(deadline), "the child's restore made no store")
	}
}

// kill sends SIGKILL and waits for the child to be gone.
func (k *killableRestore) kill(t *testing.T) {
	t.Helper()
	_ = k.cmd.Process.Signal(syscall.SIGKILL)
	<-k.done
	_ = k.stdin.Close()
}

func fileExists(path string) bool { _, err := os.Stat(path); return err == nil }

// leftovers are the restore directories beside dir.
func leftovers(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	out := map[string]bool{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "."+filepath.Base(dir)+".restore-") {
			out[filepath.Join(filepath.Dir(dir), e.Name())] = true
		}
	}
	return out
}

// sizeOf is the size of the files under dir.
func sizeOf(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// TestCrash_KilledRestoreIsCleared: a restore killed
// with SIGKILL midway leaves its temporary directory beside the target;
// the next restore into the target (in another child) removes it; a
// restore beside a running one (in another process) leaves its directory;
// and a restore refused because the target is taken still clears what a
// killed one left, and logs so.
func TestCrash_KilledRestoreIsCleared(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a 4 MB store and starts two child processes")
	}
	// A store of about 4 MB, backed up.
	src, err := queen.Open(t.TempDir(), &queen.Options{Durability: queen.SyncNever})
	require.NoError(t, err)
	ctx := context.Background()
	pad := strings.Repeat("p", 4000)
	for i := range 10 {
		items := make([]queen.PushItem, 100)
		for j := range items {
			items[j] = queen.PushItem{Queue: "q", Partition: fmt.Sprint("p", j%4), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i*100+j, pad))}
		}
		_, err := src.Push(ctx, items)
		require.NoError(t, err)
	}
	var backup bytes.Buffer
	_, err = src.Backup(ctx, &backup, 0)
	require.NoError(t, err)
	require.NoError(t, src.Close())

	dir := filepath.Join(t.TempDir(), "store")
	dead := startRestore(t, dir, backup.Bytes())
	dead.kill(t)
	left := leftovers(t, dir)
	require.Len(t, left, 1, "the killed restore left its directory (the test kills it midway)")
	var deadDir string
	for d := range left {
		deadDir = d
	}
	t.Logf("a killed restore of a %d-byte backup left %d bytes", backup.Len(), sizeOf(deadDir))
	require.NoDirExists(t, dir)

	// The next restore (in a child too) clears it first.
	running := startRestore(t, dir, backup.Bytes())
	require.NoDirExists(t, deadDir, "the killed restore's directory is still there")
	left = leftovers(t, dir)
	require.Len(t, left, 1)
	var runningDir string
	for d := range left {
		runningDir = d
	}
	// A restore beside a running one leaves the running one's directory.
	var logs itest.LogBuffer
	opts := &queen.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	require.NoError(t, queen.Restore(ctx, dir, opts, bytes.NewReader(backup.Bytes())))
	require.DirExists(t, runningDir, "the running restore's directory was removed")
	require.Contains(t, logs.String(), "in use by a running restore")

	// Killed, it is cleared by the next restore into dir, even one refused
	// (dir now holds a store), which says so.
	running.kill(t)
	require.Equal(t, map[string]bool{runningDir: true}, leftovers(t, dir))
	err = queen.Restore(ctx, dir, opts, bytes.NewReader(backup.Bytes()))
	require.ErrorIs(t, err, queen.ErrDirNotEmpty)
	require.Empty(t, leftovers(t, dir), "a refused restore did not clear what the killed one left")
	require.Contains(t, logs.String(), "removed what a killed restore left")
	require.Contains(t, logs.String(), filepath.Base(runningDir))

	b, err := queen.Open(dir, nil)
	require.NoError(t, err)
	defer b.Close()
	qs, err := b.QueueStats(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, int64(1000), qs.Messages)
}
