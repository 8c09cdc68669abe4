package queen

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/queenlite/queen/internal/uuid"
)

// partition is an ordered lane of a queue. Guarded by Broker.mu; only the
// publisher moves next, to the end of a write the writer committed (the
// writer hands out offsets past next on its own, see writer.tail). Idle partitions are expected by the million, so
// its size counts: it fits 80 bytes, its stored messages are counted from
// its offsets and holes (see stored).
// Whatever moves next, first, a cursor's offset or the queue's groups calls
// repend, which keeps the queue's pending count.
type partition struct {
	q          *queue
	pid        uint64
	name       string
	first      int64      // lowest retained offset
	next       int64      // one past the newest published offset (see writer.publisher)
	lastPushAt int64      // µs
	cursors    *[]*cursor // by group slot; nil until a group has one here (see cursorOf)
	created    uint32     // unix seconds
	idx        uint32     // in q.order and q.pend
	persisted  bool
	deleted    bool
	// pushUnread marks a lastPushAt that is the stored record's: the
	// newest message, stored before Open, has not been read (see
	// Broker.lastPush).
	pushUnread bool
}

// stored counts p's retained messages.
func (p *partition) stored() int64 { return p.storedFrom(p.first) }

// createdAt is the partition's creation time, µs, to the second.
func (p *partition) createdAt() int64 { return int64(p.created) * 1e6 }

// partitionMeta is the stored form of a partition: binary since 0.2.0
// (JSON before, which still loads).
type partitionMeta = record.Partition

func (p *partition) meta() []byte {
	return record.AppendPartition(nil, &partitionMeta{Queue: p.q.name, Name: p.name, CreatedAt: p.createdAt(), First: p.first, Next: p.next, Holes: p.holes(), HoleRuns: p.holeRunsMeta(), LastPush: p.lastPushAt})
}

// id is the public partition id: a version-8 UUID holding the internal id
// in its low 62 bits, so lookups need no index, and in its high half a hash
// of the queue's random id and the internal id, so an id of a deleted
// queue's partition never names a new one.
func (p *partition) id() uuid.UUID {
	var u uuid.UUID
	h := fnv.New64a()
	h.Write(p.q.id[:])
	binary.BigEndian.PutUint64(u[8:], p.pid)
	h.Write(u[8:])
	binary.BigEndian.PutUint64(u[:8], h.Sum64())
	u[6] = u[6]&0x0f | 0x80
	binary.BigEndian.PutUint64(u[8:], p.pid)
	u[8] = u[8]&0x3f | 0x80
	return u
}

func (p *partition) uuid() string { return p.id().String() }

// partitionByID resolves a public partition id, under b.mu.
func (b *Broker) partitionByID(s string) *partition {
	u, ok := uuid.Parse(s)
	if !ok || u[6]>>4 != 8 || u[8]>>6 != 2 {
		return nil
	}
	pid := binary.BigEndian.Uint64(u[8:]) & (1<<62 - 1)
	if pid >= uint64(len(b.parts)) {
		return nil
	}
	p := b.parts[pid]
	if p == nil || p.id() != u {
		return nil
	}
	return p
}

// partitionFor returns the named partition of q, creating it in memory.
func (b *Broker) partitionFor(q *queue, name string) (*partition, bool) {
	if p := q.parts[name]; p != nil {
		return p, false
	}
	p := &partition{q: q, pid: uint64(len(b.parts)), name: name, created: uint32(b.clock.Now().Unix())}
	b.parts = append(b.parts, p)
	q.parts[name] = p
	q.addPart(p)
	for _, g := range q.slots { // pops waiting on it look again, and join it
		if g != nil {
			if wl := g.partWaiters[name]; wl != nil {
				wl.wakeAll()
			}
		}
	}
	return p, true
}

// PushItem is one message to push.
type PushItem struct {
	// Queue is required. A push to an unknown queue creates it, with a 60 s
	// lease and labels from Namespace/Task or from the queue's dotted name.
	Queue string
	// Partition defaults to [DefaultPartition]; unknown partitions are created.
	Partition string
	// TransactionID is the idempotency key, unique per partition: a second
	// push with the same one is reported [PushDuplicate]. Defaults to a
	// generated UUIDv7.
	TransactionID string
	// Payload is any JSON value, stored byte for byte. Empty means null.
	// A broker opened with [Open] stores payloads of up to [MaxPayload]
	// bytes on disk and, in memory, a limit that depends on
	// Options.MemoryBudget (see [Broker.PayloadLimit]); a longer one is
	// refused with [ErrTooLarge] before anything is written.
	Payload json.RawMessage
	// TraceID is an optional caller-chosen trace id.
	TraceID string
	// Namespace and Task label the queue if this push creates it.
	Namespace, Task string
	// ProducerSub records who pushed (the HTTP API sets it from a token).
	ProducerSub string

	generatedID bool // TransactionID was generated here: no dedup lookup needed
}

