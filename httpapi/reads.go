package httpapi

// The read routes of Queen 2.x: several partitions by offset at once
// (POST /api/v1/fetch), time to offset (POST /api/v1/fetch/offsets) and a
// group's positions (POST /api/v1/consumer-groups/positions). Shapes,
// limits and error codes are Queen 2.x's (docs/http-api.md).

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/verbatim"
)

// Per-partition error codes of the 2.x read routes (Kafka's names).
const (
	codeUnknownPartition = "UNKNOWN_TOPIC_OR_PARTITION"
	codeOutOfRange       = "OFFSET_OUT_OF_RANGE"
)

// offsetRecord is one record of a fetch answer.
type offsetRecord struct {
	Offset        int64         `json:"offset"`
	TransactionID string        `json:"transactionId"`
	Payload       verbatim.JSON `json:"payload"`
	TS            usTime        `json:"ts"`
}

// fetchEntry is one partition of a fetch answer.
type fetchEntry struct {
	Queue          string         `json:"queue"`
	Partition      string         `json:"partition"`
	Records        []offsetRecord `json:"records"`
	HighWatermark  int64          `json:"highWatermark"`
	LogStartOffset int64          `json:"logStartOffset"`
	Error          string         `json:"error,omitempty"`
}

// partitionCode is the wire code of a partition's refusal.
func partitionCode(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, queen.ErrOffsetOutOfRange):
		return codeOutOfRange
	}
	return codeUnknownPartition
}

// partitionName reads an entry's partition as Queen's fetch does: a string
// as given, a number as its decimal text (Kafka's partition n is Queen's
// partition "n"), anything else the default partition.
func partitionName(f *fields) string {
	raw := f.raw("partition")
	switch kind(raw) {
	case '"':
		return f.str("partition")
	case '0':
		if n := f.num("partition", 0, true); f.err == nil {
			return strconv.FormatInt(n, 10)
		}
	}
	return queen.DefaultPartition
}

// entriesOf reads the entries array of a 2.x read body: at most max, each
// an object naming a queue; a missing array is none.
func entriesOf(f *fields, max int) ([]*fields, error) {
	if !f.has("entries") {
		return nil, f.err
	}
	elems, n, ok := f.arrayMax("entries", max)
	if !ok || f.err != nil {
		return nil, badRequest("entries is an array")
	}
	if n > max {
		return nil, badRequest("too many entries")
	}
	out := make([]*fields, len(elems))
	for i, raw := range elems {
		e := f.elem(nil, raw, "entries", i)
		if f.err != nil {
			return nil, f.err
		}
		if kind(e.raw("queue")) != '"' || e.str("queue") == "" {
			return nil, badRequest("every entry names a queue")
		}
		out[i] = e
	}
	return out, nil
}

// checkRef checks the queue and partition names an entry e gave.
func checkRef(e *fields, queue, partition string) error {
	if err := checkName(e.prefix()+"queue", queue); err != nil {
		return err
	}
	return checkLabel(e.prefix()+"partition", partition)
}

