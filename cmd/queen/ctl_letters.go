package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/remote"
)

// letterStore is the dead-letter store or the parked store, as seen
// through a client.
type letterStore struct {
	what   string // "dead letter" or "parked message"
	list   func(*remote.Client, context.Context, queen.LetterFilter) (*queen.LetterPage, error)
	replay func(*remote.Client, context.Context, string) (*queen.ReplayResult, error)
	delete func(*remote.Client, context.Context, string) error
}

var (
	deadLetters = &letterStore{"dead letter", (*remote.Client).DeadLetters, (*remote.Client).ReplayDeadLetter, (*remote.Client).DeleteDeadLetter}
	parked      = &letterStore{"parked message", (*remote.Client).ParkedMessages, (*remote.Client).ReplayParked, (*remote.Client).DeleteParked}
)

func ctlDLQ(x *ctl, args []string) error {
	return x.subcommand(args, "Lists, shows, replays and deletes dead letters: messages a group gave up on.", deadLetters.commands())
}

func ctlParked(x *ctl, args []string) error {
	return x.subcommand(args, "Lists, shows, replays and deletes parked messages: messages a group set aside.", parked.commands())
}

func (s *letterStore) commands() []ctlCommand {
	return []ctlCommand{
		{"list", "", "list " + s.what + "s, newest first", s.runList},
		{"show", "ID", "show one " + s.what + " with its payload", s.runShow},
		{"replay", "ID...", "push a copy of each back to its queue", s.runReplay},
		{"delete", "ID...", "delete each", s.runDelete},
	}
}

