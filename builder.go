package queen

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// QueueBuilder gathers the options of a pop, a consume loop, a push or a
// fetch on one queue, in the fluent style of Queen's clients:
//
//	msgs, err := b.Queue("orders").Group("billing").Batch(10).Wait(false).Pop(ctx)
//
// Every method returns a new builder and leaves its receiver unchanged, so
// a builder can be shared and specialised. Invalid values are reported by
// the call that finishes the chain (Pop, Consume, Push, Fetch), naming the
// option at fault.
type QueueBuilder struct {
	h                host
	queue            string
	partition        string
	group            string
	mode             SubscriptionMode
	from             string
	batch            int
	partitions       int
	wait             bool
	timeout          time.Duration
	lease            time.Duration
	renew            time.Duration // 0: no renewal
	autoAck          bool
	commitOnDelivery bool
	conflation       bool
	autopilot        bool
	each             bool
	limit            int
	idle             time.Duration
	concurrency      int
	drainTimeout     time.Duration
	retry            *RetryPolicy
	fromOffset       int64
	err              error
}

// Queue starts a builder on the named queue. The defaults: queue mode (no
// consumer group), long polls (Wait(true), 30 s), the broker choosing
// batch sizes (Autopilot(true)), the consume loop acking for the handler
// (AutoAck(true)), one handler at a time.
func (b *Broker) Queue(name string) *QueueBuilder { return newQueueBuilder(b, name) }

func newQueueBuilder(h host, name string) *QueueBuilder {
	return &QueueBuilder{h: h, queue: name, wait: true, autoAck: true, autopilot: true, concurrency: 1}
}

func (q *QueueBuilder) with(f func(*QueueBuilder)) *QueueBuilder {
	c := *q
	f(&c)
	return &c
}

func (q *QueueBuilder) fail(field, format string, args ...any) *QueueBuilder {
	return q.with(func(c *QueueBuilder) {
		if c.err == nil {
			c.err = argErr("QueueBuilder."+field, format, args...)
		}
	})
}

// Partition restricts pops, consume loops and pushes to one partition.
// Pushes default to [DefaultPartition]; pops to any partition.
func (q *QueueBuilder) Partition(name string) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.partition = name })
}

// Group reads through a consumer group: every group gets every message,
// and the workers of one group share them. Empty means queue mode.
func (q *QueueBuilder) Group(name string) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.group = name })
}

// SubscriptionMode says where a new group starts. It only counts at the
// group's first pop.
func (q *QueueBuilder) SubscriptionMode(m SubscriptionMode) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.mode = m })
}

// SubscriptionFrom starts a new group at the first message pushed at or
// after an RFC 3339 time; "now" means [SubscriptionModeNew]. It wins over
// SubscriptionMode and only counts at the group's first pop.
func (q *QueueBuilder) SubscriptionFrom(ts string) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.from = ts })
}

// Batch is the most messages one pop takes, over all its partitions. With
// [QueueBuilder.Fetch] it is the most records read per partition.
func (q *QueueBuilder) Batch(n int) *QueueBuilder {
	if n < 0 {
		return q.fail("Batch", "must not be negative")
	}
	return q.with(func(c *QueueBuilder) { c.batch = n })
}

// Partitions is how many partitions one pop may claim (1 to 64), sharing
// the Batch between them.
func (q *QueueBuilder) Partitions(n int) *QueueBuilder {
	if n < 0 {
		return q.fail("Partitions", "must not be negative")
	}
	return q.with(func(c *QueueBuilder) { c.partitions = n })
}

// Wait makes pops wait for messages, up to TimeoutMillis, instead of
// returning empty. On by default. A consume loop with Wait(false) polls.
func (q *QueueBuilder) Wait(wait bool) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.wait = wait })
}

// TimeoutMillis bounds one waiting pop: 30 s by default, at most 60 s.
func (q *QueueBuilder) TimeoutMillis(ms int) *QueueBuilder {
	if ms < 0 {
		return q.fail("TimeoutMillis", "must not be negative")
	}
	return q.with(func(c *QueueBuilder) { c.timeout = time.Duration(ms) * time.Millisecond })
}

// LeaseSeconds is how long a pop leases its messages; the queue's
// LeaseTime by default.
func (q *QueueBuilder) LeaseSeconds(s int) *QueueBuilder {
	if s < 0 {
		return q.fail("LeaseSeconds", "must not be negative")
	}
	return q.with(func(c *QueueBuilder) { c.lease = time.Duration(s) * time.Second })
}

