package modeltest_test

import (
	"slices"
	"sort"
	"time"

	"github.com/queenlite/queen"
)

// The reference model of the sequential model test (model_seq_test.go):
// what the broker holds, written from the documentation and kept next to
// the broker step by step. It is single-threaded; the executor
// (model_exec_test.go) calls the broker, checks the answer against these
// structures and then updates them.

// smMsg is one offset of a partition.
type smMsg struct {
	txid    string
	payload string
	at      int64 // µs, the commit time
	gone    bool  // deleted by DeleteMessage, or below the retention horizon
	deleted bool  // by DeleteMessage: a hole in the offsets
	enc     bool  // pushed to an encrypted queue
	traces  []smTrace
}

type smTrace struct {
	group, event, data string
	names              []string
	at                 int64
}

type smPart struct {
	q        *smQueue
	name     string
	id       string // public id, learnt from the first answer that names it
	created  int64  // µs, truncated to the second as the broker keeps it
	msgs     []*smMsg
	first    int64 // retention horizon
	lastPush int64 // commit time of the newest push, µs
}

func (p *smPart) next() int64 { return int64(len(p.msgs)) }

func (p *smPart) live(off int64) bool {
	return off >= p.first && off < p.next() && !p.msgs[off].gone
}

// firstLive is the first stored offset at or after off, or next.
func (p *smPart) firstLive(off int64) int64 {
	for o := max(off, p.first); o < p.next(); o++ {
		if !p.msgs[o].gone {
			return o
		}
	}
	return p.next()
}

// liveIn counts stored messages in [from, to).
func (p *smPart) liveIn(from, to int64) int64 {
	n := int64(0)
	for o := max(from, p.first); o < min(to, p.next()); o++ {
		if !p.msgs[o].gone {
			n++
		}
	}
	return n
}

// txOffset is the stored message holding txid (the dedup index).
func (p *smPart) txOffset(txid string) (int64, bool) {
	for o := p.first; o < p.next(); o++ {
		if m := p.msgs[o]; !m.gone && m.txid == txid {
			return o, true
		}
	}
	return 0, false
}

// firstAtOrAfter is the first stored offset created at or after at, or next.
func (p *smPart) firstAtOrAfter(at int64) int64 {
	for o := p.first; o < p.next(); o++ {
		if m := p.msgs[o]; !m.gone && m.at >= at {
			return o
		}
	}
	return p.next()
}

// norm is where a cursor at off really stands: the next stored message,
// so positions that differ only by deleted or retained offsets compare equal.
func (p *smPart) norm(off int64) int64 { return p.firstLive(off) }

type smQueue struct {
	name    string
	gen     int // 1 for the first queue of that name, +1 per delete and re-create
	cfg     queen.QueueConfig
	id      string
	parts   map[string]*smPart
	order   []string // partitions in creation order
	groups  map[string]*smGroup
	created int64 // µs
	dead    bool
}

func (q *smQueue) leaseTime() time.Duration {
	if q.cfg.LeaseTime <= 0 {
		return 60 * time.Second
	}
	return q.cfg.LeaseTime
}

// partList lists q's partitions in creation order.
func (q *smQueue) partList() []*smPart {
	out := make([]*smPart, 0, len(q.order))
	for _, n := range q.order {
		out = append(out, q.parts[n])
	}
	return out
}

