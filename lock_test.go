package queen_test

import (
	"testing"

	"bufio"
	"os"
	"os/exec"

	"fmt"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// TestOpen_LockReleasedWhileRetrying: a directory lock that is let go
// while Open waits between its tries (as a lock a forked child holds until
// its exec is) does not fail Open.
func TestOpen_LockReleasedWhileRetrying(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder := itest.OpenDir(t, dir, nil)
	var waits []int
	opts := queen.WithLockWaitForTest(&queen.Options{}, func(attempt int) {
		waits = append(waits, attempt)
		if attempt == 1 {
			require.NoError(t, holder.Close())
		}
	})
	b, err := queen.Open(dir, opts)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.Equal(t, []int{0, 1}, waits, "two waits: the lock was let go during the second")
}

// TestOpen_LockHeldAfterRetries: a lock held throughout is ErrLocked once
// Open has waited eight times (255 ms), with nothing opened.
func TestOpen_LockHeldAfterRetries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder := itest.OpenDir(t, dir, nil)
	waits := 0
	opts := queen.WithLockWaitForTest(&queen.Options{}, func(int) { waits++ })
	_, err := queen.Open(dir, opts)
	require.ErrorIs(t, err, queen.ErrLocked)
	require.Equal(t, 8, waits)
	_, err = queen.Inspect(bg, dir, opts)
	require.ErrorIs(t, err, queen.ErrLocked)
	require.NoError(t, holder.Close())
}

// TestOpen_DirectoryInUse: opening a directory a broker already has open
// is ErrLocked (it was Badger's text), from this process and from another.
func TestOpen_DirectoryInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	_, err := queen.Open(dir, nil)
	require.ErrorIs(t, err, queen.ErrLocked)
	require.Less(t, len(err.Error()), 300)
	require.NoError(t, b.Close())

	// Another process holds it.
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpen_LockHolder$")
	cmd.Env = append(os.Environ(), "QUEEN_LOCK_HOLDER_DIR="+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "holding\n", line)
	_, err = queen.Open(dir, nil)
	require.ErrorIs(t, err, queen.ErrLocked)
	require.NoError(t, stdin.Close()) // the holder closes its broker and exits
	require.NoError(t, cmd.Wait())
	b = itest.OpenDir(t, dir, nil)
	require.NoError(t, b.Close())
}

// TestOpen_LockHolder is the child of TestOpen_DirectoryInUse: it holds a
// broker open on QUEEN_LOCK_HOLDER_DIR until its stdin closes.
func TestOpen_LockHolder(t *testing.T) {
	dir := os.Getenv("QUEEN_LOCK_HOLDER_DIR")
	if dir == "" {
		t.Skip("run by TestOpen_DirectoryInUse")
	}
	b, err := queen.Open(dir, nil)
	require.NoError(t, err)
	fmt.Println("holding")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	require.NoError(t, b.Close())
}
