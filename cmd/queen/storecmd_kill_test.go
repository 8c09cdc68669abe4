package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// cliChildEnv holds the arguments (one a line) of the queen command the
// test binary runs as a child for the kill tests below.
const cliChildEnv = "QUEEN_TEST_CLI_CHILD_ARGS"

// TestCLIKill_Child is the child of the kill tests, not a test of its own:
// it runs the queen command cliChildEnv names and exits with its code.
func TestCLIKill_Child(t *testing.T) {
	args := os.Getenv(cliChildEnv)
	if args == "" {
		t.Skip("run by TestCLIKill_*")
	}
	os.Exit(run(context.Background(), strings.Split(args, "\n"), os.Getenv, os.Stdout, os.Stderr))
}

// startCLI starts "queen args..." in a child process.
func startCLI(t *testing.T, stderr *bytes.Buffer, args ...string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLIKill_Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), cliChildEnv+"="+strings.Join(args, "\n"))
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); <-done })
	return cmd, done
}

// waitFor polls cond (another process's files: nothing to wait on) until
// it holds, failing if the child ends first.
func waitFor(t *testing.T, done chan struct{}, stderr *bytes.Buffer, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case <-done:
			t.Fatalf("the child ended before %s: %s", what, stderr)
		case <-time.After(5 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "no %s", what)
	}
}

// bigBackup is a full backup of a store of about 2 MB.
func bigBackup(t *testing.T) []byte {
	t.Helper()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	pad := strings.Repeat("p", 2000)
	items := make([]queen.PushItem, 1000)
	for i := range items {
		items[i] = queen.PushItem{Queue: "q", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))}
	}
	_, err = b.Push(context.Background(), items)
	require.NoError(t, err)
	var w bytes.Buffer
	_, err = b.Backup(context.Background(), &w, 0)
	require.NoError(t, err)
	return w.Bytes()
}

// TestCLIKill_BackupServer: queen backup --server killed by SIGKILL while
// the backup streams leaves nothing under the file's name, and what it
// left under its temporary name a restore refuses; the next backup to
// that name is unhindered.
func TestCLIKill_BackupServer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	full := bigBackup(t)
	half := len(full) / 2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(full[:half])
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes: the client is killed first
	}))
	defer srv.Close()
	dir := t.TempDir()
	out := filepath.Join(dir, "full.qbk")
	var stderr bytes.Buffer
	cmd, done := startCLI(t, &stderr, "backup", "--server", srv.URL, "-o", out)
	var tmp string
	waitFor(t, done, &stderr, "half the backup on disk", func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "*full.qbk*")) // the final name too, should it be written first
		if len(m) == 1 {
			if fi, err := os.Stat(m[0]); err == nil && fi.Size() == int64(half) {
				tmp = m[0]
				return true
			}
		}
		return false
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-done

	require.NoFileExists(t, out, "a killed backup left its half under the final name")
	errOut := queenFails(t, 1, "restore", "-dir", filepath.Join(dir, "r1"), out)
	require.Contains(t, errOut, "not found")
	part, err := os.Open(tmp)
	require.NoError(t, err)
	defer part.Close()
	require.ErrorIs(t, queen.Restore(context.Background(), filepath.Join(dir, "r2"), nil, part), queen.ErrCorruptBackup,
		"what the killed backup left under its temporary name restores")
}

// TestCLIKill_Restore: queen restore killed by SIGKILL midway leaves no
// store under -dir, and the next queen restore into it removes what the
// killed one left, says so on standard error, and restores.
func TestCLIKill_Restore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	full := bigBackup(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "full.qbk")
	require.NoError(t, os.WriteFile(file, full, 0o600))
	fifo := filepath.Join(dir, "slow.qbk")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	target := filepath.Join(dir, "store")

	var stderr bytes.Buffer
	cmd, done := startCLI(t, &stderr, "restore", "-dir", target, fifo)
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // opens once the child opened it to read
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Write(full[:len(full)/2])
	require.NoError(t, err)
	var left string
	waitFor(t, done, &stderr, "a restore under way", func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, ".store.restore-*", "store", "MANIFEST"))
		if len(m) == 1 {
			left = filepath.Dir(filepath.Dir(m[0]))
		}
		return len(m) == 1
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-done

	require.NoDirExists(t, target, "a killed restore left a store")
	require.DirExists(t, left)
	_, errOut, code := queenCmd(t, nil, "restore", "-dir", target, file)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "removed what a killed restore left")
	require.NoDirExists(t, left)
	require.Equal(t, 1000, len(stateOf(t, target).Messages["q/Default"]))
}