// groupNames lists q's groups by name.
func (q *smQueue) groupNames() []string {
	out := make([]string, 0, len(q.groups))
	for n := range q.groups {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

type smGroup struct {
	name       string // as the broker names it (queen.QueueModeGroup for queue mode)
	mode       queen.SubscriptionMode
	from       int64
	joined     int64
	conflation bool
	early      bool                 // its first pop came before the queue existed: mode new starts at the first messages
	cursors    map[string]*smCursor // by partition name; a cursor exists once the broker made one
}

// api is the name a request uses for g.
func (g *smGroup) api() string {
	if g.name == queen.QueueModeGroup {
		return ""
	}
	return g.name
}

type smFlight struct {
	off     int64
	txid    string
	settled bool
}

type smCursor struct {
	offset    int64
	consumed  int64
	lastAck   int64
	retries   int
	notBefore int64
	att       map[int64]int // deliveries of offsets not yet settled
	lease     *smLease
	flights   []smFlight
	end       int64
	stored    bool // the broker has a durable record of it
}

type smLease struct {
	id       string
	expires  int64
	shares   int // cursors still held
	released bool
	expired  bool
	expAt    int64 // when the broker saw it expire, µs (it remembers that for an hour)
	lost     bool  // the broker restarted, or the queue went
	q        *smQueue
	g        *smGroup // the group it was handed to
}

type smLetter struct {
	kind     string // "dl" or "pk"
	id       string
	q        *smQueue
	part     string
	off      int64
	group    string
	err      string
	retries  int
	payload  string
	txid     string
	created  int64
	failedAt int64
	gone     bool
}

// cursorFor returns g's cursor in p, creating it at the group's start
// point as the broker does when it first needs one.
func (m *seqModel) cursorFor(g *smGroup, p *smPart) *smCursor {
	if c := g.cursors[p.name]; c != nil {
		return c
	}
	c := &smCursor{offset: p.first, att: map[int64]int{}}
	if g.mode == "timestamp" && g.from > p.created {
		c.offset = p.firstAtOrAfter(g.from)
	}
	g.cursors[p.name] = c
	return c
}

// leaseLive reports whether c's batch is under a live lease.
func (m *seqModel) leaseLive(c *smCursor) bool {
	l := c.lease
	return l != nil && !l.released && !l.lost && !l.expired && m.now() < l.expires
}

// visible reports whether the message at off of p may be delivered now.
func (m *seqModel) visible(p *smPart, off int64) bool {
	d := p.q.cfg.DelayedProcessing
	return d <= 0 || p.msgs[off].at+d.Microseconds() <= m.now()
}

// held reports why c may not be served now, apart from its messages.
func (m *seqModel) held(p *smPart, c *smCursor) bool {
	if m.leaseLive(c) || c.notBefore > m.now() {
		return true
	}
	w := p.q.cfg.WindowBuffer
	return w > 0 && p.lastPush+w.Microseconds() > m.now()
}

// head is the offset g would be served first in p, or -1.
func (m *seqModel) head(g *smGroup, p *smPart, c *smCursor) int64 {
	eo := max(c.offset, p.first)
	if g.conflation {
		for o := p.next() - 1; o >= eo; o-- {
			if p.live(o) {
				return o // the newest stored message
			}
		}
		return -1
	}
	o := p.firstLive(eo)
	if o >= p.next() {
		return -1
	}
	return o
}

// deliverable reports whether a pop of g may be served p now.
func (m *seqModel) deliverable(g *smGroup, p *smPart, c *smCursor) bool {
	if m.held(p, c) {
		return false
	}
	o := m.head(g, p, c)
	return o >= 0 && m.visible(p, o)
}

// lag is what the broker should report as a cursor's lag: stored messages
// at or after it.
func (m *seqModel) lag(p *smPart, c *smCursor) int64 {
	return p.liveIn(max(c.offset, p.first), p.next())
}

// inFlight counts c's unsettled messages under a live lease.
func (m *seqModel) inFlight(c *smCursor) int64 {
	if !m.leaseLive(c) {
		return 0
	}
	n := int64(0)
	for _, f := range c.flights {
		if !f.settled {
			n++
		}
	}
	return n
}

// pending is the queue's Pending: per partition, what the slowest group
// has not settled (everything stored, with no group).
func (m *seqModel) pending(q *smQueue) int64 {
	total := int64(0)
	for _, p := range q.partList() {
		if len(q.groups) == 0 {
			total += p.liveIn(p.first, p.next())
			continue
		}
		worst := int64(0)
		for _, g := range q.groups {
			if c := g.cursors[p.name]; c != nil {
				worst = max(worst, m.lag(p, c))
			}
		}
		total += worst
	}
	return total
}

// stored counts the queue's stored messages.
func (m *seqModel) stored(q *smQueue) int64 {
	n := int64(0)
	for _, p := range q.parts {
		n += p.liveIn(p.first, p.next())
	}
	return n
}

// letters lists the live letters of q of a kind.
func (m *seqModel) lettersOf(q *smQueue, kind string) []*smLetter {
	var out []*smLetter
	for _, l := range m.letters {
		if !l.gone && l.q == q && l.kind == kind {
			out = append(out, l)
		}
	}
	return out
}

// release ends c's share of its lease.
func (m *seqModel) release(c *smCursor) {
	if l := c.lease; l != nil {
		l.shares--
		if l.shares <= 0 && !l.expired && !l.lost {
			l.released = true
		}
	}
	c.lease, c.flights = nil, nil
}

// dropLease releases c's lease and forgets its delivery counts.
func (m *seqModel) dropLease(c *smCursor) {
	m.release(c)
	clear(c.att)
}

// addGroup makes g join q, with a cursor in every partition at its start point.
func (m *seqModel) addGroup(q *smQueue, g *smGroup) {
	g.cursors = map[string]*smCursor{}
	for _, p := range q.partList() {
		c := &smCursor{offset: p.first, att: map[int64]int{}}
		switch g.mode {
		case queen.SubscriptionModeNew:
			if !g.early {
				c.offset = p.next()
			}
		case "timestamp":
			c.offset = p.firstAtOrAfter(g.from)
		}
		c.stored = c.offset != p.first
		g.cursors[p.name] = c
	}
	q.groups[g.name] = g
}

// newGroup is the group a pop of q creates with req. A named group that
// popped q before q existed (or that waited while q was deleted and
// created again: recreated) is early: it joined when q was created.
func (m *seqModel) newGroup(q *smQueue, req queen.PopRequest, recreated bool) *smGroup {
	g := &smGroup{name: groupOf(req.Group), joined: m.now(), conflation: req.Conflation}
	if g.name != queen.QueueModeGroup {
		k := q.name + "\x00" + g.name
		if at, ok := m.early[k]; ok {
			delete(m.early, k)
			g.early, g.joined = true, min(at, q.created)
		} else if recreated {
			g.early, g.joined = true, min(m.now(), q.created)
		}
	}
	switch {
	case req.Group == "" || req.Group == queen.QueueModeGroup:
		g.mode = queen.SubscriptionModeAll
	case !req.SubscriptionFrom.IsZero():
		g.mode, g.from = "timestamp", req.SubscriptionFrom.UnixMicro()
	case req.SubscriptionMode == queen.SubscriptionModeNewOnly:
		g.mode = queen.SubscriptionModeNew
	case req.SubscriptionMode != "":
		g.mode = req.SubscriptionMode
	default:
		g.mode = queen.SubscriptionModeNew
	}
	return g
}

func groupOf(api string) string {
	if api == "" {
		return queen.QueueModeGroup
	}
	return api
}

// deliver records a delivery of offs to c; it returns the attempt of each.
func (m *seqModel) deliver(c *smCursor, offs []int64) []int {
	for o := range c.att {
		if o < offs[0] {
			delete(c.att, o)
		}
	}
	out := make([]int, len(offs))
	for i, o := range offs {
		c.att[o]++
		out[i] = c.att[o]
	}
	return out
}

// settledNow counts what a settle moved a cursor through, for Consumed.
type ackWantSeq struct {
	success, dl, pk, released bool
	counted                   bool // settled or gave back a message: Counters.Acked counts it
	err                       error
}

// partByID resolves a public partition id.
func (m *seqModel) partByID(id string) *smPart {
	p := m.pids[id]
	if p == nil || p.q.dead {
		return nil
	}
	return p
}

// sortedQueues lists the live queues by name.
func (m *seqModel) sortedQueues() []*smQueue {
	var out []*smQueue
	for _, q := range m.queues {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b *smQueue) int {
		if a.name < b.name {
			return -1
		}
		return 1
	})
	return out
}
