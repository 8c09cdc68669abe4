package queen

import (
	"encoding/json"

	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
)

// group is a consumer group on one queue. Guarded by Broker.mu.
type group struct {
	q          *queue
	name       string
	slot       int // index of this group's cursor in partition.cursors
	mode       SubscriptionMode
	from       int64 // subscriptionFrom, unix µs; 0 unless mode is "from"
	joinedAt   int64
	conflation bool
	deleted    bool
	// mark: partitions with a lower pid existed when the group joined in
	// mode "new" (0 for other modes and early groups). In those, a group
	// with no cursor stands at the partition's end (see startIn): the
	// first push there after the join gives it a stored cursor (see
	// arrivalCursors).
	mark uint64

	ready chain[cursor, *cursor] // partitions with deliverable messages and no lease
	// scan is how far in q.order the group has looked for partitions to
	// read. A group's cursors are made lazily: in a partition where it has
	// none, it stands at the first message (see cursorOf). Beyond scan, such
	// a partition may hold messages for it that no ready list shows yet;
	// discover makes their cursors as pops need them. A message arriving
	// makes the cursors of every group at once (messagesArrived), so scan
	// only matters for partitions that held messages when the group joined
	// or the broker opened.
	scan        int
	waiters     waitList             // pops of any partition
	partWaiters map[string]*waitList // pops of one named partition, by name

	ackRate float64 // messages settled per second, smoothed (autopilot)
	rateAt  int64
}

// modeFrom is the stored mode of a group that started at a timestamp.
const modeFrom SubscriptionMode = "timestamp"

// groupMeta is the stored form of a group.
type groupMeta struct {
	Mode       SubscriptionMode `json:"m"`
	From       int64            `json:"f,omitempty"`
	JoinedAt   int64            `json:"j"`
	Conflation bool             `json:"c,omitempty"`
	Mark       uint64           `json:"pm,omitempty"`
}

func (g *group) meta() []byte {
	b, _ := json.Marshal(groupMeta{Mode: g.mode, From: g.from, JoinedAt: g.joinedAt, Conflation: g.conflation, Mark: g.mark})
	return b
}

// cursor is one group's position in one partition. Guarded by Broker.mu.
// Every partition has one per group, so its size counts: the fields are
// ordered to fit 96 bytes.
type cursor struct {
	p          *partition
	g          *group
	offset     int64 // first offset not yet settled (durable)
	consumed   int64 // messages settled over the cursor's life (durable)
	lastAckAt  int64 // µs (durable)
	notBefore  int64 // µs; retry delay or delayed message: not served before
	wakeAt     int64 // µs; pending timer, 0 if none
	fl         *inflight
	att        *attempts
	readyLinks links[cursor] // its place in its group's ready chain
	retries    int32         // failed acks spent since the last completed batch (durable)
	ready      bool
	held       bool // notBefore is a message's DelayedProcessing visibility, not a retry delay
	stored     bool // saved at least once (see arrivalCursors)
	// arriving: the push, not yet published, whose arrival made c at its
	// group's start is the only one that lists c as waiting for it; until
	// it is written, where that start falls is not known, and c serves
	// nothing (see arrivalCursors).
	arriving bool
}

// inflight is the batch a cursor has handed out and not yet settled.
type inflight struct {
	lease *lease // nil while an autoAck pop reads
	end   int64  // one past the last claimed offset
	msgs  []flight
	hint  int // where find starts looking
}

type flight struct {
	off     int64
	txid    string
	settled bool
}

func (c *cursor) durable() record.Cursor {
	return record.Cursor{Offset: c.offset, Retries: c.retries, Consumed: c.consumed, LastAckAt: c.lastAckAt}
}

// save marks c stored (see arrivalCursors) and returns the write that
// stores it as it is now. Under b.mu, submitted in the same hold of it.
func (c *cursor) save() putCursor {
	c.stored, c.arriving = true, false // a position set since the arrival stands
	return cursorWrite(c)
}

// attempts counts deliveries of the offsets a cursor has handed out but not
// yet settled, as runs of equal counts.
type attempts struct {
	end  int64 // one past the highest offset delivered
	runs []attemptRun
}

type attemptRun struct {
	from int64
	n    int32
}

