package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/outbox"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// pgEnv names the PostgreSQL server the tests use
// (testdata/postgres-start.sh prints it).
const pgEnv = "QUEEN_OUTBOX_PG"

// database is one real database for one test: a SQLite file, or a fresh
// schema of the PostgreSQL server.
type database struct {
	dialect outbox.Dialect
	db      *sql.DB
	table   string // Options.Table
	dsn     string // to open it again (a child process)
}

// eachDB runs fn once per database kind, as subtests "sqlite" and
// "postgres". Without QUEEN_OUTBOX_PG the PostgreSQL subtest skips, or
// fails under CI=true.
func eachDB(t *testing.T, fn func(t *testing.T, d *database)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, openSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, openPostgres(t)) })
}

// sqliteDSN opens path with WAL, a busy timeout and immediate write
// transactions, as an application should (see docs/outbox.md).
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

func openSQLite(t testing.TB) *database {
	t.Helper()
	dsn := sqliteDSN(filepath.Join(t.TempDir(), "app.db"))
	db, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	// The first connection turns the new file to WAL, which takes an
	// exclusive lock: before the test's connections open at once, as an
	// application opens its database before it serves.
	require.NoError(t, db.Ping())
	return &database{dialect: outbox.SQLite, db: db, table: outbox.DefaultTable, dsn: dsn}
}

func openPostgres(t testing.TB) *database {
	t.Helper()
	dsn := os.Getenv(pgEnv)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: .ci/run starts PostgreSQL with outbox/dbtest/testdata/postgres-start.sh", pgEnv)
		}
		t.Skipf("%s is not set: eval \"$(outbox/dbtest/testdata/postgres-start.sh)\" to run against PostgreSQL", pgEnv)
	}
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	_, err = db.Exec("CREATE SCHEMA " + schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE")
	})
	return &database{dialect: outbox.Postgres, db: db, table: schema + ".queen_outbox", dsn: dsn}
}

// driver is the database/sql driver name of d.
func (d *database) driver() string {
	if d.dialect == outbox.SQLite {
		return "sqlite"
	}
	return "pgx"
}

// newOutbox returns a migrated outbox on d relaying to c.
func newOutbox(t testing.TB, d *database, c queen.Client, opts outbox.Options) *outbox.Outbox {
	t.Helper()
	opts.Dialect, opts.Table = d.dialect, d.table
	if opts.MinBackoff == 0 {
		opts.MinBackoff, opts.MaxBackoff = time.Millisecond, 20*time.Millisecond
	}
	ob, err := outbox.New(d.db, c, opts)
	require.NoError(t, err)
	require.NoError(t, ob.Migrate(context.Background()))
	return ob
}

// startRelay runs ob.Relay until the test ends.
func startRelay(t testing.TB, ob *outbox.Outbox) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ob.Relay(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// enqueue enqueues items in one committed transaction.
func enqueue(t testing.TB, d *database, ob *outbox.Outbox, items ...queen.PushItem) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, ob.Enqueue(ctx, tx, items...))
	require.NoError(t, tx.Commit())
}

// seqItem is message n of a partition: its payload is {"n":n}.
func seqItem(queue, partition string, n int) queen.PushItem {
	return queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
}

// stored returns the n of every message of a partition, in offset order.
func stored(t testing.TB, c queen.Client, queue, partition string) []int {
	t.Helper()
	var out []int
	for from := int64(0); ; {
		res, err := c.Fetch(context.Background(), queue, partition, from, 1000)
		if err == queen.ErrNotFound {
			return out
		}
		require.NoError(t, err)
		for _, r := range res.Records {
			var v struct{ N int }
			require.NoError(t, json.Unmarshal(r.Payload, &v))
			out = append(out, v.N)
		}
		if len(res.Records) == 0 {
			return out
		}
		from = res.NextOffset
	}
}

// seq returns 0, 1, ..., n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// waitFor polls cond until it holds, failing the test after a minute: a
// hang detector, not a measurement.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStored waits until the partition holds want, then checks nothing
// more arrives while the relay looks again.
func waitStored(t testing.TB, c queen.Client, queue, partition string, want []int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d messages in %s/%s", len(want), queue, partition), func() bool {
		return len(stored(t, c, queue, partition)) >= len(want)
	})
	require.Equal(t, want, stored(t, c, queue, partition), "%s/%s", queue, partition)
}

// stats reads ob's stats.
func stats(t testing.TB, ob *outbox.Outbox) outbox.Stats {
	t.Helper()
	s, err := ob.Stats(context.Background())
	require.NoError(t, err)
	return s
}

// logCapture is a slog.Handler counting the relay's "refused" warnings.
type logCapture struct{ refused atomic.Int64 }

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "refused, retrying") {
		l.refused.Add(1)
	}
	return nil
}
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

// waitStats waits until ob's stats are want: a relay deletes rows (and
// counts them) a moment after the broker stored them.
func waitStats(t testing.TB, ob *outbox.Outbox, want outbox.Stats) {
	t.Helper()
	var got outbox.Stats
	waitFor(t, fmt.Sprintf("stats %+v", want), func() bool {
		got = stats(t, ob)
		return got == want
	})
}
