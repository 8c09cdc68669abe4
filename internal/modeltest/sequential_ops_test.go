package modeltest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/modelgen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/internal/repro"
)

// The executor of the sequential model test: one function per operation,
// each drawing its parameters, printing its Go code, calling the broker,
// checking the answer against the model and updating the model.

// What the operations draw from: q0 more often than q1, the default
// partition 1 time in 16.
var (
	seqQueueNames = []string{"q0", "q1"}
	seqPartNames  = []string{"a", "b", "c"}
	seqQueues     = modelgen.Pool{"q0", "q0", "q0", "q0", "q0", "q0", "q0", "q1", "q1", "q1"}
	seqParts      = modelgen.Pool{"a", "b", "c", "a", "b", "c", "a", "b", "c", "a", "b", "c", "a", "b", "c", queen.DefaultPartition}
	seqGroups     = modelgen.Pool{"", "g1", "g2", modelgen.ConflationGroup}
)

// Go literals for the reproducer.

// gq and gdur write a string and a duration for the reproducer.
var gq, gdur = repro.Quote, repro.Duration

// gtime is an instant as the reproducer writes it: relative to the clock's start.
func (m *seqModel) gtime(us int64) string {
	return fmt.Sprintf("start.Add(%d * time.Microsecond)", us-m.start)
}

// gstamp is an instant as an RFC 3339 string in the reproducer.
func (m *seqModel) gstamp(us int64) string { return m.gtime(us) + ".UTC().Format(time.RFC3339Nano)" }

// gpush and gpushes write pushes for the reproducer.
func gpush(it queen.PushItem) string { return repro.PushItem(it, modelgen.GoPayload) }

func gpushes(items []queen.PushItem) string { return repro.PushItems(items, modelgen.GoPayload) }

// gpop writes a pop request for the reproducer.
func (m *seqModel) gpop(req queen.PopRequest) string {
	return repro.PopRequest(req, func(t time.Time) string { return m.gtime(t.UnixMicro()) })
}

func gack(it queen.AckItem, expr, lexpr string) string {
	if it.LeaseID == "" {
		lexpr = ""
	}
	f := []string{"TransactionID: " + expr + ".TransactionID", "PartitionID: " + expr + ".PartitionID"}
	return "{" + strings.Join(append(f, repro.AckFields(it, lexpr)...), ", ") + "}"
}

func gerr(err error) string {
	for _, e := range []error{queen.ErrClosed, queen.ErrGroupNotFound, queen.ErrNotFound, queen.ErrLeaseExpired, queen.ErrAlreadySettled,
		queen.ErrWrongGroup, queen.ErrInvalidArgument, queen.ErrQueueFull, queen.ErrTooLarge, queen.ErrTransactionAborted, context.Canceled} {
		if errors.Is(err, e) {
			switch e {
			case queen.ErrGroupNotFound:
				return "queen.ErrGroupNotFound"
			case queen.ErrAlreadySettled:
				return "queen.ErrAlreadySettled"
			case queen.ErrWrongGroup:
				return "queen.ErrWrongGroup"
			case context.Canceled:
				return "context.Canceled"
			case queen.ErrClosed:
				return "queen.ErrClosed"
			case queen.ErrNotFound:
				return "queen.ErrNotFound"
			case queen.ErrLeaseExpired:
				return "queen.ErrLeaseExpired"
			case queen.ErrInvalidArgument:
				return "queen.ErrInvalidArgument"
			case queen.ErrQueueFull:
				return "queen.ErrQueueFull"
			case queen.ErrTooLarge:
				return "queen.ErrTooLarge"
			default:
				return "queen.ErrTransactionAborted"
			}
		}
	}
	return fmt.Sprintf("%q", err)
}

// emitErr prints the model's expectation of a call's error.
func (m *seqModel) emitErr(want error) {
	if want == nil {
		m.emit("require.NoError(t, err)")
	} else {
		m.emit("require.ErrorIs(t, err, %s)", gerr(want))
	}
}

// checkErr compares a call's error with the model's; it reports a match.
func (m *seqModel) checkErr(kind, where string, got, want error) bool {
	switch {
	case want == nil && got != nil:
		m.failf(kind, "%s: %v, model says success", where, got)
		return false
	case want != nil && !errors.Is(got, want):
		m.failf(kind, "%s: error %v, model says %v", where, got, want)
		return false
	}
	return true
}

func normPayload(p json.RawMessage) string {
	if len(p) == 0 {
		return "null"
	}
	return string(p)
}

// learnPID records or checks a partition's public id.
func (m *seqModel) learnPID(p *smPart, id, where string) {
	switch {
	case id == "":
		m.failf("partition.id", "%s: empty partition id for %s/%s", where, p.q.name, p.name)
	case p.id == "":
		if other := m.pids[id]; other != nil {
			m.failf("partition.id", "%s: id %s of %s/%s (gen %d) reused for %s/%s (gen %d)", where, id, other.q.name, other.name, other.q.gen, p.q.name, p.name, p.q.gen)
		}
		p.id = id
		m.pids[id] = p
	case p.id != id:
		m.failf("partition.id", "%s: %s/%s id changed from %s to %s", where, p.q.name, p.name, p.id, id)
	}
}

// createQueue adds a queue generation to the model.
func (m *seqModel) createQueue(name string, cfg queen.QueueConfig) *smQueue {
	m.gens[name]++
	q := &smQueue{name: name, gen: m.gens[name], cfg: cfg, parts: map[string]*smPart{}, groups: map[string]*smGroup{}}
	m.queues[name] = q
	q.created = m.now()
	return q
}

func (m *seqModel) partFor(q *smQueue, name string) *smPart {
	if p := q.parts[name]; p != nil {
		return p
	}
	p := &smPart{q: q, name: name, created: m.now() / 1e6 * 1e6}
	q.parts[name] = p
	q.order = append(q.order, name)
	for _, g := range q.groups { // every group has a position in every partition
		m.cursorFor(g, p)
	}
	return p
}

func pushCreatedCfg(it queen.PushItem) queen.QueueConfig {
	c := queen.DefaultQueueConfig()
	c.LeaseTime = 60 * time.Second
	c.Namespace, c.Task, _ = strings.Cut(it.Queue, ".")
	if it.Namespace != "" || it.Task != "" {
		c.Namespace, c.Task = it.Namespace, it.Task
	}
	return c
}

// used is what MaxSize is compared with: messages not yet consumed.
func (m *seqModel) used(q *smQueue) int64 { return m.pending(q) }

type pushWant struct {
	status queen.PushStatus
	off    int64
	err    error
	p      *smPart
	msg    *smMsg
}

// applyPushes predicts and applies a push of items (one storage batch).
func (m *seqModel) applyPushes(items []queen.PushItem) []pushWant {
	now := m.now()
	room := map[*smQueue]int64{}
	want := make([]pushWant, len(items))
	var touched []*smPart
	for i, it := range items {
		q := m.queues[it.Queue]
		if q == nil {
			q = m.createQueue(it.Queue, pushCreatedCfg(it))
		}
		if _, ok := room[q]; !ok && q.cfg.MaxSize > 0 {
			room[q] = int64(q.cfg.MaxSize) - m.used(q)
		}
		part := it.Partition
		if part == "" {
			part = queen.DefaultPartition
		}
		p := m.partFor(q, part)
		want[i].p = p
		if it.TransactionID != "" {
			if off, ok := p.txOffset(it.TransactionID); ok {
				want[i].status, want[i].off = queen.PushDuplicate, off
				continue
			}
		}
		if r, limited := room[q]; limited {
			if r <= 0 {
				want[i].status, want[i].err = queen.PushFailed, queen.ErrQueueFull
				continue
			}
			room[q] = r - 1
		}
		msg := &smMsg{txid: it.TransactionID, payload: normPayload(it.Payload), at: now, enc: q.cfg.EncryptionEnabled}
		want[i].status, want[i].off, want[i].msg = queen.PushQueued, p.next(), msg
		p.msgs = append(p.msgs, msg)
		if !slices.Contains(touched, p) {
			touched = append(touched, p)
		}
	}
	for _, p := range touched {
		p.lastPush = now
		for _, g := range p.q.groups {
			m.cursorFor(g, p)
		}
	}
	return want
}

// checkPushes compares push results with the model's prediction.
func (m *seqModel) checkPushes(where string, items []queen.PushItem, res []queen.PushResult, want []pushWant) int64 {
	if len(res) != len(items) {
		m.failf("push.results", "%s: %d results for %d items", where, len(res), len(items))
		return 0
	}
	queued := int64(0)
	for i, r := range res {
		w := want[i]
		at := fmt.Sprintf("%s item %d (%s/%s tx %q)", where, i, items[i].Queue, w.p.name, items[i].TransactionID)
		if r.Status != w.status || (w.status != queen.PushFailed && r.Offset != w.off) || (w.err != nil && !errors.Is(r.Err, w.err)) {
			m.failf("push.status", "%s: %s at %d (%v), model says %s at %d (%v)", at, r.Status, r.Offset, r.Err, w.status, w.off, w.err)
			continue
		}
		if r.Queue != items[i].Queue || r.Partition != w.p.name {
			m.failf("push.fields", "%s: answered for %s/%s", at, r.Queue, r.Partition)
		}
		m.learnPID(w.p, r.PartitionID, at)
		if w.msg != nil {
			queued++
			if items[i].TransactionID == "" {
				if r.TransactionID == "" {
					m.failf("push.fields", "%s: no generated transactionId", at)
				}
				w.msg.txid = r.TransactionID
			} else if r.TransactionID != items[i].TransactionID {
				m.failf("push.fields", "%s: transactionId %q", at, r.TransactionID)
			}
		}
	}
	return queued
}