// deliver counts one more delivery of every offset in [from, to).
func (a *attempts) deliver(from, to int64) {
	if a.end <= from {
		a.runs = append(a.runs[:0], attemptRun{from, 0})
		a.end = from
	}
	// Drop runs wholly below from; the first kept run starts at from.
	i := 0
	for i+1 < len(a.runs) && a.runs[i+1].from <= from {
		i++
	}
	a.runs = append(a.runs[:0], a.runs[i:]...)
	if a.runs[0].from < from {
		a.runs[0].from = from
	} else if a.runs[0].from > from {
		a.runs = append([]attemptRun{{from, 0}}, a.runs...)
	}
	a.split(to) // so only [from, to) is bumped
	if to > a.end {
		a.runs = append(a.runs, attemptRun{a.end, 0})
		a.end = to
	}
	for k := range a.runs {
		if a.runs[k].from < to {
			a.runs[k].n++
		}
	}
	a.merge()
}

// split makes a run start at off, when off lies inside the counted range.
func (a *attempts) split(off int64) {
	if off >= a.end || len(a.runs) == 0 || off <= a.runs[0].from {
		return
	}
	j := len(a.runs) - 1
	for a.runs[j].from > off {
		j--
	}
	if a.runs[j].from == off {
		return
	}
	a.runs = append(a.runs, attemptRun{})
	copy(a.runs[j+2:], a.runs[j+1:])
	a.runs[j+1] = attemptRun{off, a.runs[j].n}
}

// merge joins neighbouring runs with equal counts.
func (a *attempts) merge() {
	out := a.runs[:1]
	for _, r := range a.runs[1:] {
		if r.n == out[len(out)-1].n {
			continue
		}
		out = append(out, r)
	}
	a.runs = out
}

// get returns how many times off was delivered.
func (a *attempts) get(off int64) int32 {
	if a == nil || off >= a.end {
		return 0
	}
	n := int32(0)
	for _, r := range a.runs {
		if r.from > off {
			break
		}
		n = r.n
	}
	return n
}

// wakeAll ends the wait of every pop parked on g, of any partition or of
// one (when the broker closes, or the group or its queue goes away).
func (g *group) wakeAll() {
	g.waiters.wakeAll()
	for _, wl := range g.partWaiters {
		wl.wakeAll()
	}
}

// ready list -------------------------------------------------------------

func (g *group) pushReady(c *cursor) {
	if c.ready {
		return
	}
	c.ready = true
	g.ready.pushBack(c)
}

func (c *cursor) links() *links[cursor] { return &c.readyLinks }

func (g *group) removeReady(c *cursor) {
	if !c.ready {
		return
	}
	g.ready.remove(c)
	c.ready = false
}

// check puts c on its group's ready list if it can be served now, and
// otherwise schedules the moment it might be. Under b.mu.
func (b *Broker) check(c *cursor, now int64) {
	if c.g.deleted || c.p.deleted {
		return
	}
	if c.fl != nil {
		if l := c.fl.lease; l != nil {
			if l.expires <= now {
				b.expireLease(l, now)
			} else {
				b.timers.schedule(c, l.expires)
			}
		}
		return
	}
	if c.ready || !b.servable(c, now) {
		return
	}
	c.g.pushReady(c)
	c.g.waiters.wakeOne()
	if wl := c.g.partWaiters[c.p.name]; wl != nil {
		wl.wakeAll()
	}
}

// servable reports whether c, which holds no lease, has messages it may be
// given now; when only time stands in the way it schedules a check. It
// moves c past retention and over deleted offsets first (in memory; the
// stored cursor catches up at its next save), so a claim starts on a
// stored message.
func (b *Broker) servable(c *cursor, now int64) bool {
	if c.arriving {
		return false
	}
	p := c.p
	if c.offset < p.first {
		c.offset = p.first
	}
	c.offset = p.skipHoles(c.offset)
	if c.offset >= p.next {
		return false
	}
	if c.notBefore > now {
		b.timers.schedule(c, c.notBefore)
		return false
	}
	if w := p.q.cfg.WindowBuffer; w > 0 {
		if open := b.lastPush(p) + w.Microseconds(); open > now {
			b.timers.schedule(c, open)
			return false
		}
	}
	return true
}

// cursorOf returns g's cursor in p, or nil while g has none there. A
// group's cursors are made lazily: without one, g stands at its start in p
// (see startIn), and stats, pending counts, acks and retention treat it
// as a cursor there (see startCursor).
func (p *partition) cursorOf(g *group) *cursor {
	if cs := p.cursorList(); g.slot < len(cs) {
		return cs[g.slot]
	}
	return nil
}

