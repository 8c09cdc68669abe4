package dbtest

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/outbox"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// gate is the broker's HTTP API that can be turned off: while down it
// answers 503, as a server that is restarting does.
type gate struct {
	h       http.Handler
	down    atomic.Bool
	refused atomic.Int64
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.down.Load() {
		g.refused.Add(1)
		http.Error(w, "restarting", http.StatusServiceUnavailable)
		return
	}
	g.h.ServeHTTP(w, r)
}

// serve serves b's HTTP API behind a gate until the test ends.
func serve(t testing.TB, b *queen.Broker) (*gate, string) {
	g := &gate{h: httpapi.New(b, nil)}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv.URL
}

// TestRelay_UnreachableBrokerDelaysNeverLoses: a relay pushing through
// package remote to a server answering 503 keeps its rows and backs off;
// once the server answers, every row arrives, in order, once.
func TestRelay_UnreachableBrokerDelaysNeverLoses(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		g, url := serve(t, b)
		c, err := remote.Dial(url, &remote.Options{Retries: -1}) // the relay sees each refusal
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		g.down.Store(true)
		logs := &logCapture{}
		ob := newOutbox(t, d, c, outbox.Options{BatchSize: 4, Logger: slog.New(logs)})
		for i := range 10 {
			enqueue(t, d, ob, seqItem("orders", "p", i))
		}
		startRelay(t, ob)
		waitFor(t, "three refused pushes", func() bool { return logs.refused.Load() >= 3 })
		require.Zero(t, stats(t, ob).Held)
		require.Empty(t, stored(t, b, "orders", "p"))
		require.Equal(t, int64(10), stats(t, ob).Waiting)
		g.down.Store(false)
		waitStored(t, b, "orders", "p", seq(10))
		waitFor(t, "an empty table", func() bool { return stats(t, ob).Waiting == 0 })
	})
}

// childEnv carries the child's instructions: dialect, DSN, table, the
// broker's URL and a seed, separated by newlines.
const childEnv = "QUEEN_OUTBOX_CRASH_CHILD"

// killer is the child's client: after a push that returned, it sometimes
// kills its own process, before the relay deletes the pushed rows.
type killer struct {
	queen.Client
	rnd *rand.Rand
	mu  sync.Mutex
}

func (k *killer) Push(ctx context.Context, items []queen.PushItem) ([]queen.PushResult, error) {
	res, err := k.Client.Push(ctx, items)
	k.mu.Lock()
	die := k.rnd.IntN(3) == 0
	k.mu.Unlock()
	if err == nil && die {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // between the push and the delete
		select {}
	}
	return res, err
}

// TestCrashChild is the child process of TestRelay_KillNineLosesNothing:
// it runs two relays until it is killed. It skips unless started so.
func TestCrashChild(t *testing.T) {
	env := os.Getenv(childEnv)
	if env == "" {
		t.Skip("the child of TestRelay_KillNineLosesNothing")
	}
	f := strings.Split(env, "\n")
	dialect, dsn, table, url := outbox.SQLite, f[1], f[2], f[3]
	driver := "sqlite"
	if f[0] == "postgres" {
		dialect, driver = outbox.Postgres, "pgx"
	}
	seed, _ := strconv.ParseUint(f[4], 10, 64)
	db, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	c, err := remote.Dial(url, nil)
	require.NoError(t, err)
	ob, err := outbox.New(db, &killer{Client: c, rnd: rand.New(rand.NewPCG(seed, 1))}, outbox.Options{
		Dialect: dialect, Table: table, BatchSize: 6, PollInterval: time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
	})
	require.NoError(t, err)
	fmt.Println("outbox-child-ready")
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = ob.Relay(context.Background()) }()
	}
	wg.Wait()
}

// TestRelay_KillNineLosesNothing SIGKILLs child processes running relays
// (pushing through package remote to this process's broker, which
// outlives them) at random moments, and at the riskiest one: after a push
// returned, before its rows were deleted. Meanwhile this process commits
// numbered messages; at the end a relay of its own drains the table. Each
// partition must hold every message once, in order: a push repeated after
// a kill is a duplicate of its TransactionID.
func TestRelay_KillNineLosesNothing(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rnd := rand.New(rand.NewPCG(seed, 2))
		b := queentest.NewBroker(t, nil)
		_, url := serve(t, b)
		ob := newOutbox(t, d, b, outbox.Options{BatchSize: 6})

		parts := []string{"p0", "p1", "p2"}
		const n = 120
		produced := make(chan struct{})
		go func() {
			defer close(produced)
			for i := 0; i < n; i += 2 {
				for _, p := range parts {
					enqueue(t, d, ob, seqItem("orders", p, i), seqItem("orders", p, i+1))
				}
			}
		}()
		var killed, died int
		for round := 0; ; round++ {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{d.dialect.String(), d.dsn, d.table, url, strconv.FormatUint(seed+uint64(round), 10)}, "\n"))
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			ready := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					if sc.Text() == "outbox-child-ready" {
						close(ready)
						break
					}
				}
				_, _ = io.Copy(io.Discard, out)
			}()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case <-ready:
			case <-exited:
				t.Fatal("the child exited before it was ready")
			case <-time.After(time.Minute):
				t.Fatal("the child was not ready within a minute")
			}
			select {
			case <-exited: // it killed itself between a push and a delete
				died++
			case <-time.After(time.Duration(rnd.IntN(300)) * time.Millisecond):
				_ = cmd.Process.Kill()
				<-exited
				killed++
			}
			select {
			case <-produced:
			default:
				continue
			}
			// Until the children relayed everything, and some died
			// between a push and its delete; the parent's relay drains
			// what a slow machine left.
			if (stats(t, ob).Waiting == 0 && died >= 3) || round >= 150 {
				break
			}
		}
		t.Logf("%d children killed, %d killed themselves after a push", killed, died)
		var byChildren int
		for _, p := range parts {
			byChildren += len(stored(t, b, "orders", p))
		}
		require.Positive(t, byChildren, "the children relayed nothing")
		t.Logf("the children relayed %d of %d messages", byChildren, n*len(parts))
		startRelay(t, ob)
		for _, p := range parts {
			waitStored(t, b, "orders", p, seq(n))
		}
		waitFor(t, "an empty table", func() bool { return stats(t, ob).Waiting == 0 })
		require.Equal(t, int64(0), stats(t, ob).Held, fmt.Sprint("no row may be held"))
	})
}
