package queen

import (
	"context"
	"sort"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
)

// CursorStats is one group's position in one partition.
type CursorStats struct {
	Group          string
	Offset         int64 // next offset to deliver (past retention and deleted messages)
	Lag            int64 // stored messages at or after Offset (deleted ones do not count)
	InFlight       int   // messages leased and not yet settled
	LeaseID        string
	LeaseExpiresAt time.Time
	Retries        int // failed acks spent since the last completed batch
	Consumed       int64
	LastAckAt      time.Time // zero if never
}

// PartitionStats describes one partition.
type PartitionStats struct {
	Name      string
	ID        string
	CreatedAt time.Time
	Messages  int64 // stored messages (neither retention nor DeleteMessage removed them)
	// Pending is the stored messages of the partition the slowest group
	// has not settled (all of them, with no group), leased ones included;
	// never more than Messages.
	Pending int64
	// InFlight is the messages under live leases, counted once for each
	// group leasing them: with several groups it can exceed Pending and
	// Messages.
	InFlight    int64
	FirstOffset int64 // lowest retained offset
	NextOffset  int64 // offset the next push gets
	LastPushAt  time.Time
	// Cursors has one entry per group of the queue: every group has a
	// position in every partition, at its first message until the group
	// reads there.
	Cursors []CursorStats
}

// QueueStats describes a queue and its partitions.
type QueueStats struct {
	QueueInfo
	Partitions []PartitionStats // by name; nil from [Broker.ListQueues]
	PartitionN int
	Messages   int64 // stored messages
	// Pending counts, per partition, the stored messages the slowest group
	// has not settled (all of them, with no group), leased ones included:
	// the sum of the partitions' [PartitionStats].Pending; never more than
	// Messages.
	Pending int64
	// InFlight is the messages under live leases, over all groups: the sum
	// of the partitions' [PartitionStats].InFlight. A message leased by two
	// groups counts twice, so InFlight can exceed Pending and Messages.
	InFlight    int64
	DeadLetters int64
	Parked      int64
	Groups      []string
}

// GroupStats describes a consumer group on one queue.
type GroupStats struct {
	Queue             string
	Group             string
	Mode              SubscriptionMode // "new", "all" or "timestamp"
	From              time.Time        // start time of a "timestamp" group
	JoinedAt          time.Time
	Conflation        bool
	Partitions        int   // cursors: one per partition of the queue
	PartitionsWithLag int   // cursors with messages to read
	Lag               int64 // messages to read, over all partitions
	InFlight          int64 // leased messages
	ActiveLeases      int   // partitions under a live lease
	Consumed          int64
	LastAckAt         time.Time
	// OldestPendingAt is when the oldest message the group has not settled
	// was pushed; zero with no lag.
	OldestPendingAt time.Time
}