// RenewLease, when on, makes a consume loop renew the leases of the
// messages it holds every intervalMs milliseconds while their handlers
// run, so long work keeps them. Each renewal extends the lease by its
// full length (LeaseSeconds, else the queue's LeaseTime).
func (q *QueueBuilder) RenewLease(on bool, intervalMs int) *QueueBuilder {
	if on && intervalMs <= 0 {
		return q.fail("RenewLease", "interval must be > 0 ms")
	}
	return q.with(func(c *QueueBuilder) {
		c.renew = 0
		if on {
			c.renew = time.Duration(intervalMs) * time.Millisecond
		}
	})
}

// AutoAck, on by default, makes the consume loop settle each message from
// its handler's result. Off, the handler settles the messages itself
// (with [Broker.Ack] or a transaction); a handler that fails is still
// settled by the loop as a failure for whatever it had not settled, so its
// partition is not stuck until the lease runs out. It does not apply to
// Pop; see CommitOnDelivery.
func (q *QueueBuilder) AutoAck(on bool) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.autoAck = on })
}

// CommitOnDelivery makes a pop move the group's cursor as it hands the
// messages out: no lease and nothing to ack, at-most-once. Pop only: a
// consume loop refuses it.
func (q *QueueBuilder) CommitOnDelivery(on bool) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.commitOnDelivery = on })
}

// Conflation makes a new group receive only the newest message of each
// partition, skipping older ones. It is fixed by the group's first pop,
// needs a group and cannot be combined with CommitOnDelivery.
func (q *QueueBuilder) Conflation(on bool) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.conflation = on })
}

// Autopilot, on by default, lets the broker choose the batch size and the
// number of partitions of each pop where Batch and Partitions are not set.
// Off, a pop takes one message from one partition unless told otherwise.
func (q *QueueBuilder) Autopilot(on bool) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.autopilot = on })
}

// Each hands a consume loop's messages to the handler one at a time.
// [QueueBuilder.Consume] always does; with [QueueBuilder.ConsumeBatch]
// the handler then gets batches of one.
func (q *QueueBuilder) Each() *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.each = true })
}

// Limit stops a consume loop once its handlers have been given n messages.
// Zero means no limit.
func (q *QueueBuilder) Limit(n int) *QueueBuilder {
	if n < 0 {
		return q.fail("Limit", "must not be negative")
	}
	return q.with(func(c *QueueBuilder) { c.limit = n })
}

// IdleMillis stops a consume loop after ms milliseconds with nothing to
// do. Zero means never.
func (q *QueueBuilder) IdleMillis(ms int) *QueueBuilder {
	if ms < 0 {
		return q.fail("IdleMillis", "must not be negative")
	}
	return q.with(func(c *QueueBuilder) { c.idle = time.Duration(ms) * time.Millisecond })
}

// Concurrency runs up to n handlers at once, each on its own partitions:
// never two handlers on one partition at the same time. Defaults to 1.
func (q *QueueBuilder) Concurrency(n int) *QueueBuilder {
	if n < 1 {
		return q.fail("Concurrency", "must be >= 1")
	}
	return q.with(func(c *QueueBuilder) { c.concurrency = n })
}

// DrainTimeout bounds how long stopping a consume loop waits for running
// handlers. Defaults to the client's: Options.DrainTimeout for a [Broker],
// 20 s unless configured otherwise.
func (q *QueueBuilder) DrainTimeout(d time.Duration) *QueueBuilder {
	if d < 0 {
		return q.fail("DrainTimeout", "must not be negative")
	}
	return q.with(func(c *QueueBuilder) { c.drainTimeout = d })
}

// RetryPolicy makes a consume loop retry failed messages by p instead of
// by the queue's retry budget. See [RetryPolicy].
func (q *QueueBuilder) RetryPolicy(p RetryPolicy) *QueueBuilder {
	if err := p.validate(); err != nil {
		return q.with(func(c *QueueBuilder) {
			if c.err == nil {
				c.err = err
			}
		})
	}
	return q.with(func(c *QueueBuilder) { c.retry = &p })
}