func (m *seqModel) opPush(i int, r *rand.Rand, builder bool) {
	qn := seqQueues.Pick(r)
	var items []queen.PushItem
	if builder {
		part := seqParts.Pick(r)
		n := 1 + r.IntN(3)
		var args []string
		for range n {
			p := modelgen.Payload(r)
			if len(p) == 0 {
				p = json.RawMessage("null")
			}
			items = append(items, queen.PushItem{Queue: qn, Partition: part, Payload: p})
			args = append(args, modelgen.GoPayload(p))
		}
		m.emit("_, err = b.Queue(%s).Partition(%s).Push(ctx, %s)", gq(qn), gq(part), strings.Join(args, ", "))
	} else {
		n := 1 + r.IntN(4)
		for range n {
			it := queen.PushItem{Queue: qn, Partition: seqParts.Pick(r)}
			if r.IntN(6) == 0 {
				it.Queue = seqQueueNames[r.IntN(2)]
			}
			if it.Partition == queen.DefaultPartition && r.IntN(2) == 0 {
				it.Partition = ""
			}
			switch {
			case r.IntN(8) == 0:
				it.TransactionID = m.someTxid(r, it.Queue, it.Partition)
			case r.IntN(15) == 0:
				// generated
			default:
				m.nextTx++
				it.TransactionID = fmt.Sprintf("t%d", m.nextTx)
			}
			if r.IntN(6) == 0 {
				it.Namespace, it.Task = "ns", "t0"
			}
			if r.IntN(10) == 0 {
				it.TraceID = "trace-" + strconv.Itoa(r.IntN(5))
			}
			it.Payload = modelgen.Payload(r)
			items = append(items, it)
		}
		m.emit("_, err = b.Push(ctx, %s)", gpushes(items))
	}
	m.emitErr(nil)
	var res []queen.PushResult
	var err error
	if builder {
		var payloads []any
		for _, it := range items {
			payloads = append(payloads, it.Payload)
		}
		res, err = m.b.Queue(qn).Partition(items[0].Partition).Push(mctx, payloads...)
	} else {
		res, err = m.b.Push(mctx, items)
	}
	if !m.checkErr("push.err", "push", err, nil) {
		return
	}
	want := m.applyPushes(items)
	m.counters.pushed += m.checkPushes("push", items, res, want)
}

// someTxid picks the transactionId of a message of queue/part, stored or not.
func (m *seqModel) someTxid(r *rand.Rand, queue, part string) string {
	if part == "" {
		part = queen.DefaultPartition
	}
	if q := m.queues[queue]; q != nil {
		if p := q.parts[part]; p != nil && len(p.msgs) > 0 {
			return p.msgs[r.IntN(len(p.msgs))].txid
		}
	}
	m.nextTx++
	return fmt.Sprintf("t%d", m.nextTx)
}

// modelBudget is the memory budget of the model's brokers: in memory, 64
// MiB stores payloads up to queen.MaxInMemoryPayload, which opPushLarge
// pushes.
const modelBudget = 64 << 20

func (m *seqModel) opPushLarge(i int, r *rand.Rand) {
	n := 3 << 19 // 1.5 MiB: in Badger's value log on disk
	var wantErr error
	if !m.disk {
		n = queen.MaxInMemoryPayload
		if r.IntN(2) == 0 {
			n++
			wantErr = queen.ErrTooLarge
		}
	}
	m.nextTx++
	it := queen.PushItem{Queue: seqQueues.Pick(r), Partition: seqParts.Pick(r), TransactionID: fmt.Sprintf("t%d", m.nextTx), Payload: bigPayload(n)}
	m.emit("_, err = b.Push(ctx, %s)", gpushes([]queen.PushItem{it}))
	m.emitErr(wantErr)
	res, err := m.b.Push(mctx, []queen.PushItem{it})
	if !m.checkErr("push.large", "large push", err, wantErr) || wantErr != nil {
		return
	}
	want := m.applyPushes([]queen.PushItem{it})
	m.counters.pushed += m.checkPushes("large push", []queen.PushItem{it}, res, want)
}

func bigPayload(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
}

// pastTime picks the creation time of a stored message, or now, or a
// time before everything.
func (m *seqModel) pastTime(r *rand.Rand) time.Time {
	switch r.IntN(6) {
	case 0:
		return m.clock.Now()
	case 1:
		return m.clock.Now().Add(-24 * time.Hour)
	}
	var ats []int64
	for _, q := range m.sortedQueues() {
		for _, p := range q.partList() {
			for _, msg := range p.msgs {
				ats = append(ats, msg.at)
			}
		}
	}
	if len(ats) == 0 {
		return m.clock.Now()
	}
	return time.UnixMicro(ats[r.IntN(len(ats))])
}

func (m *seqModel) opPop(i int, r *rand.Rand, builder bool) {
	space := modelgen.Space{Queues: seqQueues, Partitions: seqParts, Groups: seqGroups, Past: m.pastTime}
	req := space.Pop(r, func(req *queen.PopRequest) {
		if r.IntN(5) == 0 {
			req.Partition = seqParts.Pick(r)
		}
	})
	if r.IntN(12) == 0 {
		req.Autopilot = true
	}
	if r.IntN(8) == 0 {
		req.Wait, req.Timeout = true, time.Millisecond
	}
	m.doPop(i, req, builder)
}

// builderPop pops through the QueueBuilder with the options of req.
func (m *seqModel) builderPop(req queen.PopRequest) ([]*queen.Message, error, string) {
	qb := m.b.Queue(req.Queue).Group(req.Group).Batch(req.Batch).Partitions(req.Partitions).Wait(req.Wait).Autopilot(req.Autopilot)
	code := fmt.Sprintf("b.Queue(%s).Group(%s).Batch(%d).Partitions(%d).Wait(%v).Autopilot(%v)", gq(req.Queue), gq(req.Group), req.Batch, req.Partitions, req.Wait, req.Autopilot)
	if req.Partition != "" {
		qb, code = qb.Partition(req.Partition), code+fmt.Sprintf(".Partition(%s)", gq(req.Partition))
	}
	if req.Timeout != 0 {
		qb, code = qb.TimeoutMillis(int(req.Timeout/time.Millisecond)), code+fmt.Sprintf(".TimeoutMillis(%d)", req.Timeout/time.Millisecond)
	}
	if req.Lease != 0 {
		qb, code = qb.LeaseSeconds(int(req.Lease/time.Second)), code+fmt.Sprintf(".LeaseSeconds(%d)", req.Lease/time.Second)
	}
	if req.CommitOnDelivery {
		qb, code = qb.CommitOnDelivery(true), code+".CommitOnDelivery(true)"
	}
	if req.Conflation {
		qb, code = qb.Conflation(true), code+".Conflation(true)"
	}
	if req.SubscriptionMode != "" {
		qb, code = qb.SubscriptionMode(req.SubscriptionMode), code+fmt.Sprintf(".SubscriptionMode(%s)", gq(string(req.SubscriptionMode)))
	}
	if !req.SubscriptionFrom.IsZero() {
		s := req.SubscriptionFrom.UTC().Format(time.RFC3339Nano)
		qb, code = qb.SubscriptionFrom(s), code+fmt.Sprintf(".SubscriptionFrom(%s)", m.gstamp(req.SubscriptionFrom.UnixMicro()))
	}
	msgs, err := qb.Pop(mctx)
	return msgs, err, code + ".Pop(ctx)"
}

// popError is the error the model expects from a pop, before it joins.
func (m *seqModel) popError(req queen.PopRequest) error {
	if req.Conflation && (req.Group == "" || req.CommitOnDelivery) {
		return queen.ErrInvalidArgument
	}
	if q := m.queues[req.Queue]; q != nil && req.CommitOnDelivery {
		if g := q.groups[groupOf(req.Group)]; g != nil && g.conflation {
			return queen.ErrInvalidArgument
		}
	}
	return nil
}

// joinFor is the group a pop of q reads through, joined now if new.
func (m *seqModel) joinFor(q *smQueue, req queen.PopRequest) *smGroup {
	g := q.groups[groupOf(req.Group)]
	if g == nil {
		g = m.newGroup(q, req, false)
		m.addGroup(q, g)
	}
	if req.Partition != "" && !m.maint { // in maintenance mode a pop claims nothing
		if p := q.parts[req.Partition]; p != nil {
			m.cursorFor(g, p)
		}
	}
	return g
}

func (m *seqModel) doPop(i int, req queen.PopRequest, builder bool) {
	wantErr := m.popError(req)
	var res *queen.PopResult
	var err error
	v := fmt.Sprintf("p%d", i)
	if builder {
		v = fmt.Sprintf("m%d", i)
		msgs, berr, code := m.builderPop(req)
		m.emit("%s, err := %s", v, code)
		m.emitErr(wantErr)
		m.emit("_ = %s", v)
		err = berr
		if err == nil {
			res = &queen.PopResult{Messages: msgs}
			if len(msgs) > 0 {
				res.LeaseID = msgs[0].LeaseID
			}
		}
	} else {
		m.emit("%s, err := b.Pop(ctx, %s)", v, m.gpop(req))
		m.emitErr(wantErr)
		m.emit("_ = %s", v)
		res, err = m.b.Pop(mctx, req)
	}
	if !m.checkErr("pop.err", "pop "+m.gpop(req), err, wantErr) || wantErr != nil {
		return
	}
	q := m.queues[req.Queue]
	if q == nil {
		m.noteEarly(req.Queue, groupOf(req.Group))
		if len(res.Messages) > 0 {
			m.failf("pop.unknownQueue", "pop of missing queue %s gave %d messages", req.Queue, len(res.Messages))
		}
		return
	}
	g := m.joinFor(q, req)
	exprs := func(k int) string { return fmt.Sprintf("%s.Messages[%d]", v, k) }
	lexpr := v + ".LeaseID"
	if builder {
		exprs = func(k int) string { return fmt.Sprintf("%s[%d]", v, k) }
		lexpr = v + "[0].LeaseID"
	}
	if h := m.popCheck("pop "+m.gpop(req), q, g, req, res, !builder, exprs, lexpr); h != nil {
		m.helds = append(m.helds, h)
	}
	m.counters.popped += int64(len(res.Messages))
}

