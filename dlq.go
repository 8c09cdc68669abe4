package queen

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strconv"
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
func (b *Broker) letterOps(c *cursor, specs []letterSpec, now int64) ([]command, error) {
	p := c.p
	ops := make([]command, 0, len(specs))
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
			ops = append(ops, setKey{keys.IDKey(s.kind, uuid.NewV4()), encodeLetter(&lr)})
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

// DeadLetters lists dead letters matching f, newest failure first. A page
// costs the entries it returns: the others are counted from their headers,
// without their payloads.
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
	if err := b.lockUsable(); err != nil {
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
	done := b.w.submit([]command{deleteKey{keys.IDKey(kind, u)}})
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

// letterHead is the part of a letter's header a listing filters and
// orders by. Its names are views into the stored value, valid while it
// is: reading them copies nothing, the payload least of all.
type letterHead struct {
	queue, partition, group []byte
	pid                     uint64
	failedAt                int64
}

// decodeLetterHead reads the filter fields of encodeLetter's form: in
// place when the header is as encodeLetter writes it (scanLetterHead),
// else through encoding/json, which also reports a corrupt one.
func decodeLetterHead(v []byte, h *letterHead) error {
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return errCorruptLetter
	}
	head := v[k : k+int(n)]
	*h = letterHead{}
	if scanLetterHead(head, h) {
		return nil
	}
	var lr struct {
		Queue     string `json:"q"`
		Partition string `json:"p"`
		PID       uint64 `json:"pid"`
		Group     string `json:"g"`
		FailedAt  int64  `json:"f"`
	}
	if err := json.Unmarshal(head, &lr); err != nil {
		return err
	}
	*h = letterHead{queue: []byte(lr.Queue), partition: []byte(lr.Partition), group: []byte(lr.Group), pid: lr.PID, failedAt: lr.FailedAt}
	return nil
}

// scanLetterHead reads h's fields from b, a flat JSON object as
// json.Marshal writes a letterRecord (no spaces, nothing nested), without
// allocating. It reports false, leaving the header to encoding/json, on
// anything else: an escaped string in a field h keeps, a number that is
// not a plain integer, any other shape.
func scanLetterHead(b []byte, h *letterHead) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	i := 1
	for i < len(b)-1 {
		if b[i] != '"' {
			return false
		}
		end, plain := scanString(b, i)
		if end < 0 || !plain || end+1 >= len(b) || b[end+1] != ':' {
			return false
		}
		key := string(b[i+1 : end]) // compared only: not allocated
		i = end + 2
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '"':
			end, plain := scanString(b, i)
			if end < 0 {
				return false
			}
			var field *[]byte
			switch key {
			case "q":
				field = &h.queue
			case "p":
				field = &h.partition
			case "g":
				field = &h.group
			}
			if field != nil {
				if !plain {
					return false
				}
				*field = b[i+1 : end]
			}
			i = end + 1
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
				return false
			}
			switch key {
			case "pid":
				v, err := strconv.ParseUint(string(b[i:j]), 10, 64)
				if err != nil {
					return false
				}
				h.pid = v
			case "f":
				v, err := strconv.ParseInt(string(b[i:j]), 10, 64)
				if err != nil {
					return false
				}
				h.failedAt = v
			}
			i = j
		case bytes.HasPrefix(b[i:], []byte("true")):
			i += 4
		case bytes.HasPrefix(b[i:], []byte("false")):
			i += 5
		case bytes.HasPrefix(b[i:], []byte("null")):
			i += 4
		default:
			return false
		}
		switch {
		case i == len(b)-1:
			return true
		case b[i] == ',' && i+1 < len(b)-1:
			i++
		default:
			return false
		}
	}
	return i == len(b)-1 // "{}"
}

// scanString returns the index of the quote closing the JSON string that
// starts at b[i], and whether the string has no escapes (its bytes are its
// value); -1 when it is not closed, or holds a control character.
func scanString(b []byte, i int) (int, bool) {
	plain := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j, plain
		case c == '\\':
			plain = false
			j++
		case c < 0x20:
			return -1, false
		}
	}
	return -1, false
}

// letterRank places a letter in a listing: newest failure first, then
// the greater id.
type letterRank struct {
	failedAt int64
	id       [16]byte
}

