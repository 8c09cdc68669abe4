package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenlite/queen"
)

// Defaults of [Options].
const (
	DefaultTable        = "queen_outbox"
	DefaultPollInterval = time.Second
	DefaultBatchSize    = 500
	DefaultMinBackoff   = 100 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
)

// Dialect names the SQL database an [Outbox] writes to.
type Dialect int

// Dialects.
const (
	// Postgres is PostgreSQL 12 or later, through any database/sql driver
	// (pgx's stdlib adapter, lib/pq).
	Postgres Dialect = iota + 1
	// SQLite is SQLite 3.35 or later, through any database/sql driver
	// (modernc.org/sqlite, mattn/go-sqlite3).
	SQLite
)

// String returns "postgres" or "sqlite".
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// Options configures an [Outbox]. Zero fields mean the defaults.
type Options struct {
	// Dialect is the database's SQL dialect. Required.
	Dialect Dialect

	// Table names the outbox table; the held rows are in Table+"_held".
	// It may be schema-qualified ("app.queen_outbox"); each part is
	// letters, digits and underscores. Defaults to [DefaultTable].
	Table string

	// PollInterval is how often an idle relay looks for rows enqueued by
	// another process (or committed long after their Enqueue call).
	// Defaults to [DefaultPollInterval].
	PollInterval time.Duration

	// BatchSize is the most rows one relay step reads and pushes in one
	// broker call. Defaults to [DefaultBatchSize]; at most
	// [queen.MaxPushItems].
	BatchSize int

	// MinBackoff and MaxBackoff bound the wait of a relay after the broker
	// refused a push for now (a full queue, a closed or unreachable
	// broker): it starts at MinBackoff and doubles up to MaxBackoff while
	// the refusals go on. Default to [DefaultMinBackoff] and
	// [DefaultMaxBackoff].
	MinBackoff, MaxBackoff time.Duration

	// PayloadLimit is the largest payload [Outbox.Enqueue] accepts.
	// Defaults to the client's own limit when it has one (an embedded
	// [*queen.Broker]'s PayloadLimit), else [queen.MaxPayload].
	PayloadLimit int

	// Observer receives [queen.EventOutboxRelayed], [queen.EventOutboxHeld]
	// and [queen.EventOutboxBacklog]. Defaults to none.
	Observer queen.Observer

	// Logger receives the relay's refusals and errors. Defaults to a
	// logger that discards.
	Logger *slog.Logger

	// Now is the clock rows are stamped with when enqueued and their ages
	// measured by. Defaults to time.Now; tests set a fake one.
	Now func() time.Time
}