// popCheck checks a pop's answer for group g of q and applies it. It
// returns the batch when it was leased.
func (m *seqModel) popCheck(where string, q *smQueue, g *smGroup, req queen.PopRequest, res *queen.PopResult, full bool, expr func(int) string, lexpr string) *smHeld {
	now := m.now()
	if full && (res.Queue != q.name || res.ConsumerGroup != g.name || res.Conflating != g.conflation) {
		m.failf("pop.fields", "%s: result for %s/%s conflating=%v, model says %s/%s %v", where, res.Queue, res.ConsumerGroup, res.Conflating, q.name, g.name, g.conflation)
	}
	budget, maxParts := int64(max(req.Batch, 1)), max(req.Partitions, 1)
	exact := !req.Autopilot
	if req.Autopilot {
		if req.Batch == 0 {
			budget = 1000
		}
		if req.Partitions == 0 {
			maxParts = 64
		}
	}
	if req.Partition != "" {
		maxParts = 1
	}
	if int64(len(res.Messages)) > budget {
		m.failf("pop.batch", "%s: %d messages for a batch of %d", where, len(res.Messages), budget)
	}
	type run struct {
		p    *smPart
		msgs []*queen.Message
	}
	var runs []run
	for _, msg := range res.Messages {
		if len(runs) == 0 || runs[len(runs)-1].p.name != msg.Partition {
			p := q.parts[msg.Partition]
			if p == nil {
				m.failf("pop.partition", "%s: message of unknown partition %q", where, msg.Partition)
				return nil
			}
			for _, r := range runs {
				if r.p == p {
					m.failf("pop.partition", "%s: partition %s split in the answer", where, p.name)
				}
			}
			runs = append(runs, run{p: p})
		}
		runs[len(runs)-1].msgs = append(runs[len(runs)-1].msgs, msg)
	}
	if m.maint && len(runs) > 0 {
		m.failf("pop.maintenance", "%s: %d messages handed out in maintenance mode", where, len(res.Messages))
		return nil
	}
	if len(runs) > maxParts {
		m.failf("pop.partitions", "%s: %d partitions for Partitions=%d", where, len(runs), maxParts)
	}
	if req.Partition != "" && len(runs) == 1 && runs[0].p.name != req.Partition {
		m.failf("pop.partition", "%s: got partition %s", where, runs[0].p.name)
	}
	if len(runs) == 0 {
		m.counts["+pop.empty"]++
		m.checkEmpty(where, q, g, req)
		if res.LeaseID != "" {
			m.failf("pop.lease", "%s: empty answer with lease %s", where, res.LeaseID)
		}
		return nil
	}
	var l *smLease
	if !req.CommitOnDelivery {
		if res.LeaseID == "" || m.leases[res.LeaseID] != nil {
			m.failf("pop.lease", "%s: lease id %q empty or reused", where, res.LeaseID)
			return nil
		}
		d := req.Lease
		if d == 0 {
			d = q.leaseTime()
		}
		l = &smLease{id: res.LeaseID, expires: now + d.Microseconds(), q: q, g: g}
		m.leases[l.id] = l
	} else if res.LeaseID != "" {
		m.failf("pop.lease", "%s: autoAck pop with lease %s", where, res.LeaseID)
	}
	remaining := budget
	h := &smHeld{lease: res.LeaseID, lexpr: lexpr, group: g.api()}
	k := 0
	for ri, rn := range runs {
		p := rn.p
		c := g.cursors[p.name]
		if c == nil {
			m.failf("pop.cursor", "%s: served %s/%s where the group has no cursor", where, q.name, p.name)
			return nil
		}
		pw := fmt.Sprintf("%s: %s/%s %v", where, q.name, p.name, offsets(rn.msgs))
		if m.leaseLive(c) {
			m.failf("pop.leased", "%s: partition still leased (%s until %d, now %d)", pw, c.lease.id, c.lease.expires, now)
		}
		if c.notBefore > now {
			m.failf("pop.retryDelay", "%s: served %dµs before its retry delay ends", pw, c.notBefore-now)
		}
		if w := q.cfg.WindowBuffer; w > 0 && p.lastPush+w.Microseconds() > now {
			m.failf("pop.window", "%s: served %dµs before its window buffer closes", pw, p.lastPush+w.Microseconds()-now)
		}
		hd := m.head(g, p, c)
		var want []int64
		if hd >= 0 {
			if g.conflation {
				want = []int64{hd}
			} else {
				for o := hd; o < p.next() && int64(len(want)) < remaining; o++ {
					if p.msgs[o].gone {
						continue
					}
					if !m.visible(p, o) {
						break
					}
					want = append(want, o)
				}
			}
		}
		got := offsets(rn.msgs)
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			m.failf("pop.order", "%s: model says the batch is a prefix of %v (cursor %d, first %d, next %d)", pw, want, c.offset, p.first, p.next())
			return nil
		}
		if exact && ri == 0 && q.cfg.DelayedProcessing == 0 && len(got) != len(want) {
			m.failf("pop.batchSize", "%s: model says %v", pw, want)
		}
		remaining -= int64(len(got))
		m.counts["+pop.delivered"] += len(got)
		atts := m.deliver(c, got)
		for j, msg := range rn.msgs {
			sm := p.msgs[msg.Offset]
			mw := fmt.Sprintf("%s@%d", pw, msg.Offset)
			if msg.TransactionID != sm.txid || normPayload(msg.Payload) != sm.payload || msg.CreatedAt.UnixMicro() != sm.at {
				m.failf("pop.message", "%s: delivered tx %q at %d payload %.60s, pushed tx %q at %d payload %.60s", mw, msg.TransactionID, msg.CreatedAt.UnixMicro(), msg.Payload, sm.txid, sm.at, sm.payload)
			}
			if msg.Queue != q.name || msg.ConsumerGroup != g.name || msg.LeaseID != res.LeaseID {
				m.failf("pop.fields", "%s: queue %q group %q lease %q", mw, msg.Queue, msg.ConsumerGroup, msg.LeaseID)
			}
			m.learnPID(p, msg.PartitionID, mw)
			if msg.DeliveryAttempt != atts[j] {
				m.failAt("pop.attempt", []string{fmt.Sprintf("require.Equal(t, %d, %s.DeliveryAttempt)", atts[j], expr(k))}, "%s: delivery attempt %d, model says %d", mw, msg.DeliveryAttempt, atts[j])
			}
			h.msgs = append(h.msgs, msg)
			h.exprs = append(h.exprs, expr(k))
			k++
		}
		last := got[len(got)-1]
		if g.conflation && hd > c.offset {
			c.offset, c.stored = hd, true
		}
		if req.CommitOnDelivery {
			c.offset, c.stored = last+1, true
			c.consumed += int64(len(got))
			c.lastAck = now
			pruneAtt(c)
			continue
		}
		c.lease = l
		l.shares++
		c.flights = c.flights[:0]
		for _, msg := range rn.msgs {
			c.flights = append(c.flights, smFlight{off: msg.Offset, txid: msg.TransactionID})
		}
		c.end = last + 1
	}
	if l == nil {
		return nil
	}
	return h
}

func pruneAtt(c *smCursor) {
	for o := range c.att {
		if o < c.offset {
			delete(c.att, o)
		}
	}
}

// checkEmpty checks an empty pop: nothing may have been deliverable.
func (m *seqModel) checkEmpty(where string, q *smQueue, g *smGroup, req queen.PopRequest) {
	var cands []*smPart
	if req.Partition != "" {
		if p := q.parts[req.Partition]; p != nil {
			cands = append(cands, p)
		}
	} else {
		cands = q.partList()
	}
	var ready []string
	excuse := false
	for _, p := range cands {
		c := g.cursors[p.name]
		if c == nil {
			continue
		}
		if m.deliverable(g, p, c) {
			ready = append(ready, p.name)
		}
		if hd := m.head(g, p, c); hd >= 0 && !m.held(p, c) && !m.visible(p, hd) {
			excuse = true // the broker learns a delayed head by claiming it
		}
	}
	if len(ready) > 0 && !excuse && !m.maint {
		m.failAt("pop.empty", []string{"require.Fail(t, \"the pop above gave nothing\") // the model has messages for it"}, "%s: nothing delivered, model says %s/%v deliverable to %s", where, q.name, ready, g.name)
	}
}

func (m *seqModel) opDiscover(i int, r *rand.Rand) {
	req := queen.PopRequest{Namespace: "ns", Group: seqGroups[r.IntN(3)], Batch: r.IntN(5), Partitions: r.IntN(3)}
	if r.IntN(3) == 0 {
		req.Task = "t0"
	}
	v := fmt.Sprintf("p%d", i)
	m.emit("%s, err := b.Pop(ctx, %s)", v, m.gpop(req))
	m.emitErr(nil)
	m.emit("_ = %s", v)
	res, err := m.b.Pop(mctx, req)
	if !m.checkErr("discover.err", "discovery pop", err, nil) {
		return
	}
	var cands []*smQueue
	for _, q := range m.sortedQueues() {
		if q.cfg.Namespace == req.Namespace && (req.Task == "" || q.cfg.Task == req.Task) {
			cands = append(cands, q)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].cfg.Priority > cands[b].cfg.Priority })
	r2 := req
	r2.Lease = 60 * time.Second
	for _, q := range cands {
		r2.Queue = q.name
		g := m.joinFor(q, r2)
		if len(res.Messages) > 0 && res.Queue == q.name {
			if h := m.popCheck("discovery pop of "+q.name, q, g, r2, res, true, func(k int) string { return fmt.Sprintf("%s.Messages[%d]", v, k) }, v+".LeaseID"); h != nil {
				m.helds = append(m.helds, h)
			}
			m.counters.popped += int64(len(res.Messages))
			return
		}
		m.checkEmpty(fmt.Sprintf("discovery pop (answered from %q) passing %s", res.Queue, q.name), q, g, r2)
	}
	if len(res.Messages) > 0 {
		m.failf("discover.queue", "discovery pop answered from %q, not a candidate %v", res.Queue, len(cands))
	}
}

var ackStatusPool = []queen.AckStatus{
	queen.AckCompleted, queen.AckCompleted, queen.AckCompleted, queen.AckCompleted, queen.AckCompleted,
	queen.AckFailed, queen.AckFailed, queen.AckRetry, queen.AckDLQ, queen.AckPark, "success", "",
}