// cursorList returns p's cursors by group slot (nil where a group has
// none).
func (p *partition) cursorList() []*cursor {
	if p.cursors == nil {
		return nil
	}
	return *p.cursors
}

// startIn is where g stands in p while it has no cursor there: the end of
// a partition that existed when g joined in mode "new" (nothing has been
// pushed there since, or the push would have made a cursor), else the
// first message. place makes a cursor wherever a group starts elsewhere.
func (g *group) startIn(p *partition) int64 {
	if g.standsAtEnd(p) {
		return p.next
	}
	return p.first
}

// standsAtEnd reports whether g, while it has no cursor in p, stands at
// p's end: it joined in mode "new" after p was made. Nothing in p is for
// g until a push submitted after the join gives it a cursor there (see
// arrivalCursors); pushes submitted before the join, even those the
// writer has not published yet, are not.
func (g *group) standsAtEnd(p *partition) bool {
	return g.mode == SubscriptionModeNew && p.pid < g.mark
}

// offsetIn is g's cursor offset in p, or where it stands without one.
func (g *group) offsetIn(p *partition) int64 {
	if c := p.cursorOf(g); c != nil {
		return c.offset
	}
	return g.startIn(p)
}

// startCursor returns g's cursor in p, or, where g has none yet, the one
// it stands at (see startIn), not installed. For reading only.
func startCursor(g *group, p *partition) *cursor {
	if c := p.cursorOf(g); c != nil {
		return c
	}
	return &cursor{p: p, g: g, offset: g.startIn(p)}
}

// cursorFor returns g's cursor in p, creating it at the group's start point.
func (b *Broker) cursorFor(g *group, p *partition) *cursor {
	if c := p.cursorOf(g); c != nil {
		return c
	}
	return b.install(g, p, b.startOffset(g, p))
}

// install gives g a cursor in p at off; p has none for g.
func (b *Broker) install(g *group, p *partition, off int64) *cursor {
	if p.cursors == nil {
		p.cursors = new([]*cursor)
	}
	cs := *p.cursors
	for len(cs) <= g.slot {
		cs = append(cs, nil)
	}
	c := &cursor{p: p, g: g, offset: off}
	cs[g.slot] = c
	*p.cursors = cs
	b.repend(p)
	return c
}

// startOffset is where g starts in p when it has no cursor there:
// partitions that were empty when g joined are read from their first
// message, except by a group subscribed from a time later than that.
func (b *Broker) startOffset(g *group, p *partition) int64 {
	if g.mode == modeFrom && g.from > p.createdAt() && p.first < p.next {
		return b.firstOffsetAtOrAfter(p, g.from)
	}
	return g.startIn(p)
}

// place sets g's start point in every partition of its queue where it has
// no cursor, joining or going back to its start: the partition's first
// message, or its end for a group in mode "new" (unless early), or, for
// one subscribed from a time, the first message pushed since. Only the
// last kind gets cursors now (where messages are), and their writes are
// returned; elsewhere g stands at its start without one (see startIn),
// and a group that may find messages there looks for them as it pops
// (see discover). A group joining a queue of many partitions in mode
// "all" or "new" thus costs nothing per partition.
func (b *Broker) place(g *group, early bool, now int64) []command {
	g.scan, g.mark = 0, 0
	var ops []command
	switch g.mode {
	case SubscriptionModeNew:
		if !early {
			g.mark = uint64(len(b.parts))
			g.scan = len(g.q.order) // nothing before the join is for g
		}
	case modeFrom:
		for _, p := range g.q.order {
			if p.deleted || p.first >= p.next || p.cursorOf(g) != nil {
				continue
			}
			if off := b.startOffset(g, p); off != p.first {
				c := b.install(g, p, off)
				ops = append(ops, c.save())
				b.check(c, now)
			}
		}
	}
	if g.scan < len(g.q.order) {
		g.waiters.wakeAll() // a waiting pop looks again
	}
	return ops
}

// discover walks g's undiscovered partitions (see group.scan) and makes a
// cursor in each that holds messages for g, until want of them are ready
// or none is left. Each partition is looked at once per placement, so a
// group's pops pay for its partitions once in all, a few at a time.
func (b *Broker) discover(g *group, want int, now int64) {
	order := g.q.order
	for g.scan < len(order) && g.ready.n < want {
		p := order[g.scan]
		g.scan++
		if p.deleted || p.stored() == 0 || p.cursorOf(g) != nil {
			continue
		}
		if off := g.startIn(p); p.storedFrom(off) > 0 {
			b.check(b.install(g, p, off), now)
		}
	}
}

