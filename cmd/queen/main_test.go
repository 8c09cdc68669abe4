package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfig(t *testing.T) {
	t.Parallel()

	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		c, err := parseConfig(nil, envOf(nil), io.Discard)
		require.NoError(t, err)
		require.Equal(t, &config{host: "127.0.0.1", port: 6632, dataDir: "./queen-data", durability: queen.SyncEveryCommit,
			subscription: queen.SubscriptionModeNew, defaultTimeout: 30 * time.Second, defaultBatch: 1, maxBody: 16 << 20,
			shutdownTimeout: 30 * time.Second, jwtSkew: 30 * time.Second, console: true}, c)
	})

	t.Run("environment, and flags over it", func(t *testing.T) {
		t.Parallel()
		env := envOf(map[string]string{"HOST": "127.0.0.1", "PORT": "7000", "QUEEN_DATA_DIR": "/tmp/q", "QUEEN_DURABILITY": "none",
			"DEFAULT_SUBSCRIPTION_MODE": "all", "DEFAULT_TIMEOUT": "90000", "DEFAULT_BATCH_SIZE": "10", "QUEEN_MAX_BODY_BYTES": "1024",
			"LOG_LEVEL": "debug", "QUEEN_SHUTDOWN_TIMEOUT": "5s", "QUEEN_ENCRYPTION_KEY": strings.Repeat("ab", 32)})
		c, err := parseConfig(nil, env, io.Discard)
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1", c.host)
		require.Equal(t, 7000, c.port)
		require.Equal(t, "/tmp/q", c.dataDir)
		require.Equal(t, queen.SyncNever, c.durability)
		require.Equal(t, queen.SubscriptionModeAll, c.subscription)
		require.Equal(t, 60*time.Second, c.defaultTimeout, "clamped to 60 s")
		require.Equal(t, 10, c.defaultBatch)
		require.EqualValues(t, 1024, c.maxBody)
		require.Equal(t, "DEBUG", c.logLevel.String())
		require.Equal(t, 5*time.Second, c.shutdownTimeout)
		require.Len(t, c.encryptionKey, 32)

		c, err = parseConfig([]string{"-port", "8000", "-data", "here", "-durability", "sync", "-subscription-mode", "new-only"}, env, io.Discard)
		require.NoError(t, err)
		require.Equal(t, 8000, c.port)
		require.Equal(t, "here", c.dataDir)
		require.Equal(t, queen.SyncEveryCommit, c.durability)
		require.Equal(t, queen.SubscriptionModeNewOnly, c.subscription)

		env = envOf(map[string]string{"QUEEN_DURABILITY": "pushes", "QUEEN_ACK_SYNC_DELAY": "250"})
		c, err = parseConfig(nil, env, io.Discard)
		require.NoError(t, err)
		require.Equal(t, queen.SyncPushes, c.durability)
		require.Equal(t, 250*time.Millisecond, c.brokerOptions(nil).AckSyncDelay)
		c, err = parseConfig([]string{"-durability", "sync-pushes", "-ack-sync-delay", "20"}, env, io.Discard)
		require.NoError(t, err)
		require.Equal(t, queen.SyncPushes, c.durability)
		require.Equal(t, 20*time.Millisecond, c.ackSyncDelay)
	})

	t.Run("maintenance interval", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			env  map[string]string
			args []string
			want time.Duration
		}{
			{nil, nil, 0}, // the broker's default
			{map[string]string{"RETENTION_INTERVAL": "300000"}, nil, 5 * time.Minute},
			{map[string]string{"EVICTION_INTERVAL": "60000"}, nil, time.Minute},
			{map[string]string{"RETENTION_INTERVAL": "300000", "EVICTION_INTERVAL": "60000"}, nil, time.Minute},
			{map[string]string{"RETENTION_INTERVAL": "1500", "EVICTION_INTERVAL": "60000"}, nil, 1500 * time.Millisecond},
			{map[string]string{"RETENTION_INTERVAL": "300000"}, []string{"-retention-interval", "2000"}, 2 * time.Second},
			{map[string]string{"RETENTION_INTERVAL": "300000"}, []string{"-eviction-interval", "400000"}, 5 * time.Minute},
		} {
			cfg, err := parseConfig(c.args, envOf(c.env), io.Discard)
			require.NoError(t, err)
			require.Equal(t, c.want, cfg.maintenance, "%v %v", c.env, c.args)
			require.Equal(t, c.want, cfg.brokerOptions(nil).MaintenanceInterval, "%v %v", c.env, c.args)
		}
	})

	t.Run("memory budget", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			env  map[string]string
			args []string
			want int64
		}{
			{nil, nil, 0}, // the broker's default
			{map[string]string{"QUEEN_MEMORY_BUDGET": "33554432"}, nil, 32 << 20},
			{map[string]string{"QUEEN_MEMORY_BUDGET": "256MiB"}, nil, 256 << 20},
			{map[string]string{"QUEEN_MEMORY_BUDGET": "256MiB"}, []string{"-memory-budget", "1 GiB"}, 1 << 30},
			{nil, []string{"-memory-budget", "512k"}, 512 << 10},
		} {
			cfg, err := parseConfig(c.args, envOf(c.env), io.Discard)
			require.NoError(t, err)
			require.Equal(t, c.want, cfg.brokerOptions(nil).MemoryBudget, "%v %v", c.env, c.args)
		}
	})

	t.Run("refuses bad values", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			env  map[string]string
			args []string
			want string
		}{
			{map[string]string{"PORT": "http"}, nil, "port must be a number"},
			{nil, []string{"-port", "70000"}, "port must be a number from 0 to 65535"},
			{map[string]string{"QUEEN_DURABILITY": "maybe"}, nil, "durability must be sync, pushes or none"},
			{map[string]string{"QUEEN_ACK_SYNC_DELAY": "0"}, nil, `ack sync delay must be 1 to 10000 milliseconds, not "0"`},
			{nil, []string{"-ack-sync-delay", "10001"}, "ack sync delay must be 1 to 10000 milliseconds"},
			{nil, []string{"-ack-sync-delay", "9223372036855"}, "ack sync delay must be 1 to 10000 milliseconds"},
			{map[string]string{"DEFAULT_SUBSCRIPTION_MODE": "latest"}, nil, "subscription mode must be new or all"},
			{map[string]string{"DEFAULT_TIMEOUT": "-1"}, nil, "default timeout must be a positive number"},
			{map[string]string{"DEFAULT_BATCH_SIZE": "x"}, nil, "default batch must be a positive number"},
			{map[string]string{"QUEEN_MAX_BODY_BYTES": "0"}, nil, "max body must be a positive number"},
			{map[string]string{"LOG_LEVEL": "loud"}, nil, "log level must be"},
			{map[string]string{"QUEEN_SHUTDOWN_TIMEOUT": "soon"}, nil, "shutdown timeout must be a positive duration"},
			{map[string]string{"RETENTION_INTERVAL": "5m"}, nil, `retention interval must be a positive number of milliseconds, not "5m"`},
			{map[string]string{"EVICTION_INTERVAL": "0"}, nil, "eviction interval must be a positive number of milliseconds"},
			{nil, []string{"-eviction-interval", "-1"}, "eviction interval must be a positive number of milliseconds"},
			{map[string]string{"RETENTION_INTERVAL": "99999999999999999"}, nil, "retention interval must be a positive number of milliseconds"},
			{map[string]string{"QUEEN_ENCRYPTION_KEY": "abcd"}, nil, "QUEEN_ENCRYPTION_KEY must be 64 hexadecimal characters"},
			{map[string]string{"QUEEN_ENCRYPTION_KEY": strings.Repeat("zz", 32)}, nil, "QUEEN_ENCRYPTION_KEY must be 64 hexadecimal characters"},
			{nil, []string{"-data", ""}, "data directory must not be empty"},
			{map[string]string{"QUEEN_MEMORY_BUDGET": "lots"}, nil, "memory budget must be bytes or a number with KiB, MiB or GiB"},
			{nil, []string{"-memory-budget", "-5MiB"}, "memory budget must be"},
			{nil, []string{"-memory-budget", "9999999999G"}, "memory budget must be"},
			{nil, []string{"extra"}, `unexpected argument "extra"`},
			{nil, []string{"-nope"}, "flag provided but not defined"},
		} {
			_, err := parseConfig(c.args, envOf(c.env), io.Discard)
			require.ErrorContains(t, err, c.want)
		}
	})
}

