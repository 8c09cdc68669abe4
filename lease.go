package queen

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/queenlite/queen/internal/jsonvalue"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/queenlite/queen/internal/uuid"
)

// lease is what a pop hands its caller: exclusive use, for one group, of
// the partitions it claimed, until it expires or every message is settled.
type lease struct {
	id      string
	g       *group
	expires int64 // µs
	cursors []*cursor
}

// PopRequest says what to pop. The zero value of each field means its
// default.
type PopRequest struct {
	// Queue to pop from. Empty means a discovery pop across every queue
	// whose labels match Namespace and Task (which never waits).
	Queue string
	// Partition, when set, pops only that partition.
	Partition string
	// Namespace and Task select queues for a discovery pop.
	Namespace, Task string
	// Group is the consumer group; empty means [QueueModeGroup].
	Group string
	// Batch is the most messages to return, over all partitions.
	// Defaults to 1 (autopilot picks 100–1000); at most [MaxBatch] (10000).
	Batch int
	// Partitions is how many partitions one pop may claim, sharing one
	// lease. Defaults to 1; at most [MaxPartitions] (64).
	Partitions int
	// Wait makes the pop wait up to Timeout for a message to arrive.
	Wait bool
	// Timeout bounds a waiting pop. Defaults to 30 s; at most
	// [MaxPopTimeout] (60 s).
	Timeout time.Duration
	// Lease is how long the messages stay leased. Defaults to the queue's
	// LeaseTime (60 s for discovery pops). Below 1 s it is refused (Queen
	// counts leases in whole seconds), and above [MaxLease] (365 days);
	// between, it is kept to the microsecond.
	Lease time.Duration
	// CommitOnDelivery moves the group's cursor past the messages as they
	// are handed out: no lease, no ack, at-most-once (a crash after the pop
	// loses them). It is the wire's autoAck=true and the builder's
	// [QueueBuilder.CommitOnDelivery], not the builder's AutoAck (the
	// consume loop acking after the handler).
	CommitOnDelivery bool
	// SubscriptionMode is where a new group starts; SubscriptionFrom, when
	// set, wins and starts it at that time. Both are fixed by the group's
	// first pop. Default: Options.DefaultSubscriptionMode. A named group
	// whose first pop finds no queue (or whose waiting pop outlives the
	// queue's deletion) has seen none of its messages yet: in mode "new" it
	// starts at the first message of the queue created after that pop. The
	// broker remembers up to 10000 such pops, in memory only. A group's
	// first pop is reported as [EventGroupJoined], with the number of
	// messages its start point skips.
	SubscriptionMode SubscriptionMode
	SubscriptionFrom time.Time
	// Conflation makes a new group receive only the newest message of each
	// partition, skipping older ones. Fixed by the group's first pop; needs
	// a named group and refuses CommitOnDelivery.
	Conflation bool
	// Autopilot lets the broker choose Batch (100–1000, from the group's
	// ack rate) and Partitions (the ready ones, shared among waiting pops)
	// where they are left zero.
	Autopilot bool
}

// Message is a delivered message.
type Message struct {
	ID              string // UUIDv7 message id
	TransactionID   string
	Queue           string
	Partition       string
	PartitionID     string
	ConsumerGroup   string
	LeaseID         string // "" for autoAck pops and fetches
	Offset          int64  // position in the partition, from 0
	DeliveryAttempt int    // 1 on first delivery to this group, +1 per redelivery (in memory: a restart, seek or group delete starts it over)
	CreatedAt       time.Time
	TraceID         string
	ProducerSub     string
	// Payload is the message's JSON value, byte for byte as pushed.
	Payload json.RawMessage
	// Data is Payload decoded, when it is a JSON object. The broker's Pop
	// leaves it nil; the [QueueBuilder] methods and [Message.Decode] fill it.
	Data map[string]any
}

// Decode fills m.Data from the payload when the payload is a JSON object,
// and returns it.
func (m *Message) Decode() (map[string]any, error) {
	if m.Data != nil {
		return m.Data, nil
	}
	if len(m.Payload) == 0 || m.Payload[0] != '{' {
		return nil, nil
	}
	data, err := jsonvalue.DecodeObject(m.Payload)
	if err != nil {
		return nil, err
	}
	m.Data = data
	return m.Data, nil
}

