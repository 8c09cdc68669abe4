package queen

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/queenlite/queen/internal/uuid"
)

// load rebuilds the in-memory state from Badger when the broker opens:
// queues, partitions (with their last offset), groups, the cursors that
// are stored and the ready lists. A group has no cursor where none is
// stored: it reads such partitions from their first message, and finds
// them as it pops (see group.scan). Leases are not stored: none survive a restart.
func (b *Broker) load() error {
	if err := b.loadState(); err != nil {
		return err
	}
	now := b.now()
	for _, q := range b.queues {
		for _, p := range q.order {
			b.repend(p)
			for _, c := range p.cursorList() {
				if c != nil {
					b.check(c, now)
				}
			}
		}
	}
	return nil
}

// loadState reads the stored state into memory, reading only: the part of
// load that [Inspect] shares.
func (b *Broker) loadState() error {
	err := b.db.View(func(txn *badger.Txn) error {
		dead, sweeps, err := b.loadTombstones(txn)
		if err != nil {
			return err
		}
		b.sweeps = sweeps
		if err := b.loadQueues(txn); err != nil {
			return err
		}
		if err := b.loadPartitions(txn, dead); err != nil {
			return err
		}
		if err := b.loadGroups(txn); err != nil {
			return err
		}
		if err := b.loadCursors(txn); err != nil {
			return err
		}
		if err := b.loadLetterCounts(txn); err != nil {
			return err
		}
		return b.loadSettings(txn)
	})
	return storageErr("load", err)
}

func scan(txn *badger.Txn, prefix []byte, fn func(k, v []byte) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchSize: 100}) // no PrefetchValues: a goroutine per item
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if err := item.Value(func(v []byte) error { return fn(item.Key(), v) }); err != nil {
			return err
		}
	}
	return nil
}

func (b *Broker) loadQueues(txn *badger.Txn) error {
	return scan(txn, []byte{keys.Queue}, func(k, v []byte) error {
		var m queueMeta
		if err := json.Unmarshal(v, &m); err != nil {
			return err
		}
		name := string(k[1:])
		q := &queue{name: name, createdAt: m.CreatedAt, cfg: m.Config.config(), parts: make(map[string]*partition), groups: make(map[string]*group), persisted: true}
		q.id, _ = uuid.Parse(m.ID)
		b.queues[name] = q
		return nil
	})
}

func (b *Broker) loadPartitions(txn *badger.Txn, dead map[uint64]bool) error {
	// b.parts is indexed by pid: made once at the size the largest stored
	// pid needs, not grown a partition at a time (a copy of the whole
	// slice at each doubling).
	if top, ok := lastPID(txn); ok && top < math.MaxInt32 {
		b.parts = slices.Grow(b.parts, int(top)+1-len(b.parts))
	}
	for pid := range dead {
		b.reservePID(pid)
	}
	perQueue := make(map[*queue]int, len(b.queues))
	var last *queue     // the previous record's queue: partitions of a queue run together
	var m partitionMeta // one for every record: declared inside, each would be a heap allocation
	err := scan(txn, []byte{keys.Partition}, func(k, v []byte) error {
		if len(k) != 9 {
			return nil
		}
		m = partitionMeta{}
		qname, err := record.DecodePartitionRef(v, &m) // the name is looked up, not kept
		if err != nil {
			return err
		}
		pid := binary.BigEndian.Uint64(k[1:])
		b.reservePID(pid)
		if dead[pid] {
			return nil // its queue is being deleted
		}
		q := last
		if q == nil || q.name != string(qname) {
			q = b.queues[string(qname)]
			last = q
		}
		if q == nil { // its queue is gone without a tombstone
			b.sweeps = append(b.sweeps, b.orphanSweep(k))
			return nil
		}
		p := &partition{q: q, pid: pid, name: m.Name, created: uint32(m.CreatedAt / 1e6), first: m.First, next: max(m.First, m.Next), lastPushAt: m.LastPush, persisted: true}
		if err := b.loadHoles(txn, p, &m); err != nil {
			return err
		}
		b.parts[pid] = p
		perQueue[q]++
		return nil
	})
	if err != nil {
		return err
	}
	// A queue's slices and map are made once its count is known: grown a
	// partition at a time, the slices are copied at each doubling and end
	// with up to a quarter of their length unused (8 MiB each with 1M
	// partitions), and the map is rehashed again and again (a quarter of
	// Open with 1M partitions).
	b.parts = fit(b.parts)
	for q, n := range perQueue {
		q.order, q.pend = make([]*partition, 0, n), make([]int64, 0, n)
		q.parts = make(map[string]*partition, n)
	}
	for _, p := range b.parts {
		if p != nil {
			p.q.addPart(p) // in pid order, as created
			p.q.parts[p.name] = p
		}
	}
	b.loadNext(txn)
	for _, p := range b.parts {
		if p == nil {
			continue
		}
		p.q.count += p.stored()
	}
	return nil
}

