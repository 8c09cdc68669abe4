package queen

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/queenlite/queen/internal/uuid"
)

// MessageStatus is the state of a stored message, derived from the
// cursors, leases, dead letters and parked messages of its partition.
type MessageStatus string

// Message statuses.
const (
	// MessagePending: not yet settled and not under a live lease.
	MessagePending MessageStatus = "pending"
	// MessageProcessing: delivered under a live lease, not yet settled.
	MessageProcessing MessageStatus = "processing"
	// MessageCompleted: the queue-mode group (or, without one, every
	// consumer group) has moved past it.
	MessageCompleted MessageStatus = "completed"
	// MessageDeadLetter: a group dead-lettered it.
	MessageDeadLetter MessageStatus = "dead_letter"
	// MessageParked: a group parked it.
	MessageParked MessageStatus = "parked"
)

// MessageFilter selects messages for [Broker.ListMessages]. Zero fields
// match everything.
type MessageFilter struct {
	Queue, Partition string
	// Namespace and Task match the labels of the message's queue.
	Namespace, Task string
	// Status keeps only messages in that state.
	Status MessageStatus
	// From and To bound CreatedAt, inclusive.
	From, To time.Time
	// Limit is the page size: default 200, at most 1000.
	Limit int
	// Offset skips that many matching messages, newest first.
	Offset int
}

// MessageGroupState is where one consumer group stands with a message.
type MessageGroupState struct {
	Group string
	// Consumed reports that the group's cursor has moved past the message.
	Consumed bool
	// LeaseExpiresAt is set while the message is leased to the group.
	LeaseExpiresAt time.Time
}

// MessageInfo describes a stored message.
type MessageInfo struct {
	ID            string
	TransactionID string
	Queue         string
	Partition     string
	PartitionID   string
	// Namespace, Task and Priority come from the queue's configuration.
	Namespace, Task string
	Priority        int
	Offset          int64
	Status          MessageStatus
	TraceID         string
	ProducerSub     string
	CreatedAt       time.Time
	// LeaseExpiresAt is the earliest expiry of the live leases holding the
	// message; zero when none does.
	LeaseExpiresAt time.Time
	// Groups is the state of every consumer group of the queue.
	Groups []MessageGroupState

	// The fields below are filled by [Broker.GetMessage] only.

	// Payload is the message's JSON value, decrypted; nil if it is
	// encrypted and the broker has no key.
	Payload json.RawMessage
	// Encrypted reports that the payload is stored encrypted.
	Encrypted bool
	// Error and RetryCount come from the message's dead letter (or parked
	// entry), when it has one.
	Error      string
	RetryCount int
}

// MessagePage is a page of [Broker.ListMessages], newest first.
type MessagePage struct {
	Messages []MessageInfo
	// QueueMode reports that a matched queue has a queue-mode group, and
	// BusGroups counts the distinct named groups of the matched queues.
	QueueMode bool
	BusGroups int
}

// groupSnap is a consumer group's position in one partition, copied from
// memory so storage is read without holding b.mu.
type groupSnap struct {
	name    string
	queue   bool // the queue-mode group
	offset  int64
	end     int64 // one past the leased batch; offset when nothing is leased
	expires int64 // lease expiry, µs
}

// partSnap is a partition and the positions of its groups.
type partSnap struct {
	pid             uint64
	id              string
	name            string
	queue           string
	namespace, task string
	priority        int
	encrypted       bool
	first, next     int64
	groups          []groupSnap
}

// snapPartition copies p's state, under b.mu.
func (b *Broker) snapPartition(p *partition, now int64) partSnap {
	q := p.q
	ps := partSnap{pid: p.pid, id: p.uuid(), name: p.name, queue: q.name, namespace: q.cfg.Namespace, task: q.cfg.Task,
		priority: q.cfg.Priority, encrypted: q.cfg.EncryptionEnabled, first: p.first, next: p.next}
	for _, g := range q.slots {
		if g == nil {
			continue
		}
		gs := groupSnap{name: g.name, queue: g.name == QueueModeGroup, offset: g.startIn(p)} // without a cursor (see startIn)
		if c := p.cursorOf(g); c != nil {
			gs.offset = max(c.offset, p.first)
			if c.fl != nil && c.fl.lease != nil && c.fl.lease.expires > now {
				gs.end, gs.expires = c.fl.end, c.fl.lease.expires
			}
		}
		gs.end = max(gs.end, gs.offset)
		ps.groups = append(ps.groups, gs)
	}
	sort.Slice(ps.groups, func(i, j int) bool { return ps.groups[i].name < ps.groups[j].name })
	return ps
}