// PopResult is what a pop returned.
type PopResult struct {
	Queue             string
	Partition         string // first claimed partition
	PartitionID       string
	LeaseID           string // shared by every claimed partition; "" with CommitOnDelivery
	ConsumerGroup     string
	PartitionsClaimed int
	// Conflating is set when the group conflates (an empty pop of such a
	// group is answered with an empty list rather than no content). A
	// pop asking for Conflation of a queue that does not exist yet
	// reports it as asked: the group is made at its first pop that finds
	// the queue.
	Conflating bool
	// ConflationConflict is set when the pop's Conflation differs from
	// the policy the group was made with: the stored policy applies.
	ConflationConflict bool
	// Autopilot is the broker's sizing of an [PopRequest].Autopilot pop
	// (nil for other pops and discovery pops).
	Autopilot *AutopilotAdvice
	Messages  []*Message
}

// AutopilotAdvice is how the broker sized an autopilot pop, and how long
// the caller should let pass before its next pop when this one found
// nothing. Queen 2.x answers it as the pop's autopilot object.
type AutopilotAdvice struct {
	// Batch is the most messages the pop could take: PopRequest.Batch when
	// set, else the broker's choice from the group's ack rate (100–1000).
	Batch int
	// Partitions is how many partitions the pop could claim:
	// PopRequest.Partitions when set, else the ready partitions shared
	// among the group's waiting pops (1–64).
	Partitions int
	// Wait is 0 when the pop delivered messages or the group has a
	// partition ready; else how long until the broker's next timer (a
	// lease expiring, a retry delay or a delayed message ending) could
	// make work appear without a push, at least [AutopilotMinWait] and at
	// most [AutopilotMaxWait] (the latter when no timer is set, or the
	// queue does not exist yet). A waiting pop hears of a push at once.
	Wait time.Duration
}

// Bounds of [AutopilotAdvice].Wait for a pop that found nothing.
const (
	AutopilotMinWait = 50 * time.Millisecond
	AutopilotMaxWait = 2 * time.Second
)

func (r *PopRequest) normalize() error {
	if r.Queue != "" {
		if err := checkName("PopRequest.Queue", r.Queue); err != nil {
			return err
		}
	}
	for _, f := range [...]struct{ name, v string }{{"PopRequest.Partition", r.Partition}, {"PopRequest.Group", r.Group}, {"PopRequest.Namespace", r.Namespace}, {"PopRequest.Task", r.Task}} {
		if err := checkLabel(f.name, f.v); err != nil {
			return err
		}
	}
	if err := firstNegative(signed{"PopRequest.Batch", r.Batch < 0}, signed{"PopRequest.Partitions", r.Partitions < 0},
		signed{"PopRequest.Timeout", r.Timeout < 0}, signed{"PopRequest.Lease", r.Lease < 0}); err != nil {
		return err
	}
	switch {
	case r.Lease > 0 && r.Lease < time.Second:
		return argErr("PopRequest.Lease", "must be at least 1s, not %v", r.Lease)
	case r.Batch > MaxBatch:
		return argErr("PopRequest.Batch", "must be at most %d, not %d", MaxBatch, r.Batch)
	case r.Partitions > MaxPartitions:
		return argErr("PopRequest.Partitions", "must be at most %d, not %d", MaxPartitions, r.Partitions)
	case r.Timeout > MaxPopTimeout:
		return argErr("PopRequest.Timeout", "must be at most %v, not %v", MaxPopTimeout, r.Timeout)
	case r.Lease > MaxLease:
		return argErr("PopRequest.Lease", "must be at most %v, not %v", MaxLease, r.Lease)
	}
	switch r.SubscriptionMode {
	case "", SubscriptionModeNew, SubscriptionModeAll:
	case SubscriptionModeNewOnly:
		r.SubscriptionMode = SubscriptionModeNew
	default:
		return argErr("PopRequest.SubscriptionMode", "must be %q or %q, not %q", SubscriptionModeNew, SubscriptionModeAll, r.SubscriptionMode)
	}
	if r.Group == QueueModeGroup {
		r.Group = ""
	}
	if r.Conflation && r.Group == "" {
		return argErr("PopRequest.Conflation", "needs a consumer group")
	}
	if r.Conflation && r.CommitOnDelivery {
		return argErr("PopRequest.Conflation", "cannot be combined with CommitOnDelivery")
	}
	if r.Partition != "" {
		r.Partitions = 1
	}
	if r.Timeout == 0 {
		r.Timeout = DefaultPopTimeout
	}
	return nil
}

