package queen

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
)

// NoOffset is [Position].Offset where a group has no position.
const NoOffset = -1

// PartitionRef names a partition of a queue. Partition defaults to
// [DefaultPartition].
type PartitionRef struct {
	Queue, Partition string
}

// Position is a consumer group's place in one partition, the cursor that
// acks move: Offset is the next offset the group reads (every offset below
// it is settled for the group), as a Kafka committed offset is. Metadata
// is the caller's note set with the position (up to [MaxPositionMetadata]
// bytes); acks move Offset and keep it, the next set replaces it.
//
// [Broker.GroupPositions] reads positions; [Broker.SetPosition] and a
// transaction's [TxOp].Position set them (Queen 2.x's positions route and
// transaction rider). They suit exporting a group's cursors and importing
// them elsewhere, or a consumer that keeps its place in its own store.
type Position struct {
	Group     string
	Queue     string
	Partition string
	// Offset is the next offset the group reads, from 0 to the partition's
	// high watermark; [NoOffset] in a read where the group has no position
	// (it never popped the queue, or the partition does not exist).
	Offset int64
	// Metadata is stored with the position; "" for none.
	Metadata string
	// Forget, on a set, removes the group's position in the partition
	// instead of setting it (Queen's offset null): the group goes back to
	// its start point there (its subscription mode's), and the metadata
	// is dropped. Offset and Metadata are then ignored; forgetting a
	// partition that does not exist changes nothing.
	Forget bool
}

// GroupPositions returns group's position in each named partition, in
// order; with no partitions named, every position of the group on every
// queue it has popped, by queue name and then partition creation. A group
// that has popped a queue has a position in each of its partitions (its
// start point where it has settled nothing). A group with no position in
// a partition answers [NoOffset] there; the call itself fails only on
// invalid input ([*ArgumentError]) or storage errors. An empty group is
// the queue-mode group ([QueueModeGroup]).
func (b *Broker) GroupPositions(ctx context.Context, group string, parts []PartitionRef) ([]Position, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if err := checkLabel("group", group); err != nil {
		return nil, err
	}
	if len(parts) > MaxPositionReads {
		return nil, argErr("parts", "at most %d, not %d", MaxPositionReads, len(parts))
	}
	for i := range parts {
		if err := checkName(fmt.Sprintf("parts[%d].Queue", i), parts[i].Queue); err != nil {
			return nil, err
		}
		if err := checkLabel(fmt.Sprintf("parts[%d].Partition", i), parts[i].Partition); err != nil {
			return nil, err
		}
	}
	name := groupName(group)
	var out []Position
	var pids []uint64 // of the positions found; 0 for none
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	add := func(q *queue, p *partition, queueName, partName string) {
		pos := Position{Group: name, Queue: queueName, Partition: partName, Offset: NoOffset}
		var pid uint64
		if q != nil && p != nil && !p.deleted {
			if g := q.groups[name]; g != nil {
				pos.Offset, pid = g.offsetIn(p), p.pid
			}
		}
		out, pids = append(out, pos), append(pids, pid)
	}
	if parts == nil {
		qnames := make([]string, 0)
		for qn, q := range b.queues {
			if q.groups[name] != nil {
				qnames = append(qnames, qn)
			}
		}
		sort.Strings(qnames)
		for _, qn := range qnames {
			q := b.queues[qn]
			for _, p := range q.order {
				if !p.deleted {
					add(q, p, qn, p.name)
				}
			}
		}
	} else {
		out = make([]Position, 0, len(parts))
		for _, r := range parts {
			part := r.Partition
			if part == "" {
				part = DefaultPartition
			}
			var p *partition
			q := b.queues[r.Queue]
			if q != nil {
				p = q.parts[part]
			}
			add(q, p, r.Queue, part)
		}
	}
	b.mu.Unlock()
	if out == nil {
		out = []Position{}
	}
	err := b.db.View(func(txn *badger.Txn) error {
		for i, pid := range pids {
			if out[i].Offset == NoOffset {
				continue
			}
			item, err := txn.Get(keys.PositionKey(pid, name))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			out[i].Metadata = string(v)
		}
		return nil
	})
	if err != nil {
		return nil, storageErr("positions", err)
	}
	return out, nil
}

