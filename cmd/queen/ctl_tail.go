package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/remote"
)

// tailJSON is one message in tail's --json output (one object a line).
type tailJSON struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Offset        int64           `json:"offset"`
	MessageID     string          `json:"messageId"`
	TransactionID string          `json:"transactionId"`
	TraceID       string          `json:"traceId,omitempty"`
	CreatedAt     string          `json:"createdAt"`
	Payload       json.RawMessage `json:"payload"`
}

// tailBatch is how many messages one fetch reads.
const tailBatch = 500

func ctlTail(x *ctl, args []string) error {
	fs := x.flags("", "QUEUE", "Prints the messages pushed to QUEUE from now on, in every partition (new\npartitions included), until interrupted. It reads by offset: no group, no\nlease, nothing acked. Lines are cut to 80 columns; --json prints one whole\nmessage per line. Not served by Queen's own server (no fetch by offset).")
	partition := fs.String("partition", "", "follow only this partition")
	fromStart := fs.Bool("from-start", false, "print the messages already stored first")
	interval := fs.Duration("interval", time.Second, "how often to look for new messages")
	pos, err := x.exactly(fs, args, "QUEUE")
	if err != nil {
		return err
	}
	if *interval <= 0 {
		return usagef("--interval must be positive, not %v", *interval)
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	t := &tailer{x: x, c: c, queue: pos[0], only: *partition, next: map[string]int64{}}
	if err := t.start(*fromStart); err != nil {
		return err
	}
	fmt.Fprintf(x.stderr, "following %s (%d partitions); interrupt to stop\n", t.queue, len(t.next))
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		if err := t.round(); err != nil {
			if x.ctx.Err() != nil {
				return nil
			}
			if !errors.Is(err, queen.ErrUnavailable) {
				return err
			}
			fmt.Fprintf(x.stderr, "%s: %v (trying again)\n", x.cmd, err)
		}
		select {
		case <-x.ctx.Done():
			return nil // interrupted: the normal end
		case <-tick.C:
		}
	}
}

// tailer follows a queue's partitions by offset.
type tailer struct {
	x     *ctl
	c     *remote.Client
	queue string
	only  string           // the one partition followed, or "" for all
	next  map[string]int64 // by partition: the next offset to print
}

// start records where each partition ends (or begins, with fromStart).
func (t *tailer) start(fromStart bool) error {
	s, err := t.c.QueueStats(t.x.ctx, t.queue)
	if err != nil {
		return err
	}
	for _, p := range s.Partitions {
		if t.only == "" || p.Name == t.only {
			t.next[p.Name] = p.NextOffset
			if fromStart {
				t.next[p.Name] = p.FirstOffset
			}
		}
	}
	if t.only != "" {
		if _, ok := t.next[t.only]; !ok {
			return fmt.Errorf("%w: partition %q of queue %q", queen.ErrNotFound, t.only, t.queue)
		}
	}
	return nil
}

// round prints what was pushed since the last round. A partition created
// since is followed from its first message.
func (t *tailer) round() error {
	if t.only == "" {
		s, err := t.c.QueueStats(t.x.ctx, t.queue)
		if err != nil {
			return err
		}
		for _, p := range s.Partitions {
			if _, ok := t.next[p.Name]; !ok {
				t.next[p.Name] = p.FirstOffset
			}
		}
	}
	names := make([]string, 0, len(t.next))
	for n := range t.next {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for {
			r, err := t.c.Fetch(t.x.ctx, t.queue, n, t.next[n], tailBatch)
			if err != nil {
				return err
			}
			for i := range r.Records {
				if err := t.print(n, &r.Records[i]); err != nil {
					return err
				}
			}
			if r.NextOffset > t.next[n] {
				t.next[n] = r.NextOffset
			}
			if len(r.Records) < tailBatch {
				break
			}
		}
	}
	return nil
}

func (t *tailer) print(partition string, r *queen.Record) error {
	p := r.Payload
	if len(p) == 0 {
		p = json.RawMessage("null")
	}
	if t.x.json {
		line, err := json.Marshal(tailJSON{Queue: t.queue, Partition: partition, Offset: r.Offset, MessageID: r.MessageID,
			TransactionID: r.TransactionID, TraceID: r.TraceID, CreatedAt: timeJSON(r.CreatedAt), Payload: p})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(t.x.stdout, "%s\n", line)
		return err
	}
	var flat bytes.Buffer // one message, one line
	if json.Compact(&flat, p) != nil {
		flat.Reset()
		flat.Write(p)
	}
	_, err := fmt.Fprintln(t.x.stdout, cut(fmt.Sprintf("%s  %s  %d  %s", timeText(r.CreatedAt), partition, r.Offset, flat.Bytes()), ctlMaxWidth))
	return err
}