// claim is one partition taken by a pop. The fields up to end are set
// under b.mu when the claim is made and only read after; deliver reads
// storage with them without holding b.mu.
type claim struct {
	c        *cursor
	p        *partition // c.p, read under b.mu (a cursor may be rewritten meanwhile)
	fl       *inflight
	from     int64
	end      int64 // the claim's end when it was made
	skipTo   int64 // conflation: the cursor moves here, past older messages
	cut      int64 // where a delayed message cut the read short; -1 if none
	visible  int64 // µs; when that message becomes visible
	msgs     []record.Message
	offs     []int64
	attempts []int32
}

// popState is what one Pop remembers between its attempts.
type popState struct {
	seen *queue // the queue an earlier attempt found, if any
}

// observePop reports a pop of queue that started at start, and counts the
// lag of what it delivered.
func (b *Broker) observePop(queue string, res *PopResult, start time.Time) {
	b.qcounters.countLag(queue, res.Messages, b.clockNow())
	b.observe(Event{Kind: EventPop, Queue: queue, Group: res.ConsumerGroup, Count: len(res.Messages), Duration: time.Since(start)})
}

// Pop leases messages for a consumer group. With nothing to deliver it
// returns a result with no messages (after waiting, with Wait); it returns
// ctx.Err() if ctx ends while waiting, and [ErrClosed] if the broker closes.
// An unknown queue is not an error: it has no messages yet.
func (b *Broker) Pop(ctx context.Context, req PopRequest) (*PopResult, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	start := time.Now()
	if err := req.normalize(); err != nil {
		return nil, err
	}
	if req.Queue == "" {
		res, err := b.discoveryPop(ctx, req)
		if err == nil {
			b.observePop(res.Queue, res, start)
		}
		return res, err
	}
	var deadline <-chan time.Time
	if req.Wait {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	var ps popState
	for {
		res, w, wl, err := b.tryPop(ctx, &req, &ps)
		if err != nil {
			return nil, err
		}
		if res != nil {
			b.observePop(req.Queue, res, start)
			return res, nil
		}
		select {
		case <-w.ch:
			continue
		case <-deadline:
			b.mu.Lock()
			wl.leave(w)
			b.mu.Unlock()
			req.Wait = false // one last look, then give up
		case <-ctx.Done():
			b.mu.Lock()
			wl.leave(w)
			b.mu.Unlock()
			return nil, ctx.Err()
		}
	}
}

func groupName(g string) string {
	if g == "" {
		return QueueModeGroup
	}
	return g
}

// tryPop makes one attempt. It returns a result, or (with req.Wait) a
// registered waiter to wait on before the next attempt. When what it
// claimed held nothing to deliver it looks again at once: each such round
// moved a cursor past deleted offsets or set a time before which a
// partition is not served, so the rounds end (in a claim, a wait or
// an empty result), and none of them recurses.
func (b *Broker) tryPop(ctx context.Context, req *PopRequest, ps *popState) (*PopResult, *waiter, *waitList, error) {
	for {
		if err := ctx.Err(); err != nil { // a cancelled pop claims nothing
			return nil, nil, nil, err
		}
		res, w, wl, err := b.popOnce(ctx, req, ps)
		if err != nil || res != nil || w != nil {
			return res, w, wl, err
		}
	}
}

// popOnce is one round of tryPop; it returns nothing at all when the
// round should be made again.
func (b *Broker) popOnce(ctx context.Context, req *PopRequest, ps *popState) (*PopResult, *waiter, *waitList, error) {
	conflating, conflict := req.Conflation, false // as asked until the group says
	var advice *AutopilotAdvice
	if req.Autopilot {
		advice = &AutopilotAdvice{Batch: max(req.Batch, 100), Partitions: max(req.Partitions, 1), Wait: AutopilotMaxWait}
	}
	empty := func() *PopResult { // built only when returned
		return &PopResult{Queue: req.Queue, ConsumerGroup: groupName(req.Group), Conflating: conflating,
			ConflationConflict: conflict, Autopilot: advice, Messages: []*Message{}}
	}
	if err := b.lockUsable(); err != nil {
		return nil, nil, nil, err
	}
	now := b.now()
	b.timers.fire(now)
	q := b.queues[req.Queue]
	if q == nil {
		if req.Group != "" {
			b.notePopBeforeQueue(req.Queue, req.Group, now)
		}
		if !req.Wait {
			b.mu.Unlock()
			return empty(), nil, nil, nil
		}
		wl := waitListIn(b.queueWait, req.Queue)
		w := wl.add()
		b.mu.Unlock()
		return nil, w, wl, nil
	}
	recreated := ps.seen != nil && ps.seen != q // deleted and created again while this pop waited
	ps.seen = q
	g, ops, joinEv, err := b.join(q, req, now, recreated)
	if joinEv != nil {
		defer b.reportJoin(*joinEv) // once b.mu is released, on every path below
	}
	if err != nil {
		b.mu.Unlock()
		return nil, nil, nil, err
	}
	conflating = g.conflation
	conflict = joinEv == nil && g.conflation != req.Conflation
	if advice != nil {
		if req.Partitions == 0 {
			b.discover(g, MaxPartitions, now) // the ready partitions, found as the claim would find them
		}
		advice.Batch, advice.Partitions = g.sizing(req)
	}
	delay := q.cfg.DelayedProcessing.Microseconds()
	var p *partition
	var claims []claim
	var l *lease
	if req.Partition != "" {
		p = q.parts[req.Partition]
	}
	// An unknown partition has nothing yet; in maintenance mode nothing
	// is handed out (read under b.mu, see SetMaintenanceMode).
	if (req.Partition == "" || p != nil) && !b.maint.Load() {
		claims, l = b.claim(g, p, req, now)
	}
	var joined <-chan error
	if len(ops) > 0 {
		joined = b.w.submit(ops)
	}
	if len(claims) == 0 {
		var w *waiter
		var wl *waitList
		if req.Wait {
			wl = &g.waiters
			if req.Partition != "" {
				if g.partWaiters == nil {
					g.partWaiters = make(map[string]*waitList)
				}
				wl = waitListIn(g.partWaiters, req.Partition)
			}
			w = wl.add()
		}
		if advice != nil {
			advice.Wait = b.autopilotWait(g, now)
		}
		b.mu.Unlock()
		if joined != nil {
			if err := waitCtx(ctx, joined); err != nil {
				if w != nil {
					b.mu.Lock()
					wl.leave(w)
					b.mu.Unlock()
				}
				return nil, nil, nil, err
			}
		}
		if w != nil {
			return nil, w, wl, nil
		}
		return empty(), nil, nil, nil
	}
	b.mu.Unlock()

	res, err := b.deliver(ctx, g, l, claims, req, now, delay)
	if err == nil && joined != nil {
		err = waitCtx(ctx, joined)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	res.ConflationConflict, res.Autopilot = conflict, advice
	if advice != nil {
		advice.Wait = 0
	}
	if len(res.Messages) == 0 {
		// Everything claimed turned out not deliverable yet (delayed
		// messages, messages deleted meanwhile): look again.
		return nil, nil, nil, nil
	}
	return res, nil, nil, nil
}

// join returns the group a pop reads through, creating it at its first pop
// with its start point in every partition. Under b.mu; ops persist a new
// group and must be written before the pop returns. For a new group it
// also returns the EventGroupJoined to report (see reportJoin).
//
// A named group whose first pop came before the queue existed (an earlier
// pop found no queue, or the queue was deleted and created again while
// this pop waited) starts at the queue's first message even in mode
// "new": everything the queue holds was pushed after that pop.
func (b *Broker) join(q *queue, req *PopRequest, now int64, recreated bool) (*group, []command, *Event, error) {
	name := groupName(req.Group)
	if g := q.groups[name]; g != nil {
		if g.conflation && req.CommitOnDelivery {
			return nil, nil, nil, argErr("PopRequest.CommitOnDelivery", "group %q conflates; it cannot autoAck", name)
		}
		return g, nil, nil, nil
	}
	g := &group{q: q, name: name, joinedAt: now, conflation: req.Conflation}
	early := false
	if req.Group != "" {
		if at, ok := b.takePopBeforeQueue(q.name, name); ok {
			early, g.joinedAt = true, min(at, q.createdAt)
		} else if recreated {
			early, g.joinedAt = true, min(now, q.createdAt)
		}
	}
	switch {
	case req.Group == "":
		g.mode = SubscriptionModeAll
	case !req.SubscriptionFrom.IsZero():
		g.mode, g.from = modeFrom, req.SubscriptionFrom.UnixMicro()
	case req.SubscriptionMode != "":
		g.mode = req.SubscriptionMode
	default:
		g.mode = b.opts.DefaultSubscriptionMode
	}
	ops := b.addGroup(q, g, early)
	return g, ops, &Event{Kind: EventGroupJoined, Queue: q.name, Group: name, Count: int(b.skippedAtJoin(g, early))}, nil
}

// skippedAtJoin counts the retained messages g's start point skips, just
// after addGroup placed it, from what the broker keeps in memory (no
// storage read): in mode "new" every retained message of the queue, in
// mode "timestamp" those before each partition's start cursor. Under
// b.mu.
func (b *Broker) skippedAtJoin(g *group, early bool) int64 {
	switch {
	case early:
		return 0
	case g.mode == SubscriptionModeNew:
		return g.q.count
	case g.mode == modeFrom:
		var n int64
		for _, p := range g.q.order {
			if c := p.cursorOf(g); c != nil && !p.deleted {
				n += p.storedBetween(p.first, c.offset)
			}
		}
		return n
	}
	return 0
}

// reportJoin hands a group's join to the observer, and logs a join that
// skipped messages. Not under b.mu.
func (b *Broker) reportJoin(e Event) {
	b.observe(e)
	if e.Count > 0 {
		b.log.Info("queen: consumer group joined past existing messages; they are not delivered to it",
			"queue", e.Queue, "group", e.Group, "skipped", e.Count)
	}
}

// addGroup installs g on q at its start point (see place) and returns the
// writes that make it durable. An early group in mode "new" starts at
// every partition's first message.
func (b *Broker) addGroup(q *queue, g *group, early bool) []command {
	g.slot = len(q.slots)
	for i, s := range q.slots {
		if s == nil {
			g.slot = i
			break
		}
	}
	if g.slot == len(q.slots) {
		q.slots = append(q.slots, g)
	} else {
		q.slots[g.slot] = g
	}
	q.groups[g.name] = g
	ops := b.place(g, early, b.now())
	ops = append(ops, setKey{keys.GroupKey(q.name, g.name), g.meta()})
	switch {
	case len(q.groups) == 1 && g.mark > 0:
		// The first group, at the end of every partition: nothing is
		// pending any more.
		clear(q.pend)
		q.pending = 0
	case len(q.groups) > 1 && g.mark == 0:
		// g's start counts in pending where the others are past it. One
		// in mode "new" (g.mark set) stands at the end of every partition
		// there is: it adds nothing, and 1M partitions are not walked.
		for _, p := range q.order {
			b.repend(p)
		}
	}
	return ops
}

// sizing is the batch and partitions of a pop of g: as asked, or where an
// autopilot pop left them zero, the broker's choice (batch from the
// group's ack rate, partitions the ready ones shared among the pops
// waiting on the group). Under b.mu.
func (g *group) sizing(req *PopRequest) (batch, parts int) {
	batch, parts = req.Batch, req.Partitions
	if req.Autopilot {
		if batch == 0 {
			batch = min(max(int(g.ackRate), 100), 1000)
		}
		if parts == 0 {
			parts = min(max(1, (g.ready.n+g.waiters.n)/(g.waiters.n+1)), MaxPartitions)
		}
	}
	return max(batch, 1), max(parts, 1)
}

// autopilotWait is the pause advised after an autopilot pop of g that
// found nothing: none while g has a ready partition; else until the
// broker's next timer (a lease expiring, a retry delay or a delayed
// message ending: the earliest moment a pop could find work that no push
// brought), bounded to [AutopilotMinWait, AutopilotMaxWait]. Under b.mu.
func (b *Broker) autopilotWait(g *group, now int64) time.Duration {
	if g != nil && g.ready.n > 0 {
		return 0
	}
	next := b.timers.next()
	if next == 0 {
		return AutopilotMaxWait
	}
	return min(max(time.Duration(next-now)*time.Microsecond, AutopilotMinWait), AutopilotMaxWait)
}

// claim leases up to req.Partitions partitions of g (or just p) holding at
// most req.Batch messages in all. Under b.mu.
func (b *Broker) claim(g *group, p *partition, req *PopRequest, now int64) ([]claim, *lease) {
	batch, parts := g.sizing(req)
	budget := int64(batch)
	var l *lease
	if !req.CommitOnDelivery {
		d := req.Lease
		if d == 0 {
			d = g.q.leaseTime()
		}
		l = &lease{id: uuid.NewV7At(b.clock.Now()).String(), g: g, expires: now + d.Microseconds()}
	}
	var claims []claim
	// c is servable: its offset is on a stored message.
	take := func(c *cursor) {
		p := c.p
		from := c.offset
		end, n := p.span(from, budget) // over deleted offsets
		cl := claim{c: c, p: p, from: from, skipTo: -1, cut: -1}
		if g.conflation {
			from, end, cl.skipTo = conflatedRange(c)
			cl.from, n = from, 1
		}
		cl.end = end
		cl.fl = &inflight{lease: l, end: end}
		c.fl = cl.fl
		g.removeReady(c)
		if l != nil {
			l.cursors = append(l.cursors, c)
		}
		claims = append(claims, cl)
		budget -= n
	}
	switch {
	case p != nil && p.cursorOf(g) == nil && g.standsAtEnd(p):
		// Nothing in p is for g yet (see arrivalCursors).
	case p != nil:
		c := b.cursorFor(g, p)
		if c.fl != nil && c.fl.lease != nil && c.fl.lease.expires <= now {
			b.expireLease(c.fl.lease, now)
		}
		switch {
		case c.fl != nil:
		case b.servable(c, now):
			take(c)
		default:
			// Off the ready list, as in the loop below: the check that
			// finds it servable again puts it back and wakes the pops
			// waiting on p (check skips a cursor already marked ready).
			g.removeReady(c)
		}
	default:
		for budget > 0 && len(claims) < parts {
			c := g.ready.head
			if c == nil {
				b.discover(g, parts-len(claims), now)
				if c = g.ready.head; c == nil {
					break
				}
			}
			g.removeReady(c)
			if c.fl != nil || !b.servable(c, now) {
				continue
			}
			take(c)
		}
	}
	if l != nil && len(l.cursors) > 0 {
		b.leases[l.id] = l
	}
	return claims, l
}

// deliver reads the claimed messages and turns the claims into a result.
// delay is the queue's DelayedProcessing, µs, read under b.mu. Reading
// storage happens without b.mu, so it touches only the claims; what the
// read found is applied to the cursors under b.mu, for the claims still
// theirs.
func (b *Broker) deliver(ctx context.Context, g *group, l *lease, claims []claim, req *PopRequest, now, delay int64) (*PopResult, error) {
	var readErr error
	for i := range claims {
		cl := &claims[i]
		err := b.readRange(cl.p.pid, cl.from, cl.end, int(cl.end-cl.from), func(off int64, m *record.Message) bool {
			if delay > 0 && m.CreatedAt+delay > now {
				cl.cut, cl.visible = off, m.CreatedAt+delay // the claim shrinks to what is visible
				return false
			}
			cl.msgs = append(cl.msgs, *m)
			cl.offs = append(cl.offs, off)
			return true
		})
		if err != nil {
			readErr = err
		}
	}

	b.mu.Lock()
	var ops []command
	for i := range claims {
		cl := &claims[i]
		c := cl.c
		if c.fl != cl.fl { // lost while reading (seek, group or queue delete)
			cl.msgs = nil
			continue
		}
		if cl.cut >= 0 {
			cl.fl.end = cl.cut
			// The hold is the held message's: it applies once the cursor
			// stands on it, now if nothing before it was read or the read
			// commits on delivery. A leased batch before it may come back
			// (a retry) and must not wait for it; once the batch is
			// settled, the next claim finds the held message again.
			if (len(cl.msgs) == 0 || req.CommitOnDelivery) && cl.visible > c.notBefore {
				c.notBefore, c.held = cl.visible, true
			}
		}
		if readErr != nil || len(cl.msgs) == 0 {
			if readErr == nil && cl.fl.end > c.offset {
				// Nothing stored before the end: deleted after the claim
				// was made, or superseded for a conflating group. The
				// cursor steps over those offsets.
				c.offset = cl.fl.end
				b.repend(c.p)
				ops = append(ops, c.save())
			}
			cl.msgs = nil
			b.release(c)
			b.check(c, now)
			continue
		}
		if cl.skipTo > c.offset {
			c.offset = cl.skipTo
			b.repend(c.p)
			ops = append(ops, c.save())
		}
		if c.att == nil {
			c.att = &attempts{}
		}
		c.att.deliver(cl.offs[0], cl.offs[len(cl.offs)-1]+1)
		cl.attempts = make([]int32, len(cl.offs))
		cl.fl.msgs = make([]flight, len(cl.offs))
		for j, off := range cl.offs {
			cl.attempts[j] = c.att.get(off)
			cl.fl.msgs[j] = flight{off: off, txid: cl.msgs[j].TxID}
		}
		if req.CommitOnDelivery {
			c.offset = cl.fl.end
			b.repend(c.p)
			c.consumed += int64(len(cl.offs))
			c.lastAckAt = now
			c.fl = nil
			if c.att.end <= c.offset {
				c.att = nil // no count above the cursor to keep
			}
			ops = append(ops, c.save())
			b.check(c, now)
		} else {
			b.timers.schedule(c, l.expires)
		}
	}
	var done <-chan error
	if len(ops) > 0 {
		done = b.w.submitState(ops)
	}
	leaseID := ""
	if l != nil {
		if len(l.cursors) == 0 {
			delete(b.leases, l.id)
		} else {
			leaseID = l.id
		}
	}
	b.mu.Unlock()
	if readErr != nil {
		return nil, readErr
	}
	if done != nil && req.CommitOnDelivery {
		if err := waitCtx(context.WithoutCancel(ctx), done); err != nil {
			return nil, err
		}
	}

	res := &PopResult{Queue: g.q.name, ConsumerGroup: g.name, LeaseID: leaseID, Conflating: g.conflation, PartitionsClaimed: len(claims)}
	n := 0
	for i := range claims {
		n += len(claims[i].msgs)
	}
	res.Messages = make([]*Message, 0, n)
	block := make([]Message, n)
	for i := range claims {
		cl := &claims[i]
		if len(cl.msgs) == 0 {
			continue
		}
		p := cl.p
		pidStr := p.uuid()
		if res.Partition == "" {
			res.Partition, res.PartitionID = p.name, pidStr
		}
		for j := range cl.msgs {
			m := &cl.msgs[j]
			payload, err := b.openPayload(m)
			if err != nil {
				return nil, err
			}
			msg := &block[0]
			block = block[1:]
			*msg = Message{
				ID: uuid.UUID(m.ID).String(), TransactionID: m.TxID, Queue: g.q.name, Partition: p.name,
				PartitionID: pidStr, ConsumerGroup: g.name, LeaseID: leaseID, Offset: cl.offs[j],
				DeliveryAttempt: int(cl.attempts[j]), CreatedAt: time.UnixMicro(m.CreatedAt).UTC(),
				TraceID: m.TraceID, ProducerSub: m.ProducerSub, Payload: payload,
			}
			res.Messages = append(res.Messages, msg)
		}
	}
	return res, nil
}

// release ends c's part in its lease without settling anything. Under b.mu.
func (b *Broker) release(c *cursor) {
	fl := c.fl
	if fl == nil {
		return
	}
	c.fl = nil
	if l := fl.lease; l != nil {
		for i, lc := range l.cursors {
			if lc == c {
				l.cursors = append(l.cursors[:i], l.cursors[i+1:]...)
				break
			}
		}
		if len(l.cursors) == 0 {
			delete(b.leases, l.id)
		}
	}
}

// dropLease releases c's lease share and forgets its delivery counts (used
// when a cursor is moved or deleted). Under b.mu.
func (b *Broker) dropLease(c *cursor) {
	b.release(c)
	c.att = nil
}

// expireLease frees every partition of l: their batches are delivered
// again from the cursor. Under b.mu.
func (b *Broker) expireLease(l *lease, now int64) {
	delete(b.leases, l.id)
	b.expired.note(l.id, now)
	cursors := l.cursors
	l.cursors = nil
	for _, c := range cursors {
		if c.fl != nil && c.fl.lease == l {
			c.fl = nil
			b.check(c, now)
		}
	}
	b.observe(Event{Kind: EventLeaseExpired, Queue: l.g.q.name, Group: l.g.name, Count: len(cursors)})
}

// LeaseRenewal reports a renewed lease.
type LeaseRenewal struct {
	// ExpiresAt is the lease's new expiry, on the broker's clock.
	ExpiresAt time.Time
	// Partitions counts the partitions the lease holds, all renewed
	// together: a pop that claimed several (PopRequest.Partitions) shares
	// one lease among them.
	Partitions int
}

// RenewLease extends every partition of a lease to at least d from now
// (default 60 s) and returns the new expiry and how many partitions the
// renewal covered (Queen 2.x's renewal answer carries that count as
// renewed). A lease that already expired is [ErrLeaseExpired] and cannot
// be renewed (the broker remembers expired leases for an hour, the
// latest 65536 of them); any other unknown lease, including one released
// because its messages were all settled, is [ErrNotFound]. A negative d,
// or one above [MaxLease], is an [*ArgumentError].
func (b *Broker) RenewLease(ctx context.Context, leaseID string, d time.Duration) (LeaseRenewal, error) {
	if err := b.enter(); err != nil {
		return LeaseRenewal{}, err
	}
	defer b.leave()
	if d < 0 {
		return LeaseRenewal{}, argErr("d", "must not be negative")
	}
	if d > MaxLease {
		return LeaseRenewal{}, argErr("d", "must be at most %v, not %v", MaxLease, d)
	}
	if d == 0 {
		d = DefaultLeaseTime
	}
	if err := b.lockUsable(); err != nil {
		return LeaseRenewal{}, err
	}
	defer b.mu.Unlock()
	now := b.now()
	l := b.leases[leaseID]
	if l == nil {
		if b.expired.has(leaseID, now) {
			return LeaseRenewal{}, ErrLeaseExpired
		}
		return LeaseRenewal{}, ErrNotFound
	}
	if l.expires <= now {
		b.expireLease(l, now)
		return LeaseRenewal{}, ErrLeaseExpired
	}
	l.expires = max(l.expires, now+d.Microseconds())
	b.observe(Event{Kind: EventLeaseRenewed, Queue: l.g.q.name, Group: l.g.name, Count: 1})
	return LeaseRenewal{ExpiresAt: time.UnixMicro(l.expires).UTC(), Partitions: len(l.cursors)}, nil
}

// leaseTimeOf is the lease a pop of queue gets when it does not say.
func (b *Broker) leaseTimeOf(queue string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.queues[queue]; q != nil {
		return q.leaseTime()
	}
	return DefaultLeaseTime
}

// Lease states of a delivered message, as seen by the loop.
const (
	leaseLost    = iota // no longer leased to this delivery
	leaseHeld           // leased to it and not settled
	leaseSettled        // settled, by anyone
)

// leaseState tells whether msg is still leased to the pop that delivered
// it and unsettled.
func (b *Broker) leaseState(msg *Message) int {
	if msg.LeaseID == "" {
		return leaseLost
	}
	if b.lockUsable() != nil {
		return leaseLost
	}
	defer b.mu.Unlock()
	p := b.partitionByID(msg.PartitionID)
	if p == nil {
		return leaseLost
	}
	g := p.q.groups[msg.ConsumerGroup]
	if g == nil {
		return leaseLost
	}
	c := startCursor(g, p)
	if fl := c.fl; fl != nil && fl.lease != nil && fl.lease.id == msg.LeaseID && fl.lease.expires > b.now() {
		if i := fl.find(msg.TransactionID); i >= 0 {
			if fl.msgs[i].settled {
				return leaseSettled
			}
			return leaseHeld
		}
	}
	if c.offset > msg.Offset {
		return leaseSettled
	}
	return leaseLost
}

// discoveryPop pops from the first queue, by priority then name, whose
// labels match and which has a message. It never waits.
func (b *Broker) discoveryPop(ctx context.Context, req PopRequest) (*PopResult, error) {
	if req.Namespace == "" && req.Task == "" {
		return nil, argErr("PopRequest.Queue", "needs a queue name, or Namespace/Task for a discovery pop")
	}
	b.mu.Lock()
	type cand struct {
		name string
		prio int
	}
	var cands []cand
	for name, q := range b.queues {
		if (req.Namespace == "" || q.cfg.Namespace == req.Namespace) && (req.Task == "" || q.cfg.Task == req.Task) {
			cands = append(cands, cand{name, q.cfg.Priority})
		}
	}
	b.mu.Unlock()
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].prio != cands[j].prio {
			return cands[i].prio > cands[j].prio
		}
		return cands[i].name < cands[j].name
	})
	if req.Lease == 0 {
		req.Lease = DefaultLeaseTime
	}
	req.Wait = false
	for _, c := range cands {
		r := req
		r.Queue = c.name
		res, _, _, err := b.tryPop(ctx, &r, &popState{})
		if err != nil {
			return nil, err
		}
		if len(res.Messages) > 0 {
			return res, nil
		}
	}
	return &PopResult{ConsumerGroup: groupName(req.Group), Messages: []*Message{}}, nil
}