// letterJSON is a dead letter or parked message in --json output.
type letterJSON struct {
	ID            string          `json:"id"`
	MessageID     string          `json:"messageId"`
	TransactionID string          `json:"transactionId"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	Error         string          `json:"error"`
	RetryCount    int             `json:"retryCount"`
	Offset        int64           `json:"offset"`
	TraceID       string          `json:"traceId,omitempty"`
	CreatedAt     string          `json:"createdAt,omitempty"`
	FailedAt      string          `json:"failedAt,omitempty"`
	Payload       json.RawMessage `json:"payload"`
}

func letterOf(l *queen.DeadLetter) letterJSON {
	p := l.Payload
	if len(p) == 0 {
		p = json.RawMessage("null")
	}
	return letterJSON{ID: l.ID, MessageID: l.MessageID, TransactionID: l.TransactionID, Queue: l.Queue, Partition: l.Partition,
		ConsumerGroup: l.ConsumerGroup, Error: l.Error, RetryCount: l.RetryCount, Offset: l.Offset, TraceID: l.TraceID,
		CreatedAt: timeJSON(l.CreatedAt), FailedAt: timeJSON(l.FailedAt), Payload: p}
}

func (s *letterStore) runList(x *ctl, args []string) error {
	var f queen.LetterFilter
	fs := x.flags("", "", "Lists "+s.what+"s, newest failure first, with the filters given.")
	fs.StringVar(&f.Queue, "queue", "", "only this queue's")
	fs.StringVar(&f.ConsumerGroup, "group", "", "only this consumer group's")
	fs.StringVar(&f.Partition, "partition", "", "only this partition's (with --queue)")
	from := fs.String("from", "", "only those failed at or after this RFC 3339 time")
	to := fs.String("to", "", "only those failed at or before this RFC 3339 time")
	fs.IntVar(&f.Limit, "limit", 100, "at most this many, 1 to 1000")
	fs.IntVar(&f.Offset, "offset", 0, "skip this many first")
	if _, err := x.exactly(fs, args); err != nil {
		return err
	}
	if f.Limit < 1 || f.Limit > 1000 {
		return usagef("--limit must be from 1 to 1000, not %d", f.Limit)
	}
	if f.Offset < 0 {
		return usagef("--offset must not be negative, not %d", f.Offset)
	}
	var err error
	if *from != "" {
		if f.From, err = parseTime("from", *from); err != nil {
			return err
		}
	}
	if *to != "" {
		if f.To, err = parseTime("to", *to); err != nil {
			return err
		}
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	page, err := s.list(c, x.ctx, f)
	if err != nil {
		return err
	}
	if x.json {
		out := struct {
			Total   int          `json:"total"`
			Letters []letterJSON `json:"letters"`
		}{page.Total, make([]letterJSON, len(page.Letters))}
		for i := range page.Letters {
			out.Letters[i] = letterOf(&page.Letters[i])
		}
		return x.printJSON(out)
	}
	// IDs are never cut: they are what show, replay and delete take. The
	// times are in show and --json.
	t := newTable("ID", "QUEUE<", "PARTITION<", "GROUP<", "ERROR<")
	for _, l := range page.Letters {
		t.add(orDash(l.ID), l.Queue, l.Partition, l.ConsumerGroup, orDash(l.Error))
	}
	if err := t.write(x.stdout); err != nil {
		return err
	}
	if page.Total > f.Offset+len(page.Letters) {
		fmt.Fprintf(x.stdout, "(%d of %d shown; --offset %d for more)\n", len(page.Letters), page.Total, f.Offset+len(page.Letters))
	}
	return nil
}

// find pages through the store for the entry whose id (or, on Queen's
// server, which sends no ids, whose message id) is id.
func (s *letterStore) find(x *ctl, c *remote.Client, queue, id string) (*queen.DeadLetter, error) {
	f := queen.LetterFilter{Queue: queue, Limit: 1000}
	for {
		page, err := s.list(c, x.ctx, f)
		if err != nil {
			return nil, err
		}
		for i, l := range page.Letters {
			if l.ID == id || l.MessageID == id {
				return &page.Letters[i], nil
			}
		}
		if len(page.Letters) < f.Limit {
			return nil, fmt.Errorf("%w: %s %q", queen.ErrNotFound, s.what, id)
		}
		f.Offset += len(page.Letters)
	}
}

func (s *letterStore) runShow(x *ctl, args []string) error {
	fs := x.flags("", "ID", "Shows one "+s.what+", found by its id or its message's id, with its payload.")
	queue := fs.String("queue", "", "look only in this queue (faster on large stores)")
	pos, err := x.exactly(fs, args, "ID")
	if err != nil {
		return err
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	l, err := s.find(x, c, *queue, pos[0])
	if err != nil {
		return err
	}
	if x.json {
		return x.printJSON(letterOf(l))
	}
	if err := writeFields(x.stdout, [][2]string{{"id", orDash(l.ID)}, {"message", l.MessageID}, {"transaction", l.TransactionID},
		{"queue", l.Queue}, {"partition", l.Partition}, {"group", l.ConsumerGroup}, {"error", orDash(l.Error)},
		{"retries", strconv.Itoa(l.RetryCount)}, {"offset", strconv.FormatInt(l.Offset, 10)}, {"trace", orDash(l.TraceID)},
		{"pushed", timeText(l.CreatedAt)}, {"failed", timeText(l.FailedAt)}, {"payload", ""}}); err != nil {
		return err
	}
	// The payload is printed whole, indented: it is what show is for.
	var buf bytes.Buffer
	if json.Indent(&buf, l.Payload, "", "  ") != nil {
		buf.Reset()
		buf.Write(l.Payload)
	}
	_, err = fmt.Fprintln(x.stdout, buf.String())
	return err
}

// replayJSON reports what replay or delete did to one entry, in --json
// output: ok, or the error; a replay adds the copy's message id, its
// offset, and whether it had been replayed before.
type replayJSON struct {
	ID            string `json:"id"`
	OK            bool   `json:"ok"`
	MessageID     string `json:"messageId,omitempty"`
	TransactionID string `json:"transactionId,omitempty"`
	Offset        *int64 `json:"offset,omitempty"`
	Duplicate     bool   `json:"duplicate,omitempty"`
	Error         string `json:"error,omitempty"`
}

func (s *letterStore) runReplay(x *ctl, args []string) error {
	fs := x.flags("", "ID...", "Pushes a copy of each "+s.what+" back to its queue and partition. Replaying\nan entry twice pushes one copy (the second is reported duplicate).")
	return s.each(x, fs, args, func(c *remote.Client, id string) (replayJSON, error) {
		r, err := s.replay(c, x.ctx, id)
		if err != nil {
			return replayJSON{ID: id}, err
		}
		return replayJSON{ID: id, OK: true, MessageID: r.MessageID, TransactionID: r.TransactionID, Offset: &r.Offset, Duplicate: r.Duplicate}, nil
	})
}

func (s *letterStore) runDelete(x *ctl, args []string) error {
	fs := x.flags("", "ID...", "Deletes each "+s.what+" for good.")
	return s.each(x, fs, args, func(c *remote.Client, id string) (replayJSON, error) {
		err := s.delete(c, x.ctx, id)
		return replayJSON{ID: id, OK: err == nil}, err
	})
}

// each runs op on every id, going on past failures; it prints a line per
// id and fails when any id did.
func (s *letterStore) each(x *ctl, fs *flag.FlagSet, args []string, op func(*remote.Client, string) (replayJSON, error)) error {
	ids, err := x.positional(fs, args)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return usagef("missing ID")
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	var errs []error
	out := make([]replayJSON, 0, len(ids))
	for _, id := range ids {
		r, err := op(c, id)
		if err != nil {
			if !errors.Is(err, queen.ErrNotFound) {
				return err // the server is out of reach, refused us or lacks the store: the rest would fail too
			}
			r.Error = err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
		out = append(out, r)
	}
	if x.json {
		if err := x.printJSON(out); err != nil {
			return err
		}
	} else {
		t := newTable("ID", "RESULT<")
		for _, r := range out {
			t.add(r.ID, resultText(r))
		}
		if err := t.write(x.stdout); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

func resultText(r replayJSON) string {
	switch {
	case r.Error != "":
		return r.Error
	case r.Duplicate:
		return fmt.Sprintf("already replayed, at offset %d", *r.Offset)
	case r.MessageID != "":
		return fmt.Sprintf("replayed at offset %d", *r.Offset)
	}
	return "deleted"
}