// lastPID returns the largest pid of a stored partition record.
func lastPID(txn *badger.Txn) (uint64, bool) {
	it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte{keys.Partition}})
	defer it.Close()
	for it.Seek(keys.PartitionKey(math.MaxUint64)); it.Valid(); it.Next() {
		if k := it.Item().Key(); len(k) == 9 {
			return binary.BigEndian.Uint64(k[1:]), true
		}
	}
	return 0, false
}

// fit returns s, or a copy of it without its unused capacity when that is
// more than 1/32 of its length.
func fit[T any](s []T) []T {
	if cap(s)-len(s) <= len(s)/32 {
		return s
	}
	return append(make([]T, 0, len(s)), s...)
}

// walkRun is how many messages of one partition loadNext steps through
// before it seeks to the partition's end instead.
const walkRun = 32

// loadNext sets every loaded partition's next offset from its newest
// stored message, in one pass over the message keys in key order: a
// partition of a few messages is stepped through (cheap: its keys share a
// block with its neighbours'), a longer one is left by a seek to its last
// key. A seek per partition costs far more when partitions are many and
// short. It reads no message record, except in queues with a WindowBuffer
// (their last push time, the stored metadata's if later: that message may
// be deleted); elsewhere that time is read when asked for (see lastPush).
func (b *Broker) loadNext(txn *badger.Txn) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{keys.Message}})
	defer it.Close()
	var rev *badger.Iterator // for long partitions
	defer func() {
		if rev != nil {
			rev.Close()
		}
	}()
	seen := func(p *partition, off int64, item *badger.Item) { // in offset order
		p.next = max(p.next, off+1)
		p.q.sizeSum += item.EstimatedSize() + dedupEntrySize
		p.q.sizeN++
		if p.q.cfg.WindowBuffer == 0 {
			p.pushUnread = true // read when asked for (see lastPush)
			return
		}
		readPushAt(p, item)
	}
	it.Rewind()
	for it.Valid() {
		pid, _, ok := keys.DecodeMessageKey(it.Item().Key())
		if !ok {
			it.Next()
			continue
		}
		var p *partition
		if pid < uint64(len(b.parts)) {
			p = b.parts[pid]
		}
		n := 0
		for ; it.Valid(); it.Next() {
			at, off, ok := keys.DecodeMessageKey(it.Item().Key())
			if !ok || at != pid {
				break
			}
			if p == nil { // a deleted queue's, being swept
				it.Seek(keys.MessageKey(pid+1, 0))
				break
			}
			if n++; n > walkRun {
				if rev == nil {
					rev = txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte{keys.Message}})
				}
				if rev.Seek(keys.MessageKey(pid, math.MaxInt64)); rev.Valid() {
					if at, off, ok := keys.DecodeMessageKey(rev.Item().Key()); ok && at == pid {
						seen(p, off, rev.Item())
					}
				}
				it.Seek(keys.MessageKey(pid+1, 0))
				break
			}
			seen(p, off, it.Item())
		}
	}
}

