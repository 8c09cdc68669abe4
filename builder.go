package queen

import (
	"context"
	"fmt"
	"math"
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
// option at fault; the first invalid value is the one reported.
//
// Durations have two forms. The [time.Duration] ones (Timeout, Lease,
// RenewLeaseEvery, Idle, DrainTimeout) are the Go form. The millisecond
// and second ones (TimeoutMillis, LeaseSeconds, RenewLease(on, ms),
// IdleMillis) mirror Queen's clients, so code written for them ports
// unchanged. Each pair sets one option: whichever is called last wins,
// as with any option set twice.
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
// consumer group), long polls (Wait(true), up to a Timeout of 30 s), the
// broker choosing batch sizes (Autopilot(true)), the consume loop acking
// for the handler (AutoAck(true)), one handler at a time.
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

// duration sets a duration option through set, refusing a negative d and,
// with max > 0, one above max.
func (q *QueueBuilder) duration(name string, d, max time.Duration, set func(*QueueBuilder, time.Duration)) *QueueBuilder {
	if d < 0 {
		return q.fail(name, "must not be negative, not %v", d)
	}
	if max > 0 && d > max {
		return q.fail(name, "must be at most %v, not %v", max, d)
	}
	return q.with(func(c *QueueBuilder) { set(c, d) })
}

// units is duration for n units (milliseconds or seconds, the form of
// Queen's clients), refusing a count whose duration is above max or, with
// max 0, above the longest Duration.
func (q *QueueBuilder) units(name string, n int, unit, max time.Duration, set func(*QueueBuilder, time.Duration)) *QueueBuilder {
	if n < 0 {
		return q.fail(name, "must not be negative, not %d", n)
	}
	limit := max
	if limit == 0 {
		limit = math.MaxInt64
	}
	if int64(n) > int64(limit/unit) {
		return q.fail(name, "must be at most %d, not %d", limit/unit, n)
	}
	return q.duration(name, time.Duration(n)*unit, max, set)
}

func setTimeout(c *QueueBuilder, d time.Duration) { c.timeout = d }

func setIdle(c *QueueBuilder, d time.Duration) { c.idle = d }

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

// Batch is the most messages one pop takes, over all its partitions: at
// most [MaxBatch] (10000); more is an error. With [QueueBuilder.Fetch] it
// is the most records read per partition (a page holds at most 1000).
func (q *QueueBuilder) Batch(n int) *QueueBuilder {
	if n < 0 {
		return q.fail("Batch", "must not be negative")
	}
	if n > MaxBatch {
		return q.fail("Batch", "must be at most %d, not %d", MaxBatch, n)
	}
	return q.with(func(c *QueueBuilder) { c.batch = n })
}

// Partitions is how many partitions one pop may claim (1 to 64), sharing
// the Batch between them. Above 64 ([MaxPartitions]) is an error.
func (q *QueueBuilder) Partitions(n int) *QueueBuilder {
	if n < 0 {
		return q.fail("Partitions", "must not be negative")
	}
	if n > MaxPartitions {
		return q.fail("Partitions", "must be at most %d, not %d", MaxPartitions, n)
	}
	return q.with(func(c *QueueBuilder) { c.partitions = n })
}

// Wait makes pops wait for messages, up to the Timeout (30 s by
// default), instead of returning empty. On by default. A consume loop
// with Wait(false) polls.
func (q *QueueBuilder) Wait(wait bool) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.wait = wait })
}

// Timeout bounds one waiting pop: 30 s when zero (the default), at most
// 60 s ([MaxPopTimeout]). A negative d, or a longer one, is an error.
// [QueueBuilder.TimeoutMillis] sets the same option; the last call wins.
func (q *QueueBuilder) Timeout(d time.Duration) *QueueBuilder {
	return q.duration("Timeout", d, MaxPopTimeout, setTimeout)
}

