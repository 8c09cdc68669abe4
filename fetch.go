package queen

import (
	"context"
	"strconv"
	"time"

	"github.com/queenlite/queen/internal/record"
	"github.com/queenlite/queen/internal/uuid"
)

// FetchRequest reads several partitions by offset at once: no group, no
// lease, no ack (Queen 2.x's POST /api/v1/fetch).
type FetchRequest struct {
	// Partitions to read, each from its own offset; at most
	// [MaxFetchPartitions]. The answer keeps their order.
	Partitions []FetchPartition
	// MaxWait, when set, lets the call wait for records to arrive: it
	// returns once the records found add up to MinBytes, a partition
	// answers an error, or MaxWait has passed. At most [MaxFetchWait].
	// Defaults to 0: answer at once.
	MaxWait time.Duration
	// MinBytes is how many payload bytes (each record counting at least
	// one) end a wait. Defaults to 1: any record.
	MinBytes int
}

// FetchPartition is one partition of a [FetchRequest].
type FetchPartition struct {
	Queue string
	// Partition defaults to [DefaultPartition].
	Partition string
	// Offset is the first offset to read; it must not be negative.
	Offset int64
	// MaxBytes bounds the payload bytes read from this partition; the
	// first record is returned even when it is larger. Defaults to
	// [DefaultFetchBytes]; at most [MaxFetchBytes].
	MaxBytes int
}

// PartitionRead is what [Broker.FetchPartitions] read from one partition.
type PartitionRead struct {
	Queue, Partition string
	// Records are the stored messages from the asked offset on, in offset
	// order; deleted ones are skipped.
	Records []Record
	// HighWatermark is the offset the next message pushed to the
	// partition gets (the newest one's plus one).
	HighWatermark int64
	// LogStartOffset is the first offset still retained.
	LogStartOffset int64
	// Err is the partition's refusal: [ErrNotFound] for an unknown queue
	// (a partition never written is empty, with both offsets 0), or
	// [ErrOffsetOutOfRange] for an offset below LogStartOffset or above
	// HighWatermark (both still reported, to start again from).
	Err error
}

// FetchPartitions reads several partitions by offset in one call, each
// from its own offset and within its own byte budget, and reports each
// partition's high watermark and log start. With req.MaxWait it waits for
// records to arrive as a long poll does; a push to any partition makes it
// look again. Nothing about consumer groups changes. An invalid request is
// an [*ArgumentError]; a partition's refusal is its [PartitionRead].Err.
func (b *Broker) FetchPartitions(ctx context.Context, req FetchRequest) ([]PartitionRead, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if err := req.normalize(); err != nil {
		return nil, err
	}
	var deadline <-chan time.Time
	if req.MaxWait > 0 {
		t := time.NewTimer(req.MaxWait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		// The watch is taken before reading: a push after the read
		// closes it.
		var watch <-chan struct{}
		if deadline != nil {
			if watch = b.appendWatch(); watch == nil {
				return nil, ErrClosed
			}
		}
		out, n, failed, err := b.fetchOnce(req.Partitions)
		if err != nil || deadline == nil || failed || n >= req.MinBytes {
			return out, err
		}
		b.fetchWaiting.Add(1)
		select {
		case <-watch:
		case <-deadline:
			deadline = nil // one last look
		case <-ctx.Done():
			b.fetchWaiting.Add(-1)
			return nil, ctx.Err()
		}
		b.fetchWaiting.Add(-1)
	}
}

// appendWatch returns a channel closed when pushed messages are next
// published, or when Close begins; nil once Close has begun.
func (b *Broker) appendWatch() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return nil
	}
	if b.fetchWatch == nil {
		b.fetchWatch = make(chan struct{})
	}
	return b.fetchWatch
}

// appended wakes the FetchPartitions calls waiting for a push. Under b.mu.
func (b *Broker) appended() {
	if b.fetchWatch != nil {
		close(b.fetchWatch)
		b.fetchWatch = nil
	}
}

func (r *FetchRequest) normalize() error {
	switch {
	case len(r.Partitions) > MaxFetchPartitions:
		return argErr("FetchRequest.Partitions", "at most %d, not %d", MaxFetchPartitions, len(r.Partitions))
	case r.MaxWait < 0:
		return argErr("FetchRequest.MaxWait", "must not be negative")
	case r.MaxWait > MaxFetchWait:
		return argErr("FetchRequest.MaxWait", "must be at most %v, not %v", MaxFetchWait, r.MaxWait)
	case r.MinBytes < 0:
		return argErr("FetchRequest.MinBytes", "must not be negative")
	}
	if r.MinBytes == 0 {
		r.MinBytes = 1
	}
	parts := make([]FetchPartition, len(r.Partitions))
	for i, p := range r.Partitions {
		field := "FetchRequest.Partitions[" + strconv.Itoa(i) + "]."
		if p.Partition == "" {
			p.Partition = DefaultPartition
		}
		if err := checkName(field+"Queue", p.Queue); err != nil {
			return err
		}
		if err := checkLabel(field+"Partition", p.Partition); err != nil {
			return err
		}
		switch {
		case p.Offset < 0:
			return argErr(field+"Offset", "must not be negative")
		case p.MaxBytes < 0:
			return argErr(field+"MaxBytes", "must not be negative")
		case p.MaxBytes > MaxFetchBytes:
			return argErr(field+"MaxBytes", "must be at most %d, not %d", MaxFetchBytes, p.MaxBytes)
		case p.MaxBytes == 0:
			p.MaxBytes = DefaultFetchBytes
		}
		parts[i] = p
	}
	r.Partitions = parts
	return nil
}

