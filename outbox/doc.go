// Package outbox is a transactional outbox for queen: it writes messages
// into the application's own PostgreSQL or SQLite database, in the
// application's transaction, and relays them into a [queen.Client] (an
// embedded [*queen.Broker] or package remote's client) once that
// transaction has committed. "Save the order, then push order.created"
// becomes one transaction: a rollback delivers nothing, a commit delivers
// the message exactly once into its queue, whatever crashes when.
//
// It is built on database/sql and imports no driver: the application
// brings its own (pgx's stdlib adapter or lib/pq for PostgreSQL,
// modernc.org/sqlite or mattn/go-sqlite3 for SQLite).
//
//	events, err := outbox.New(db, broker, outbox.Options{Dialect: outbox.Postgres})
//	err = events.Migrate(ctx)       // at start: creates the tables if missing
//	go events.Relay(ctx)            // in each instance of the application
//
//	tx, err := db.BeginTx(ctx, nil)
//	_, err = tx.ExecContext(ctx, `INSERT INTO orders ...`)
//	err = events.Enqueue(ctx, tx, queen.PushItem{Queue: "orders", Partition: customer, Payload: body})
//	err = tx.Commit()
//
// # Guarantees
//
// A rolled-back Enqueue is never delivered. A committed one is pushed
// into its queue exactly once: its TransactionID is fixed when it is
// enqueued, so a relay that dies after its push and before deleting the
// row pushes it again as a duplicate, which the broker stores once (as
// long as the first copy is retained in its partition). Handlers then
// receive it at least once, as every queen message. A partition's rows
// are pushed in the order they were enqueued within a transaction, and of
// transactions that did not overlap, in commit order.
//
// An item the broker would refuse (a bad name, a payload over the limit)
// is refused by Enqueue itself, with the error [queen.Client.Push] gives
// ([queen.CheckPush]), before anything is written.
//
// # Tables
//
// [Outbox.Migrate] creates two tables (their SQL is in docs/outbox.md and
// [Outbox.MigrationSQL]): Options.Table, one row per waiting message, and
// Options.Table+"_held", the rows the broker refused for good. They make
// no other assumption about the application's schema.
//
// # Relays
//
// [Outbox.Relay] reads the oldest rows, pushes them in one call per batch
// and deletes them. Any number may run: on PostgreSQL each batch locks
// the partitions it relays with pg_try_advisory_xact_lock, so one
// partition is relayed by one relay at a time, in order, and no row is
// pushed twice; on SQLite two relays may push the same rows, and the
// broker stores them once. A relay wakes at once when this process
// enqueues ([Outbox.Enqueue] calls [Outbox.Notify]) and otherwise looks
// every Options.PollInterval; PostgreSQL's LISTEN/NOTIFY is not used,
// since database/sql has no portable way to wait for a notification.
//
// A refusal for now (a full queue, a closed or unreachable broker) leaves
// the rows in place and the relay backs off. A refusal for good (see
// [Outbox.Relay] for which) moves the row to the held table, where
// [Outbox.Held] lists it and [Outbox.RequeueHeld] or [Outbox.DeleteHeld]
// settle it; the rows behind it go on, its own partition's included.
//
// # Metrics
//
// A relay reports [queen.EventOutboxRelayed], [queen.EventOutboxHeld] and,
// about once a second, [queen.EventOutboxBacklog] to Options.Observer;
// the Observers of contrib/queenprom and contrib/queenotel turn them into
// metrics. [Outbox.Stats] reads the same figures on demand.
package outbox
