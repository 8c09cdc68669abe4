package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/queenlite/queen"
)

// Wake-up after [Outbox.Notify]: the relay looks again after eagerFirst,
// doubling up to eagerMax, until it has looked for eagerFor, then falls
// back to Options.PollInterval. Enqueue cannot see its transaction
// commit, so a relay woken by it looks closely for a while.
const (
	eagerFirst = time.Millisecond
	eagerMax   = time.Second
	eagerFor   = 5 * time.Second
)

// backlogEvery is how often a relay reports [queen.EventOutboxBacklog].
const backlogEvery = time.Second

// finishTimeout bounds deleting what was pushed once the relay's context
// has ended: the push landed, so its rows are deleted if the database
// allows (else the next relay pushes them again, as duplicates).
const finishTimeout = 10 * time.Second

// row is one outbox row read by a relay.
type row struct {
	id         int64
	item       queen.PushItem
	enqueuedAt int64 // µs since the epoch
}

// heldRow is a row the broker refused for good, and why.
type heldRow struct {
	row
	err error
}

// partKey names a partition.
type partKey struct{ queue, partition string }

// Relay moves committed rows into the broker until ctx ends, then returns
// nil. It returns an error at once only when the outbox table cannot be
// read (not migrated, no such database); later failures, of the database
// or of the broker, are logged and retried with backoff.
//
// Each step reads the oldest rows (at most Options.BatchSize), pushes
// them in one [queen.Client.Push] call, in order, and deletes those the
// broker stored or reported a duplicate of. A row the broker refused for
// now ([queen.ErrQueueFull], [queen.ErrClosed], an unreachable remote,
// any error not listed below) stays, with the rows of its partition
// behind it, and the relay waits from Options.MinBackoff, doubling up to
// MaxBackoff, before trying again. A row refused for good
// ([queen.ErrInvalidArgument], [queen.ErrTooLarge], [queen.ErrNotFound],
// [queen.ErrUnsupported]) is moved to the held table (see
// [Outbox.Held]); the rows behind it, of its partition and others, go on.
//
// Any number of relays may run over one database. On PostgreSQL each
// step locks the partitions it relays (pg_try_advisory_xact_lock, held
// until its transaction commits after the delete) and skips those another
// relay holds: one partition's rows are pushed by one relay at a time, in
// order. On SQLite, which has one writer, a step reads the oldest rows,
// pushes them and then deletes them; two relays may push the same rows,
// and the broker stores them once (each is a duplicate of its
// TransactionID), in order, since every relay pushes each partition's
// oldest rows first.
func (ob *Outbox) Relay(ctx context.Context) error {
	if _, err := ob.Stats(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("outbox: relay: %w", err)
	}
	var backoff, eager, eagerSpent time.Duration
	var lastBacklog time.Time
	for {
		if now := ob.o.Now(); now.Sub(lastBacklog) >= backlogEvery || now.Before(lastBacklog) {
			lastBacklog = now
			ob.reportBacklog(ctx)
		}
		woken := ob.woken() // before the step: a Notify during it is not missed
		n, err := ob.step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-woken: // an Enqueue during the step: its transaction may commit soon
			eager, eagerSpent = eagerFirst, 0
		default:
		}
		if err != nil {
			backoff = min(max(2*backoff, ob.o.MinBackoff), ob.o.MaxBackoff)
			ob.log.Warn("outbox: relay refused, retrying", "table", ob.o.Table, "err", err, "backoff", backoff)
			if !sleep(ctx, backoff, nil) {
				return nil
			}
			continue
		}
		backoff = 0
		if n > 0 {
			continue // more may be waiting
		}
		d := ob.o.PollInterval
		if eager > 0 && eagerSpent < eagerFor {
			d, eagerSpent = min(eager, d), eagerSpent+eager
			eager = min(2*eager, eagerMax)
		}
		if !sleep(ctx, d, woken) {
			return nil
		}
		select {
		case <-woken: // an Enqueue while idle
			eager, eagerSpent = eagerFirst, 0
		default:
		}
	}
}