// fetchOnce reads every partition once. It returns the payload bytes read
// and whether a partition answered an error.
func (b *Broker) fetchOnce(parts []FetchPartition) ([]PartitionRead, int, bool, error) {
	type span struct {
		pid         uint64
		first, next int64
	}
	out := make([]PartitionRead, len(parts))
	spans := make([]span, len(parts))
	failed := false
	if err := b.lockUsable(); err != nil {
		return nil, 0, false, err
	}
	for i, fp := range parts {
		out[i] = PartitionRead{Queue: fp.Queue, Partition: fp.Partition, Records: []Record{}}
		q := b.queues[fp.Queue]
		if q == nil {
			out[i].Err, failed = ErrNotFound, true
			continue
		}
		p := q.parts[fp.Partition]
		if p == nil || p.deleted {
			continue // never written: an empty log
		}
		out[i].HighWatermark, out[i].LogStartOffset = p.next, p.first
		spans[i] = span{p.pid, p.first, p.next}
		if fp.Offset < p.first || fp.Offset > p.next {
			out[i].Err, failed = ErrOffsetOutOfRange, true
		}
	}
	b.mu.Unlock()
	total := 0
	for i, fp := range parts {
		s := spans[i]
		if out[i].Err != nil || fp.Offset >= s.next {
			continue
		}
		budget := fp.MaxBytes
		err := b.readRange(s.pid, fp.Offset, s.next, MaxFetchRecords, func(off int64, m *record.Message) bool {
			payload, err := b.openPayload(m)
			if err != nil {
				payload = nil
			}
			size := max(len(payload), 1)
			if len(out[i].Records) > 0 && size > budget {
				return false
			}
			budget -= size
			total += size
			out[i].Records = append(out[i].Records, Record{
				Offset: off, MessageID: uuid.UUID(m.ID).String(), TransactionID: m.TxID, TraceID: m.TraceID,
				Payload: payload, CreatedAt: time.UnixMicro(m.CreatedAt).UTC(),
			})
			return true
		})
		if err != nil {
			return nil, 0, false, storageErr("fetch", err)
		}
	}
	return out, total, failed, nil
}

// TimeOffset is what [Broker.OffsetForTime] found in a partition.
type TimeOffset struct {
	// Found is false when no retained message was pushed at or after the
	// time: a reader starting then starts at HighWatermark.
	Found bool
	// Offset is the first offset pushed at or after the time, and At that
	// message's push time (both zero unless Found).
	Offset int64
	At     time.Time
	// HighWatermark and LogStartOffset are the partition's, as in
	// [PartitionRead] (both 0 for a partition never written).
	HighWatermark, LogStartOffset int64
}

// OffsetForTime finds the first offset of a partition whose message was
// pushed at or after t (Queen 2.x's POST /api/v1/fetch/offsets): a time
// before the oldest retained message gives the log start, a time after
// the newest gives Found false. Push times never go back within a
// partition, so the search is a binary search over offsets. An unknown
// queue is [ErrNotFound]; a partition never written answers Found false.
// The partition defaults to [DefaultPartition].
func (b *Broker) OffsetForTime(ctx context.Context, queue, partition string, t time.Time) (TimeOffset, error) {
	if err := b.enter(); err != nil {
		return TimeOffset{}, err
	}
	defer b.leave()
	if partition == "" {
		partition = DefaultPartition
	}
	if err := checkName("queue", queue); err != nil {
		return TimeOffset{}, err
	}
	if err := checkLabel("partition", partition); err != nil {
		return TimeOffset{}, err
	}
	q, err := b.lockKnownQueue(queue)
	if err != nil {
		return TimeOffset{}, err
	}
	p := q.parts[partition]
	if p == nil || p.deleted {
		b.mu.Unlock()
		return TimeOffset{}, nil
	}
	res := TimeOffset{HighWatermark: p.next, LogStartOffset: p.first}
	if p.first >= p.next {
		b.mu.Unlock()
		return res, nil
	}
	off := b.firstOffsetAtOrAfter(p, t.UnixMicro())
	pid, end := p.pid, p.next
	b.mu.Unlock()
	if off >= end {
		return res, nil
	}
	err = b.readRange(pid, off, end, 1, func(o int64, m *record.Message) bool {
		res.Found, res.Offset, res.At = true, o, time.UnixMicro(m.CreatedAt).UTC()
		return false
	})
	if err != nil {
		return TimeOffset{}, storageErr("offset for time", err)
	}
	return res, nil
}
