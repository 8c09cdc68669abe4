package queen

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/queenlite/queen/internal/uuid"
)

// Dead letters hold messages a group gave up on (failed with no retries
// left, or acked dlq). Parked messages hold messages nothing could read
// (acked park, or payloads a typed consumer could not decode). Both are
// kept per group, with the payload, until replayed or deleted; other groups
// still receive the message normally.

// DeadLetter is an entry of the dead-letter or the parked store.
type DeadLetter struct {
	ID            string // the entry's own id
	MessageID     string
	TransactionID string
	Queue         string
	Partition     string
	PartitionID   string
	ConsumerGroup string // the group that gave up on it
	Error         string
	RetryCount    int // failed acks spent when it was moved
	Payload       json.RawMessage
	TraceID       string
	ProducerSub   string
	Offset        int64
	CreatedAt     time.Time // when the message was pushed
	FailedAt      time.Time // when it was moved here
}

// LetterFilter selects dead letters or parked messages. Zero fields match
// everything.
type LetterFilter struct {
	Queue         string
	ConsumerGroup string
	Partition     string
	From, To      time.Time // FailedAt bounds, inclusive
	Limit         int       // default 100, at most 1000
	Offset        int       // entries to skip, newest first
}

// LetterPage is one page of entries, newest failure first.
type LetterPage struct {
	Letters []DeadLetter
	Total   int // entries matching the filter
}

// ReplayResult reports a replayed entry.
type ReplayResult struct {
	ID            string
	MessageID     string
	TransactionID string // "dlq:<id>" or "parked:<id>"
	Offset        int64
	// Duplicate reports that the entry had been replayed before: no second
	// copy was pushed.
	Duplicate bool
}

type letterSpec struct {
	kind    byte
	off     int64
	txid    string
	errText string
	retries int32
}

type letterRecord struct {
	Queue       string `json:"q"`
	Partition   string `json:"p"`
	PID         uint64 `json:"pid"`
	Offset      int64  `json:"o"`
	MessageID   string `json:"m"`
	TxID        string `json:"t"`
	TraceID     string `json:"tr,omitempty"`
	ProducerSub string `json:"ps,omitempty"`
	Group       string `json:"g"`
	Error       string `json:"e"`
	RetryCount  int    `json:"rc"`
	CreatedAt   int64  `json:"c"`
	FailedAt    int64  `json:"f"`
	Encrypted   bool   `json:"x,omitempty"` // Payload is sealed (see crypto.go)
	Payload     []byte `json:"-"`           // as stored, byte for byte
}

// maxLetterError bounds the error text kept with a dead letter.
const maxLetterError = 4 << 10

// encodeLetter stores a letter as a JSON header followed by the raw
// payload, so the payload is kept byte for byte and costs its own size.
func encodeLetter(lr *letterRecord) []byte {
	head, _ := json.Marshal(lr)
	out := binary.AppendUvarint(make([]byte, 0, len(head)+len(lr.Payload)+4), uint64(len(head)))
	out = append(out, head...)
	return append(out, lr.Payload...)
}

// decodeLetter reads encodeLetter's form; the payload is copied.
func decodeLetter(v []byte, lr *letterRecord) error {
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return errCorruptLetter
	}
	if err := json.Unmarshal(v[k:k+int(n)], lr); err != nil {
		return err
	}
	lr.Payload = append([]byte(nil), v[k+int(n):]...)
	return nil
}

var errCorruptLetter = errors.New("queen: corrupt dead-letter record")

// letterOps builds the writes that move messages of c's partition to the
// dead-letter or parked store. Under b.mu (it reads the messages).
func (b *Broker) letterOps(c *cursor, specs []letterSpec, now int64) ([]op, error) {
	p := c.p
	ops := make([]op, 0, len(specs))
	var dead, parked int
	err := b.db.View(func(txn *badger.Txn) error {
		for _, s := range specs {
			lr := letterRecord{Queue: p.q.name, Partition: p.name, PID: p.pid, Offset: s.off, TxID: s.txid,
				Group: c.g.name, Error: s.errText, RetryCount: int(s.retries), FailedAt: now}
			item, err := txn.Get(keys.MessageKey(p.pid, s.off))
			switch {
			case err == nil:
				var m record.Message
				if err := item.Value(func(v []byte) error { return record.DecodeMessage(v, &m) }); err != nil {
					return err
				}
				lr.MessageID, lr.TraceID, lr.ProducerSub, lr.CreatedAt = uuid.UUID(m.ID).String(), m.TraceID, m.ProducerSub, m.CreatedAt
				lr.Payload, lr.Encrypted = m.Payload, m.Flags&record.FlagEncrypted != 0
			case err != badger.ErrKeyNotFound: // deleted by retention: keep what we know
				return err
			}
			if len(lr.Error) > maxLetterError {
				lr.Error = lr.Error[:maxLetterError]
			}
			ops = append(ops, op{key: keys.IDKey(s.kind, uuid.NewV4()), val: encodeLetter(&lr)})
			if s.kind == keys.DeadLetter {
				dead++
			} else {
				parked++
			}
		}
		return nil
	})
	if err != nil {
		return nil, storageErr("dead-letter", err)
	}
	p.q.dlqCount += int64(dead)
	p.q.parkedCount += int64(parked)
	// One call may both dead-letter and park messages of a partition (an ack
	// batch with dlq and park items): each kind is reported with its own count.
	if dead > 0 {
		b.observe(Event{Kind: EventDeadLettered, Queue: p.q.name, Group: c.g.name, Count: dead})
	}
	if parked > 0 {
		b.observe(Event{Kind: EventParked, Queue: p.q.name, Group: c.g.name, Count: parked})
	}
	return ops, nil
}