// PushStatus is the fate of one pushed item.
type PushStatus string

// Push statuses.
const (
	PushQueued    PushStatus = "queued"
	PushDuplicate PushStatus = "duplicate"
	PushFailed    PushStatus = "failed"
)

// PushResult reports one pushed item, in the order of the request.
type PushResult struct {
	Status        PushStatus
	Queue         string
	Partition     string
	PartitionID   string
	MessageID     string // the new message, or the one holding TransactionID for a duplicate
	TransactionID string
	TraceID       string
	Offset        int64 // the message's offset in its partition
	Err           error // why the item failed, for PushFailed (e.g. ErrQueueFull)
}

func (it *PushItem) normalize(i int) error {
	// Field names are built only for an error: this runs for every item.
	field := func(f string) string { return "PushItem[" + strconv.Itoa(i) + "]." + f }
	if err := checkName("", it.Queue); err != nil {
		return checkName(field("Queue"), it.Queue)
	}
	if it.Partition == "" {
		it.Partition = DefaultPartition
	}
	if err := checkName("", it.Partition); err != nil {
		return checkName(field("Partition"), it.Partition)
	}
	if err := checkLabel("", it.TransactionID); err != nil {
		return checkLabel(field("TransactionID"), it.TransactionID)
	}
	if it.TransactionID == "" {
		it.TransactionID = uuid.NewV7().String()
		it.generatedID = true
	}
	for _, f := range [...]struct{ name, v string }{{"TraceID", it.TraceID}, {"Namespace", it.Namespace}, {"Task", it.Task}, {"ProducerSub", it.ProducerSub}} {
		if err := checkLabel("", f.v); err != nil {
			return checkLabel(field(f.name), f.v)
		}
	}
	if len(it.Payload) == 0 {
		it.Payload = json.RawMessage("null")
	} else if !json.Valid(it.Payload) {
		return argErr(field("Payload"), "not valid JSON")
	}
	return nil
}

// payloadLimit is the largest payload db stores.
func payloadLimit(db *badger.DB) int {
	o := db.Opts()
	limit := o.ValueLogFileSize
	if o.InMemory {
		// No value log: a value is in the memtable, within one batch; and
		// at most 1 MiB, Badger's largest value threshold, so that the
		// limit does not grow past MaxInMemoryPayload with the budget.
		limit = min(limit, 1<<20, db.MaxBatchSize())
	}
	return int(max(limit-payloadRoom, 0))
}

// PayloadLimit returns the largest payload, in bytes, this broker stores
// (see [PushItem]): [MaxPayload] on disk; in memory, [MaxInMemoryPayload]
// with an Options.MemoryBudget of 64 MiB or more, less with a smaller one
// (91,750 bytes at [DefaultInMemoryBudget]).
func (b *Broker) PayloadLimit() int { return b.maxPayload }

// checkPushItem validates and normalizes item i of a push or transaction:
// names, JSON payload, and payload size ([ErrTooLarge]).
func (b *Broker) checkPushItem(i int, it *PushItem) error {
	return checkItem(i, it, b.maxPayload, b.payloadIn)
}