// before reports whether r is listed before o.
func (r *letterRank) before(o *letterRank) bool {
	if r.failedAt != o.failedAt {
		return r.failedAt > o.failedAt
	}
	return string(r.id[:]) > string(o.id[:])
}

// topLetters keeps the first k ranks offered, in listing order, as a heap
// whose root is the last of them: a listing holds the letters up to its
// page's end, not every letter it counts.
type topLetters struct {
	k     int
	ranks []letterRank
}

func (t *topLetters) offer(r letterRank) {
	if len(t.ranks) < t.k {
		t.ranks = append(t.ranks, r)
		for i := len(t.ranks) - 1; i > 0; { // up
			parent := (i - 1) / 2
			if !t.ranks[parent].before(&t.ranks[i]) {
				break
			}
			t.ranks[parent], t.ranks[i] = t.ranks[i], t.ranks[parent]
			i = parent
		}
		return
	}
	if t.k == 0 || !r.before(&t.ranks[0]) {
		return
	}
	t.ranks[0] = r
	for i := 0; ; { // down
		last, l, rr := i, 2*i+1, 2*i+2
		if l < len(t.ranks) && t.ranks[last].before(&t.ranks[l]) {
			last = l
		}
		if rr < len(t.ranks) && t.ranks[last].before(&t.ranks[rr]) {
			last = rr
		}
		if last == i {
			return
		}
		t.ranks[i], t.ranks[last] = t.ranks[last], t.ranks[i]
		i = last
	}
}

// listLetters lists a page of the entries of kind matching f. It reads
// every entry's header, without its payload, to count and order them, and
// keeps only the ranks up to the page's end; the page's own entries are
// then read whole, in the same snapshot. A page thus costs the entries it
// returns (plus a header read per entry), not the store's payloads.
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
	from, to := f.From.UnixMicro(), f.To.UnixMicro()
	page := &LetterPage{Letters: []DeadLetter{}}
	top := topLetters{k: min(f.Offset, math.MaxInt-f.Limit) + f.Limit}
	var lrs []letterRecord
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kind}}) // values read one at a time, not copied
		defer it.Close()
		var h letterHead
		var match bool
		read := func(v []byte) error { // one closure for every entry: none allocated per entry
			if err := decodeLetterHead(v, &h); err != nil {
				return err
			}
			match = (f.Queue == "" || string(h.queue) == f.Queue) && (f.ConsumerGroup == "" || string(h.group) == f.ConsumerGroup) &&
				(f.Partition == "" || string(h.partition) == f.Partition) &&
				(f.From.IsZero() || h.failedAt >= from) && (f.To.IsZero() || h.failedAt <= to)
			return nil
		}
		for it.Rewind(); it.Valid(); it.Next() {
			if err := it.Item().Value(read); err != nil {
				return err
			}
			if !match || !b.partitionLive(h.pid) { // not live: of a deleted queue, being swept
				continue
			}
			page.Total++
			r := letterRank{failedAt: h.failedAt}
			copy(r.id[:], it.Item().Key()[1:])
			top.offer(r)
		}
		ranks := top.ranks
		sort.Slice(ranks, func(i, j int) bool { return ranks[i].before(&ranks[j]) })
		if f.Offset >= len(ranks) {
			return nil
		}
		ranks = ranks[f.Offset:]
		lrs = make([]letterRecord, len(ranks))
		for i := range ranks {
			item, err := txn.Get(keys.IDKey(kind, ranks[i].id))
			if err != nil {
				return err
			}
			if err := item.Value(func(v []byte) error { return decodeLetter(v, &lrs[i]) }); err != nil {
				return err
			}
		}
		top.ranks = ranks
		return nil
	})
	if err != nil {
		return nil, storageErr("list dead letters", err)
	}
	for i := range lrs {
		lr := &lrs[i]
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
			ID: uuid.UUID(top.ranks[i].id).String(), MessageID: lr.MessageID, TransactionID: lr.TxID, Queue: lr.Queue,
			Partition: lr.Partition, PartitionID: pid, ConsumerGroup: lr.Group, Error: lr.Error, RetryCount: lr.RetryCount,
			Payload: payload, TraceID: lr.TraceID, ProducerSub: lr.ProducerSub, Offset: lr.Offset,
			CreatedAt: time.UnixMicro(lr.CreatedAt).UTC(), FailedAt: time.UnixMicro(lr.FailedAt).UTC(),
		})
	}
	return page, nil
}