// ackItemsFor draws acks of part or all of h; it returns the items, the
// messages and their expressions, and the messages left over.
func (m *seqModel) ackItemsFor(r *rand.Rand, h *smHeld, txn bool) ([]queen.AckItem, []*queen.Message, []string, []*queen.Message, []string) {
	var pick, rest []*queen.Message
	var pe, re []string
	mode := r.IntN(3)
	k := 1 + r.IntN(len(h.msgs))
	for j, msg := range h.msgs {
		in := mode == 0 || (mode == 1 && j < k) || (mode == 2 && r.IntN(2) == 0)
		if in {
			pick, pe = append(pick, msg), append(pe, h.exprs[j])
		} else {
			rest, re = append(rest, msg), append(re, h.exprs[j])
		}
	}
	if len(pick) == 0 {
		pick, pe, rest, re = h.msgs[:1], h.exprs[:1], h.msgs[1:], h.exprs[1:]
	}
	items := make([]queen.AckItem, len(pick))
	for j, msg := range pick {
		it := queen.AckItem{TransactionID: msg.TransactionID, PartitionID: msg.PartitionID, LeaseID: h.lease, Group: h.group, Status: ackStatusPool[r.IntN(len(ackStatusPool))]}
		if r.IntN(3) > 0 {
			it.Error = "boom " + strconv.Itoa(r.IntN(9))
		}
		if (it.Status == queen.AckFailed || it.Status == queen.AckRetry) && r.IntN(3) == 0 {
			it.Delay = time.Duration(1+r.IntN(8)) * time.Second
		}
		switch {
		case r.IntN(8) == 0:
			it.LeaseID = ""
		case r.IntN(40) == 0:
			it.LeaseID = "00000000-0000-7000-8000-000000000000"
		case r.IntN(60) == 0 && !txn:
			it.Status = "bogus"
		case r.IntN(30) == 0:
			it.Group = seqGroups[r.IntN(3)]
		}
		items[j] = it
	}
	return items, pick, pe, rest, re
}

func (m *seqModel) opAck(i int, r *rand.Rand, single bool) {
	if len(m.helds) == 0 {
		return
	}
	hi := r.IntN(len(m.helds))
	h := m.helds[hi]
	items, pick, pe, rest, re := m.ackItemsFor(r, h, false)
	var results []queen.AckResult
	var err error
	if single {
		// Ack takes one message: the others stay held.
		msg, expr, it := pick[0], pe[0], items[0]
		rest, re = nil, nil
		for j, x := range h.msgs {
			if x != msg {
				rest, re = append(rest, x), append(re, h.exprs[j])
			}
		}
		items, pick = items[:1], pick[:1]
		ok := it.Status != queen.AckFailed
		opts := queen.AckOptions{Error: it.Error, Delay: it.Delay}
		code := fmt.Sprintf("queen.AckOptions{Error: %s, Delay: %s", gq(opts.Error), gdur(opts.Delay))
		if ok {
			opts.Status = it.Status
			code += ", Status: " + gq(string(it.Status))
		} else {
			it.Status = queen.AckFailed
		}
		if it.LeaseID != h.lease && it.LeaseID != "" {
			opts.LeaseID = it.LeaseID
			code += ", LeaseID: " + gq(it.LeaseID)
		}
		it.LeaseID = cmpOr(it.LeaseID, h.lease) // Ack falls back to the message's lease
		if it.Group != h.group {
			opts.ConsumerGroup = groupOf(it.Group)
			code += ", ConsumerGroup: " + gq(opts.ConsumerGroup)
		}
		if it.Status == "" {
			it.Status = queen.AckCompleted
		}
		items[0] = it
		want, _ := m.settle(items, false)
		m.emit("_, err = b.Ack(ctx, %s, %v, %s})", expr, ok, code)
		m.emitErr(want[0].err)
		res, aerr := m.b.Ack(mctx, msg, ok, opts)
		if res == nil {
			m.failf("ack.err", "Ack: no result (%v)", aerr)
			return
		}
		if (aerr == nil) != (res.Err == nil) {
			m.failf("ack.err", "Ack returned %v with an item error %v", aerr, res.Err)
		}
		m.finishAck(hi, h, items, pick, []queen.AckResult{*res}, want, rest, re)
		return
	}
	want, _ := m.settle(items, false)
	s := make([]string, len(items))
	for j, it := range items {
		lx := h.lexpr
		if it.LeaseID != h.lease {
			lx = ""
		}
		s[j] = gack(it, pe[j], lx)
	}
	m.emit("_, err = b.AckBatch(ctx, []queen.AckItem{%s})", strings.Join(s, ", "))
	m.emitErr(nil)
	results, err = m.b.AckBatch(mctx, items)
	if !m.checkErr("ack.err", "ack", err, nil) {
		return
	}
	m.finishAck(hi, h, items, pick, results, want, rest, re)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// finishAck checks an ack's results and forgets what it finished.
func (m *seqModel) finishAck(hi int, h *smHeld, items []queen.AckItem, pick []*queen.Message, results []queen.AckResult, want []ackWantSeq, rest []*queen.Message, re []string) {
	m.checkAcks("ack", items, pick, results, want)
	for j, w := range want {
		if w.counted && results[j].Success {
			m.counters.acked[normAck(items[j].Status)]++
		}
	}
	if len(rest) == 0 {
		m.helds = slices.Delete(m.helds, hi, hi+1)
	} else {
		h.msgs, h.exprs = rest, re
	}
	m.learnLetters()
}

func normAck(s queen.AckStatus) queen.AckStatus {
	if s == "" || s == "success" {
		return queen.AckCompleted
	}
	return s
}

// checkAcks compares ack results with the model's prediction.
func (m *seqModel) checkAcks(where string, items []queen.AckItem, pick []*queen.Message, got []queen.AckResult, want []ackWantSeq) {
	if len(got) != len(items) {
		m.failf("ack.results", "%s: %d results for %d items", where, len(got), len(items))
		return
	}
	for j := range items {
		g, w := got[j], want[j]
		at := fmt.Sprintf("%s %s/%s@%d %q lease=%q group=%q", where, pick[j].Queue, pick[j].Partition, pick[j].Offset, items[j].Status, items[j].LeaseID, items[j].Group)
		switch {
		case w.err != nil && !errors.Is(g.Err, w.err):
			m.failf("ack.refusal", "%s: err %v, model says %v", at, g.Err, w.err)
		case w.err == nil && g.Err != nil:
			m.failf("ack.refusal", "%s: refused (%v), model says success", at, g.Err)
		case g.Success != w.success || g.DeadLettered != w.dl || g.Parked != w.pk || g.LeaseReleased != w.released:
			m.failf("ack.outcome", "%s: success=%v dl=%v parked=%v released=%v, model says %+v", at, g.Success, g.DeadLettered, g.Parked, g.LeaseReleased, w)
		}
	}
}

type smTarget struct {
	i  int
	p  *smPart
	g  *smGroup
	c  *smCursor
	fi int
}

// resolve finds what an ack item names, as the broker does.
func (m *seqModel) resolve(it queen.AckItem) (smTarget, bool, error) {
	switch normAck(it.Status) {
	case queen.AckCompleted, queen.AckFailed, queen.AckRetry, queen.AckDLQ, queen.AckPark:
	default:
		return smTarget{}, false, queen.ErrInvalidArgument
	}
	p := m.partByID(it.PartitionID)
	if p == nil {
		return smTarget{}, false, queen.ErrNotFound
	}
	g := p.q.groups[groupOf(it.Group)]
	if g == nil {
		if _, ok := p.txOffset(it.TransactionID); ok {
			return smTarget{}, false, queen.ErrGroupNotFound
		}
		return smTarget{}, false, queen.ErrNotFound
	}
	if l := m.leases[it.LeaseID]; it.LeaseID != "" && l != nil && l.g != g && l.q == p.q &&
		!l.released && !l.lost && !l.expired && m.now() < l.expires {
		return smTarget{}, false, queen.ErrWrongGroup // another group's live lease
	}
	c := g.cursors[p.name]
	if c == nil {
		if _, ok := p.txOffset(it.TransactionID); ok {
			return smTarget{}, false, queen.ErrLeaseExpired
		}
		return smTarget{}, false, queen.ErrNotFound
	}
	if m.leaseLive(c) && len(c.flights) > 0 {
		if fi := slices.IndexFunc(c.flights, func(f smFlight) bool { return f.txid == it.TransactionID }); fi >= 0 {
			switch {
			case c.flights[fi].settled: // by an earlier call
				return smTarget{}, false, queen.ErrAlreadySettled
			case it.LeaseID != "" && c.lease.id != it.LeaseID:
				return smTarget{}, false, queen.ErrLeaseExpired
			}
			return smTarget{p: p, g: g, c: c, fi: fi}, false, nil
		}
	}
	off, ok := p.txOffset(it.TransactionID)
	if !ok {
		return smTarget{}, false, queen.ErrNotFound
	}
	if off < c.offset {
		return smTarget{}, false, queen.ErrAlreadySettled
	}
	return smTarget{}, false, queen.ErrLeaseExpired
}

// settle predicts and applies an ack batch. With all (a transaction), the
// first refused item aborts everything: nothing is applied and its index
// is returned (else -1).
func (m *seqModel) settle(items []queen.AckItem, all bool) ([]ackWantSeq, int) {
	now := m.now()
	want := make([]ackWantSeq, len(items))
	var targets []smTarget
	for i, it := range items {
		t, before, err := m.resolve(it)
		if err != nil {
			want[i].err = err
			if all {
				return want, i
			}
			continue
		}
		if before {
			want[i].success = true
			continue
		}
		t.i = i
		targets = append(targets, t)
	}
	byCursor := map[*smCursor][]smTarget{}
	var order []*smCursor
	for _, t := range targets {
		if byCursor[t.c] == nil {
			order = append(order, t.c)
		}
		byCursor[t.c] = append(byCursor[t.c], t)
	}
	for _, c := range order {
		ts := byCursor[c]
		sort.SliceStable(ts, func(a, b int) bool { return ts[a].fi < ts[b].fi })
		p, g, q := ts[0].p, ts[0].g, ts[0].p.q
		comeback, settledNow := false, 0
		for _, t := range ts {
			it, w, f := items[t.i], &want[t.i], &c.flights[t.fi]
			w.success = true
			if comeback || f.settled {
				continue
			}
			w.counted = true // it settles or gives back a message
			switch normAck(it.Status) {
			case queen.AckCompleted:
				f.settled = true
			case queen.AckDLQ:
				f.settled, w.dl = true, true
				m.addLetter("dl", p, g, f.off, f.txid, orDefault(it.Error, "Unknown error"), c.retries)
			case queen.AckPark:
				f.settled, w.pk = true, true
				m.addLetter("pk", p, g, f.off, f.txid, it.Error, c.retries)
			case queen.AckFailed:
				if c.retries < q.cfg.RetryLimit {
					c.retries++
					comeback = true
					d := q.cfg.RetryDelay
					if it.Delay > 0 {
						d = it.Delay
					}
					if d > 0 {
						c.notBefore = now + d.Microseconds()
					}
				} else {
					f.settled, w.dl = true, true
					m.addLetter("dl", p, g, f.off, f.txid, orDefault(it.Error, "Retries exhausted"), c.retries)
				}
			case queen.AckRetry:
				comeback = true
				if it.Delay > 0 {
					c.notBefore = now + it.Delay.Microseconds()
				}
			}
			if f.settled {
				settledNow++
			}
		}
		m.countLetters()
		prefix, allDone := c.offset, true
		for _, f := range c.flights {
			if !f.settled {
				allDone = false
				break
			}
			prefix = f.off + 1
		}
		if allDone && !comeback {
			prefix = c.end
			c.retries = 0
		}
		moved := prefix != c.offset
		k := 0
		for k < len(c.flights) && c.flights[k].off < prefix {
			k++
		}
		c.flights = c.flights[k:]
		c.offset = prefix
		c.consumed += int64(settledNow)
		if settledNow > 0 {
			c.lastAck = now
		}
		if moved || comeback || settledNow > 0 {
			c.stored = true
		}
		pruneAtt(c)
		if comeback || allDone {
			m.release(c)
			for _, t := range ts {
				want[t.i].released = true
			}
		}
	}
	return want, -1
}

func (m *seqModel) addLetter(kind string, p *smPart, g *smGroup, off int64, txid, errText string, retries int) {
	l := &smLetter{kind: kind, q: p.q, part: p.name, off: off, group: g.name, err: errText, retries: retries, txid: txid, failedAt: m.now()}
	if p.live(off) {
		l.payload, l.created = p.msgs[off].payload, p.msgs[off].at
	}
	m.letters = append(m.letters, l)
	m.counts["+letter."+kind]++
	m.batchKinds = append(m.batchKinds, kind)
}

// countLetters counts the letters one cursor's settle (or eviction) made.
func (m *seqModel) countLetters() {
	for _, k := range m.batchKinds {
		if k == "dl" {
			m.counters.dead++
		} else {
			m.counters.parked++
		}
	}
	m.batchKinds = m.batchKinds[:0]
}

func (m *seqModel) opRenew(i int, r *rand.Rand, viaMsg bool) {
	if len(m.helds) == 0 {
		m.emit("_, err = b.RenewLease(ctx, %q, 0)", "00000000-0000-7000-8000-000000000001")
		m.emitErr(queen.ErrNotFound)
		_, err := m.b.RenewLease(mctx, "00000000-0000-7000-8000-000000000001", 0)
		m.checkErr("renew.unknown", "renew of an unknown lease", err, queen.ErrNotFound)
		return
	}
	h := m.helds[r.IntN(len(m.helds))]
	d := []time.Duration{0, 10 * time.Second, 90 * time.Second}[r.IntN(3)]
	var got time.Time
	var err error
	if viaMsg {
		d = 60 * time.Second
		if q := m.queues[h.msgs[0].Queue]; q != nil {
			d = q.leaseTime()
		}
		m.emit("_, err = b.Renew(ctx, %s)", h.exprs[0])
		got, err = m.b.Renew(mctx, h.msgs[0])
	} else {
		m.emit("_, err = b.RenewLease(ctx, %s, %s)", h.lexpr, gdur(d))
		var ren queen.LeaseRenewal
		ren, err = m.b.RenewLease(mctx, h.lease, d)
		got = ren.ExpiresAt
		if d == 0 {
			d = 60 * time.Second
		}
	}
	l := m.leases[h.lease]
	var want error
	switch {
	case l.lost, l.released, l.expired && m.now()-l.expAt > time.Hour.Microseconds():
		want = queen.ErrNotFound // forgotten an hour after it expired
	case l.expired || l.expires <= m.now():
		want = queen.ErrLeaseExpired
	}
	m.emitErr(want)
	if !m.checkErr("renew.err", "renew of lease "+l.id, err, want) || want != nil {
		return
	}
	l.expires = max(l.expires, m.now()+d.Microseconds())
	m.counters.renewed++
	m.counts["+renew.ok"]++
	if got.UnixMicro() != l.expires {
		m.failf("renew.expiry", "renew of %s: expires %d, model says %d", l.id, got.UnixMicro(), l.expires)
	}
}

var advanceSteps = []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 6 * time.Second, 31 * time.Second, 61 * time.Second, 130 * time.Second, 400 * time.Second}