// Push appends messages to their partitions. A call of more than
// [MaxPushItems] items is refused with [ErrTooLarge]. Items are validated
// first: one bad item refuses the whole call, with an [*ArgumentError] or,
// for a payload over the limit (see [PushItem]), [ErrTooLarge], and nothing
// is written. Otherwise each item gets a result: queued (with its offset),
// duplicate, or failed ([ErrQueueFull]; or, for a queue with
// EncryptionEnabled on a broker opened without Options.EncryptionKey, an
// [*ArgumentError]). Offsets are assigned in commit order.
// Push returns after the write is durable as Options.Durability says; if
// ctx ends first, Push returns ctx.Err() and the write may still land
// (push again with the same TransactionID to find out).
func (b *Broker) Push(ctx context.Context, items []PushItem) ([]PushResult, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if len(items) > MaxPushItems {
		return nil, fmt.Errorf("%w: a push takes at most %d items (queen.MaxPushItems), not %d", ErrTooLarge, MaxPushItems, len(items))
	}
	start := time.Now()
	items = append([]PushItem(nil), items...)
	for i := range items {
		if err := b.checkPushItem(i, &items[i]); err != nil {
			return nil, err
		}
	}
	results := make([]PushResult, len(items))
	var reqs []*pushReq
	// A huge request is split across storage transactions, so that it
	// does not fail (see storeLimits).
	for lo := 0; lo < len(items); {
		hi, size := lo, 0
		for hi < len(items) && (hi == lo || size+len(items[hi].Payload) < b.lim.txnBytes && hi-lo < b.lim.txnOps/2) {
			size += len(items[hi].Payload) + len(items[hi].TransactionID) + 64
			hi++
		}
		reqs = append(reqs, &pushReq{items: items[lo:hi], results: results[lo:hi], done: make(chan error, 1)})
		lo = hi
	}
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	var dups []bool
	for i := range items {
		if b.roomChecked(&items[i]) == nil {
			continue
		}
		// Items to queues with a MaxSize need room unless they are
		// duplicates; those stored already are found outside the lock.
		b.mu.Unlock()
		var err error
		if dups, err = b.existingTxIDs(items); err != nil {
			return nil, err
		}
		if err := b.lockUsable(); err != nil {
			return nil, err
		}
		break
	}
	lo := 0
	for _, r := range reqs {
		if dups != nil {
			b.preparePush(r, dups[lo:lo+len(r.items)])
		} else {
			b.preparePush(r, nil)
		}
		lo += len(r.items)
		b.w.submitPush(r)
	}
	b.mu.Unlock()
	var err error
	for _, r := range reqs {
		if err = waitCtx(ctx, r.done); err != nil {
			break
		}
	}
	b.w.publishPending() // what Push wrote is visible when it returns
	if err != nil {
		return nil, err
	}
	b.observePushes(items, results, time.Since(start))
	return results, nil
}

// preparePush resolves what r's items need before the writer stores them:
// their queues and partitions (created in memory if new), the records of
// those not stored yet, the cursors their arrival stores (see
// arrivalCursors), whether their queue encrypts, and, for a plain push,
// room under each queue's MaxSize, item by item; dups marks the items
// expected to be duplicates, which take none (nil: none is). Under b.mu,
// in the same hold that submits r, so that the writer stores pushes and
// other writes in the order memory saw them.
func (b *Broker) preparePush(r *pushReq, dups []bool) {
	r.parts = make([]*partition, len(r.items))
	r.plans = make([]itemPlan, len(r.items))
	var stored []any // queues and partitions whose records r.records holds
	for i := range r.items {
		it := &r.items[i]
		q := b.queues[it.Queue]
		if q == nil {
			cfg := pushCreatedConfig(it.Queue)
			if it.Namespace != "" || it.Task != "" {
				cfg.Namespace, cfg.Task = it.Namespace, it.Task
			}
			q = b.newQueue(it.Queue, cfg)
		}
		if !q.persisted && !slices.Contains(stored, any(q)) {
			stored = append(stored, q)
			r.records = append(r.records, setKey{keys.QueueKey(q.name), q.meta()})
		}
		p, _ := b.partitionFor(q, it.Partition)
		if !p.persisted && !slices.Contains(stored, any(p)) {
			stored = append(stored, p)
			r.records = append(r.records, setKey{keys.PartitionKey(p.pid), b.partitionRecord(p)})
		}
		if i == 0 || p != r.parts[i-1] {
			r.records = append(r.records, b.arrivalCursors(p, r)...)
		}
		r.parts[i] = p
		if q.cfg.EncryptionEnabled {
			r.plans[i] |= planEncrypt
		}
		if !r.txn && q.cfg.MaxSize > 0 && !b.takeRoom(r, q, dups != nil && dups[i]) {
			r.plans[i] |= planNoRoom
		}
	}
}

// takeRoom reserves room for one message of a plain push on q, a queue
// with a MaxSize; false when the queue is full, or for an expected
// duplicate, which needs none. Pending counts what is published, reserved
// what transactions and pushes not yet published hold. Under b.mu.
func (b *Broker) takeRoom(r *pushReq, q *queue, dup bool) bool {
	if dup || q.pending+q.reserved >= int64(q.cfg.MaxSize) {
		return false
	}
	if r.reserved == nil {
		r.reserved = make(map[*queue]int64)
	}
	r.reserved[q]++
	q.reserved++
	return true
}

// Record is one message read by [Broker.Fetch].
type Record struct {
	Offset        int64
	MessageID     string
	TransactionID string
	TraceID       string
	Payload       json.RawMessage
	CreatedAt     time.Time
}