func TestRun_Exits(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	require.Equal(t, 2, run(context.Background(), []string{"-port", "x"}, envOf(nil), io.Discard, &out))
	require.Contains(t, out.String(), "queen: port must be a number")
	require.Equal(t, 0, run(context.Background(), []string{"-h"}, envOf(nil), io.Discard, io.Discard))

	// A data directory that cannot be opened: a file in the way.
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	out.Reset()
	require.Equal(t, 1, run(context.Background(), []string{"-data", filepath.Join(file, "sub"), "-port", "0"}, envOf(nil), io.Discard, &out))
	require.Contains(t, out.String(), "cannot open the data directory")
}

func TestRun_Version(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	var stdout, stderr strings.Builder
	// Settings are not checked, nothing is opened or listened on.
	code := run(context.Background(), []string{"-version", "-data", data}, envOf(map[string]string{"PORT": "nope"}), &stdout, &stderr)
	require.Equal(t, 0, code)
	require.Equal(t, "queen "+queen.Version+"\n", stdout.String())
	require.Empty(t, stderr.String())
	require.NoDirExists(t, data)
}

// lockedBuffer collects the child's log for the test to read.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// TestEndToEnd builds the server, runs it as a child process on a free
// loopback port, drives it over HTTP, stops it with SIGTERM while a
// long-poll is parked, and reopens its data directory.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "queen")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	version, err := exec.Command(bin, "-version").Output()
	require.NoError(t, err)
	require.Equal(t, "queen "+queen.Version+"\n", string(version))

	data := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "-host", "127.0.0.1")
	cmd.Env = append(os.Environ(), "PORT=0", "QUEEN_DATA_DIR="+data, "DEFAULT_SUBSCRIPTION_MODE=all", "LOG_LEVEL=info",
		"QUEEN_ENCRYPTION_KEY="+strings.Repeat("0f", 32))
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})

	// The server logs the address it listens on.
	logs := &lockedBuffer{}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
		for sc.Scan() {
			_, _ = logs.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addrc <- m[1]
			}
		}
		exited <- cmd.Wait()
	}()
	var base string
	select {
	case a := <-addrc:
		base = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not start: %s", logs.String())
	}

	client := &http.Client{Timeout: 70 * time.Second}
	call := func(method, path, body string, status int) map[string]any {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, status, resp.StatusCode, "%s %s: %s", method, path, data)
		require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "no CORS grant without -cors-origins")
		if len(data) == 0 {
			return nil
		}
		var v any
		require.NoError(t, json.Unmarshal(data, &v))
		if arr, ok := v.([]any); ok {
			return map[string]any{"data": arr}
		}
		return v.(map[string]any)
	}

	require.Equal(t, "healthy", call("GET", "/health", "", http.StatusOK)["status"])
	call("POST", "/api/v1/configure", `{"queue":"orders","options":{"encryptionEnabled":true}}`, http.StatusOK)
	call("POST", "/api/v1/push", `{"items":[{"queue":"orders","transactionId":"o-1","payload":{"n":1}},{"queue":"orders","transactionId":"o-2","payload":{"n":2}}]}`, http.StatusCreated)
	pop := call("GET", "/api/v1/pop/queue/orders?wait=true&timeout=5000", "", http.StatusOK)
	m := pop["messages"].([]any)[0].(map[string]any)
	require.Equal(t, "o-1", m["transactionId"])
	require.Equal(t, map[string]any{"n": 1.0}, m["data"])
	ack := call("POST", "/api/v1/ack", `{"transactionId":"o-1","partitionId":"`+m["partitionId"].(string)+`","leaseId":"`+m["leaseId"].(string)+`"}`, http.StatusOK)
	require.Equal(t, true, ack["data"].([]any)[0].(map[string]any)["success"])
	call("GET", "/api/v1/pop/queue/orders?consumerGroup=analytics&batch=10", "", http.StatusOK)

	// A long-poll parked on an empty queue ends at once on SIGTERM.
	polled := make(chan int, 1)
	go func() {
		resp, err := client.Get(base + "/api/v1/pop/queue/idle?wait=true&timeout=60000")
		if err != nil {
			polled <- -1
			return
		}
		resp.Body.Close()
		polled <- resp.StatusCode
	}()
	waitParked := time.Now().Add(20 * time.Second)
	for !popWaiting(t, client, base, "idle") {
		require.True(t, time.Now().Before(waitParked), "the long-poll never showed in queen_pops_waiting")
		time.Sleep(2 * time.Millisecond) // poll interval: the condition is the gauge
	}
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case code := <-polled:
		require.Equal(t, http.StatusNoContent, code)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting long-poll did not end at shutdown")
	}
	select {
	case err := <-exited:
		require.NoError(t, err, "clean exit: %s", logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("the server did not exit: %s", logs.String())
	}
	require.Less(t, time.Since(start), 15*time.Second)
	require.Contains(t, logs.String(), "queen: stopped")

	// The data survives: o-1 is settled, o-2 waits, the payload decrypts.
	b, err := queen.Open(data, &queen.Options{EncryptionKey: make32(0x0f)})
	require.NoError(t, err)
	defer b.Close()
	st, err := b.QueueStats(context.Background(), "orders")
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Messages)
	require.ElementsMatch(t, []string{queen.QueueModeGroup, "analytics"}, st.Groups)
	res, err := b.Pop(context.Background(), queen.PopRequest{Queue: "orders"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	require.Equal(t, "o-2", res.Messages[0].TransactionID)
	require.JSONEq(t, `{"n":2}`, string(res.Messages[0].Payload))
}

func make32(b byte) []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = b
	}
	return k
}

// popWaiting reports whether the server's /metrics/prometheus shows a
// long-poll pop waiting on queue.
func popWaiting(t *testing.T, client *http.Client, base, queue string) bool {
	t.Helper()
	resp, err := client.Get(base + "/metrics/prometheus")
	require.NoError(t, err)
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", text)
	return strings.Contains(string(text), `queen_pops_waiting{queue="`+queue+`"} 1`+"\n")
}