// DeadLetters lists dead letters matching f, newest failure first.
func (b *Broker) DeadLetters(ctx context.Context, f LetterFilter) (*LetterPage, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	return b.listLetters(keys.DeadLetter, f)
}

// ParkedMessages lists parked messages matching f, newest first.
func (b *Broker) ParkedMessages(ctx context.Context, f LetterFilter) (*LetterPage, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	return b.listLetters(keys.Parked, f)
}

// ReplayDeadLetter pushes a copy of a dead letter to the end of its
// partition under transactionId "dlq:<id>", where every group reading the
// partition sees it. The entry stays; replaying it again while the copy is
// retained is a duplicate (no second copy). Once retention (or
// [Broker.DeleteMessage]) has removed the copy, a replay pushes a new one,
// as a push of any removed transactionId would: the entry is replayed as
// often as it is asked to, with at most one copy in the partition at a
// time. Unknown ids, and entries of a deleted queue, are [ErrNotFound].
func (b *Broker) ReplayDeadLetter(ctx context.Context, id string) (*ReplayResult, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	return b.replayLetter(ctx, keys.DeadLetter, "dlq:", id)
}

// ReplayParked is [Broker.ReplayDeadLetter] for parked messages, under
// transactionId "parked:<id>".
func (b *Broker) ReplayParked(ctx context.Context, id string) (*ReplayResult, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	return b.replayLetter(ctx, keys.Parked, "parked:", id)
}

// DeleteDeadLetter removes a dead letter; unknown ids are [ErrNotFound]. Of
// concurrent deletes of one entry exactly one succeeds.
func (b *Broker) DeleteDeadLetter(ctx context.Context, id string) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	return b.deleteLetter(ctx, keys.DeadLetter, id)
}

// DeleteParked removes a parked message; unknown ids are [ErrNotFound].
func (b *Broker) DeleteParked(ctx context.Context, id string) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	return b.deleteLetter(ctx, keys.Parked, id)
}

func (b *Broker) getLetter(kind byte, id string) (letterRecord, error) {
	var lr letterRecord
	u, ok := uuid.Parse(id)
	if !ok {
		return lr, ErrNotFound
	}
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keys.IDKey(kind, u))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return decodeLetter(v, &lr) })
	})
	return lr, storageErr("read dead letter", err)
}

func (b *Broker) replayLetter(ctx context.Context, kind byte, prefix, id string) (*ReplayResult, error) {
	if err := b.closedErr(); err != nil {
		return nil, err
	}
	lr, err := b.getLetter(kind, id)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	live := b.letterQueue(&lr) != nil
	b.mu.Unlock()
	if !live {
		return nil, ErrNotFound // of a deleted queue, being swept
	}
	payload := lr.Payload
	if lr.Encrypted {
		if payload, err = b.open(lr.Payload); err != nil {
			return nil, err
		}
	}
	res, err := b.Push(ctx, []PushItem{{Queue: lr.Queue, Partition: lr.Partition, TransactionID: prefix + strings.ToLower(id), Payload: payload, TraceID: lr.TraceID, ProducerSub: lr.ProducerSub}})
	if err != nil {
		return nil, err
	}
	r := res[0]
	if r.Status == PushFailed {
		return nil, r.Err
	}
	return &ReplayResult{ID: id, MessageID: r.MessageID, TransactionID: r.TransactionID, Offset: r.Offset, Duplicate: r.Status == PushDuplicate}, nil
}

