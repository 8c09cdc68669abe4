package queen

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/uuid"
)

// Traces are events a worker records against a message while it handles
// it ("charged card", "sent email"), optionally under one or more trace
// names that tie the events of a whole flow together across queues. They
// are stored with the message and deleted with it.

// TraceEvent is one recorded event.
type TraceEvent struct {
	// ID is assigned by [Broker.RecordTrace] (a time-ordered UUID).
	ID string
	// PartitionID and TransactionID name the message; both are required.
	PartitionID   string
	TransactionID string
	// Queue and Partition are filled on reads.
	Queue, Partition string
	// ConsumerGroup defaults to [QueueModeGroup].
	ConsumerGroup string
	// EventType defaults to "info".
	EventType string
	// Names are the trace names the event is filed under.
	Names []string
	// Data is any JSON value; empty means null.
	Data json.RawMessage
	// WorkerID optionally says who recorded it.
	WorkerID string
	// CreatedAt is set by [Broker.RecordTrace].
	CreatedAt time.Time
	// MessagePayload is the traced message's payload, filled by
	// [Broker.TracesByName]; nil if the message is gone.
	MessagePayload json.RawMessage
}

// TracePage is a page of trace events, newest first.
type TracePage struct {
	Traces []TraceEvent
	Total  int // events matching
}

// TraceName summarises the events filed under one trace name.
type TraceName struct {
	Name     string
	Events   int       // events filed under it
	Messages int       // distinct messages those events belong to
	LastSeen time.Time // newest event
}

// TraceNamePage is a page of trace names, most recently seen first.
type TraceNamePage struct {
	Names []TraceName
	Total int // distinct names
}

type traceRecord struct {
	Group    string          `json:"g"`
	Event    string          `json:"e"`
	Names    []string        `json:"n,omitempty"`
	Data     json.RawMessage `json:"d,omitempty"`
	WorkerID string          `json:"w,omitempty"`
	At       int64           `json:"c"`
}

// RecordTrace stores a trace event against an existing message and
// returns it with its ID and CreatedAt set. An unknown message is
// [ErrNotFound].
func (b *Broker) RecordTrace(ctx context.Context, ev TraceEvent) (*TraceEvent, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if ev.PartitionID == "" || ev.TransactionID == "" {
		return nil, argErr("TraceEvent", "PartitionID and TransactionID are required")
	}
	if ev.ConsumerGroup == "" {
		ev.ConsumerGroup = QueueModeGroup
	}
	if ev.EventType == "" {
		ev.EventType = "info"
	}
	for f, v := range map[string]string{"TraceEvent.ConsumerGroup": ev.ConsumerGroup, "TraceEvent.EventType": ev.EventType, "TraceEvent.WorkerID": ev.WorkerID} {
		if err := checkLabel(f, v); err != nil {
			return nil, err
		}
	}
	for i, n := range ev.Names {
		if err := checkName("TraceEvent.Names["+strconv.Itoa(i)+"]", n); err != nil {
			return nil, err
		}
	}
	if len(ev.Data) == 0 {
		ev.Data = json.RawMessage("null")
	} else if !json.Valid(ev.Data) {
		return nil, argErr("TraceEvent.Data", "not valid JSON")
	}
	p, ps, off, err := b.locate(ev.PartitionID, ev.TransactionID)
	if err != nil {
		return nil, err
	}
	now := b.clock.Now()
	id := uuid.NewV7At(now)
	val, err := json.Marshal(traceRecord{Group: ev.ConsumerGroup, Event: ev.EventType, Names: ev.Names, Data: ev.Data, WorkerID: ev.WorkerID, At: now.UnixMicro()})
	if err != nil {
		return nil, err
	}
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	// The message may have been deleted (by retention or DeleteMessage)
	// since locate found it: their writes delete the traces written
	// before them, so none may follow.
	if p.deleted || off < p.first || p.skipHoles(off) != off {
		b.mu.Unlock()
		return nil, ErrNotFound
	}
	done := b.w.submit([]command{setKey{keys.TraceKey(ps.pid, ev.TransactionID, id), val}})
	b.mu.Unlock()
	if err := waitCtx(ctx, done); err != nil {
		return nil, err
	}
	ev.ID, ev.Queue, ev.Partition, ev.PartitionID = id.String(), ps.queue, ps.name, ps.id
	ev.CreatedAt = time.UnixMicro(now.UnixMicro()).UTC()
	return &ev, nil
}

// decodeTraceKey splits a trace key into partition, transactionId and id.
func decodeTraceKey(k []byte) (pid uint64, txid string, id uuid.UUID, ok bool) {
	if len(k) < 9+1+16 || k[0] != keys.Trace || k[len(k)-17] != 0 {
		return 0, "", id, false
	}
	pid = uint64(k[1])<<56 | uint64(k[2])<<48 | uint64(k[3])<<40 | uint64(k[4])<<32 | uint64(k[5])<<24 | uint64(k[6])<<16 | uint64(k[7])<<8 | uint64(k[8])
	copy(id[:], k[len(k)-16:])
	return pid, string(k[9 : len(k)-17]), id, true
}