// readPushAt raises p's last push time to that of the message in item.
// Its record may sit in the value log: a read of the file.
func readPushAt(p *partition, item *badger.Item) {
	_ = item.Value(func(v []byte) error {
		if at, ok := record.MessageCreatedAt(v); ok {
			p.lastPushAt = max(p.lastPushAt, at)
		}
		return nil
	})
}

// lastPush returns p's last push time, under b.mu. Open reads the time of
// a partition's newest message only for queues with a WindowBuffer (the
// others' records stay unread, most of them in Badger's value log, which
// Open would otherwise read whole): for the rest it is read here, when
// first asked for.
func (b *Broker) lastPush(p *partition) int64 {
	if p.pushUnread {
		b.readLastPushes([]*partition{p})
	}
	return p.lastPushAt
}

// readLastPushes reads the last push time of the partitions of ps that
// have one unread, in one storage transaction, under b.mu. A failed read
// leaves a partition with its stored record's time.
func (b *Broker) readLastPushes(ps []*partition) {
	var it *badger.Iterator
	_ = b.db.View(func(txn *badger.Txn) error {
		for _, p := range ps {
			if !p.pushUnread {
				continue
			}
			p.pushUnread = false
			if it == nil {
				it = txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte{keys.Message}})
				defer it.Close()
			}
			if it.Seek(keys.MessageKey(p.pid, math.MaxInt64)); it.Valid() {
				if at, _, ok := keys.DecodeMessageKey(it.Item().Key()); ok && at == p.pid {
					readPushAt(p, it.Item())
				}
			}
		}
		return nil
	})
}

// partitionRecord is p's stored record, with its last push time read
// first (a record written with an unread one would keep the older time
// once the message that has it is deleted).
func (b *Broker) partitionRecord(p *partition) []byte {
	b.lastPush(p)
	return p.meta()
}

func (b *Broker) loadGroups(txn *badger.Txn) error {
	return scan(txn, []byte{keys.Group}, func(k, v []byte) error {
		var m groupMeta
		if err := json.Unmarshal(v, &m); err != nil {
			return err
		}
		rest := k[1:]
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return nil
		}
		q := b.queues[string(rest[:i])]
		if q == nil {
			return nil
		}
		g := &group{q: q, name: string(rest[i+1:]), mode: m.Mode, from: m.From, joinedAt: m.JoinedAt, conflation: m.Conflation, mark: m.Mark}
		g.slot = len(q.slots)
		q.slots = append(q.slots, g)
		q.groups[g.name] = g // its cursors are those stored (see cursorOf)
		return nil
	})
}

func (b *Broker) loadCursors(txn *badger.Txn) error {
	return scan(txn, []byte{keys.Cursor}, func(k, v []byte) error {
		pid, name, ok := keys.DecodeCursorKey(k)
		if !ok || pid >= uint64(len(b.parts)) || b.parts[pid] == nil {
			return nil
		}
		p := b.parts[pid]
		g := p.q.groups[name]
		if g == nil {
			return nil
		}
		rc, err := record.DecodeCursor(v)
		if err != nil {
			return err
		}
		c := p.cursorOf(g)
		if c == nil {
			c = b.install(g, p, rc.Offset)
		}
		c.offset, c.retries, c.consumed, c.lastAckAt, c.stored = rc.Offset, rc.Retries, rc.Consumed, rc.LastAckAt, true
		return nil
	})
}

func (b *Broker) loadLetterCounts(txn *badger.Txn) error {
	for _, kind := range []byte{keys.DeadLetter, keys.Parked} {
		err := scan(txn, []byte{kind}, func(k, v []byte) error {
			var lr letterRecord
			if err := decodeLetter(v, &lr); err != nil {
				return err
			}
			if lr.PID >= uint64(len(b.parts)) || b.parts[lr.PID] == nil {
				return nil // of a deleted queue, being swept
			}
			if q := b.queues[lr.Queue]; q != nil {
				if kind == keys.DeadLetter {
					q.dlqCount++
				} else {
					q.parkedCount++
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