// letterKey names a message by partition and offset.
type letterKey struct {
	pid uint64
	off int64
}

// letterHit is what the dead-letter and parked stores hold for a message:
// the kind of the first entry found (dead letters are scanned first) and
// the keys of all of them.
type letterHit struct {
	kind    byte
	errText string
	retries int
	keys    [][]byte
}

// lettersOf scans the dead letters and parked messages of the partitions
// in pids (all when pids is nil).
func (b *Broker) lettersOf(pids map[uint64]bool) (map[letterKey]*letterHit, error) {
	out := make(map[letterKey]*letterHit)
	err := b.db.View(func(txn *badger.Txn) error {
		for _, kind := range []byte{keys.DeadLetter, keys.Parked} {
			err := scan(txn, []byte{kind}, func(k, v []byte) error {
				var lr letterRecord
				if err := decodeLetter(v, &lr); err != nil {
					return err
				}
				if pids != nil && !pids[lr.PID] {
					return nil
				}
				lk := letterKey{lr.PID, lr.Offset}
				h := out[lk]
				if h == nil {
					h = &letterHit{kind: kind, errText: lr.Error, retries: lr.RetryCount}
					out[lk] = h
				}
				h.keys = append(h.keys, append([]byte(nil), k...))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, storageErr("read dead letters", err)
	}
	return out, nil
}

// status derives a message's status and group states.
func (ps *partSnap) status(off int64, hit *letterHit) (MessageStatus, []MessageGroupState, time.Time) {
	states := make([]MessageGroupState, len(ps.groups))
	var leaseAt int64
	var qm *groupSnap
	allConsumed, anyLeased, named := true, false, 0
	for i := range ps.groups {
		g := &ps.groups[i]
		st := MessageGroupState{Group: g.name, Consumed: off < g.offset}
		leased := !st.Consumed && g.expires != 0 && off < g.end
		if leased {
			st.LeaseExpiresAt = time.UnixMicro(g.expires).UTC()
			if leaseAt == 0 || g.expires < leaseAt {
				leaseAt = g.expires
			}
		}
		states[i] = st
		if g.queue {
			qm = g
			continue
		}
		named++
		allConsumed = allConsumed && st.Consumed
		anyLeased = anyLeased || leased
	}
	var lease time.Time
	if leaseAt != 0 {
		lease = time.UnixMicro(leaseAt).UTC()
	}
	switch {
	case hit != nil && hit.kind == keys.DeadLetter:
		return MessageDeadLetter, states, lease
	case hit != nil:
		return MessageParked, states, lease
	case qm != nil:
		switch {
		case off < qm.offset:
			return MessageCompleted, states, lease
		case qm.expires != 0 && off < qm.end:
			return MessageProcessing, states, lease
		}
		return MessagePending, states, lease
	case named == 0:
		return MessagePending, states, lease
	case allConsumed:
		return MessageCompleted, states, lease
	case anyLeased:
		return MessageProcessing, states, lease
	}
	return MessagePending, states, lease
}

func (ps *partSnap) info(off int64, m *record.Message) MessageInfo {
	return MessageInfo{
		ID: uuid.UUID(m.ID).String(), TransactionID: m.TxID, Queue: ps.queue, Partition: ps.name, PartitionID: ps.id,
		Namespace: ps.namespace, Task: ps.task, Priority: ps.priority, Offset: off, TraceID: m.TraceID,
		ProducerSub: m.ProducerSub, CreatedAt: time.UnixMicro(m.CreatedAt).UTC(),
	}
}

// ListMessages lists stored messages matching f, newest first, without
// their payloads. Each message's status is derived from the cursors and
// leases of its queue's groups: see [MessageStatus].
func (b *Broker) ListMessages(ctx context.Context, f MessageFilter) (*MessagePage, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if f.Limit < 0 || f.Offset < 0 {
		return nil, argErr("MessageFilter", "Limit and Offset must not be negative")
	}
	switch f.Status {
	case "", MessagePending, MessageProcessing, MessageCompleted, MessageDeadLetter, MessageParked:
	default:
		return nil, argErr("MessageFilter.Status", "unknown status %q", f.Status)
	}
	if f.Limit == 0 {
		f.Limit = 200
	}
	f.Limit = min(f.Limit, 1000)
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	now := b.now()
	page := &MessagePage{Messages: []MessageInfo{}}
	named := make(map[string]bool)
	var parts []partSnap
	pids := make(map[uint64]bool)
	for _, q := range b.queues {
		if (f.Queue != "" && q.name != f.Queue) || (f.Namespace != "" && q.cfg.Namespace != f.Namespace) || (f.Task != "" && q.cfg.Task != f.Task) {
			continue
		}
		for name := range q.groups {
			if name == QueueModeGroup {
				page.QueueMode = true
			} else {
				named[name] = true
			}
		}
		for _, p := range q.parts {
			if f.Partition != "" && p.name != f.Partition {
				continue
			}
			if p.next > p.first {
				parts = append(parts, b.snapPartition(p, now))
				pids[p.pid] = true
			}
		}
	}
	b.mu.Unlock()
	page.BusGroups = len(named)
	if len(parts) == 0 {
		return page, nil
	}
	letters, err := b.lettersOf(pids)
	if err != nil {
		return nil, err
	}
	from, to := int64(0), int64(1<<62)
	if !f.From.IsZero() {
		from = f.From.UnixMicro()
	}
	if !f.To.IsZero() {
		to = f.To.UnixMicro()
	}
	need := f.Offset + f.Limit
	var all []MessageInfo
	err = b.db.View(func(txn *badger.Txn) error {
		var m record.Message
		for i := range parts {
			if err := ctx.Err(); err != nil {
				return err
			}
			ps := &parts[i]
			// No PrefetchValues: going backwards, Badger starts a read ahead
			// for each older version of a key it passes (past the prefix: a
			// deleted letter, a rewritten cursor) and drops it, so Close does
			// not wait for it; one still pending when the broker closes
			// waits for the closed value log forever.
			it := txn.NewIterator(badger.IteratorOptions{Prefix: keys.MessagePrefix(ps.pid), Reverse: true, PrefetchSize: min(need, 100)})
			n := 0
			for it.Seek(keys.MessageKey(ps.pid, ps.next)); it.Valid() && n < need; it.Next() {
				_, off, ok := keys.DecodeMessageKey(it.Item().Key())
				if !ok || off < ps.first {
					break
				}
				if off >= ps.next {
					continue
				}
				if err := it.Item().Value(func(v []byte) error { return record.DecodeMessage(v, &m) }); err != nil {
					it.Close()
					return err
				}
				if m.CreatedAt > to {
					continue
				}
				if m.CreatedAt < from {
					break
				}
				st, groups, lease := ps.status(off, letters[letterKey{ps.pid, off}])
				if f.Status != "" && st != f.Status {
					continue
				}
				mi := ps.info(off, &m)
				mi.Status, mi.Groups, mi.LeaseExpiresAt = st, groups, lease
				all = append(all, mi)
				n++
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, storageErr("list messages", err)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.After(all[j].CreatedAt)
		}
		return all[i].ID > all[j].ID
	})
	if f.Offset < len(all) {
		page.Messages = all[f.Offset:min(len(all), need)]
	}
	return page, nil
}

// locate resolves a message by partition id and transactionId to its
// partition's snapshot and offset, or [ErrNotFound].
func (b *Broker) locate(partitionID, txid string) (*partition, partSnap, int64, error) {
	if err := b.lockUsable(); err != nil {
		return nil, partSnap{}, 0, err
	}
	p := b.partitionByID(partitionID)
	b.mu.Unlock()
	if p == nil || txid == "" {
		return nil, partSnap{}, 0, ErrNotFound
	}
	off, found, err := b.offsetOf(p, txid)
	if err != nil {
		return nil, partSnap{}, 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !found || p.deleted || off < p.first {
		return nil, partSnap{}, 0, ErrNotFound
	}
	return p, b.snapPartition(p, b.now()), off, nil
}

// readMessage reads the stored message at (pid, off).
func (b *Broker) readMessage(pid uint64, off int64) (*record.Message, error) {
	var m record.Message
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keys.MessageKey(pid, off))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return record.DecodeMessage(v, &m) })
	})
	if err != nil {
		return nil, storageErr("read message", err)
	}
	return &m, nil
}

// GetMessage describes one message with its payload, found by its
// partition id and transactionId. An unknown message is [ErrNotFound].
func (b *Broker) GetMessage(ctx context.Context, partitionID, transactionID string) (*MessageInfo, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	_, ps, off, err := b.locate(partitionID, transactionID)
	if err != nil {
		return nil, err
	}
	m, err := b.readMessage(ps.pid, off)
	if err != nil {
		return nil, err
	}
	letters, err := b.lettersOf(map[uint64]bool{ps.pid: true})
	if err != nil {
		return nil, err
	}
	hit := letters[letterKey{ps.pid, off}]
	mi := ps.info(off, m)
	mi.Status, mi.Groups, mi.LeaseExpiresAt = ps.status(off, hit)
	mi.Encrypted = m.Flags&record.FlagEncrypted != 0
	if payload, err := b.openPayload(m); err == nil {
		mi.Payload = payload
	}
	if hit != nil {
		mi.Error, mi.RetryCount = hit.errText, hit.retries
	}
	return &mi, nil
}

// DeleteMessage deletes one message with its dead letters, parked entries
// and traces. A group that had it leased can still ack it; otherwise it is
// never delivered again: cursors step over its offset, which stays
// assigned (offsets are never reused) but holds nothing, and it no longer
// counts in lag or pending. An unknown message is [ErrNotFound].
func (b *Broker) DeleteMessage(ctx context.Context, partitionID, transactionID string) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	b.delMu.Lock()
	defer b.delMu.Unlock()
	p, ps, off, err := b.locate(partitionID, transactionID)
	if err != nil {
		return err
	}
	letters, err := b.lettersOf(map[uint64]bool{ps.pid: true})
	if err != nil {
		return err
	}
	ops := []command{deleteKey{keys.MessageKey(ps.pid, off)}, deleteKey{keys.TxIDKey(ps.pid, transactionID)},
		dropTraces{pid: ps.pid, txids: map[string]bool{transactionID: true}}}
	nDead, nParked := 0, 0
	exists := false
	err = b.db.View(func(txn *badger.Txn) error {
		if _, err := txn.Get(keys.MessageKey(ps.pid, off)); err == nil {
			exists = true
		} else if err != badger.ErrKeyNotFound {
			return err
		}
		return nil
	})
	if err != nil {
		return storageErr("delete message", err)
	}
	if !exists {
		return ErrNotFound
	}
	// Every entry of either store that refers to this message goes.
	if hit := letters[letterKey{ps.pid, off}]; hit != nil {
		for _, k := range hit.keys {
			ops = append(ops, deleteKey{k})
			if k[0] == keys.DeadLetter {
				nDead++
			} else {
				nParked++
			}
		}
	}
	if err := b.lockUsable(); err != nil {
		return err
	}
	if p.deleted || off < p.first || !p.addHole(off) { // gone meanwhile
		b.mu.Unlock()
		return ErrNotFound
	}
	p.q.count--
	b.repend(p)
	ops = append(ops, setKey{keys.PartitionKey(p.pid), b.partitionRecord(p)})
	p.q.dlqCount -= int64(nDead)
	p.q.parkedCount -= int64(nParked)
	done := b.w.submit(ops)
	b.mu.Unlock()
	return waitCtx(ctx, done)
}