func microsTime(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

func (b *Broker) cursorStats(c *cursor, now int64) CursorStats {
	cs := CursorStats{Group: c.g.name, Offset: c.p.skipHoles(max(c.offset, c.p.first)), Retries: int(c.retries), Consumed: c.consumed, LastAckAt: microsTime(c.lastAckAt)}
	cs.Lag = c.p.storedFrom(cs.Offset)
	if c.fl != nil && c.fl.lease != nil && c.fl.lease.expires > now {
		for _, f := range c.fl.msgs {
			if !f.settled {
				cs.InFlight++
			}
		}
		cs.LeaseID, cs.LeaseExpiresAt = c.fl.lease.id, microsTime(c.fl.lease.expires)
	}
	return cs
}

func (b *Broker) queueStats(q *queue, withParts bool, now int64) QueueStats {
	qs := QueueStats{QueueInfo: *q.info(), PartitionN: len(q.parts), Messages: q.count, DeadLetters: q.dlqCount, Parked: q.parkedCount}
	for name := range q.groups {
		qs.Groups = append(qs.Groups, name)
	}
	sort.Strings(qs.Groups)
	if withParts {
		b.readLastPushes(q.order) // in one pass, in key order
	}
	for _, p := range q.parts {
		ps := b.partitionStats(p, now, withParts)
		qs.Pending += ps.Pending
		qs.InFlight += ps.InFlight
		if withParts {
			qs.Partitions = append(qs.Partitions, ps)
		}
	}
	sort.Slice(qs.Partitions, func(i, j int) bool { return qs.Partitions[i].Name < qs.Partitions[j].Name })
	return qs
}

// QueueStats describes a queue, its partitions and the cursors of its
// groups; an unknown queue is [ErrNotFound].
func (b *Broker) QueueStats(ctx context.Context, name string) (*QueueStats, error) {
	q, unlock, err := b.lockQueue(name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	qs := b.queueStats(q, true, b.now())
	return &qs, nil
}

// ListQueues describes every queue (without per-partition detail), by name.
// It reads the counts the broker keeps: its cost does not grow with the
// queues' partitions.
func (b *Broker) ListQueues(ctx context.Context) ([]QueueStats, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	now := b.now()
	out := make([]QueueStats, 0, len(b.queues))
	for _, q := range b.queues {
		out = append(out, b.queueTotals(q, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// groupStats describes the groups f selects, by queue then group.
func (b *Broker) groupStats(f GroupFilter) ([]GroupStats, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	now := b.now()
	var out []GroupStats
	type probe struct {
		i   int
		pid uint64
		off int64
	}
	var probes []probe
	budget := f.MaxProbes
	for _, q := range b.queues {
		if f.Queue != "" && q.name != f.Queue {
			continue
		}
		for _, g := range q.groups {
			if f.Group != "" && g.name != f.Group {
				continue
			}
			gs := GroupStats{Queue: q.name, Group: g.name, Mode: g.mode, From: microsTime(g.from), JoinedAt: microsTime(g.joinedAt), Conflation: g.conflation}
			mine := len(probes)
			for _, p := range q.order { // creation order: partitions lie in memory in it
				cs := b.cursorStats(startCursor(g, p), now)
				gs.Partitions++
				gs.Lag += cs.Lag
				gs.InFlight += int64(cs.InFlight)
				gs.Consumed += cs.Consumed
				if cs.Lag > 0 {
					gs.PartitionsWithLag++
					probes = append(probes, probe{len(out), p.pid, cs.Offset})
				}
				if cs.LeaseID != "" {
					gs.ActiveLeases++
				}
				if cs.LastAckAt.After(gs.LastAckAt) {
					gs.LastAckAt = cs.LastAckAt
				}
			}
			if f.MaxProbes > 0 {
				// A group's oldest pending message is found in full or not
				// at all: past the budget, its probes are dropped.
				if n := len(probes) - mine; n > budget {
					probes = probes[:mine]
				} else {
					budget -= n
				}
			}
			out = append(out, gs)
		}
	}
	b.mu.Unlock()
	err := b.db.View(func(txn *badger.Txn) error {
		for _, pr := range probes {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: keys.MessagePrefix(pr.pid)})
			it.Seek(keys.MessageKey(pr.pid, pr.off))
			if it.Valid() {
				_ = it.Item().Value(func(v []byte) error {
					if ts, ok := record.MessageCreatedAt(v); ok {
						t := microsTime(ts)
						if o := &out[pr.i].OldestPendingAt; o.IsZero() || t.Before(*o) {
							*o = t
						}
					}
					return nil
				})
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return nil, storageErr("group stats", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queue != out[j].Queue {
			return out[i].Queue < out[j].Queue
		}
		return out[i].Group < out[j].Group
	})
	return out, nil
}

// DeleteGroup removes group's cursors and leases on queue (every queue when
// queue is ""), and reports how many partition cursors were removed. With
// deleteMetadata the group is forgotten: its next pop starts it afresh. Without, its
// start point is kept and its cursors go back to it.
//
// An unknown queue is [ErrNotFound], and a group that never popped queue
// (with queue "", any queue) is [ErrGroupNotFound]; nothing changed. With
// deleteMetadata, a group that only popped queue before the queue existed
// (see [PopRequest].SubscriptionMode) is found: what the broker remembers
// of that pop is forgotten, and 0 cursors are removed.
//
// As in [PopRequest.Group], an empty group (or [QueueModeGroup]) is the
// queue-mode group: DeleteGroup(ctx, "", "", …) resets queue mode on
// every queue.
func (b *Broker) DeleteGroup(ctx context.Context, group, queue string, deleteMetadata bool) (int, error) {
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.leave()
	gc, err := b.lockGroupChange(group)
	if err != nil {
		return 0, err
	}
	if deleteMetadata {
		gc.found = b.forgetEarlyPops(gc.name, queue) > 0
	}
	if queue != "" && b.queues[queue] == nil && !gc.found {
		b.mu.Unlock()
		return 0, ErrNotFound
	}
	for _, q := range b.queues {
		if queue != "" && q.name != queue {
			continue
		}
		g := q.groups[gc.name]
		if g == nil {
			continue
		}
		gc.found = true
		gc.n += len(q.parts) // g has a position in each (see cursorOf)
		if !deleteMetadata && g.mode == SubscriptionModeNew {
			g.mode, g.from = modeFrom, g.joinedAt
		}
		for _, p := range q.order {
			c := p.cursorOf(g)
			if c == nil {
				continue // nothing stored, nothing leased
			}
			b.dropLease(c)
			g.removeReady(c)
			gc.ops = append(gc.ops, deleteKey{keys.PositionKey(p.pid, gc.name)}) // a position's metadata goes with it
			if deleteMetadata {
				gc.ops = append(gc.ops, deleteKey{keys.CursorKey(p.pid, gc.name)})
				(*p.cursors)[g.slot] = nil
				continue
			}
			*c = cursor{p: p, g: g, offset: b.startOffset(g, p)}
			if c.offset != p.first {
				gc.ops = append(gc.ops, c.save())
			} else {
				gc.ops = append(gc.ops, deleteKey{keys.CursorKey(p.pid, gc.name)})
			}
			b.check(c, gc.now)
		}
		if deleteMetadata {
			g.deleted = true
			q.slots[g.slot] = nil
			delete(q.groups, gc.name)
			g.wakeAll()
			gc.ops = append(gc.ops, deleteKey{keys.GroupKey(q.name, gc.name)})
		} else {
			gc.ops = append(gc.ops, b.place(g, false, gc.now)...) // where it has no cursor
			gc.ops = append(gc.ops, setKey{keys.GroupKey(q.name, gc.name), g.meta()})
		}
		for _, p := range q.parts {
			b.repend(p)
		}
	}
	return b.unlockGroupChange(ctx, gc)
}

// groupChange is a change of a group's positions in the queues that
// have it, made under b.mu: its group's name, the time it is made at,
// the writes it submits, the count it reports, and whether any queue had
// the group.
type groupChange struct {
	name  string
	now   int64
	ops   []command
	n     int
	found bool
}

// lockGroupChange takes b.mu, if the broker is usable, for a change of
// group's positions (see unlockGroupChange).
func (b *Broker) lockGroupChange(group string) (*groupChange, error) {
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	return &groupChange{name: groupName(group), now: b.now()}, nil
}

// unlockGroupChange ends gc, made under b.mu, which the caller holds and
// unlockGroupChange releases: it reports [ErrGroupNotFound] when no queue
// had the group; else it submits gc's writes (still under b.mu, so that
// writes keep the order of the changes), releases b.mu, waits for the
// write and returns gc.n.
func (b *Broker) unlockGroupChange(ctx context.Context, gc *groupChange) (int, error) {
	if !gc.found {
		b.mu.Unlock()
		return 0, ErrGroupNotFound
	}
	var done <-chan error
	if len(gc.ops) > 0 {
		done = b.w.submit(gc.ops)
	}
	b.mu.Unlock()
	if done != nil {
		if err := waitCtx(ctx, done); err != nil {
			return 0, err
		}
	}
	return gc.n, nil
}

// SetGroupSubscription moves the start point of group on every queue to
// from, and returns how many cursors moved. A partition the group has
// started on keeps its cursor: one it has settled messages of, or one it
// holds under a live lease (that batch stays out, and its messages are
// delivered again from the kept cursor if the lease is lost). Every other
// partition's cursor moves to the first message pushed at or after from,
// as [Broker.SeekGroup] would move it (its retry count and any retry delay
// or DelayedProcessing hold start over), and so do partitions created later. The kept and the moved cursors are
// stored, so a restart finds them where they are now. An empty group is
// the queue-mode group, as in [Broker.DeleteGroup]. A group that has
// popped no queue is [ErrGroupNotFound] (a pop that found no queue does
// not count): SetGroupSubscription moves groups, it does not create them
// (see [ErrGroupNotFound]).
func (b *Broker) SetGroupSubscription(ctx context.Context, group string, from time.Time) (int, error) {
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.leave()
	if from.IsZero() {
		return 0, argErr("from", "must be set")
	}
	gc, err := b.lockGroupChange(group)
	if err != nil {
		return 0, err
	}
	for _, q := range b.queues {
		g := q.groups[gc.name]
		if g == nil {
			continue
		}
		gc.found = true
		g.mode, g.from = modeFrom, from.UnixMicro()
		g.scan = 0 // where it stands without a cursor may hold messages gc.now
		g.waiters.wakeAll()
		gc.ops = append(gc.ops, setKey{keys.GroupKey(q.name, gc.name), g.meta()})
		for _, p := range q.order {
			c := p.cursorOf(g)
			if c == nil {
				// Not started: it moves too. Where it lands on the first
				// message it may stay without a cursor (see cursorOf).
				if off := b.startOffset(g, p); off != p.first {
					c = b.install(g, p, off)
					gc.ops = append(gc.ops, c.save())
					b.check(c, gc.now)
				} else {
					b.repend(p) // it stood at p's end in mode "new"
				}
				gc.n++
				continue
			}
			if c.fl != nil && c.fl.lease != nil && c.fl.lease.expires <= gc.now {
				b.expireLease(c.fl.lease, gc.now)
			}
			if c.consumed > 0 || c.fl != nil {
				gc.ops = append(gc.ops, c.save()) // kept, also across a restart
				continue
			}
			g.removeReady(c)
			c.offset = b.firstOffsetAtOrAfter(p, g.from)
			c.retries, c.notBefore, c.held = 0, 0, false // as a seek: the hold was the old position's
			b.repend(p)
			gc.ops = append(gc.ops, c.save())
			b.check(c, gc.now)
			gc.n++
		}
	}
	return b.unlockGroupChange(ctx, gc)
}