// TimeoutMillis is [QueueBuilder.Timeout] in milliseconds, the form of
// Queen's clients (seed-shaped); the two set one option, and the last call
// wins.
func (q *QueueBuilder) TimeoutMillis(ms int) *QueueBuilder {
	return q.units("TimeoutMillis", ms, time.Millisecond, MaxPopTimeout, setTimeout)
}

// Lease is how long a pop leases its messages: the queue's LeaseTime when
// zero (the default), else at least 1 s (Queen counts leases in whole
// seconds; a remote client rounds up to the next second). A negative d,
// one between 0 and 1 s, or one above [MaxLease] (365 days) is an error.
// [QueueBuilder.LeaseSeconds] sets the same option; the last call wins.
func (q *QueueBuilder) Lease(d time.Duration) *QueueBuilder {
	if d < 0 || d > 0 && d < time.Second {
		return q.fail("Lease", "must be 0 (the queue's LeaseTime) or at least 1s, not %v", d)
	}
	if d > MaxLease {
		return q.fail("Lease", "must be at most %v, not %v", MaxLease, d)
	}
	return q.with(func(c *QueueBuilder) { c.lease = d })
}

// LeaseSeconds is [QueueBuilder.Lease] in whole seconds, the form of
// Queen's clients (seed-shaped); the two set one option, and the last call
// wins.
func (q *QueueBuilder) LeaseSeconds(s int) *QueueBuilder {
	return q.units("LeaseSeconds", s, time.Second, MaxLease, func(c *QueueBuilder, d time.Duration) { c.lease = d })
}

// RenewLeaseEvery makes a consume loop renew the leases of the messages
// it holds every d while their handlers run, so long work keeps them.
// Each renewal extends the lease by its full length (Lease, else the
// queue's LeaseTime). Zero, the default, turns renewal off; a negative d
// is an error. [QueueBuilder.RenewLease] sets the same option; the last
// call wins.
func (q *QueueBuilder) RenewLeaseEvery(d time.Duration) *QueueBuilder {
	return q.duration("RenewLeaseEvery", d, 0, func(c *QueueBuilder, d time.Duration) { c.renew = d })
}

// RenewLease is [QueueBuilder.RenewLeaseEvery] in the form of Queen's
// clients (seed-shaped): on renews every intervalMs milliseconds (which
// must then be > 0), off turns renewal off. The two set one option, and
// the last call wins.
func (q *QueueBuilder) RenewLease(on bool, intervalMs int) *QueueBuilder {
	if !on {
		return q.with(func(c *QueueBuilder) { c.renew = 0 })
	}
	if intervalMs <= 0 {
		return q.fail("RenewLease", "interval must be > 0 ms")
	}
	return q.units("RenewLease", intervalMs, time.Millisecond, 0, func(c *QueueBuilder, d time.Duration) { c.renew = d })
}

// AutoAck, on by default, makes the consume loop settle each message
// after its handler returns, from the handler's result: the loop acks for
// the handler. Off, the handler settles the messages itself (with
// [Broker.Ack] or a transaction); a handler that fails is still settled by
// the loop as a failure for whatever it had not settled, so its partition
// is not stuck until the lease runs out. The name is that of Queen's
// clients.
//
// AutoAck is not at-most-once delivery: messages are leased and settled
// after handling, as usual. Settling at delivery, with no lease, is
// [QueueBuilder.CommitOnDelivery] ([PopRequest.CommitOnDelivery], the
// wire's autoAck=true). AutoAck does not apply to Pop.
func (q *QueueBuilder) AutoAck(on bool) *QueueBuilder {
	return q.with(func(c *QueueBuilder) { c.autoAck = on })
}

// CommitOnDelivery makes a pop move the group's cursor as it hands the
// messages out: no lease and nothing to ack, at-most-once (a crash after
// the pop loses the messages). It sets [PopRequest.CommitOnDelivery] (the
// wire's autoAck=true); it is not [QueueBuilder.AutoAck]. Pop only: a
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

