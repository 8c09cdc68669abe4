package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/queenlite/queen"
)

// The Queen 2.x reads: FetchPartitions (POST /api/v1/fetch), OffsetForTime
// (POST /api/v1/fetch/offsets), GroupPositions (POST
// /api/v1/consumer-groups/positions) and SetPosition (a transaction's
// positions rider, see ExecTransaction). Queen's 1.x server has none of
// them: there each is [queen.ErrUnsupported] before anything is sent.

// argument is the *queen.ArgumentError a Broker gives.
func argument(field, format string, args ...any) error {
	return &queen.ArgumentError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// checkName validates a queue (or other required) name as the Broker does.
func checkName(field, s string) error {
	if s == "" {
		return argument(field, "must not be empty")
	}
	return checkLabel(field, s)
}

// checkLabel validates an optional name-like string as the Broker does.
func checkLabel(field, s string) error {
	switch {
	case len(s) > queen.MaxNameLen:
		return argument(field, "longer than %d bytes", queen.MaxNameLen)
	case !utf8.ValidString(s):
		return argument(field, "not valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return argument(field, "contains a NUL byte")
	}
	return nil
}

// newRoute maps a missing route (a server older than these calls: Go's
// mux answers 404 "404 page not found", or 405 for a path it serves with
// another method) to ErrUnsupported; other 404s keep their meaning.
func newRoute(op string) func(string) error {
	return func(msg string) error {
		if msg == "" || strings.Contains(msg, "page not found") {
			return fmt.Errorf("%w: %s (the server has no such route)", queen.ErrUnsupported, op)
		}
		return notFound(msg)
	}
}

// callNew is c.call for the new routes: a 405 is ErrUnsupported too.
func (c *Client) callNew(ctx context.Context, r *request, out any) error {
	r.notFound = newRoute(r.op)
	err := c.call(ctx, r, out)
	var se *ServerError
	if errors.As(err, &se) && se.StatusCode == http.StatusMethodNotAllowed {
		return fmt.Errorf("%w: %s (the server has no such route)", queen.ErrUnsupported, r.op)
	}
	return err
}

// partitionError maps a per-partition error code of the fetch routes.
func partitionError(code string) error {
	switch code {
	case "":
		return nil
	case "UNKNOWN_TOPIC_OR_PARTITION":
		return queen.ErrNotFound
	case "OFFSET_OUT_OF_RANGE":
		return queen.ErrOffsetOutOfRange
	}
	return &ServerError{Op: "fetch", StatusCode: http.StatusOK, Message: code}
}

// fetchEntryJSON is one partition of a fetch request.
type fetchEntryJSON struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
	Offset    int64  `json:"offset"`
	MaxBytes  int    `json:"maxBytes"`
}

// fetchReply is a fetch's answer.
type fetchReply struct {
	Entries []struct {
		Queue     string `json:"queue"`
		Partition string `json:"partition"`
		Records   []struct {
			Offset        int64           `json:"offset"`
			TransactionID string          `json:"transactionId"`
			Payload       json.RawMessage `json:"payload"`
			TS            string          `json:"ts"`
		} `json:"records"`
		HighWatermark  int64  `json:"highWatermark"`
		LogStartOffset int64  `json:"logStartOffset"`
		Error          string `json:"error"`
	} `json:"entries"`
}

// checkFetch checks and completes req as the Broker does.
func checkFetch(req *queen.FetchRequest) error {
	switch {
	case len(req.Partitions) > queen.MaxFetchPartitions:
		return argument("FetchRequest.Partitions", "at most %d, not %d", queen.MaxFetchPartitions, len(req.Partitions))
	case req.MaxWait < 0:
		return argument("FetchRequest.MaxWait", "must not be negative")
	case req.MaxWait > queen.MaxFetchWait:
		return argument("FetchRequest.MaxWait", "must be at most %v, not %v", queen.MaxFetchWait, req.MaxWait)
	case req.MinBytes < 0:
		return argument("FetchRequest.MinBytes", "must not be negative")
	}
	if req.MinBytes == 0 {
		req.MinBytes = 1
	}
	parts := make([]queen.FetchPartition, len(req.Partitions))
	for i, p := range req.Partitions {
		field := "FetchRequest.Partitions[" + strconv.Itoa(i) + "]."
		if p.Partition == "" {
			p.Partition = queen.DefaultPartition
		}
		if err := checkName(field+"Queue", p.Queue); err != nil {
			return err
		}
		if err := checkLabel(field+"Partition", p.Partition); err != nil {
			return err
		}
		switch {
		case p.Offset < 0:
			return argument(field+"Offset", "must not be negative")
		case p.MaxBytes < 0:
			return argument(field+"MaxBytes", "must not be negative")
		case p.MaxBytes > queen.MaxFetchBytes:
			return argument(field+"MaxBytes", "must be at most %d, not %d", queen.MaxFetchBytes, p.MaxBytes)
		case p.MaxBytes == 0:
			p.MaxBytes = queen.DefaultFetchBytes
		}
		parts[i] = p
	}
	req.Partitions = parts
	return nil
}

// FetchPartitions reads several partitions by offset in one call, as
// [queen.Broker.FetchPartitions] (Queen 2.x's POST /api/v1/fetch). A
// MaxWait holds the request for the wait plus Options.RequestTimeout.
// Records carry no MessageID nor TraceID (the route sends none), and
// their CreatedAt has microsecond precision. Invalid input is an
// [*queen.ArgumentError] before sending; against Queen's 1.x server, or a
// server without the route, the call is [queen.ErrUnsupported].
func (c *Client) FetchPartitions(ctx context.Context, req queen.FetchRequest) ([]queen.PartitionRead, error) {
	if err := checkFetch(&req); err != nil {
		return nil, err
	}
	if err := c.unsupportedOn(ctx, "FetchPartitions"); err != nil {
		return nil, err
	}
	entries := make([]fetchEntryJSON, len(req.Partitions))
	for i, p := range req.Partitions {
		entries[i] = fetchEntryJSON{Queue: p.Queue, Partition: p.Partition, Offset: p.Offset, MaxBytes: p.MaxBytes}
	}
	body := map[string]any{"entries": entries, "maxWaitMs": waitMillis(req.MaxWait), "minBytes": req.MinBytes}
	r := &request{op: "fetch", method: http.MethodPost, path: "/api/v1/fetch", body: body, safe: true, extra: req.MaxWait}
	var out fetchReply
	if err := c.callNew(ctx, r, &out); err != nil {
		return nil, err
	}
	if len(out.Entries) != len(entries) {
		return nil, &TransportError{Op: "fetch", URL: c.redacted(r), Err: fmt.Errorf("%d entries for %d partitions", len(out.Entries), len(entries))}
	}
	reads := make([]queen.PartitionRead, len(out.Entries))
	for i := range out.Entries {
		e := &out.Entries[i]
		pr := queen.PartitionRead{Queue: firstOf(e.Queue, entries[i].Queue), Partition: firstOf(e.Partition, entries[i].Partition),
			Records: make([]queen.Record, len(e.Records)), HighWatermark: e.HighWatermark, LogStartOffset: e.LogStartOffset,
			Err: partitionError(e.Error)}
		for j := range e.Records {
			rec := &e.Records[j]
			p := rec.Payload
			if len(p) == 0 {
				p = json.RawMessage("null")
			}
			pr.Records[j] = queen.Record{Offset: rec.Offset, TransactionID: rec.TransactionID, Payload: p, CreatedAt: parseTime(rec.TS)}
		}
		reads[i] = pr
	}
	return reads, nil
}

// waitMillis is a wait in whole milliseconds, rounded up.
func waitMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// offsetsReply is a fetch/offsets answer.
type offsetsReply struct {
	Entries []struct {
		Offset         *int64  `json:"offset"`
		TS             *string `json:"ts"`
		HighWatermark  int64   `json:"highWatermark"`
		LogStartOffset int64   `json:"logStartOffset"`
		Error          string  `json:"error"`
	} `json:"entries"`
}

// OffsetForTime finds the first offset of a partition pushed at or after
// t, as [queen.Broker.OffsetForTime] (Queen 2.x's POST
// /api/v1/fetch/offsets): an unknown queue is [queen.ErrNotFound]. The
// time found has microsecond precision. Against Queen's 1.x server, or a
// server without the route, it is [queen.ErrUnsupported].
func (c *Client) OffsetForTime(ctx context.Context, queue, partition string, t time.Time) (queen.TimeOffset, error) {
	if partition == "" {
		partition = queen.DefaultPartition
	}
	if err := checkName("queue", queue); err != nil {
		return queen.TimeOffset{}, err
	}
	if err := checkLabel("partition", partition); err != nil {
		return queen.TimeOffset{}, err
	}
	if err := c.unsupportedOn(ctx, "OffsetForTime"); err != nil {
		return queen.TimeOffset{}, err
	}
	body := map[string]any{"entries": []map[string]string{{"queue": queue, "partition": partition,
		"timestamp": t.UTC().Format(time.RFC3339Nano)}}}
	r := &request{op: "offset for time", method: http.MethodPost, path: "/api/v1/fetch/offsets", body: body, safe: true}
	var out offsetsReply
	if err := c.callNew(ctx, r, &out); err != nil {
		return queen.TimeOffset{}, err
	}
	if len(out.Entries) != 1 {
		return queen.TimeOffset{}, &TransportError{Op: r.op, URL: c.redacted(r), Err: fmt.Errorf("%d entries for 1", len(out.Entries))}
	}
	e := &out.Entries[0]
	if e.Error != "" {
		return queen.TimeOffset{}, partitionError(e.Error)
	}
	res := queen.TimeOffset{HighWatermark: e.HighWatermark, LogStartOffset: e.LogStartOffset}
	if e.Offset != nil {
		res.Found, res.Offset = true, *e.Offset
		if e.TS != nil {
			res.At = parseTime(*e.TS)
		}
	}
	return res, nil
}

// positionsReply is a positions answer.
type positionsReply struct {
	ConsumerGroup string `json:"consumerGroup"`
	Entries       []struct {
		Queue     string  `json:"queue"`
		Partition string  `json:"partition"`
		Offset    *int64  `json:"offset"`
		Metadata  *string `json:"metadata"`
	} `json:"entries"`
}

// GroupPositions reads a group's position in each named partition (every
// position of the group when parts is nil), as
// [queen.Broker.GroupPositions] (Queen 2.x's POST
// /api/v1/consumer-groups/positions). Against Queen's 1.x server, or a
// server without the route, it is [queen.ErrUnsupported].
func (c *Client) GroupPositions(ctx context.Context, group string, parts []queen.PartitionRef) ([]queen.Position, error) {
	if err := checkLabel("group", group); err != nil {
		return nil, err
	}
	if len(parts) > queen.MaxPositionReads {
		return nil, argument("parts", "at most %d, not %d", queen.MaxPositionReads, len(parts))
	}
	for i := range parts {
		if err := checkName(fmt.Sprintf("parts[%d].Queue", i), parts[i].Queue); err != nil {
			return nil, err
		}
		if err := checkLabel(fmt.Sprintf("parts[%d].Partition", i), parts[i].Partition); err != nil {
			return nil, err
		}
	}
	if err := c.unsupportedOn(ctx, "GroupPositions"); err != nil {
		return nil, err
	}
	name := wireGroup(group)
	body := map[string]any{"consumerGroup": name}
	var asked []map[string]string
	if parts != nil {
		asked = make([]map[string]string, len(parts))
		for i, p := range parts {
			asked[i] = map[string]string{"queue": p.Queue, "partition": firstOf(p.Partition, queen.DefaultPartition)}
		}
		body["entries"] = asked
	}
	r := &request{op: "positions", method: http.MethodPost, path: "/api/v1/consumer-groups/positions", body: body, safe: true}
	var out positionsReply
	if err := c.callNew(ctx, r, &out); err != nil {
		return nil, err
	}
	if parts != nil && len(out.Entries) != len(parts) {
		return nil, &TransportError{Op: r.op, URL: c.redacted(r), Err: fmt.Errorf("%d entries for %d partitions", len(out.Entries), len(parts))}
	}
	res := make([]queen.Position, len(out.Entries))
	for i := range out.Entries {
		e := &out.Entries[i]
		pos := queen.Position{Group: firstOf(out.ConsumerGroup, name), Queue: e.Queue, Partition: e.Partition, Offset: queen.NoOffset}
		if parts != nil {
			pos.Queue, pos.Partition = firstOf(e.Queue, asked[i]["queue"]), firstOf(e.Partition, asked[i]["partition"])
		}
		if e.Offset != nil {
			pos.Offset = *e.Offset
			pos.Metadata = either(e.Metadata, nil)
		}
		res[i] = pos
	}
	return res, nil
}

// SetPosition sets (or with pos.Forget forgets) a group's position in a
// partition, as [queen.Broker.SetPosition]: a transaction of one
// position (Queen 2.x's positions rider), whose refusal is returned as
// its cause ([queen.ErrNotFound], [queen.ErrOffsetOutOfRange]). Against
// Queen's 1.x server it is [queen.ErrUnsupported].
func (c *Client) SetPosition(ctx context.Context, pos queen.Position) error {
	_, err := c.ExecTransaction(ctx, []queen.TxOp{{Position: &pos}})
	var te *queen.TransactionError
	if errors.As(err, &te) {
		return te.Err
	}
	return err
}

// checkPosition checks a position to set, as ops[i], as the Broker does,
// and defaults its partition.
func checkPosition(i int, pos *queen.Position) error {
	field := fmt.Sprintf("ops[%d].Position.", i)
	if pos.Partition == "" {
		pos.Partition = queen.DefaultPartition
	}
	if err := checkName(field+"Queue", pos.Queue); err != nil {
		return err
	}
	if err := checkLabel(field+"Partition", pos.Partition); err != nil {
		return err
	}
	if err := checkLabel(field+"Group", pos.Group); err != nil {
		return err
	}
	if pos.Forget {
		return nil
	}
	switch {
	case pos.Offset < 0:
		return argument(field+"Offset", "must not be negative")
	case len(pos.Metadata) > queen.MaxPositionMetadata:
		return argument(field+"Metadata", "%d bytes, at most %d", len(pos.Metadata), queen.MaxPositionMetadata)
	}
	return nil
}

// positionJSON is a position of a transaction's rider; Offset nil
// forgets.
type positionJSON struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	ConsumerGroup string `json:"consumerGroup"`
	Offset        *int64 `json:"offset"`
	Metadata      string `json:"metadata"`
}

func positionOf(pos *queen.Position) positionJSON {
	p := positionJSON{Queue: pos.Queue, Partition: pos.Partition, ConsumerGroup: wireGroup(pos.Group)}
	if !pos.Forget {
		off := pos.Offset
		p.Offset, p.Metadata = &off, pos.Metadata
	}
	return p
}

// positionError maps a refused position's text (after "POSITION operation
// failed: ").
func positionError(text string) error {
	low := strings.ToLower(text)
	switch {
	case strings.Contains(low, "out of range"):
		return fmt.Errorf("%w: %s", queen.ErrOffsetOutOfRange, text)
	case strings.Contains(low, "not found"):
		return queen.ErrNotFound
	}
	return &ServerError{Op: "transaction", StatusCode: http.StatusOK, Message: "POSITION operation failed: " + text}
}