// FromOffset is where [QueueBuilder.Fetch] starts reading. Defaults to 0.
func (q *QueueBuilder) FromOffset(off int64) *QueueBuilder {
	if off < 0 {
		return q.fail("FromOffset", "must not be negative")
	}
	return q.with(func(c *QueueBuilder) { c.fromOffset = off })
}

// popRequest turns the builder into a pop request.
func (q *QueueBuilder) popRequest() (PopRequest, error) {
	if q.err != nil {
		return PopRequest{}, q.err
	}
	if q.conflation && q.commitOnDelivery {
		return PopRequest{}, argErr("QueueBuilder.Conflation", "cannot be combined with CommitOnDelivery")
	}
	req := PopRequest{
		Queue: q.queue, Partition: q.partition, Group: q.group, Batch: q.batch, Partitions: q.partitions,
		Wait: q.wait, Timeout: q.timeout, Lease: q.lease, AutoAck: q.commitOnDelivery,
		SubscriptionMode: q.mode, Conflation: q.conflation, Autopilot: q.autopilot,
	}
	if q.queue == "" {
		return req, argErr("QueueBuilder.Queue", "must not be empty")
	}
	switch strings.TrimSpace(q.from) {
	case "":
	case "now":
		req.SubscriptionMode = SubscriptionModeNew
	default:
		t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(q.from))
		if err != nil {
			return req, argErr("QueueBuilder.SubscriptionFrom", "not an RFC 3339 time: %q", q.from)
		}
		req.SubscriptionFrom = t
	}
	return req, nil
}

// Pop takes messages once, with [Data] filled for JSON-object payloads,
// and leaves settling them to the caller ([Broker.Ack], a transaction).
// Nothing to deliver is an empty slice, not an error.
//
// [Data]: Message.Data
func (q *QueueBuilder) Pop(ctx context.Context) ([]*Message, error) {
	req, err := q.popRequest()
	if err != nil {
		return nil, err
	}
	res, err := q.h.Pop(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, m := range res.Messages {
		if _, err := m.Decode(); err != nil {
			return res.Messages, fmt.Errorf("queen: decode message %s: %w", m.TransactionID, err)
		}
	}
	return res.Messages, nil
}

// Push pushes one message per payload to the queue (and the builder's
// Partition, else [DefaultPartition]). [json.RawMessage] and []byte
// payloads must hold JSON and are stored byte for byte; anything else is
// marshalled with encoding/json. See [Broker.Push].
func (q *QueueBuilder) Push(ctx context.Context, payloads ...any) ([]PushResult, error) {
	if q.err != nil {
		return nil, q.err
	}
	items := make([]PushItem, len(payloads))
	for i, p := range payloads {
		raw, err := encodePayload(p)
		if err != nil {
			return nil, argErr(fmt.Sprintf("payloads[%d]", i), "cannot encode: %v", err)
		}
		items[i] = PushItem{Queue: q.queue, Partition: q.partition, Payload: raw}
	}
	return q.h.Push(ctx, items)
}

// Fetch reads the named partitions by offset, with no group, lease or ack:
// from FromOffset (0 by default), up to Batch records each (100 by
// default, at most 1000). The result maps each partition name to its
// page. An unknown queue or partition is [ErrNotFound].
func (q *QueueBuilder) Fetch(ctx context.Context, partitions []string) (map[string]*FetchResult, error) {
	if q.err != nil {
		return nil, q.err
	}
	out := make(map[string]*FetchResult, len(partitions))
	for _, p := range partitions {
		res, err := q.h.Fetch(ctx, q.queue, p, q.fromOffset, q.batch)
		if err != nil {
			return nil, fmt.Errorf("queen: fetch %s/%s: %w", q.queue, p, err)
		}
		out[p] = res
	}
	return out, nil
}

// Renew extends the lease msg was delivered under by the queue's
// LeaseTime, as a consume loop's RenewLease does, and returns the new
// expiry. A lease that has already expired cannot be renewed
// ([ErrLeaseExpired]).
func (b *Broker) Renew(ctx context.Context, msg *Message) (time.Time, error) {
	if err := b.enter(); err != nil {
		return time.Time{}, err
	}
	defer b.leave()
	if msg == nil || msg.LeaseID == "" {
		return time.Time{}, argErr("msg", "has no lease")
	}
	return b.RenewLease(ctx, msg.LeaseID, b.leaseTimeOf(msg.Queue))
}