// sleep waits d, until wake is closed, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-t.C:
	}
	return true
}

// step relays one batch and returns how many rows it took out of the
// table (relayed or held). Its error is a refusal for now: the caller
// backs off.
func (ob *Outbox) step(ctx context.Context) (int, error) {
	if ob.o.Dialect == Postgres {
		return ob.stepLocked(ctx)
	}
	rows, err := ob.readRows(ctx, ob.db, ob.q.oldest, ob.o.BatchSize)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	pushed, held, stop := ob.push(ctx, rows)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	tx, err := ob.db.BeginTx(fctx, nil)
	if err != nil {
		return 0, errors.Join(stop, err)
	}
	defer tx.Rollback()
	return ob.finish(fctx, tx, pushed, held, stop)
}

// stepLocked is a step on PostgreSQL: in one transaction, lock the
// partitions of the oldest rows that no other relay holds, read their
// oldest rows, push them, delete them and commit, which releases the
// locks.
func (ob *Outbox) stepLocked(ctx context.Context) (int, error) {
	tx, err := ob.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var args []any
	prs, err := tx.QueryContext(ctx, ob.q.lockParts, ob.o.BatchSize, ob.o.Table)
	if err != nil {
		return 0, err
	}
	for prs.Next() {
		var q, p string
		if err := prs.Scan(&q, &p); err != nil {
			prs.Close()
			return 0, err
		}
		args = append(args, q, p)
	}
	if err := errors.Join(prs.Err(), prs.Close()); err != nil {
		return 0, err
	}
	if len(args) == 0 {
		return 0, nil
	}
	// A new statement, so a new snapshot (READ COMMITTED): it sees the
	// deletes of the relay that held a lock just before this one.
	rows, err := ob.readRows(ctx, tx, ob.q.partRows(len(args)/2), append(args, ob.o.BatchSize)...)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	pushed, held, stop := ob.push(ctx, rows)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	return ob.finish(fctx, tx, pushed, held, stop)
}

// querier is a *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readRows runs a query selecting q.selectCols.
func (ob *Outbox) readRows(ctx context.Context, db querier, query string, args ...any) ([]row, error) {
	rs, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		var payload []byte
		it := &r.item
		if err := rs.Scan(&r.id, &it.Queue, &it.Partition, &it.TransactionID, &payload, &it.TraceID, &it.Namespace, &it.Task, &it.ProducerSub, &r.enqueuedAt); err != nil {
			return nil, err
		}
		it.Payload = payload
		out = append(out, r)
	}
	return out, rs.Err()
}

// push pushes rows in one call and sorts them: pushed (stored or a
// duplicate), held (refused for good), and the rest, left in the table;
// stop is why the rest was refused for now, nil if there is no rest.
func (ob *Outbox) push(ctx context.Context, rows []row) (pushed []row, held []heldRow, stop error) {
	items := make([]queen.PushItem, len(rows))
	for i := range rows {
		items[i] = rows[i].item
	}
	results, err := ob.c.Push(ctx, items)
	if err != nil {
		if !permanent(err) {
			return nil, nil, err
		}
		if len(rows) == 1 {
			return nil, []heldRow{{rows[0], err}}, nil
		}
		// The call was refused for good, as a whole: by one row, or by
		// its size (a server's body limit). Halves, in order, until the
		// row is alone.
		half := len(rows) / 2
		p1, h1, s1 := ob.push(ctx, rows[:half])
		if s1 != nil {
			return p1, h1, s1
		}
		p2, h2, s2 := ob.push(ctx, rows[half:])
		return append(p1, p2...), append(h1, h2...), s2
	}
	if len(results) != len(rows) {
		return nil, nil, fmt.Errorf("outbox: the broker answered %d results for %d items", len(results), len(rows))
	}
	blocked := map[partKey]bool{}
	for i, res := range results {
		k := partKey{rows[i].item.Queue, rows[i].item.Partition}
		switch {
		case res.Status == queen.PushQueued || res.Status == queen.PushDuplicate:
			if blocked[k] && res.Status == queen.PushQueued {
				ob.log.Error("outbox: the broker stored a row after refusing an earlier row of its partition", "queue", k.queue, "partition", k.partition, "id", rows[i].id)
			}
			pushed = append(pushed, rows[i])
		case permanent(res.Err):
			held = append(held, heldRow{rows[i], res.Err})
		default:
			blocked[k] = true
			if stop == nil {
				stop = res.Err
				if stop == nil {
					stop = fmt.Errorf("outbox: push status %q", res.Status)
				}
			}
		}
	}
	return pushed, held, stop
}

