package remote_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

var listening = regexp.MustCompile(`msg="queen: listening" addr=\S*:(\d+)`)

// startQueen builds cmd/queen into a temporary directory, runs it as a
// child process on a free loopback port with a fresh data directory, and
// returns its base URL. The child is stopped with SIGTERM, and must exit
// cleanly, when tb ends. env adds environment variables.
func startQueen(tb testing.TB, env ...string) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds and runs cmd/queen")
	}
	dir := tb.TempDir()
	bin := filepath.Join(dir, "queen")
	build := exec.Command("go", "build", "-o", bin, "github.com/queenlite/queen/cmd/queen")
	out, err := build.CombinedOutput()
	require.NoError(tb, err, "go build: %s", out)

	cmd := exec.Command(bin, "-host", "127.0.0.1", "-port", "0", "-data", filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	logs := &itest.LogBuffer{}
	port := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logs, line)
			if m := listening.FindStringSubmatch(line); m != nil {
				port <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	exited := make(chan error, 1)
	go func() {
		wg.Wait() // stderr is read to its end before Wait closes it
		exited <- cmd.Wait()
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				tb.Errorf("cmd/queen exited with %v; log:\n%s", err, logs)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			tb.Errorf("cmd/queen did not stop on SIGTERM; log:\n%s", logs)
		}
	})
	select {
	case p := <-port:
		return "http://127.0.0.1:" + p
	case err := <-exited:
		tb.Fatalf("cmd/queen exited before listening: %v; log:\n%s", err, logs)
	case <-time.After(60 * time.Second):
		tb.Fatalf("cmd/queen did not listen; log:\n%s", logs)
	}
	return ""
}

// The remote client against the real server binary, in a child process:
// the same application code as in process.
func TestChildProcess(t *testing.T) {
	t.Parallel()
	url := startQueen(t, "QUEEN_TOKEN=child-secret")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	anon, err := remote.Dial(url, nil)
	require.NoError(t, err)
	defer anon.Close()
	_, err = anon.Push(ctx, []queen.PushItem{{Queue: "q"}})
	var se *remote.ServerError
	require.ErrorAs(t, err, &se)
	require.Equal(t, 401, se.StatusCode)

	c, err := remote.Dial(url, &remote.Options{Token: "child-secret"})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Ping(ctx))
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit, cfg.RetryDelay = 0, 0
	_, err = c.ConfigureQueue(ctx, "orders", cfg)
	require.NoError(t, err)
	for p := range 3 {
		_, err := c.Queue("orders").Partition(fmt.Sprintf("p%d", p)).Push(ctx, map[string]int{"n": 0}, map[string]int{"n": 1})
		require.NoError(t, err)
	}

	var mu sync.Mutex
	handled := map[string]int{}
	var settled []queen.Settlement
	err = c.Queue("orders").Group("billing").SubscriptionMode(queen.SubscriptionModeAll).Concurrency(3).Each().Limit(6).
		RenewLease(true, 1000).
		Consume(ctx, func(ctx context.Context, m *queen.Message) error {
			mu.Lock()
			defer mu.Unlock()
			handled[fmt.Sprintf("%s/%v", m.Partition, m.Data["n"])]++
			if m.Partition == "p2" && m.Data["n"] == float64(1) {
				return queen.Reject(fmt.Errorf("bad order"))
			}
			return nil
		}).OnSettled(func(s queen.Settlement) {
		mu.Lock()
		settled = append(settled, s)
		mu.Unlock()
	}).Execute(ctx)
	require.NoError(t, err)
	require.Len(t, handled, 6)
	require.Len(t, settled, 6)

	dl, err := c.DeadLetters(ctx, queen.LetterFilter{Queue: "orders"})
	require.NoError(t, err)
	require.Equal(t, 1, dl.Total)
	require.Equal(t, "bad order", dl.Letters[0].Error)
	rep, err := c.ReplayDeadLetter(ctx, dl.Letters[0].ID)
	require.NoError(t, err)

	// A transaction: take the replayed copy and pass it on.
	msgs, err := c.Queue("orders").Group("billing").Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, rep.TransactionID, msgs[0].TransactionID)
	_, err = c.Transaction().Ack(msgs[0], queen.AckCompleted, queen.AckOptions{}).
		Push(queen.PushItem{Queue: "shipped", Payload: json.RawMessage(`{"n":1}`)}).Commit(ctx)
	require.NoError(t, err)
	read, err := c.Queue("shipped").Fetch(ctx, []string{queen.DefaultPartition})
	require.NoError(t, err)
	require.Len(t, read[queen.DefaultPartition].Records, 1)

	gs, err := c.ListGroups(ctx, queen.GroupFilter{Group: "billing"})
	require.NoError(t, err)
	require.Len(t, gs, 1)
	require.Zero(t, gs[0].Lag)
}