func (m *seqModel) opAdvance(r *rand.Rand) {
	d := advanceSteps[r.IntN(len(advanceSteps))]
	if r.IntN(25) == 0 {
		d = 2 * time.Hour
	}
	m.advance(d)
}

// advance moves the clock and lets the broker's timers run (a pop of a
// queue that does not exist fires every due timer synchronously), so
// whatever looks at leases next sees the expired ones gone.
func (m *seqModel) advance(d time.Duration) {
	m.emit("clock.Advance(%s)", gdur(d))
	m.emit("_, _ = b.Pop(ctx, queen.PopRequest{Queue: \"tick\"}) // fires due timers")
	m.clock.Advance(d)
	if _, err := m.b.Pop(mctx, queen.PopRequest{Queue: "tick"}); err != nil {
		m.failf("tick", "pop of a missing queue: %v", err)
	}
	now := m.now()
	seen := map[*smLease]bool{}
	for _, q := range m.queues {
		for _, g := range q.groups {
			for _, c := range g.cursors {
				if l := c.lease; l != nil && !l.released && !l.lost && l.expires <= now {
					if !seen[l] {
						seen[l] = true
						m.counters.expired++
					}
					l.expired, l.expAt = true, now
					c.lease, c.flights = nil, nil
				}
			}
		}
	}
}

func (m *seqModel) opMaintain() {
	m.emit("require.NoError(t, b.Maintain(ctx))")
	if err := m.b.Maintain(mctx); err != nil {
		m.failf("maintain.err", "Maintain: %v", err)
		return
	}
	now := m.now()
	for _, q := range m.sortedQueues() {
		cfg := q.cfg
		if cfg.Retention <= 0 && cfg.CompletedRetention <= 0 && cfg.MaxWaitTime <= 0 {
			continue
		}
		for _, p := range q.partList() {
			if cfg.MaxWaitTime > 0 {
				m.evict(p, now-cfg.MaxWaitTime.Microseconds())
				m.retain(p, now-cfg.MaxWaitTime.Microseconds(), retainUnread)
			}
			if cfg.Retention > 0 {
				m.retain(p, now-cfg.Retention.Microseconds(), retainAll)
			}
			if cfg.CompletedRetention > 0 {
				m.retain(p, now-cfg.CompletedRetention.Microseconds(), retainCompleted)
			}
		}
	}
	m.learnLetters()
}

// evict dead-letters, per group, the unsettled messages created before cutoff.
func (m *seqModel) evict(p *smPart, cutoff int64) {
	for _, gn := range p.q.groupNames() {
		g := p.q.groups[gn]
		c := g.cursors[p.name]
		if c == nil || m.leaseLive(c) {
			continue
		}
		c.offset = max(c.offset, p.first)
		end := c.offset
		for o := c.offset; o < p.next(); o++ {
			msg := p.msgs[o]
			if msg.gone {
				continue
			}
			if msg.at >= cutoff {
				break
			}
			m.addLetter("dl", p, g, o, msg.txid, "max wait time exceeded", 0)
			end = o + 1
		}
		m.countLetters()
		if end != c.offset {
			c.offset, c.stored = end, true
		}
	}
}

const (
	retainAll       = iota // every old message
	retainCompleted        // those every group has passed
	retainUnread           // every old one, while no group reads the partition (MaxWaitTime)
)

// retain deletes p's oldest messages created before cutoff, of the kind given.
func (m *seqModel) retain(p *smPart, cutoff int64, kind int) {
	end := p.next()
	if kind != retainAll {
		n := 0
		for _, g := range p.q.groups {
			if c := g.cursors[p.name]; c != nil {
				end = min(end, c.offset)
				n++
			}
		}
		if (kind == retainCompleted && n == 0) || (kind == retainUnread && n > 0) {
			return
		}
	}
	last := int64(-1)
	for o := p.first; o < end; o++ {
		msg := p.msgs[o]
		if msg.gone {
			continue
		}
		if msg.at >= cutoff {
			break
		}
		last = o
	}
	if last < 0 {
		return
	}
	for o := p.first; o <= last; o++ {
		m.counts["+retained"]++
		p.msgs[o].gone = true
		p.msgs[o].traces = nil
	}
	p.first = last + 1
}