// Outbox writes messages into an application's database, in the
// application's transactions, and relays them into a [queen.Client] once
// committed. Build it with [New]. It is safe for concurrent use: any
// number of goroutines may call Enqueue, and any number of [Outbox.Relay]
// loops may run, in this process or others.
type Outbox struct {
	db      *sql.DB
	c       queen.Client
	o       Options
	q       queries
	obs     queen.Observer
	log     *slog.Logger
	relayed atomic.Int64

	wakeMu sync.Mutex
	wake   chan struct{} // closed and replaced by each wake-up
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// New returns an outbox writing to db and relaying to c. It checks the
// options and touches neither: call [Outbox.Migrate] to create the
// tables. db and c stay the caller's to close, after the relays stopped.
func New(db *sql.DB, c queen.Client, opts Options) (*Outbox, error) {
	if db == nil {
		return nil, errors.New("outbox: New: db must not be nil")
	}
	if c == nil {
		return nil, errors.New("outbox: New: client must not be nil")
	}
	o := opts
	if o.Dialect != Postgres && o.Dialect != SQLite {
		return nil, fmt.Errorf("outbox: Options.Dialect must be Postgres or SQLite, not %v", o.Dialect)
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if !tableName.MatchString(o.Table) || len(o.Table) > 55 {
		return nil, fmt.Errorf("outbox: Options.Table must be a name of letters, digits and underscores, optionally schema-qualified, at most 55 bytes, not %q", o.Table)
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"PollInterval", &o.PollInterval, DefaultPollInterval}, {"MinBackoff", &o.MinBackoff, DefaultMinBackoff}, {"MaxBackoff", &o.MaxBackoff, DefaultMaxBackoff}} {
		if *f.v < 0 {
			return nil, fmt.Errorf("outbox: Options.%s must not be negative, not %s", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.MaxBackoff < o.MinBackoff {
		return nil, fmt.Errorf("outbox: Options.MaxBackoff (%s) must not be below MinBackoff (%s)", o.MaxBackoff, o.MinBackoff)
	}
	if o.BatchSize < 0 || o.BatchSize > queen.MaxPushItems {
		return nil, fmt.Errorf("outbox: Options.BatchSize must be between 1 and %d, not %d", queen.MaxPushItems, o.BatchSize)
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.PayloadLimit < 0 {
		return nil, fmt.Errorf("outbox: Options.PayloadLimit must not be negative, not %d", o.PayloadLimit)
	}
	if o.PayloadLimit == 0 {
		o.PayloadLimit = queen.MaxPayload
		if l, ok := c.(interface{ PayloadLimit() int }); ok {
			o.PayloadLimit = l.PayloadLimit()
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ob := &Outbox{db: db, c: c, o: o, q: newQueries(o.Dialect, o.Table), obs: o.Observer, log: o.Logger, wake: make(chan struct{})}
	if ob.obs == nil {
		ob.obs = queen.ObserverFunc(func(queen.Event) {})
	}
	if ob.log == nil {
		ob.log = slog.New(slog.DiscardHandler)
	}
	return ob, nil
}

// Migrate creates the outbox's tables and index if they do not exist
// (the statements are in the package documentation and
// [Outbox.MigrationSQL]). It is safe to run at every start, by several
// processes at once.
func (ob *Outbox) Migrate(ctx context.Context) error {
	tx, err := ob.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	defer tx.Rollback()
	if ob.o.Dialect == Postgres {
		// Two CREATE ... IF NOT EXISTS at once can both miss the other's
		// table and one fail: one migration at a time.
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "queen outbox migrate "+ob.o.Table); err != nil {
			return fmt.Errorf("outbox: migrate: %w", err)
		}
	}
	for _, stmt := range ob.q.migrate {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("outbox: migrate: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	return nil
}

// MigrationSQL returns the statements [Outbox.Migrate] runs, for a
// migration tool of the application's own.
func (ob *Outbox) MigrationSQL() []string { return append([]string(nil), ob.q.migrate...) }

// Enqueue writes items to the outbox table in the application's
// transaction tx: they are relayed into the broker once tx commits, and
// never if it rolls back. It takes what [queen.Client.Push] takes and
// refuses what Push would refuse before writing anything, with Push's
// error ([queen.CheckPush]: an [*queen.ArgumentError] for a bad name or
// payload, [queen.ErrTooLarge] for a payload over Options.PayloadLimit or
// more than [queen.MaxPushItems] items); the application should then
// roll tx back, or go on without the items.
//
// Each item's TransactionID is fixed here (a UUIDv7 when empty): the
// relay pushes it with the row, so that a push repeated after a relay
// crash is reported a duplicate by the broker and stored once. Items of
// one partition are relayed in the order they were enqueued.
//
// Enqueue wakes this process's relays; since it cannot know when tx
// commits, they look for the rows at once and again a few times over the
// next second or so (see [Outbox.Notify] for a transaction that commits
// later).
func (ob *Outbox) Enqueue(ctx context.Context, tx *sql.Tx, items ...queen.PushItem) error {
	if tx == nil {
		return errors.New("outbox: Enqueue: tx must not be nil")
	}
	if err := queen.CheckPush(items, ob.o.PayloadLimit); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	now := ob.o.Now().UnixMicro()
	for lo := 0; lo < len(items); lo += insertChunk {
		chunk := items[lo:min(lo+insertChunk, len(items))]
		args := make([]any, 0, len(chunk)*rowColumns)
		for i := range chunk {
			it := &chunk[i]
			part, txid, payload := it.Partition, it.TransactionID, []byte(it.Payload)
			if part == "" {
				part = queen.DefaultPartition
			}
			if txid == "" {
				txid = newTxID()
			}
			if len(payload) == 0 {
				payload = []byte("null")
			}
			args = append(args, it.Queue, part, txid, payload, it.TraceID, it.Namespace, it.Task, it.ProducerSub, now)
		}
		if _, err := tx.ExecContext(ctx, ob.q.insert(len(chunk)), args...); err != nil {
			return fmt.Errorf("outbox: enqueue: %w", err)
		}
	}
	ob.Notify()
	return nil
}

// insertChunk is the most rows one INSERT statement writes (SQLite
// allows 32766 bound parameters).
const insertChunk = 500

// Notify wakes this process's relays at once, and keeps them looking
// closely for a second or so. [Outbox.Enqueue] calls it; call it again
// after committing a transaction that ran long after its Enqueue, or to
// relay at once rows another process enqueued. Relays of other processes
// find the rows within their PollInterval.
func (ob *Outbox) Notify() {
	ob.wakeMu.Lock()
	close(ob.wake)
	ob.wake = make(chan struct{})
	ob.wakeMu.Unlock()
}

// woken returns the channel the next [Outbox.Notify] closes.
func (ob *Outbox) woken() <-chan struct{} {
	ob.wakeMu.Lock()
	defer ob.wakeMu.Unlock()
	return ob.wake
}
