package queen

import (
	"context"
	"time"

	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
)

// maintain runs retention and eviction every Options.MaintenanceInterval and
// Badger's value-log GC every Options.GCInterval, until Close.
func (b *Broker) maintain() {
	tick := time.NewTicker(b.opts.MaintenanceInterval)
	defer tick.Stop()
	gc := time.NewTicker(b.opts.GCInterval)
	defer gc.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
			if err := b.Maintain(context.Background()); err != nil && err != ErrClosed {
				b.log.Warn("queen: maintenance", "err", err)
			}
		case <-gc.C:
			b.collectGarbage()
		}
	}
}

// collectGarbage rewrites value-log files that are mostly garbage so Badger
// gives their disk space back.
func (b *Broker) collectGarbage() {
	if b.opts.InMemory {
		return
	}
	for i := 0; i < 16; i++ {
		select {
		case <-b.stop:
			return
		default:
		}
		if b.db.RunValueLogGC(0.5) != nil {
			return
		}
	}
}

// Maintain runs one round of the time-driven jobs now: max-wait eviction
// (messages waiting longer than MaxWaitTime are dead-lettered for each group
// that has not settled them; in a partition no group reads yet, where there
// is nobody to dead-letter for, they are deleted), retention (messages
// older than Retention are deleted) and completed retention (messages older
// than CompletedRetention that every group has passed are deleted). The
// broker runs it every Options.MaintenanceInterval; tests with a fake clock
// call it directly.
func (b *Broker) Maintain(ctx context.Context) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if err := b.lockUsable(); err != nil {
		return err
	}
	var parts []*partition
	for _, q := range b.queues {
		if q.cfg.Retention > 0 || q.cfg.CompletedRetention > 0 || q.cfg.MaxWaitTime > 0 {
			for _, p := range q.parts {
				parts = append(parts, p)
			}
		}
	}
	b.mu.Unlock()
	for _, p := range parts {
		cfg := p.q.cfgSnapshot(b)
		now := b.now()
		if cfg.MaxWaitTime > 0 {
			cutoff := now - cfg.MaxWaitTime.Microseconds()
			if err := b.evict(ctx, p, cutoff); err != nil {
				return err
			}
			if err := b.retain(ctx, p, cutoff, retainUnread); err != nil {
				return err
			}
		}
		if cfg.Retention > 0 {
			if err := b.retain(ctx, p, now-cfg.Retention.Microseconds(), retainAll); err != nil {
				return err
			}
		}
		if cfg.CompletedRetention > 0 {
			if err := b.retain(ctx, p, now-cfg.CompletedRetention.Microseconds(), retainCompleted); err != nil {
				return err
			}
		}
	}
	return nil
}

func (q *queue) cfgSnapshot(b *Broker) QueueConfig {
	b.mu.Lock()
	defer b.mu.Unlock()
	return q.cfg
}

const maintainChunk = 5000

// retainKind says which of a partition's old messages retain deletes.
type retainKind int

const (
	retainAll       retainKind = iota // every one
	retainCompleted                   // those every group has passed
	retainUnread                      // all, but only while no group reads the partition
)

// retainEnd is one past the last offset of p that retain may delete.
// Under b.mu.
func retainEnd(p *partition, kind retainKind) int64 {
	if kind == retainAll {
		return p.next
	}
	end, groups := p.next, len(p.q.groups)
	for _, g := range p.q.slots {
		if g != nil {
			end = min(end, g.offsetIn(p))
		}
	}
	if (kind == retainCompleted && groups == 0) || (kind == retainUnread && groups > 0) {
		return p.first
	}
	return end
}

// retain deletes p's oldest messages created before cutoff, of the kind
// given.
func (b *Broker) retain(ctx context.Context, p *partition, cutoff int64, kind retainKind) error {
	b.delMu.Lock() // no message delete between reading the range and counting it
	defer b.delMu.Unlock()
	for {
		b.mu.Lock()
		if p.deleted {
			b.mu.Unlock()
			return nil
		}
		from, end := p.first, retainEnd(p, kind)
		b.mu.Unlock()
		if from >= end {
			return nil
		}
		var offs []int64
		var txids []string
		last := from - 1
		err := b.readRange(p.pid, from, end, maintainChunk, func(off int64, m *record.Message) bool {
			if m.CreatedAt >= cutoff {
				return false
			}
			offs, txids, last = append(offs, off), append(txids, m.TxID), off
			return true
		})
		if err != nil {
			return err
		}
		if last < from {
			return nil
		}
		b.mu.Lock()
		// A group may have joined, or a cursor moved back, meanwhile.
		if p.deleted || p.first != from || retainEnd(p, kind) <= last {
			b.mu.Unlock()
			return nil
		}
		gone := make(map[string]bool, len(txids))
		dels := make([][]byte, 0, 2*len(offs))
		for i, off := range offs {
			gone[txids[i]] = true
			dels = append(dels, keys.MessageKey(p.pid, off), keys.TxIDKey(p.pid, txids[i]))
		}
		ops := make([]command, 0, len(dels)/deleteRun+3)
		ops = append(ops, dropTraces{pid: p.pid, txids: gone})
		ops = appendDeletes(ops, dels)
		p.trimHoles(last + 1) // deleted ones passed over
		p.first = last + 1
		p.q.count -= int64(len(offs))
		b.repend(p)
		ops = append(ops, setKey{keys.PartitionKey(p.pid), b.partitionRecord(p)})
		done := b.w.submit(ops)
		b.mu.Unlock()
		if err := waitCtx(ctx, done); err != nil {
			return err
		}
		b.qcounters.countRetained(p.q.name, kind, len(offs))
		if len(offs) < maintainChunk {
			return nil
		}
	}
}

// evict dead-letters, for every group of p's queue, the messages it has
// not settled that were created before cutoff. Leased batches are left to
// their lease.
func (b *Broker) evict(ctx context.Context, p *partition, cutoff int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.deleted {
		return nil
	}
	now := b.now()
	var ops []command
	evicted := 0
	for _, g := range p.q.slots {
		if g == nil {
			continue
		}
		c := startCursor(g, p)
		if c.fl != nil || c.arriving {
			continue // leased batches wait for their lease; see arrivalCursors
		}
		if c.offset < p.first {
			c.offset = p.first
		}
		var specs []letterSpec
		end := c.offset
		err := b.readRange(p.pid, c.offset, p.next, maintainChunk, func(off int64, m *record.Message) bool {
			if m.CreatedAt >= cutoff {
				return false
			}
			specs = append(specs, letterSpec{kind: keys.DeadLetter, off: off, txid: m.TxID, errText: "max wait time exceeded"})
			end = off + 1
			return true
		})
		if err != nil {
			return err
		}
		if len(specs) == 0 {
			continue
		}
		if p.cursorOf(g) == nil {
			c = b.install(g, p, c.offset)
		}
		lops, err := b.letterOps(c, specs, now)
		if err != nil {
			return err
		}
		ops = append(ops, lops...)
		evicted += len(specs)
		c.offset = end
		b.repend(p)
		g := c.g
		g.removeReady(c)
		ops = append(ops, c.save())
		b.check(c, now)
	}
	if len(ops) == 0 {
		return nil
	}
	done := b.w.submit(ops)
	b.mu.Unlock()
	err := waitCtx(ctx, done)
	if err == nil {
		b.qcounters.countRetained(p.q.name, retainUnread, evicted)
	}
	b.mu.Lock()
	return err
}