// fetchMany serves POST /api/v1/fetch.
func (h *handler) fetchMany(w http.ResponseWriter, r *http.Request) {
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	entries, err := entriesOf(f, queen.MaxFetchPartitions)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	req := queen.FetchRequest{Partitions: make([]queen.FetchPartition, len(entries))}
	for i, e := range entries {
		if kind(e.raw("offset")) != '0' {
			e.fail("%soffset is required", e.prefix())
		}
		fp := queen.FetchPartition{Queue: e.str("queue"), Partition: partitionName(e), Offset: e.num("offset", 0, true),
			MaxBytes: int(min(max(e.num("maxBytes", queen.DefaultFetchBytes, true), 1), queen.MaxFetchBytes))}
		if e.err != nil {
			h.writeError(w, r, e.err)
			return
		}
		if fp.Offset < 0 {
			h.writeError(w, r, badRequest("offset must be non-negative"))
			return
		}
		if err := checkRef(e, fp.Queue, fp.Partition); err != nil {
			h.writeError(w, r, err)
			return
		}
		req.Partitions[i] = fp
	}
	waitMs := min(max(f.num("maxWaitMs", 0, true), 0), queen.MaxFetchWait.Milliseconds())
	minBytes := f.num("minBytes", 1, true)
	if f.err != nil {
		h.writeError(w, r, f.err)
		return
	}
	if minBytes > 0 && h.stopped.Err() == nil { // minBytes 0: never wait
		req.MaxWait = time.Duration(waitMs) * time.Millisecond
		req.MinBytes = int(min(minBytes, int64(queen.MaxFetchBytes)*queen.MaxFetchPartitions))
	}
	ctx := r.Context()
	if req.MaxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(h.stopped, cancel)()
	}
	reads, err := h.b.FetchPartitions(ctx, req)
	if err != nil && ctx.Err() != nil && r.Context().Err() == nil {
		// Shutting down while waiting: answer what is there now.
		req.MaxWait = 0
		reads, err = h.b.FetchPartitions(r.Context(), req)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := make([]fetchEntry, len(reads))
	for i, pr := range reads {
		e := fetchEntry{Queue: pr.Queue, Partition: pr.Partition, Records: make([]offsetRecord, len(pr.Records)),
			HighWatermark: pr.HighWatermark, LogStartOffset: pr.LogStartOffset, Error: partitionCode(pr.Err)}
		for j, rec := range pr.Records {
			e.Records[j] = offsetRecord{Offset: rec.Offset, TransactionID: rec.TransactionID, Payload: payload(rec.Payload), TS: usTime(rec.CreatedAt)}
		}
		out[i] = e
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": out})
}

// offsetEntry is one partition of a fetch/offsets answer; Offset and TS
// are null when no message is that recent.
type offsetEntry struct {
	Queue          string  `json:"queue"`
	Partition      string  `json:"partition"`
	Offset         *int64  `json:"offset"`
	TS             *usTime `json:"ts"`
	HighWatermark  int64   `json:"highWatermark"`
	LogStartOffset int64   `json:"logStartOffset"`
	Error          string  `json:"error,omitempty"`
}

// errBadTimestamp refuses an entry's timestamp, as Queen 2.x does.
var errBadTimestamp = badRequest("timestamp must be a non-negative number of epoch milliseconds or an ISO-8601 time")

// fetchOffsets serves POST /api/v1/fetch/offsets: per entry, the first
// offset pushed at or after its timestamp.
func (h *handler) fetchOffsets(w http.ResponseWriter, r *http.Request) {
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	entries, err := entriesOf(f, queen.MaxFetchPartitions)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type ask struct {
		queue, partition string
		at               time.Time
	}
	asks := make([]ask, len(entries))
	for i, e := range entries {
		a := ask{queue: e.str("queue"), partition: partitionName(e)}
		switch raw := e.raw("timestamp"); kind(raw) {
		case '0':
			ms := e.num("timestamp", -1, true)
			if e.err != nil || ms < 0 {
				h.writeError(w, r, errBadTimestamp)
				return
			}
			a.at = time.UnixMilli(ms)
		case '"':
			t, err := parseTime(e.str("timestamp"))
			if err != nil || t.Before(time.Unix(0, 0)) {
				h.writeError(w, r, errBadTimestamp)
				return
			}
			a.at = t
		default:
			h.writeError(w, r, errBadTimestamp)
			return
		}
		if e.err != nil {
			h.writeError(w, r, e.err)
			return
		}
		if err := checkRef(e, a.queue, a.partition); err != nil {
			h.writeError(w, r, err)
			return
		}
		asks[i] = a
	}
	out := make([]offsetEntry, len(asks))
	for i, a := range asks {
		e := offsetEntry{Queue: a.queue, Partition: a.partition}
		res, err := h.b.OffsetForTime(r.Context(), a.queue, a.partition, a.at)
		switch {
		case errors.Is(err, queen.ErrNotFound):
			e.Error = codeUnknownPartition
		case err != nil:
			h.writeError(w, r, err)
			return
		case res.Found:
			off, ts := res.Offset, usTime(res.At)
			e.Offset, e.TS = &off, &ts
		}
		e.HighWatermark, e.LogStartOffset = res.HighWatermark, res.LogStartOffset
		out[i] = e
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": out})
}

// positionEntry is one partition of a positions answer: offset null (and
// no metadata) where the group has no position.
type positionEntry struct {
	Queue     string  `json:"queue"`
	Partition string  `json:"partition"`
	Offset    *int64  `json:"offset"`
	Metadata  *string `json:"metadata,omitempty"`
}

// groupPositions serves POST /api/v1/consumer-groups/positions.
func (h *handler) groupPositions(w http.ResponseWriter, r *http.Request) {
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	group := f.str("consumerGroup")
	if f.err != nil || group == "" {
		h.writeError(w, r, badRequest("consumerGroup is required"))
		return
	}
	if err := checkLabel("consumerGroup", group); err != nil {
		h.writeError(w, r, err)
		return
	}
	entries, err := entriesOf(f, queen.MaxPositionReads)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var parts []queen.PartitionRef
	if f.has("entries") {
		parts = make([]queen.PartitionRef, len(entries))
		for i, e := range entries {
			// Only a string names a partition here, as in Queen 2.x.
			p := queen.DefaultPartition
			if kind(e.raw("partition")) == '"' {
				p = e.str("partition")
			}
			parts[i] = queen.PartitionRef{Queue: e.str("queue"), Partition: p}
			if e.err == nil {
				e.err = checkRef(e, parts[i].Queue, p)
			}
			if e.err != nil {
				h.writeError(w, r, e.err)
				return
			}
		}
	}
	pos, err := h.b.GroupPositions(r.Context(), group, parts)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := make([]positionEntry, len(pos))
	for i := range pos {
		p := &pos[i]
		out[i] = positionEntry{Queue: p.Queue, Partition: p.Partition}
		if p.Offset != queen.NoOffset {
			out[i].Offset, out[i].Metadata = &p.Offset, &p.Metadata
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"consumerGroup": group, "entries": out})
}

// parsePositions reads a transaction's positions rider: [{queue,
// partition, consumerGroup, offset (null forgets), metadata}].
func parsePositions(f *fields, room int) ([]queen.TxOp, error) {
	if !f.has("positions") {
		return nil, f.err
	}
	elems, n, ok := f.arrayMax("positions", room)
	if !ok || f.err != nil {
		return nil, badRequest("positions must be an array")
	}
	if n > room {
		return nil, errTooManyOps
	}
	ops := make([]queen.TxOp, len(elems))
	for i, raw := range elems {
		e := f.elem(nil, raw, "positions", i)
		if f.err != nil {
			return nil, f.err
		}
		pos := queen.Position{Queue: e.str("queue"), Group: e.str("consumerGroup"), Partition: queen.DefaultPartition}
		if kind(e.raw("partition")) == '"' {
			pos.Partition = e.str("partition")
		}
		switch raw, present := e.get("offset"); {
		case !present:
			e.fail("%soffset is required (null forgets the position)", e.prefix())
		case kind(raw) == 'n':
			pos.Forget = true
		default:
			pos.Offset = e.num("offset", 0, false)
		}
		switch kind(e.raw("metadata")) {
		case 'n':
		case '"':
			pos.Metadata = e.str("metadata")
		default:
			e.fail("%smetadata is a string", e.prefix())
		}
		if e.err == nil && pos.Queue == "" {
			e.fail("%squeue is required", e.prefix())
		}
		if e.err == nil && len(pos.Metadata) > queen.MaxPositionMetadata {
			e.fail("positions[%d]: metadata of %d B exceeds %d B", i, len(pos.Metadata), queen.MaxPositionMetadata)
		}
		if e.err != nil {
			return nil, e.err
		}
		ops[i] = queen.TxOp{Position: &pos}
	}
	return ops, nil
}

// positionErrorText is the reason a refused position gives.
func positionErrorText(err error) string {
	switch {
	case errors.Is(err, queen.ErrOffsetOutOfRange):
		return "Offset out of range"
	case errors.Is(err, queen.ErrNotFound):
		return "Queue or partition not found"
	}
	var ae *queen.ArgumentError
	if errors.As(err, &ae) {
		return ae.Error()
	}
	return "internal error"
}