// arrivalCursors returns, for the push r of p's next messages, the
// writes that store the cursor of every group in mode "new" that joined
// after p was made and has not stored one there: once the messages are
// in, the end has moved, and only a stored cursor tells a restart where
// the group started. Under b.mu, as the push is prepared (see
// preparePush): a push prepared before a group joined counts as before
// the join. The cursors are noted in r (see pushReq.arrivals).
//
// A group with no cursor stands at p's end (see standsAtEnd), past the
// pushes submitted before it joined, which the writer may not have
// published yet: its start is where r's messages land, known once r is
// written. Its cursor is made now, serving nothing until then, and the
// writer stores it at that start (see writer.applyPush and
// Broker.arrived).
func (b *Broker) arrivalCursors(p *partition, r *pushReq) []command {
	var ops []command
	for _, g := range p.q.slots {
		if g == nil || !g.standsAtEnd(p) {
			continue
		}
		switch c := p.cursorOf(g); {
		case c == nil:
			c = b.install(g, p, p.next)
			c.stored, c.arriving = true, true
			r.arrivals = append(r.arrivals, arrival{c: c, key: keys.CursorKey(p.pid, g.name)})
		case !c.stored:
			ops = append(ops, c.save())
			r.arrivals = append(r.arrivals, arrival{c: c})
		}
	}
	return ops
}

// arrival is a cursor a push stores (see arrivalCursors): with a key, one
// the writer stores at start, the end of its partition before the push's
// messages; without, one whose write is in the push's records.
type arrival struct {
	c     *cursor // c.p is fixed when c is made, so the writer may read it
	key   []byte
	start int64 // set by the writer
}

// arrived settles the cursors pr stored as it is published: one that
// waited for pr's write stands at its start, where the writer stored it,
// or, if pr was not written, at p's end, which every earlier push has
// reached by now; the cursors of a push not written are left to a later
// write to store. Under b.mu.
func (b *Broker) arrived(pr *pushReq, committed bool) {
	now := b.now()
	for _, a := range pr.arrivals {
		c := a.c
		if !committed {
			c.stored = false
		}
		if a.key == nil || !c.arriving {
			continue // stored by its own write, or placed since
		}
		c.arriving = false
		c.offset = c.p.next
		if committed {
			c.offset = a.start
		}
		if c.p.cursorOf(c.g) == c {
			b.repend(c.p)
			b.check(c, now)
		}
	}
	pr.arrivals = nil
}

// messagesArrived tells every group of p's queue that p has new messages.
func (b *Broker) messagesArrived(p *partition) {
	now := b.now()
	for _, g := range p.q.slots {
		if g == nil {
			continue
		}
		c := p.cursorOf(g)
		if c == nil {
			if g.standsAtEnd(p) {
				continue // the messages came from pushes before g joined
			}
			c = b.cursorFor(g, p)
		}
		b.check(c, now)
	}
}

// earlyPop names a named group that popped a queue before it existed.
type earlyPop struct{ queue, group string }

// maxEarlyPops bounds how many early pops a broker remembers (pops of
// unknown queues come from outside; they must not grow memory without
// end). Beyond it, such a group starts at its first pop that finds the
// queue.
const maxEarlyPops = 10000

// notePopBeforeQueue remembers, in memory, that group popped queue while
// it did not exist: if the queue is created, the group's first pop there
// starts it at the queue's first message (see join). Under b.mu.
func (b *Broker) notePopBeforeQueue(queue, group string, now int64) {
	k := earlyPop{queue, group}
	if _, ok := b.early[k]; ok || len(b.early) >= maxEarlyPops {
		return
	}
	if b.early == nil {
		b.early = make(map[earlyPop]int64)
	}
	b.early[k] = now
}

// takePopBeforeQueue returns and forgets when group first popped queue
// before it existed. Under b.mu.
func (b *Broker) takePopBeforeQueue(queue, group string) (int64, bool) {
	k := earlyPop{queue, group}
	at, ok := b.early[k]
	if ok {
		delete(b.early, k)
	}
	return at, ok
}

// forgetEarlyPops drops what is remembered of group's pops before its
// queues existed (of queue only, unless queue is ""), and says how many
// it dropped. Under b.mu.
func (b *Broker) forgetEarlyPops(group, queue string) int {
	n := 0
	for k := range b.early {
		if k.group == group && (queue == "" || k.queue == queue) {
			delete(b.early, k)
			n++
		}
	}
	return n
}