// SetPosition sets a group's position in a partition (or forgets it, with
// pos.Forget): a one-operation transaction (see [TxOp].Position and
// [Broker.ExecTransaction]). The group's live lease on that partition is
// released, as a seek releases it: its batch is abandoned, not acked, and
// acks for it are refused. A group that has not popped the queue yet is
// made by it, with the broker's default subscription mode for its other
// partitions. An unknown queue or partition is [ErrNotFound], an offset
// above the partition's high watermark [ErrOffsetOutOfRange], invalid
// input (a negative offset, metadata over [MaxPositionMetadata] bytes) an
// [*ArgumentError].
func (b *Broker) SetPosition(ctx context.Context, pos Position) error {
	_, err := b.ExecTransaction(ctx, []TxOp{{Position: &pos}})
	var te *TransactionError
	if errors.As(err, &te) {
		return te.Err
	}
	return err
}

// checkPosition validates a position to set, as ops[i].
func checkPosition(i int, pos *Position) error {
	field := fmt.Sprintf("ops[%d].Position.", i)
	if pos.Partition == "" {
		pos.Partition = DefaultPartition
	}
	if err := checkName(field+"Queue", pos.Queue); err != nil {
		return err
	}
	if err := checkLabel(field+"Partition", pos.Partition); err != nil {
		return err
	}
	if err := checkLabel(field+"Group", pos.Group); err != nil {
		return err
	}
	if pos.Group == QueueModeGroup {
		pos.Group = "" // as a pop names it: a queue-mode group starts at the first message
	}
	if pos.Forget {
		return nil
	}
	switch {
	case pos.Offset < 0:
		return argErr(field+"Offset", "must not be negative")
	case len(pos.Metadata) > MaxPositionMetadata:
		return argErr(field+"Metadata", "%d bytes, at most %d", len(pos.Metadata), MaxPositionMetadata)
	}
	return nil
}

// resolvePosition finds where a position is set; p is nil for a Forget on
// a partition that does not exist (nothing to do). Under b.mu; it changes
// nothing.
func (b *Broker) resolvePosition(pos *Position) (*queue, *partition, error) {
	q := b.queues[pos.Queue]
	if q == nil {
		return nil, nil, ErrNotFound
	}
	p := q.parts[pos.Partition]
	if p == nil || p.deleted {
		if pos.Forget {
			return q, nil, nil
		}
		return nil, nil, ErrNotFound
	}
	if !pos.Forget && pos.Offset > p.next {
		return nil, nil, fmt.Errorf("%w: offset %d is past the high watermark %d of %s/%s", ErrOffsetOutOfRange, pos.Offset, p.next, q.name, p.name)
	}
	return q, p, nil
}

// applyPosition sets a position resolved by resolvePosition and returns
// the writes that make it durable and the join event of a group it made.
// Under b.mu.
func (b *Broker) applyPosition(pos *Position, q *queue, p *partition, now int64) ([]command, *Event) {
	name := groupName(pos.Group)
	g := q.groups[name]
	var ops []command
	var joinEv *Event
	if g == nil {
		if p == nil {
			return nil, nil // forgetting where nothing was
		}
		var err error
		g, ops, joinEv, err = b.join(q, &PopRequest{Group: pos.Group}, now, false)
		if err != nil { // join refuses only a pop's own options
			return nil, nil
		}
	}
	if p == nil {
		return ops, joinEv
	}
	c := b.cursorFor(g, p)
	b.dropLease(c)
	g.removeReady(c)
	if pos.Forget {
		c.offset = b.startOffset(g, p)
		pos.Offset = c.offset
		pos.Metadata = ""
	} else {
		c.offset = pos.Offset
	}
	c.retries, c.notBefore, c.held = 0, 0, false
	b.repend(p)
	ops = append(ops, c.save())
	if pos.Metadata == "" {
		ops = append(ops, deleteKey{keys.PositionKey(p.pid, name)})
	} else {
		ops = append(ops, setKey{keys.PositionKey(p.pid, name), []byte(pos.Metadata)})
	}
	b.check(c, now)
	return ops, joinEv
}
