package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/queenlite/queen"
)

// Stats describes an outbox table.
type Stats struct {
	// Waiting is the number of committed rows not yet relayed.
	Waiting int64
	// OldestAge is how long ago the oldest waiting row was enqueued; zero
	// when none waits.
	OldestAge time.Duration
	// Held is the number of rows kept aside (see [Outbox.Held]).
	Held int64
	// Relayed is the number of rows the relays of this [Outbox] pushed
	// and deleted since [New] (held rows excluded): a count of this
	// process, not of the table. On SQLite, two relays that pushed the
	// same rows (the broker stored them once) both count them.
	Relayed int64
}

// Stats counts the rows waiting and held. It reads the whole table:
// call it for metrics and checks, not for every message.
func (ob *Outbox) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	var oldest int64
	if err := ob.db.QueryRowContext(ctx, ob.q.stats).Scan(&s.Waiting, &oldest); err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", err)
	}
	if err := ob.db.QueryRowContext(ctx, ob.q.heldCount).Scan(&s.Held); err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", err)
	}
	if s.Waiting > 0 {
		s.OldestAge = max(0, ob.o.Now().Sub(time.UnixMicro(oldest)))
	}
	s.Relayed = ob.relayed.Load()
	return s, nil
}

// HeldRow is a row the broker refused for good, kept aside by a relay.
type HeldRow struct {
	// ID is the row's id, the same it had in the outbox table.
	ID int64
	// Item is what was enqueued, its TransactionID included.
	Item queen.PushItem
	// EnqueuedAt is when [Outbox.Enqueue] wrote it; HeldAt when a relay
	// moved it aside.
	EnqueuedAt, HeldAt time.Time
	// Error is the broker's refusal.
	Error string
}

// Held lists up to limit held rows with an id above after, oldest
// first: pass the last ID of a page to read the next one. limit defaults
// to 100 when zero or less.
func (ob *Outbox) Held(ctx context.Context, after int64, limit int) ([]HeldRow, error) {
	if limit <= 0 {
		limit = 100
	}
	rs, err := ob.db.QueryContext(ctx, ob.q.heldPage, after, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: held: %w", err)
	}
	defer rs.Close()
	var out []HeldRow
	for rs.Next() {
		var h HeldRow
		var payload []byte
		var enq, at int64
		it := &h.Item
		if err := rs.Scan(&h.ID, &it.Queue, &it.Partition, &it.TransactionID, &payload, &it.TraceID, &it.Namespace, &it.Task, &it.ProducerSub, &enq, &at, &h.Error); err != nil {
			return nil, fmt.Errorf("outbox: held: %w", err)
		}
		it.Payload = payload
		h.EnqueuedAt, h.HeldAt = time.UnixMicro(enq), time.UnixMicro(at)
		out = append(out, h)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("outbox: held: %w", err)
	}
	return out, nil
}

// RequeueHeld moves held row id back into the outbox table, behind every
// row waiting there (so behind the later rows of its partition that the
// relays may already have pushed), with its TransactionID. Fix what made
// the broker refuse it first (create the queue, raise a limit). An
// unknown id is [queen.ErrNotFound].
func (ob *Outbox) RequeueHeld(ctx context.Context, id int64) error {
	err := ob.inTx(ctx, func(tx *sql.Tx) error {
		if err := ob.mustHold(ctx, tx, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, ob.q.requeue, ob.o.Now().UnixMicro(), id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, ob.q.delHeld, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("outbox: requeue held row %d: %w", id, err)
	}
	ob.Notify()
	return nil
}

// DeleteHeld deletes held row id for good. An unknown id is
// [queen.ErrNotFound].
func (ob *Outbox) DeleteHeld(ctx context.Context, id int64) error {
	err := ob.inTx(ctx, func(tx *sql.Tx) error {
		if err := ob.mustHold(ctx, tx, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, ob.q.delHeld, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("outbox: delete held row %d: %w", id, err)
	}
	return nil
}

// mustHold returns [queen.ErrNotFound] unless row id is held.
func (ob *Outbox) mustHold(ctx context.Context, tx *sql.Tx, id int64) error {
	var n int
	if err := tx.QueryRowContext(ctx, ob.q.heldOne, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return queen.ErrNotFound
	}
	return nil
}

// inTx runs fn in a transaction and commits it unless fn fails.
func (ob *Outbox) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := ob.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}
