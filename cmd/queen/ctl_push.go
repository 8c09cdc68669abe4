package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/queenlite/queen"
)

// pushJSON reports one pushed message in --json output.
type pushJSON struct {
	Status        string `json:"status"` // queued, duplicate or failed
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	MessageID     string `json:"messageId,omitempty"`
	TransactionID string `json:"transactionId,omitempty"`
	Offset        int64  `json:"offset"`
	Error         string `json:"error,omitempty"`
}

func ctlPush(x *ctl, args []string) error {
	fs := x.flags("", "QUEUE JSON...", "Pushes one message per JSON argument (any JSON value: '{\"id\":1}', '42',\n'\"text\"'). A payload starting with - goes after --. A push to an unknown\nqueue creates it.")
	partition := fs.String("partition", queen.DefaultPartition, "partition to push to")
	txid := fs.String("transaction-id", "", "idempotency key (one message only): a second push with it is a duplicate")
	trace := fs.String("trace-id", "", "trace id (a UUID) to record with the messages")
	pos, err := x.positional(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("missing QUEUE and JSON")
	case len(pos) == 1:
		return usagef("missing JSON")
	case pos[0] == "":
		return usagef("QUEUE must not be empty")
	case *partition == "":
		return usagef("--partition must not be empty")
	case *txid != "" && len(pos) > 2:
		return usagef("--transaction-id names one message, not %d", len(pos)-1)
	}
	items := make([]queen.PushItem, len(pos)-1)
	for i, p := range pos[1:] {
		if !json.Valid([]byte(p)) {
			return usagef("payload %d is not valid JSON: %q", i+1, cut(p, 40))
		}
		items[i] = queen.PushItem{Queue: pos[0], Partition: *partition, TransactionID: *txid, TraceID: *trace, Payload: json.RawMessage(p)}
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	res, err := c.Push(x.ctx, items)
	if err != nil {
		return err
	}
	out := make([]pushJSON, len(res))
	var errs []error
	for i, r := range res {
		out[i] = pushJSON{Status: string(r.Status), Queue: r.Queue, Partition: r.Partition, MessageID: r.MessageID,
			TransactionID: r.TransactionID, Offset: r.Offset}
		if r.Err != nil {
			out[i].Error = r.Err.Error()
			errs = append(errs, fmt.Errorf("message %d: %w", i+1, r.Err))
		}
	}
	if x.json {
		if err := x.printJSON(out); err != nil {
			return err
		}
	} else {
		t := newTable("STATUS", "PARTITION<", "OFFSET>", "MESSAGE", "ERROR<")
		for _, r := range out {
			t.add(r.Status, r.Partition, r.Offset, orDash(r.MessageID), orDash(r.Error))
		}
		if err := t.write(x.stdout); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

func ctlSeek(x *ctl, args []string) error {
	fs := x.flags("", "GROUP QUEUE --to-end | --time T", "Moves a consumer group's cursors on a queue: past every message (--to-end),\nor to the first message pushed at or after T. The group's leases there are\nreleased. With --partition, moves that partition's cursor only.")
	toEnd := fs.Bool("to-end", false, "move past every message")
	at := fs.String("time", "", "move to the first message pushed at or after this RFC 3339 time")
	partition := fs.String("partition", "", "move only this partition's cursor")
	pos, err := x.exactly(fs, args, "GROUP", "QUEUE")
	if err != nil {
		return err
	}
	if *toEnd == (*at != "") {
		return usagef("give either --to-end or --time")
	}
	opts := queen.SeekOptions{ToEnd: *toEnd}
	if *at != "" {
		if opts.Timestamp, err = parseTime("time", *at); err != nil {
			return err
		}
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	var r *queen.SeekResult
	if *partition != "" {
		r, err = c.SeekPartition(x.ctx, pos[0], pos[1], *partition, opts)
	} else {
		r, err = c.SeekGroup(x.ctx, pos[0], pos[1], opts)
	}
	if err != nil {
		return err
	}
	if x.json {
		out := struct {
			PartitionsUpdated int    `json:"partitionsUpdated"`
			CursorMovedTo     *int64 `json:"cursorMovedTo,omitempty"`
		}{PartitionsUpdated: r.PartitionsUpdated}
		if *partition != "" {
			out.CursorMovedTo = &r.CursorMovedTo
		}
		return x.printJSON(out)
	}
	if *partition != "" {
		_, err = fmt.Fprintf(x.stdout, "group %s on %s/%s: cursor moved to offset %d\n", pos[0], pos[1], *partition, r.CursorMovedTo)
		return err
	}
	_, err = fmt.Fprintf(x.stdout, "group %s on %s: %d partition cursors moved\n", pos[0], pos[1], r.PartitionsUpdated)
	return err
}