// deleteLetter removes one entry. Deletes of entries (these, and
// DeleteMessage's) run one at a time, each looking the entry up and
// waiting for its removal to be written: of two concurrent deletes of one
// entry, one succeeds and the other finds nothing, so a queue's count is
// decremented once. An entry of a deleted queue (being swept) is not
// found, even when a queue of that name exists again.
func (b *Broker) deleteLetter(ctx context.Context, kind byte, id string) error {
	b.delMu.Lock()
	defer b.delMu.Unlock()
	lr, err := b.getLetter(kind, id)
	if err != nil {
		return err
	}
	u, _ := uuid.Parse(id)
	b.mu.Lock()
	if err := b.usable(); err != nil {
		b.mu.Unlock()
		return err
	}
	q := b.letterQueue(&lr)
	if q == nil {
		b.mu.Unlock()
		return ErrNotFound
	}
	if kind == keys.DeadLetter {
		q.dlqCount--
	} else {
		q.parkedCount--
	}
	done := b.w.submit([]op{{key: keys.IDKey(kind, u), del: true}})
	b.mu.Unlock()
	// Not cut short by ctx: the next delete under delMu must see this one.
	return <-done
}

// letterQueue returns the live queue an entry belongs to, or nil when its
// partition is gone (its queue was deleted). Under b.mu.
func (b *Broker) letterQueue(lr *letterRecord) *queue {
	if lr.PID >= uint64(len(b.parts)) || b.parts[lr.PID] == nil {
		return nil
	}
	if q := b.parts[lr.PID].q; q.name == lr.Queue && b.queues[q.name] == q {
		return q
	}
	return nil
}

// partitionLive reports whether pid names an existing partition.
func (b *Broker) partitionLive(pid uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return pid < uint64(len(b.parts)) && b.parts[pid] != nil
}

func (b *Broker) closedErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.usable()
}

func (b *Broker) listLetters(kind byte, f LetterFilter) (*LetterPage, error) {
	if f.Limit < 0 || f.Offset < 0 {
		return nil, argErr("LetterFilter", "Limit and Offset must not be negative")
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	f.Limit = min(f.Limit, 1000)
	if err := b.closedErr(); err != nil {
		return nil, err
	}
	type entry struct {
		id [16]byte
		lr letterRecord
	}
	var all []entry
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kind}, PrefetchSize: 100}) // no PrefetchValues: a goroutine per item
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var e entry
			copy(e.id[:], it.Item().Key()[1:])
			if err := it.Item().Value(func(v []byte) error { return decodeLetter(v, &e.lr) }); err != nil {
				return err
			}
			lr := &e.lr
			if !b.partitionLive(lr.PID) {
				continue // of a deleted queue, being swept
			}
			if (f.Queue != "" && lr.Queue != f.Queue) || (f.ConsumerGroup != "" && lr.Group != f.ConsumerGroup) ||
				(f.Partition != "" && lr.Partition != f.Partition) ||
				(!f.From.IsZero() && lr.FailedAt < f.From.UnixMicro()) || (!f.To.IsZero() && lr.FailedAt > f.To.UnixMicro()) {
				continue
			}
			all = append(all, e)
		}
		return nil
	})
	if err != nil {
		return nil, storageErr("list dead letters", err)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].lr.FailedAt != all[j].lr.FailedAt {
			return all[i].lr.FailedAt > all[j].lr.FailedAt
		}
		return string(all[i].id[:]) > string(all[j].id[:])
	})
	page := &LetterPage{Total: len(all), Letters: []DeadLetter{}}
	for i := f.Offset; i < len(all) && len(page.Letters) < f.Limit; i++ {
		lr := &all[i].lr
		payload := lr.Payload
		if lr.Encrypted {
			if p, err := b.open(lr.Payload); err == nil {
				payload = p
			}
		}
		pid := ""
		b.mu.Lock()
		if int(lr.PID) < len(b.parts) && b.parts[lr.PID] != nil {
			pid = b.parts[lr.PID].uuid()
		}
		b.mu.Unlock()
		page.Letters = append(page.Letters, DeadLetter{
			ID: uuid.UUID(all[i].id).String(), MessageID: lr.MessageID, TransactionID: lr.TxID, Queue: lr.Queue,
			Partition: lr.Partition, PartitionID: pid, ConsumerGroup: lr.Group, Error: lr.Error, RetryCount: lr.RetryCount,
			Payload: payload, TraceID: lr.TraceID, ProducerSub: lr.ProducerSub, Offset: lr.Offset,
			CreatedAt: time.UnixMicro(lr.CreatedAt).UTC(), FailedAt: time.UnixMicro(lr.FailedAt).UTC(),
		})
	}
	return page, nil
}