// Idle stops a consume loop once it has had nothing to do for d: no
// handler running and no message arriving. Zero, the default, means
// never; a negative d is an error. [QueueBuilder.IdleMillis] sets the same
// option; the last call wins.
func (q *QueueBuilder) Idle(d time.Duration) *QueueBuilder {
	return q.duration("Idle", d, 0, setIdle)
}

// IdleMillis is [QueueBuilder.Idle] in milliseconds, the form of Queen's
// clients (seed-shaped); the two set one option, and the last call wins.
func (q *QueueBuilder) IdleMillis(ms int) *QueueBuilder {
	return q.units("IdleMillis", ms, time.Millisecond, 0, setIdle)
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
// handlers (and for the acks of what they accepted), however it is stopped:
// [Consumer.Stop] (whose ctx may cut it shorter), the end of its ctx, or
// the client's Close (whose own total bound, Options.DrainTimeout for a
// [Broker], may also cut it shorter). Past it, what is left unsettled is
// reported as a [*DrainError]. Defaults to the client's: Options.DrainTimeout
// for a [Broker], 20 s unless configured otherwise.
func (q *QueueBuilder) DrainTimeout(d time.Duration) *QueueBuilder {
	return q.duration("DrainTimeout", d, 0, func(c *QueueBuilder, d time.Duration) { c.drainTimeout = d })
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
		Wait: q.wait, Timeout: q.timeout, Lease: q.lease, CommitOnDelivery: q.commitOnDelivery,
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
// By default Pop waits for a message to arrive, up to 30 s: set
// [QueueBuilder.Timeout] (at most 60 s) to wait less or more, or
// Wait(false) to return at once. ctx bounds this one pop; its end returns
// ctx's error.
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

// Payload is a message for [QueueBuilder.Push] with ids of its own. Pass
// it among Push's payloads where a message needs a transaction id or a
// trace id; other payloads get a generated transaction id and no trace id.
type Payload struct {
	// Data is the message, encoded as any payload of Push is: a
	// [json.RawMessage] or []byte holding JSON byte for byte, anything
	// else marshalled with encoding/json.
	Data any
	// TransactionID makes the push idempotent: a second push with the same
	// id to the same partition stores nothing and is reported
	// [PushDuplicate], with the first message's id. Empty means a
	// generated one. See [PushItem.TransactionID].
	TransactionID string
	// TraceID is a caller-chosen trace id, delivered with the message
	// ([Message.TraceID]). Empty means none. Queen's own server accepts
	// only UUIDs here.
	TraceID string
}

// Push pushes one message per payload to the queue (and the builder's
// Partition, else [DefaultPartition]), in order. [json.RawMessage] and
// []byte payloads must hold JSON and are stored byte for byte; a
// [Payload] (or *Payload) carries its message in Data with its own
// transaction and trace ids; anything else is marshalled with
// encoding/json. See [Broker.Push].
func (q *QueueBuilder) Push(ctx context.Context, payloads ...any) ([]PushResult, error) {
	if q.err != nil {
		return nil, q.err
	}
	items := make([]PushItem, len(payloads))
	for i, p := range payloads {
		it := PushItem{Queue: q.queue, Partition: q.partition}
		if v, ok := p.(*Payload); ok {
			if v == nil {
				return nil, argErr(fmt.Sprintf("payloads[%d]", i), "is a nil *Payload")
			}
			p = *v
		}
		if v, ok := p.(Payload); ok {
			p, it.TransactionID, it.TraceID = v.Data, v.TransactionID, v.TraceID
		}
		raw, err := encodePayload(p)
		if err != nil {
			return nil, argErr(fmt.Sprintf("payloads[%d]", i), "cannot encode: %v", err)
		}
		it.Payload = raw
		items[i] = it
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
	r, err := b.RenewLease(ctx, msg.LeaseID, b.leaseTimeOf(msg.Queue))
	return r.ExpiresAt, err
}