// scanTraces calls fn for every stored trace event under prefix.
func (b *Broker) scanTraces(ctx context.Context, prefix []byte, fn func(pid uint64, txid string, id uuid.UUID, tr *traceRecord)) error {
	err := b.db.View(func(txn *badger.Txn) error {
		return scan(txn, prefix, func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			pid, txid, id, ok := decodeTraceKey(k)
			if !ok {
				return nil
			}
			var tr traceRecord
			if err := json.Unmarshal(v, &tr); err != nil {
				return err
			}
			fn(pid, txid, id, &tr)
			return nil
		})
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return storageErr("read traces", err)
}

func (tr *traceRecord) event(id uuid.UUID, txid string) TraceEvent {
	return TraceEvent{ID: id.String(), TransactionID: txid, ConsumerGroup: tr.Group, EventType: tr.Event, Names: tr.Names,
		Data: tr.Data, WorkerID: tr.WorkerID, CreatedAt: time.UnixMicro(tr.At).UTC()}
}

// Traces returns the trace events of one message, oldest first. An
// unknown message has none.
func (b *Broker) Traces(ctx context.Context, partitionID, transactionID string) ([]TraceEvent, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	out := []TraceEvent{}
	if transactionID == "" {
		return out, nil
	}
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	p := b.partitionByID(partitionID)
	var pid uint64
	var queue, part, pidStr string
	if p != nil {
		pid, queue, part, pidStr = p.pid, p.q.name, p.name, p.uuid()
	}
	b.mu.Unlock()
	if p == nil {
		return out, nil
	}
	err := b.scanTraces(ctx, keys.TracePrefix(pid, transactionID), func(_ uint64, txid string, id uuid.UUID, tr *traceRecord) {
		ev := tr.event(id, txid)
		ev.Queue, ev.Partition, ev.PartitionID = queue, part, pidStr
		out = append(out, ev)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func hasName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// tracePage checks the limit and offset of a page of traces, and returns
// the limit: def when zero, at most 1000. A closed broker is
// [ErrClosed].
func (b *Broker) tracePage(limit, offset, def int) (int, error) {
	if limit < 0 || offset < 0 {
		return 0, argErr("limit", "limit and offset must not be negative")
	}
	if limit == 0 {
		limit = def
	}
	return min(limit, 1000), b.closedErr()
}

// TracesByName returns the trace events filed under name, newest first,
// with the payload of each event's message. limit defaults to 100 and is
// capped at 1000.
func (b *Broker) TracesByName(ctx context.Context, name string, limit, offset int) (*TracePage, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	limit, err := b.tracePage(limit, offset, 100)
	if err != nil {
		return nil, err
	}
	type hit struct {
		pid uint64
		ev  TraceEvent
	}
	var hits []hit
	err = b.scanTraces(ctx, []byte{keys.Trace}, func(pid uint64, txid string, id uuid.UUID, tr *traceRecord) {
		if hasName(tr.Names, name) {
			hits = append(hits, hit{pid, tr.event(id, txid)})
		}
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].ev.ID > hits[j].ev.ID })
	page := &TracePage{Total: len(hits), Traces: []TraceEvent{}}
	if offset >= len(hits) {
		return page, nil
	}
	hits = hits[offset:min(len(hits), offset+limit)]
	for i := range hits {
		h := &hits[i]
		b.mu.Lock()
		var p *partition
		if h.pid < uint64(len(b.parts)) {
			p = b.parts[h.pid]
		}
		if p != nil {
			h.ev.Queue, h.ev.Partition, h.ev.PartitionID = p.q.name, p.name, p.uuid()
		}
		b.mu.Unlock()
		if p != nil {
			if off, found, err := b.offsetOf(p, h.ev.TransactionID); err == nil && found {
				if m, err := b.readMessage(h.pid, off); err == nil {
					if payload, err := b.openPayload(m); err == nil {
						h.ev.MessagePayload = payload
					}
				}
			}
		}
		page.Traces = append(page.Traces, h.ev)
	}
	return page, nil
}

// TraceNames lists the trace names in use, most recently seen first.
// limit defaults to 50 and is capped at 1000.
func (b *Broker) TraceNames(ctx context.Context, limit, offset int) (*TraceNamePage, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	limit, err := b.tracePage(limit, offset, 50)
	if err != nil {
		return nil, err
	}
	type agg struct {
		TraceName
		msgs map[string]bool
	}
	byName := make(map[string]*agg)
	err = b.scanTraces(ctx, []byte{keys.Trace}, func(pid uint64, txid string, id uuid.UUID, tr *traceRecord) {
		msg := strconv.FormatUint(pid, 10) + "/" + txid
		at := time.UnixMicro(tr.At).UTC()
		for _, n := range tr.Names {
			a := byName[n]
			if a == nil {
				a = &agg{TraceName: TraceName{Name: n}, msgs: make(map[string]bool)}
				byName[n] = a
			}
			a.Events++
			a.msgs[msg] = true
			if at.After(a.LastSeen) {
				a.LastSeen = at
			}
		}
	})
	if err != nil {
		return nil, err
	}
	all := make([]TraceName, 0, len(byName))
	for _, a := range byName {
		a.Messages = len(a.msgs)
		all = append(all, a.TraceName)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].LastSeen.Equal(all[j].LastSeen) {
			return all[i].LastSeen.After(all[j].LastSeen)
		}
		return all[i].Name < all[j].Name
	})
	page := &TraceNamePage{Total: len(all), Names: []TraceName{}}
	if offset < len(all) {
		page.Names = all[offset:min(len(all), offset+limit)]
	}
	return page, nil
}