func (m *seqModel) opSeek(i int, r *rand.Rand, onePart bool) {
	qn := seqQueues.Pick(r)
	if r.IntN(20) == 0 {
		qn = "nope"
	}
	group := seqGroups.Pick(r)
	if r.IntN(20) == 0 {
		group = "gx"
	}
	opts := queen.SeekOptions{ToEnd: true}
	code := "queen.SeekOptions{ToEnd: true}"
	switch r.IntN(4) {
	case 0:
		opts, code = queen.SeekOptions{}, "queen.SeekOptions{}"
	case 1, 2:
		opts.ToEnd = false
		opts.Timestamp = m.pastTime(r)
		code = "queen.SeekOptions{Timestamp: " + m.gtime(opts.Timestamp.UnixMicro()) + "}"
	}
	admin := r.IntN(4) == 0
	var aopts queen.SeekConsumerGroupOptions
	if admin {
		aopts = queen.SeekConsumerGroupOptions{ToEnd: opts.ToEnd}
		if !opts.Timestamp.IsZero() {
			aopts.Timestamp = opts.Timestamp.UTC().Format(time.RFC3339Nano)
		}
		if r.IntN(10) == 0 {
			aopts.Timestamp, aopts.ToEnd = "yesterday", false
		}
		ts := gq(aopts.Timestamp)
		if aopts.Timestamp != "" && aopts.Timestamp != "yesterday" {
			ts = m.gstamp(opts.Timestamp.UnixMicro())
		}
		code = fmt.Sprintf("queen.SeekConsumerGroupOptions{Timestamp: %s, ToEnd: %v}", ts, aopts.ToEnd)
	}
	part := ""
	if onePart {
		part = seqParts.Pick(r)
		if r.IntN(20) == 0 {
			part = "zz"
		}
	}
	// Expectation.
	var want error
	q := m.queues[qn]
	var p *smPart
	switch {
	case admin && aopts.Timestamp == "yesterday":
		want = queen.ErrInvalidArgument
	case q == nil:
		want = queen.ErrNotFound
	case onePart && q.parts[part] == nil:
		want = queen.ErrNotFound
	case q.groups[groupOf(group)] == nil:
		want = queen.ErrGroupNotFound // a seek does not create a group
	}
	if onePart && q != nil {
		p = q.parts[part]
	}
	call := "SeekGroup"
	switch {
	case admin && onePart:
		call = "Admin().SeekPartition"
	case admin:
		call = "Admin().SeekConsumerGroup"
	case onePart:
		call = "SeekPartition"
	}
	if onePart {
		m.emit("_, err = b.%s(ctx, %s, %s, %s, %s)", call, gq(group), gq(qn), gq(part), code)
	} else {
		m.emit("_, err = b.%s(ctx, %s, %s, %s)", call, gq(group), gq(qn), code)
	}
	m.emitErr(want)
	var res *queen.SeekResult
	var err error
	switch {
	case admin && onePart:
		res, err = m.b.Admin().SeekPartition(mctx, group, qn, part, aopts)
	case admin:
		res, err = m.b.Admin().SeekConsumerGroup(mctx, group, qn, aopts)
	case onePart:
		res, err = m.b.SeekPartition(mctx, group, qn, part, opts)
	default:
		res, err = m.b.SeekGroup(mctx, group, qn, opts)
	}
	if !m.checkErr("seek.err", call, err, want) || want != nil {
		return
	}
	g := q.groups[groupOf(group)]
	parts := q.partList()
	if onePart {
		parts = []*smPart{p}
	}
	for _, p := range parts {
		c := m.cursorFor(g, p)
		m.dropLease(c)
		if opts.ToEnd || opts.Timestamp.IsZero() {
			c.offset = p.next()
		} else {
			c.offset = p.firstAtOrAfter(opts.Timestamp.UnixMicro())
		}
		if c.notBefore > m.now() {
			m.counts["+seek.resetDelay"]++
		}
		c.retries, c.notBefore, c.stored = 0, 0, true
		if onePart && p.norm(res.CursorMovedTo) != p.norm(c.offset) {
			m.failf("seek.result", "%s: cursor moved to %d, model says %d", call, res.CursorMovedTo, c.offset)
		}
	}
	if res.PartitionsUpdated != len(parts) {
		m.failf("seek.result", "%s: %d partitions updated, model says %d", call, res.PartitionsUpdated, len(parts))
	}
}

func (m *seqModel) opSetSub(r *rand.Rand) {
	group := seqGroups.Pick(r)
	from := m.pastTime(r)
	var want error
	if r.IntN(15) == 0 {
		from, want = time.Time{}, queen.ErrInvalidArgument
	} else {
		want = queen.ErrGroupNotFound // unless some queue has the group
		for _, q := range m.queues {
			if q.groups[groupOf(group)] != nil {
				want = nil
			}
		}
	}
	admin := r.IntN(3) == 0
	fcode := m.gtime(from.UnixMicro())
	if from.IsZero() {
		fcode = "time.Time{}"
	}
	if admin {
		m.emit("_, err = b.Admin().UpdateConsumerGroupSubscription(ctx, %s, %s)", gq(group), fcode)
	} else {
		m.emit("_, err = b.SetGroupSubscription(ctx, %s, %s)", gq(group), fcode)
	}
	m.emitErr(want)
	var n int
	var err error
	if admin {
		n, err = m.b.Admin().UpdateConsumerGroupSubscription(mctx, group, from)
	} else {
		n, err = m.b.SetGroupSubscription(mctx, group, from)
	}
	if !m.checkErr("setsub.err", "SetGroupSubscription", err, want) || want != nil {
		return
	}
	moved := 0
	for _, q := range m.sortedQueues() {
		g := q.groups[groupOf(group)]
		if g == nil {
			continue
		}
		g.mode, g.from = "timestamp", from.UnixMicro()
		for _, p := range q.partList() {
			c := g.cursors[p.name]
			if c == nil {
				continue
			}
			if c.consumed > 0 || m.leaseLive(c) {
				c.stored = true // the broker keeps it where it is, durably
				continue
			}
			c.offset, c.stored = p.firstAtOrAfter(g.from), true
			c.retries, c.notBefore = 0, 0
			moved++
		}
	}
	if n != moved {
		m.failf("setsub.count", "SetGroupSubscription(%q) moved %d cursors, model says %d", group, n, moved)
	}
}

func (m *seqModel) opDeleteGroup(r *rand.Rand) {
	group := seqGroups.Pick(r)
	qn := seqQueues.Pick(r)
	if r.IntN(4) == 0 {
		qn = ""
	}
	meta := r.IntN(2) == 0
	admin := r.IntN(3) == 0
	if admin {
		m.emit("_, err = b.Admin().DeleteConsumerGroup(ctx, %s, %s, %v)", gq(group), gq(qn), meta)
	} else {
		m.emit("_, err = b.DeleteGroup(ctx, %s, %s, %v)", gq(group), gq(qn), meta)
	}
	// Found: the group on the queue (any queue for ""), or, with meta, a
	// note of a pop before the queue existed.
	found := meta && m.hasEarly(groupOf(group), qn)
	for _, q := range m.queues {
		if (qn == "" || q.name == qn) && q.groups[groupOf(group)] != nil {
			found = true
		}
	}
	var want error
	switch {
	case found:
	case qn != "" && m.queues[qn] == nil:
		want = queen.ErrNotFound
	default:
		want = queen.ErrGroupNotFound
	}
	m.emitErr(want)
	var n int
	var err error
	if admin {
		n, err = m.b.Admin().DeleteConsumerGroup(mctx, group, qn, meta)
	} else {
		n, err = m.b.DeleteGroup(mctx, group, qn, meta)
	}
	if !m.checkErr("deletegroup.err", "DeleteGroup", err, want) || want != nil {
		return
	}
	removed := 0
	if meta {
		m.forgetEarly(groupOf(group), qn)
	}
	for _, q := range m.sortedQueues() {
		if qn != "" && q.name != qn {
			continue
		}
		g := q.groups[groupOf(group)]
		if g == nil {
			continue
		}
		for _, p := range q.partList() {
			c := g.cursors[p.name]
			if c == nil {
				continue
			}
			m.dropLease(c)
			removed++
			delete(g.cursors, p.name)
			if meta {
				continue
			}
			if g.mode == queen.SubscriptionModeNew {
				g.mode, g.from = "timestamp", g.joined
			}
			m.cursorFor(g, p)
		}
		if meta {
			delete(q.groups, g.name)
		}
	}
	if n != removed {
		m.failf("deletegroup.count", "DeleteGroup(%q, %q, %v) removed %d cursors, model says %d", group, qn, meta, n, removed)
	}
}

// someMessage picks a message of a live queue: stored mostly.
func (m *seqModel) someMessage(r *rand.Rand) (*smPart, int64) {
	var ps []*smPart
	for _, q := range m.sortedQueues() {
		for _, p := range q.partList() {
			if len(p.msgs) > 0 {
				ps = append(ps, p)
			}
		}
	}
	if len(ps) == 0 {
		return nil, 0
	}
	p := ps[r.IntN(len(ps))]
	if r.IntN(5) > 0 && p.liveIn(p.first, p.next()) > 0 {
		for {
			if o := int64(r.IntN(len(p.msgs))); p.live(o) {
				return p, o
			}
		}
	}
	return p, int64(r.IntN(len(p.msgs)))
}

func (m *seqModel) opDeleteMessage(r *rand.Rand) {
	p, off := m.someMessage(r)
	if p == nil {
		return
	}
	txid := p.msgs[off].txid
	if r.IntN(15) == 0 {
		txid = "no-such-tx"
	}
	var want error
	if txid != p.msgs[off].txid || !p.live(off) {
		want = queen.ErrNotFound
	}
	if o, ok := p.txOffset(txid); ok && want != nil {
		off, want = o, nil // a later message took the transactionId
	}
	m.emit("err = b.DeleteMessage(ctx, pid(%s, %s), %s)", gq(p.q.name), gq(p.name), gq(txid))
	m.emitErr(want)
	err := m.b.DeleteMessage(mctx, p.id, txid)
	if !m.checkErr("deletemessage.err", fmt.Sprintf("DeleteMessage %s/%s %s", p.q.name, p.name, txid), err, want) || want != nil {
		return
	}
	msg := p.msgs[off]
	m.counts["+deleted"]++
	msg.gone, msg.deleted, msg.traces = true, true, nil
	for _, l := range m.letters {
		if l.q == p.q && l.part == p.name && l.off == off {
			l.gone = true
		}
	}
}

func (m *seqModel) opDeleteQueue(r *rand.Rand) {
	qn := seqQueues.Pick(r)
	q := m.queues[qn]
	admin := r.IntN(3) == 0
	if admin {
		m.emit("_, err = b.Admin().DeleteQueue(ctx, %s)", gq(qn))
	} else {
		m.emit("_, err = b.DeleteQueue(ctx, %s)", gq(qn))
	}
	m.emitErr(nil)
	var existed bool
	var err error
	if admin {
		existed, err = m.b.Admin().DeleteQueue(mctx, qn)
	} else {
		existed, err = m.b.DeleteQueue(mctx, qn)
	}
	if !m.checkErr("deletequeue.err", "DeleteQueue "+qn, err, nil) {
		return
	}
	if existed != (q != nil) {
		m.failf("deletequeue.existed", "DeleteQueue(%s) existed=%v, model says %v", qn, existed, q != nil)
	}
	if q == nil {
		return
	}
	for _, g := range q.groups {
		for _, c := range g.cursors {
			m.dropLease(c)
		}
	}
	q.dead = true
	delete(m.queues, qn)
	for _, l := range m.letters {
		if l.q == q {
			l.gone = true
		}
	}
}