// permanent reports a refusal that pushing again will not change.
func permanent(err error) bool {
	for _, e := range []error{queen.ErrInvalidArgument, queen.ErrTooLarge, queen.ErrNotFound, queen.ErrUnsupported} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// finish moves held rows aside, deletes pushed ones and commits tx; then
// reports them. It returns the number of rows taken out of the table,
// and stop or the database's error.
func (ob *Outbox) finish(ctx context.Context, tx *sql.Tx, pushed []row, held []heldRow, stop error) (int, error) {
	now := ob.o.Now()
	ids := make([]any, 0, len(pushed)+len(held))
	for _, h := range held {
		if _, err := tx.ExecContext(ctx, ob.q.hold, now.UnixMicro(), h.err.Error(), h.id); err != nil {
			return 0, errors.Join(stop, err)
		}
		ids = append(ids, h.id)
	}
	for _, r := range pushed {
		ids = append(ids, r.id)
	}
	if len(ids) > 0 {
		if _, err := tx.ExecContext(ctx, ob.q.deleteIDs(len(ids)), ids...); err != nil {
			return 0, errors.Join(stop, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, errors.Join(stop, err)
	}
	ob.relayed.Add(int64(len(pushed)))
	ob.reportMoved(now, pushed, held)
	return len(ids), stop
}

// reportMoved reports [queen.EventOutboxRelayed] and
// [queen.EventOutboxHeld], one event per queue.
func (ob *Outbox) reportMoved(now time.Time, pushed []row, held []heldRow) {
	type acc struct {
		n      int
		oldest int64
	}
	var order []string
	per := map[string]*acc{}
	for _, r := range pushed {
		a := per[r.item.Queue]
		if a == nil {
			a = &acc{oldest: r.enqueuedAt}
			per[r.item.Queue] = a
			order = append(order, r.item.Queue)
		}
		a.n++
		a.oldest = min(a.oldest, r.enqueuedAt)
	}
	for _, q := range order {
		a := per[q]
		ob.obs.Observe(queen.Event{Kind: queen.EventOutboxRelayed, Queue: q, Count: a.n, Duration: max(0, now.Sub(time.UnixMicro(a.oldest)))})
	}
	heldBy := map[string]int{}
	order = order[:0]
	for _, h := range held {
		if heldBy[h.item.Queue] == 0 {
			order = append(order, h.item.Queue)
		}
		heldBy[h.item.Queue]++
		ob.log.Error("outbox: row refused for good, held", "table", ob.o.Table, "id", h.id, "queue", h.item.Queue, "partition", h.item.Partition, "err", h.err)
	}
	for _, q := range order {
		ob.obs.Observe(queen.Event{Kind: queen.EventOutboxHeld, Queue: q, Count: heldBy[q]})
	}
}

// reportBacklog reports [queen.EventOutboxBacklog].
func (ob *Outbox) reportBacklog(ctx context.Context) {
	s, err := ob.Stats(ctx)
	if err != nil {
		return
	}
	ob.obs.Observe(queen.Event{Kind: queen.EventOutboxBacklog, Count: int(s.Waiting), Duration: s.OldestAge})
}
