package queen

import (
	"context"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
)

// SeekOptions moves a group's cursor: to the end, or to the first message
// pushed at or after Timestamp. The zero value seeks to the end.
type SeekOptions struct {
	ToEnd     bool
	Timestamp time.Time
}

// SeekResult reports a seek.
type SeekResult struct {
	// PartitionsUpdated counts the partitions whose cursor was set.
	PartitionsUpdated int
	// CursorMovedTo is the new cursor (next offset to deliver) of a
	// partition seek.
	CursorMovedTo int64
}

// SeekGroup moves group's cursor in every partition of queue. Live leases
// of the group on the queue are released: their in-flight batches are
// abandoned, not acked, and acks for them are refused. An unknown queue is
// [ErrNotFound]; a group that never popped the queue is
// [ErrGroupNotFound] (a seek does not create a group: a group starts at
// its first pop, at a time of its choice with
// [PopRequest].SubscriptionFrom, and can be moved by a seek after that).
// An empty group (or [QueueModeGroup]) is the queue-mode group, as in
// [PopRequest.Group].
func (b *Broker) SeekGroup(ctx context.Context, group, queue string, opts SeekOptions) (*SeekResult, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	return b.seek(ctx, group, queue, "", opts)
}

// SeekPartition is [Broker.SeekGroup] for one partition; an unknown queue
// or partition is [ErrNotFound], a group that never popped the queue
// [ErrGroupNotFound].
func (b *Broker) SeekPartition(ctx context.Context, group, queue, partition string, opts SeekOptions) (*SeekResult, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if partition == "" {
		return nil, argErr("partition", "must not be empty")
	}
	return b.seek(ctx, group, queue, partition, opts)
}

func (b *Broker) seek(ctx context.Context, group, queueName, partName string, opts SeekOptions) (*SeekResult, error) {
	q, err := b.lockKnownQueue(queueName)
	if err != nil {
		return nil, err
	}
	parts := q.parts
	if partName != "" {
		p := q.parts[partName]
		if p == nil {
			b.mu.Unlock()
			return nil, ErrNotFound
		}
		parts = map[string]*partition{partName: p}
	}
	res := &SeekResult{}
	g := q.groups[groupName(group)]
	if g == nil {
		b.mu.Unlock()
		return nil, ErrGroupNotFound
	}
	now := b.now()
	var ops []command
	for _, p := range parts {
		c := b.cursorFor(g, p)
		b.dropLease(c)
		g.removeReady(c)
		if opts.ToEnd || opts.Timestamp.IsZero() {
			c.offset = p.next
		} else {
			c.offset = b.firstOffsetAtOrAfter(p, opts.Timestamp.UnixMicro())
		}
		c.retries, c.notBefore, c.held = 0, 0, false
		b.repend(p)
		ops = append(ops, c.save())
		b.check(c, now)
		res.PartitionsUpdated++
		res.CursorMovedTo = c.offset
	}
	done := b.w.submit(ops)
	b.mu.Unlock()
	if err := waitCtx(ctx, done); err != nil {
		return nil, err
	}
	return res, nil
}

// firstOffsetAtOrAfter finds the first retained message of p pushed at or
// after t (µs), by binary search over offsets (creation times grow with
// offsets). Under b.mu.
func (b *Broker) firstOffsetAtOrAfter(p *partition, t int64) int64 {
	lo, hi := p.first, p.next // answer in [lo, hi]
	_ = b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: keys.MessagePrefix(p.pid)})
		defer it.Close()
		// createdAt of the first stored message at or after off.
		at := func(off int64) (int64, int64, bool) {
			it.Seek(keys.MessageKey(p.pid, off))
			if !it.Valid() {
				return 0, 0, false
			}
			_, o, _ := keys.DecodeMessageKey(it.Item().Key())
			var ts int64
			var ok bool
			_ = it.Item().Value(func(v []byte) error { ts, ok = record.MessageCreatedAt(v); return nil })
			return o, ts, ok
		}
		for lo < hi {
			mid := lo + (hi-lo)/2
			o, ts, ok := at(mid)
			switch {
			case !ok || o >= hi:
				hi = mid
			case ts >= t:
				hi = mid
			default:
				lo = o + 1
			}
		}
		return nil
	})
	return lo
}