func (m *seqModel) opConfigure(r *rand.Rand) {
	qn := seqQueues.Pick(r)
	cfg := queen.DefaultQueueConfig()
	cfg.LeaseTime = []time.Duration{0, 5 * time.Second, 30 * time.Second, 120 * time.Second}[r.IntN(4)]
	cfg.RetryLimit = r.IntN(4)
	cfg.RetryDelay = []time.Duration{0, 2 * time.Second, 10 * time.Second}[r.IntN(3)]
	pick := func(p int, ds ...time.Duration) time.Duration {
		if r.IntN(p) != 0 {
			return 0
		}
		return ds[r.IntN(len(ds))]
	}
	if r.IntN(5) == 0 {
		cfg.MaxSize = []int{3, 8, 20}[r.IntN(3)]
	}
	cfg.DelayedProcessing = pick(6, 5*time.Second, 20*time.Second)
	cfg.WindowBuffer = pick(6, 3*time.Second, 10*time.Second)
	cfg.Retention = pick(5, 60*time.Second, 300*time.Second)
	cfg.CompletedRetention = pick(5, 30*time.Second, 200*time.Second)
	cfg.MaxWaitTime = pick(5, 45*time.Second, 400*time.Second)
	cfg.Priority = r.IntN(3)
	cfg.Namespace = "ns"
	cfg.Task = []string{"t0", "t1", ""}[r.IntN(3)]
	cfg.EncryptionEnabled = r.IntN(4) == 0
	var want error
	if r.IntN(15) == 0 {
		cfg.RetryLimit, want = -1, queen.ErrInvalidArgument
	}
	admin := r.IntN(3) == 0
	call := "ConfigureQueue"
	if admin {
		call = "Admin().ConfigureQueue"
	}
	m.emit("_, err = b.%s(ctx, %s, %#v)", call, gq(qn), cfg)
	m.emitErr(want)
	var info *queen.QueueInfo
	var err error
	if admin {
		info, err = m.b.Admin().ConfigureQueue(mctx, qn, cfg)
	} else {
		info, err = m.b.ConfigureQueue(mctx, qn, cfg)
	}
	if !m.checkErr("configure.err", call, err, want) || want != nil {
		return
	}
	if cfg.LeaseTime == 0 {
		cfg.LeaseTime = 300 * time.Second
	}
	q := m.queues[qn]
	if q == nil {
		q = m.createQueue(qn, cfg)
	}
	q.cfg = cfg
	p := m.partFor(q, queen.DefaultPartition)
	m.learnPID(p, info.DefaultPartitionID, call)
	if q.id == "" {
		q.id = info.ID
	}
	if info.Name != qn || info.ID != q.id || !reflect.DeepEqual(info.Config, cfg) {
		m.failf("configure.info", "%s(%s): %+v, model says id %s config %+v", call, qn, info, q.id, cfg)
	}
}

// someLetter picks a letter of a kind: a live one mostly, a deleted one
// or an id that never existed sometimes. It returns the id and the model's letter.
func (m *seqModel) someLetter(r *rand.Rand, kind string) (string, *smLetter) {
	var live, dead []*smLetter
	for _, l := range m.letters {
		if l.kind != kind || l.id == "" {
			continue
		}
		if l.gone {
			dead = append(dead, l)
		} else {
			live = append(live, l)
		}
	}
	switch {
	case len(live) > 0 && r.IntN(6) > 0:
		l := live[r.IntN(len(live))]
		return l.id, l
	case len(dead) > 0 && r.IntN(2) == 0:
		l := dead[r.IntN(len(dead))]
		return l.id, l
	case r.IntN(2) == 0:
		return "not-a-uuid", nil
	}
	return "018f0000-0000-4000-8000-000000000000", nil
}

// letterExpr is the reproducer's expression for a letter's id.
func (m *seqModel) letterExpr(id string, l *smLetter) string {
	if l == nil || l.gone {
		return gq(id)
	}
	return fmt.Sprintf("letterID(%v, %s, %s, %s, %d)", l.kind == "dl", gq(l.q.name), gq(l.group), gq(l.part), l.off)
}

func (m *seqModel) opReplay(r *rand.Rand) {
	kind := "dl"
	if r.IntN(3) == 0 {
		kind = "pk"
	}
	id, l := m.someLetter(r, kind)
	call, prefix := "ReplayDeadLetter", "dlq:"
	if kind == "pk" {
		call, prefix = "ReplayParked", "parked:"
	}
	var want error
	var p *smPart
	var wantOff int64
	dup := false
	if l == nil || l.gone {
		want = queen.ErrNotFound
	} else {
		p = l.q.parts[l.part]
		if off, ok := p.txOffset(prefix + strings.ToLower(id)); ok {
			dup, wantOff = true, off
		} else if l.q.cfg.MaxSize > 0 && m.used(l.q) >= int64(l.q.cfg.MaxSize) {
			want = queen.ErrQueueFull
		}
	}
	m.emit("_, err = b.%s(ctx, %s)", call, m.letterExpr(id, l))
	m.emitErr(want)
	var res *queen.ReplayResult
	var err error
	if kind == "dl" {
		res, err = m.b.ReplayDeadLetter(mctx, id)
	} else {
		res, err = m.b.ReplayParked(mctx, id)
	}
	if !m.checkErr("replay.err", call+" "+id, err, want) || want != nil {
		return
	}
	m.counts["+replay.ok"]++
	if dup {
		if !res.Duplicate || res.Offset != wantOff {
			m.failf("replay.result", "%s %s again: %+v, model says duplicate at %d", call, id, res, wantOff)
		}
		return
	}
	payload := l.payload
	if payload == "" {
		payload = "null"
	}
	items := []queen.PushItem{{Queue: l.q.name, Partition: l.part, TransactionID: prefix + strings.ToLower(id), Payload: json.RawMessage(payload)}}
	w := m.applyPushes(items)
	if res.Duplicate || res.Offset != w[0].off || res.TransactionID != items[0].TransactionID {
		m.failf("replay.result", "%s %s: %+v, model says a copy at %d", call, id, res, w[0].off)
	}
	m.counters.pushed++
}

func (m *seqModel) opDeleteLetter(r *rand.Rand) {
	kind := "dl"
	if r.IntN(3) == 0 {
		kind = "pk"
	}
	id, l := m.someLetter(r, kind)
	call := "DeleteDeadLetter"
	if kind == "pk" {
		call = "DeleteParked"
	}
	var want error
	if l == nil || l.gone {
		want = queen.ErrNotFound
	}
	m.emit("err = b.%s(ctx, %s)", call, m.letterExpr(id, l))
	m.emitErr(want)
	var err error
	if kind == "pk" {
		err = m.b.DeleteParked(mctx, id)
	} else {
		err = m.b.DeleteDeadLetter(mctx, id)
	}
	if !m.checkErr("deleteletter.err", call+" "+id, err, want) || want != nil {
		return
	}
	l.gone = true
}

func (m *seqModel) opTxn(i int, r *rand.Rand) {
	var acks []queen.AckItem
	var pick []*queen.Message
	var pe []string
	hi := -1
	var rest []*queen.Message
	var restE []string
	var h *smHeld
	if len(m.helds) > 0 && r.IntN(5) > 0 {
		hi = r.IntN(len(m.helds))
		h = m.helds[hi]
		acks, pick, pe, rest, restE = m.ackItemsFor(r, h, true)
	}
	var pushes []queen.PushItem
	for range r.IntN(4) {
		it := queen.PushItem{Queue: seqQueues.Pick(r), Partition: seqParts.Pick(r), Payload: modelgen.Payload(r)}
		if r.IntN(6) == 0 {
			it.TransactionID = m.someTxid(r, it.Queue, it.Partition)
		} else {
			m.nextTx++
			it.TransactionID = fmt.Sprintf("t%d", m.nextTx)
		}
		if r.IntN(40) == 0 {
			it.Payload = bigPayload(3 << 19)
			if !m.disk {
				it.Payload = bigPayload(queen.MaxInMemoryPayload + 1)
			}
		}
		pushes = append(pushes, it)
	}
	if len(acks) == 0 && len(pushes) == 0 {
		return
	}
	builder := h != nil && r.IntN(3) == 0
	var code []string
	bc := "b.Transaction()"
	for j := range acks {
		it := &acks[j]
		if builder {
			bc += fmt.Sprintf(".Ack(%s, %s, queen.AckOptions{Error: %s, Delay: %s, LeaseID: %s, ConsumerGroup: %s})", pe[j], gq(string(it.Status)), gq(it.Error), gdur(it.Delay), gq(it.LeaseID), gq(groupOf(it.Group)))
			it.LeaseID = cmpOr(it.LeaseID, h.lease) // the builder takes the message's lease
			it.Group = groupOf(it.Group)
			continue
		}
		lx := h.lexpr
		if it.LeaseID != h.lease {
			lx = ""
		}
		code = append(code, "{Ack: &queen.AckItem"+gack(*it, pe[j], lx)+"}")
	}
	var pc []string
	for j := range pushes {
		code = append(code, "{Push: &queen.PushItem"+gpush(pushes[j])+"}")
		pc = append(pc, "queen.PushItem"+gpush(pushes[j]))
	}
	if builder && len(pushes) > 0 {
		bc += ".Push(" + strings.Join(pc, ", ") + ")"
	}
	// Expectation, before anything is applied.
	oversized := false
	for _, it := range pushes {
		if !m.disk && len(it.Payload) > queen.MaxInMemoryPayload {
			oversized = true
		}
	}
	// Push items are checked first (an oversized one is ErrTooLarge, and
	// nothing runs), then the pushes are decided (a refused one aborts the
	// transaction at its index), then the acks.
	var wantErr error
	abortAt := -1
	switch full := m.txnFull(pushes); {
	case oversized:
		wantErr = queen.ErrTooLarge
	case full >= 0:
		abortAt, wantErr = len(acks)+full, queen.ErrQueueFull
	default:
		for j, it := range acks {
			if _, _, err := m.resolve(it); err != nil {
				abortAt, wantErr = j, queen.ErrTransactionAborted
				break
			}
		}
	}
	v := fmt.Sprintf("x%d", i)
	var res *queen.TxResult
	var err error
	if builder {
		tx := m.b.Transaction()
		for j := range acks {
			it := acks[j]
			tx = tx.Ack(pick[j], it.Status, queen.AckOptions{Error: it.Error, Delay: it.Delay, LeaseID: it.LeaseID, ConsumerGroup: it.Group})
		}
		if len(pushes) > 0 {
			tx = tx.Push(pushes...)
		}
		m.emit("%s, err := %s.Commit(ctx)", v, bc)
		m.emitErr(wantErr)
		m.emit("_ = %s", v)
		res, err = tx.Commit(mctx)
	} else {
		ops := make([]queen.TxOp, 0, len(acks)+len(pushes))
		for j := range acks {
			ops = append(ops, queen.TxOp{Ack: &acks[j]})
		}
		for j := range pushes {
			ops = append(ops, queen.TxOp{Push: &pushes[j]})
		}
		m.emit("%s, err := b.ExecTransaction(ctx, []queen.TxOp{%s})", v, strings.Join(code, ", "))
		m.emitErr(wantErr)
		m.emit("_ = %s", v)
		res, err = m.b.ExecTransaction(mctx, ops)
	}
	if !m.checkErr("txn.err", "transaction", err, wantErr) {
		return
	}
	if wantErr != nil {
		if abortAt >= 0 {
			var te *queen.TransactionError
			if !errors.As(err, &te) || te.Index != abortAt {
				m.failf("txn.abort", "transaction aborted with %v, model says at op %d", err, abortAt)
			}
		}
		return
	}
	m.counts["+txn.committed"]++
	want, _ := m.settle(acks, true)
	if len(res.Results) != len(acks)+len(pushes) {
		m.failf("txn.results", "%d results for %d ops", len(res.Results), len(acks)+len(pushes))
		return
	}
	got := make([]queen.AckResult, len(acks))
	for j := range acks {
		if res.Results[j].Ack == nil {
			m.failf("txn.results", "op %d: no ack result", j)
			return
		}
		got[j] = *res.Results[j].Ack
	}
	m.checkAcks("transaction ack", acks, pick, got, want)
	for j, w := range want {
		if w.counted && got[j].Success {
			m.counters.acked[normAck(acks[j].Status)]++
		}
	}
	pw := m.applyPushes(pushes)
	pres := make([]queen.PushResult, len(pushes))
	for j := range pushes {
		if res.Results[len(acks)+j].Push == nil {
			m.failf("txn.results", "op %d: no push result", len(acks)+j)
			return
		}
		pres[j] = *res.Results[len(acks)+j].Push
	}
	n := m.checkPushes("transaction push", pushes, pres, pw)
	m.counters.pushed += n
	if h != nil {
		if len(rest) == 0 {
			m.helds = slices.Delete(m.helds, hi, hi+1)
		} else {
			h.msgs, h.exprs = rest, restE
		}
	}
	m.learnLetters()
}