// FetchResult is a page of a partition read by offset.
type FetchResult struct {
	Queue     string
	Partition string
	Records   []Record
	// NextOffset is where the next page starts.
	NextOffset int64
}

// Fetch reads up to limit messages of one partition from offset from, with
// no consumer group, lease or ack. limit defaults to 100 and is capped at
// 1000. Messages below the retention horizon are skipped. An unknown queue
// or partition is [ErrNotFound].
func (b *Broker) Fetch(ctx context.Context, queueName, partitionName string, from int64, limit int) (*FetchResult, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if from < 0 {
		return nil, argErr("from", "must not be negative")
	}
	if limit < 0 {
		return nil, argErr("limit", "must not be negative")
	}
	if limit == 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	if partitionName == "" {
		partitionName = DefaultPartition
	}
	q, err := b.lockKnownQueue(queueName)
	if err != nil {
		return nil, err
	}
	p := q.parts[partitionName]
	if p == nil {
		b.mu.Unlock()
		return nil, ErrNotFound
	}
	pid, start, end := p.pid, max(from, p.first), p.next
	b.mu.Unlock()

	res := &FetchResult{Queue: queueName, Partition: partitionName, NextOffset: max(start, from)}
	if start >= end {
		return res, nil
	}
	err = b.readRange(pid, start, end, limit, func(off int64, m *record.Message) bool {
		payload, err := b.openPayload(m)
		if err != nil {
			payload = nil
		}
		res.Records = append(res.Records, Record{
			Offset: off, MessageID: uuid.UUID(m.ID).String(), TransactionID: m.TxID, TraceID: m.TraceID,
			Payload: payload, CreatedAt: time.UnixMicro(m.CreatedAt).UTC(),
		})
		res.NextOffset = off + 1
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(res.Records) < limit {
		res.NextOffset = end
	}
	return res, nil
}

// readRange calls fn for the stored messages of pid in [from, end), at most
// limit of them, in offset order, until fn returns false.
func (b *Broker) readRange(pid uint64, from, end int64, limit int, fn func(int64, *record.Message) bool) error {
	err := b.db.View(func(txn *badger.Txn) error {
		var m record.Message
		if end-from <= 2 {
			for off := from; off < end && limit > 0; off++ {
				item, err := txn.Get(keys.MessageKey(pid, off))
				if err == badger.ErrKeyNotFound {
					continue
				}
				if err != nil {
					return err
				}
				if err := item.Value(func(v []byte) error { return record.DecodeMessage(v, &m) }); err != nil {
					return err
				}
				limit--
				if !fn(off, &m) {
					return nil
				}
			}
			return nil
		}
		opts := badger.DefaultIteratorOptions
		opts.Prefix = keys.MessagePrefix(pid)
		opts.PrefetchSize = min(limit, 100)
		opts.PrefetchValues = false // each value is read as fn needs it (through its pointer when it is in the value log)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(keys.MessageKey(pid, from)); it.Valid() && limit > 0; it.Next() {
			_, off, ok := keys.DecodeMessageKey(it.Item().Key())
			if !ok || off >= end {
				break
			}
			if err := it.Item().Value(func(v []byte) error { return record.DecodeMessage(v, &m) }); err != nil {
				return err
			}
			limit--
			if !fn(off, &m) {
				return nil
			}
		}
		return nil
	})
	return storageErr("read", err)
}

// observePushes reports the messages one call queued, one event per queue
// in order of first appearance (a call may push to several queues).
// Duplicates and refused items are not counted.
func (b *Broker) observePushes(items []PushItem, results []PushResult, d time.Duration) {
	if len(items) == 0 {
		return
	}
	var order []string
	var counts map[string]int
	n, q := 0, items[0].Queue
	for i := range items {
		if items[i].Queue != q && counts == nil { // several queues: count by name
			counts = map[string]int{q: n}
			order = append(order, q)
		}
		queued := results[i].Status == PushQueued
		if counts == nil {
			if queued {
				n++
			}
			continue
		}
		c, ok := counts[items[i].Queue]
		if !ok {
			order = append(order, items[i].Queue)
		}
		if queued {
			c++
		}
		counts[items[i].Queue] = c
	}
	if counts == nil {
		b.observe(Event{Kind: EventPush, Queue: q, Count: n, Duration: d})
		return
	}
	for _, name := range order {
		b.observe(Event{Kind: EventPush, Queue: name, Count: counts[name], Duration: d})
	}
}
