package queen

import (
	"context"
	"sort"
	"strings"
)

// PartitionFilter selects a page of a queue's partitions for
// [Broker.ListPartitions].
type PartitionFilter struct {
	// Name, when set, selects that one partition (a page of it alone, or
	// an empty page if the queue has none of that name), looked up
	// directly; Search and From are then ignored.
	Name string
	// Search keeps the partitions whose name contains it; "" keeps all.
	Search string
	// From is where the page starts: the Next of the previous page, 0 for
	// the first.
	From int
	// Limit is the page size: [DefaultPartitionPage] when 0, at most
	// [MaxPartitionPage].
	Limit int
}

// PartitionPage is a page of one queue's partitions, in creation order.
type PartitionPage struct {
	// Queue holds the queue's totals, as [Broker.QueueStats] counts them,
	// but with Partitions nil: they are the page's.
	Queue QueueStats
	// Partitions are the page's partitions, each with the cursors of
	// every group of the queue.
	Partitions []PartitionStats
	// Next is the From of the next page; 0 when this page is the last.
	Next int
	// Scanned is how many partitions the page looked at to fill itself
	// (all it skipped with Search included).
	Scanned int
}

// ListPartitions returns a page of the partitions of queue, in the order
// they were created, with each group's position in them. The queue's
// totals come from counts the broker keeps, so a page costs the
// partitions it looks at, not the queue's size; only a Search scans
// further, until it fills the page. An unknown queue is [ErrNotFound]; a
// negative From or Limit, or a Limit over [MaxPartitionPage], is an
// [*ArgumentError].
func (b *Broker) ListPartitions(ctx context.Context, queue string, f PartitionFilter) (*PartitionPage, error) {
	if f.From < 0 {
		return nil, argErr("From", "must not be negative")
	}
	if f.Limit < 0 || f.Limit > MaxPartitionPage {
		return nil, argErr("Limit", "must be from 0 to MaxPartitionPage")
	}
	if f.Limit == 0 {
		f.Limit = DefaultPartitionPage
	}
	q, unlock, err := b.lockQueue(queue)
	if err != nil {
		return nil, err
	}
	defer unlock()
	now := b.now()
	page := &PartitionPage{Queue: b.queueTotals(q, now)}
	if f.Name != "" {
		if p := q.parts[f.Name]; p != nil && !p.deleted {
			page.Partitions = []PartitionStats{b.partitionStats(p, now, true)}
			page.Scanned = 1
		}
		return page, nil
	}
	i := f.From
	var parts []*partition
	for ; i < len(q.order) && len(parts) < f.Limit; i++ {
		if i&1023 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p := q.order[i]
		page.Scanned++
		if p.deleted || (f.Search != "" && !strings.Contains(p.name, f.Search)) {
			continue
		}
		parts = append(parts, p)
	}
	b.readLastPushes(parts) // in one pass
	for _, p := range parts {
		page.Partitions = append(page.Partitions, b.partitionStats(p, now, true))
	}
	if i < len(q.order) {
		page.Next = i
	}
	return page, nil
}

// partitionStats describes p, with the cursors of every group of its
// queue and its last push time when withCursors is set (without them,
// only its counts are meant to be used).
func (b *Broker) partitionStats(p *partition, now int64, withCursors bool) PartitionStats {
	ps := PartitionStats{Name: p.name, ID: p.uuid(), CreatedAt: microsTime(p.createdAt()), Messages: p.stored(), FirstOffset: p.first, NextOffset: p.next}
	if withCursors {
		ps.LastPushAt = microsTime(b.lastPush(p))
	}
	if len(p.q.groups) == 0 {
		ps.Pending = ps.Messages
	}
	for _, g := range p.q.slots {
		if g == nil {
			continue
		}
		cs := b.cursorStats(startCursor(g, p), now)
		ps.Pending = max(ps.Pending, cs.Lag)
		ps.InFlight += int64(cs.InFlight)
		if withCursors {
			ps.Cursors = append(ps.Cursors, cs)
		}
	}
	return ps
}

// queueTotals is q's QueueStats without partitions, from the counts kept
// in memory: pending from repend's sum, in flight from the live leases.
func (b *Broker) queueTotals(q *queue, now int64) QueueStats {
	qs := QueueStats{QueueInfo: *q.info(), PartitionN: len(q.parts), Messages: q.count, Pending: q.pending, DeadLetters: q.dlqCount, Parked: q.parkedCount}
	for name := range q.groups {
		qs.Groups = append(qs.Groups, name)
	}
	sort.Strings(qs.Groups)
	for _, l := range b.leases {
		if l.g.q != q || l.expires <= now {
			continue
		}
		for _, c := range l.cursors {
			if c.fl == nil || c.fl.lease != l {
				continue
			}
			for _, m := range c.fl.msgs {
				if !m.settled {
					qs.InFlight++
				}
			}
		}
	}
	return qs
}