// txnFull is the index of the first of a transaction's pushes a MaxSize
// refuses, or -1. Room is counted per push not already stored (two
// pushes of one new transactionId in one transaction take two).
func (m *seqModel) txnFull(pushes []queen.PushItem) int {
	room := map[string]int64{}
	for j, it := range pushes {
		q := m.queues[it.Queue]
		if q == nil || q.cfg.MaxSize == 0 {
			continue
		}
		part := it.Partition
		if part == "" {
			part = queen.DefaultPartition
		}
		if p := q.parts[part]; p != nil {
			if _, ok := p.txOffset(it.TransactionID); ok {
				continue
			}
		}
		if _, ok := room[it.Queue]; !ok {
			room[it.Queue] = int64(q.cfg.MaxSize) - m.used(q)
		}
		room[it.Queue]--
		if room[it.Queue] < 0 {
			return j
		}
	}
	return -1
}

func (m *seqModel) opWaitStart(i int, r *rand.Rand) {
	if m.waiter != nil {
		return
	}
	req := queen.PopRequest{Queue: seqQueues.Pick(r), Group: seqGroups[r.IntN(3)], Wait: true, Timeout: time.Minute, Batch: 1 + r.IntN(4), Partitions: r.IntN(3)}
	if r.IntN(3) == 0 {
		req.Queue = "q" + strconv.Itoa(2+r.IntN(2)) // not there yet, maybe later
	}
	if r.IntN(4) == 0 {
		req.Partition = seqParts.Pick(r)
	}
	if req.Group != "" && r.IntN(2) == 0 {
		req.SubscriptionMode = queen.SubscriptionModeAll
	}
	if q := m.queues[req.Queue]; q != nil {
		if g := q.groups[groupOf(req.Group)]; g != nil && g.conflation {
			return
		}
	}
	v := strconv.Itoa(i)
	ctx, cancel := context.WithCancel(mctx)
	w := &smWaiter{v: v, req: req, ch: make(chan popAnswer, 1), cancel: cancel}
	m.emit("wctx%s, cancel%s := context.WithCancel(ctx)", v, v)
	m.emit("_ = cancel%s", v)
	m.emit("w%s := make(chan popRes, 1)", v)
	m.emit("go func() { r, err := b.Pop(wctx%s, %s); w%s <- popRes{r, err} }()", v, m.gpop(req), v)
	b := m.b
	go func() {
		res, err := b.Pop(ctx, req)
		w.ch <- popAnswer{res, err}
	}()
	m.waiter = w
}

func (m *seqModel) opWaitCancel() {
	w := m.waiter
	if w == nil {
		return
	}
	m.waiter = nil
	m.emit("cancel%s()", w.v)
	m.emit("wr%s := recv(w%s)", w.v, w.v)
	m.emit("require.ErrorIs(t, wr%s.err, context.Canceled)", w.v)
	w.cancel()
	select {
	case a := <-w.ch:
		if !errors.Is(a.err, context.Canceled) {
			m.failf("wait.cancel", "cancelled waiting pop returned %v with %d messages", a.err, msgCount(a.res))
		}
	case <-time.After(5 * time.Second):
		m.failf("wait.cancel", "cancelled waiting pop did not return")
	}
}

func msgCount(r *queen.PopResult) int {
	if r == nil {
		return 0
	}
	return len(r.Messages)
}

// syncWaiter brings the waiting pop in step with the model: it waits until
// the pop has parked again or returned (itest.Waiting), so whatever it
// did after the last step (join its group, note that its queue is missing,
// take messages) is done; then it checks the answer, or that a waiting pop
// has nothing the model could give it.
func (m *seqModel) syncWaiter() {
	w := m.waiter
	if w == nil || m.fail != nil {
		return
	}
	var ans *popAnswer
	deadline := time.Now().Add(5 * time.Second)
	for ans == nil && itest.Waiting(m.b) < 1 {
		select {
		case a := <-w.ch:
			ans = &a
			continue
		default:
		}
		if time.Now().After(deadline) {
			m.failf("wait.stuck", "waiting pop %s neither parked nor returned within 5s", m.gpop(w.req))
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
	if ans == nil {
		select {
		case a := <-w.ch:
			ans = &a
		default:
		}
	}
	q := m.queues[w.req.Queue]
	gname := groupOf(w.req.Group)
	if q == nil {
		if ans != nil {
			m.waiter = nil
			m.failf("wait.early", "waiting pop on missing queue %s returned %v with %d messages", w.req.Queue, ans.err, msgCount(ans.res))
			return
		}
		m.noteEarly(w.req.Queue, gname) // it looked and found no queue
		m.emit("itest.AwaitWaiting(t, b, 1)")
		return
	}
	g := q.groups[gname]
	if g == nil {
		// It ran since its queue appeared (or its group went): it joined.
		g = m.newGroup(q, w.req, w.seenGen != 0 && w.seenGen != q.gen)
		m.addGroup(q, g)
		m.counts["+wait.joined"]++
	}
	w.seenGen = q.gen
	if p := q.parts[w.req.Partition]; p != nil && !m.maint {
		m.cursorFor(g, p) // its claim of that partition made one
	}
	ready := false
	for _, p := range q.partList() {
		if w.req.Partition != "" && p.name != w.req.Partition {
			continue
		}
		if c := g.cursors[p.name]; c != nil && m.deliverable(g, p, c) {
			ready = true
		}
	}
	if ready && !m.maint && ans == nil {
		select {
		case a := <-w.ch:
			ans = &a
		case <-time.After(2 * time.Second):
			m.emit("wr%s := recv(w%s)", w.v, w.v)
			m.failf("wait.hang", "waiting pop %s stays parked although the model has messages for it", m.gpop(w.req))
			return
		}
	}
	if ans == nil {
		m.emit("itest.AwaitWaiting(t, b, 1)")
		return
	}
	m.waiter = nil
	m.emit("wr%s := recv(w%s)", w.v, w.v)
	m.emit("require.NoError(t, wr%s.err)", w.v)
	if ans.err != nil {
		m.failf("wait.err", "waiting pop: %v", ans.err)
		return
	}
	v := "wr" + w.v + ".r"
	if h := m.popCheck("waiting pop "+m.gpop(w.req), q, g, w.req, ans.res, true, func(k int) string { return fmt.Sprintf("%s.Messages[%d]", v, k) }, v+".LeaseID"); h != nil {
		m.helds = append(m.helds, h)
	}
	if len(ans.res.Messages) == 0 {
		m.failf("wait.empty", "waiting pop %s returned nothing before its timeout", m.gpop(w.req))
	}
	m.counters.popped += int64(msgCount(ans.res))
	m.counts["+wait.delivered"]++
}

// noteEarly records that a named group popped a queue that did not exist:
// the broker remembers it (in memory) and starts the group, when it joins
// the queue, at the queue's first messages.
func (m *seqModel) noteEarly(queue, group string) {
	if group == queen.QueueModeGroup {
		return
	}
	k := queue + "\x00" + group
	if _, ok := m.early[k]; !ok {
		m.early[k] = m.now()
	}
}

// hasEarly reports whether there is a note of group (on queue, or any
// queue when "").
func (m *seqModel) hasEarly(group, queue string) bool {
	for k := range m.early {
		q, g, _ := strings.Cut(k, "\x00")
		if g == group && (queue == "" || q == queue) {
			return true
		}
	}
	return false
}

// forgetEarly drops the notes of group (on queue, or every queue when "").
func (m *seqModel) forgetEarly(group, queue string) {
	for k := range m.early {
		q, g, _ := strings.Cut(k, "\x00")
		if g == group && (queue == "" || q == queue) {
			delete(m.early, k)
		}
	}
}
