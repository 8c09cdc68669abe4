package remote_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/modelgen"
	"github.com/queenlite/queen/internal/repro"
)

// The operations of the differential test: each draws its parameters from
// its own seed and from what the run holds when it runs (earlier pops,
// pushed transactionIds, letters), prints its Go code for the reproducer
// and runs through diff.do on the three backends.

// diffWeights are the operations' relative frequencies.
var diffWeights = modelgen.Weights{
	modelgen.Push: 140, modelgen.Pop: 120, modelgen.Discover: 8, modelgen.Ack: 100, modelgen.AckOne: 30, modelgen.Renew: 20,
	modelgen.Txn: 40, modelgen.Advance: 50, modelgen.SeekGroup: 12, modelgen.SeekPartition: 12, modelgen.SetSubscription: 8,
	modelgen.Fetch: 15, modelgen.DeadLetters: 15, modelgen.ReplayDead: 12, modelgen.DeleteDead: 8, modelgen.Parked: 10,
	modelgen.ReplayParked: 8, modelgen.DeleteParked: 6, modelgen.Configure: 15, modelgen.Describe: 6, modelgen.DeleteQueue: 3,
	modelgen.Stats: 15, modelgen.ListQueues: 6, modelgen.ListGroups: 10, modelgen.DeleteGroup: 8, modelgen.Maintain: 8,
	modelgen.Reopen: 8, modelgen.Verify: 6, modelgen.Positions: 12, modelgen.FetchPartitions: 10,
}

// dex executes operations on a diff and keeps the handles later
// operations use.
type dex struct {
	d      *diff
	pops   []*dpop     // pops that returned messages
	txids  []dtx       // transactionIds pushed by name, for duplicates
	pushAt []time.Time // instants of pushes, to seek to
	counts map[string]int
}

// dpop is a pop's result on each backend.
type dpop struct {
	v     string // its variable in the reproducer
	res   [nBack]*queen.PopResult
	group string // the group it asked for
	acked bool   // an ack or a transaction named it
}

type dtx struct{ queue, partition, tx string }

// What the operations draw from. q2 has one partition, the default.
var (
	diffQueues = modelgen.Pool{"q0", "q0", "q0", "q1", "q1", "q2"}
	diffParts  = modelgen.Pool{"a", "a", "b", "c", queen.DefaultPartition}
	diffGroups = modelgen.Pool{"", "", "g1", "g2", modelgen.ConflationGroup}
)

func (x *dex) exec(i int, o modelgen.Op) {
	r := o.Rand()
	x.counts[o.Kind.String()]++
	switch o.Kind {
	case modelgen.Push:
		x.opPush(r)
	case modelgen.Pop:
		x.opPop(i, r, false)
	case modelgen.Discover:
		x.opPop(i, r, true)
	case modelgen.Ack:
		x.opAck(r)
	case modelgen.AckOne:
		x.opAckOne(r)
	case modelgen.Renew:
		x.opRenew(r)
	case modelgen.Txn:
		x.opTxn(r)
	case modelgen.Advance:
		x.opAdvance(r)
	case modelgen.SeekGroup:
		x.opSeek(r, false)
	case modelgen.SeekPartition:
		x.opSeek(r, true)
	case modelgen.SetSubscription:
		x.opSetSub(r)
	case modelgen.Fetch:
		x.opFetch(r)
	case modelgen.DeadLetters:
		x.opLetters(r, true)
	case modelgen.Parked:
		x.opLetters(r, false)
	case modelgen.ReplayDead:
		x.opLetter(r, true, true)
	case modelgen.DeleteDead:
		x.opLetter(r, true, false)
	case modelgen.ReplayParked:
		x.opLetter(r, false, true)
	case modelgen.DeleteParked:
		x.opLetter(r, false, false)
	case modelgen.Configure:
		x.opConfigure(r)
	case modelgen.Describe:
		q := diffQueues.Pick(r)
		if r.IntN(5) == 0 {
			q = "nope"
		}
		x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.DescribeQueue(ctx, %s)) })", "describe", gq(q))
		x.d.do("describe", func(k int, c queen.Client) any { return ans(c.DescribeQueue(x.d.ctx, q)) })
	case modelgen.DeleteQueue:
		q := diffQueues.Pick(r)
		x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.DeleteQueue(ctx, %s)) })", "deleteQueue", gq(q))
		x.d.do("deleteQueue", func(k int, c queen.Client) any { return ans(c.DeleteQueue(x.d.ctx, q)) })
	case modelgen.Stats:
		q := diffQueues.Pick(r)
		if r.IntN(6) == 0 {
			q = "nope"
		}
		x.stats(q)
	case modelgen.ListQueues:
		x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.ListQueues(ctx)) })", "listQueues")
		x.d.do("listQueues", func(k int, c queen.Client) any { return ans(c.ListQueues(x.d.ctx)) })
	case modelgen.ListGroups:
		g := ""
		if r.IntN(2) == 0 {
			g = diffGroups.Pick(r)
			if g == "" {
				g = queen.QueueModeGroup
			}
		}
		x.listGroups(g)
	case modelgen.DeleteGroup:
		x.opDeleteGroup(r)
	case modelgen.Maintain:
		x.d.emit("d.maintain()")
		x.d.maintain()
	case modelgen.Reopen:
		x.d.emit("d.reopen()")
		x.d.reopen()
	case modelgen.Verify:
		x.verify()
	case modelgen.Positions:
		x.opPositions(r)
	case modelgen.FetchPartitions:
		x.opFetchParts(r)
	}
}

// verify compares everything the backends can list: every queue's stats,
// the groups, the queues, the dead letters and the parked messages.
func (x *dex) verify() {
	x.d.emit("d.verify()")
	x.d.verify()
}

func (d *diff) verify() {
	for _, q := range []string{"q0", "q1", "q2"} {
		d.do("verify.stats", func(k int, c queen.Client) any { return ans(c.QueueStats(d.ctx, q)) })
	}
	d.do("verify.groups", func(k int, c queen.Client) any { return ans(c.ListGroups(d.ctx, queen.GroupFilter{})) })
	d.do("verify.queues", func(k int, c queen.Client) any { return ans(c.ListQueues(d.ctx)) })
	all := queen.LetterFilter{Limit: 1000}
	d.do("verify.dead", func(k int, c queen.Client) any { return letters(all)(c.DeadLetters(d.ctx, all)) })
	d.do("verify.parked", func(k int, c queen.Client) any { return letters(all)(c.ParkedMessages(d.ctx, all)) })
}

func (x *dex) stats(q string) {
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.QueueStats(ctx, %s)) })", "stats", gq(q))
	x.d.do("stats", func(k int, c queen.Client) any { return ans(c.QueueStats(x.d.ctx, q)) })
}

func (x *dex) listGroups(g string) {
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.ListGroups(ctx, queen.GroupFilter{Group: %s})) })", "listGroups", gq(g))
	x.d.do("listGroups", func(k int, c queen.Client) any { return ans(c.ListGroups(x.d.ctx, queen.GroupFilter{Group: g})) })
}

// Go literals for the reproducer.

// gq and gdur write a string and a duration for the reproducer.
var gq, gdur = repro.Quote, repro.Duration

// gtime writes an instant relative to the clock's start.
func (x *dex) gtime(t time.Time) string { return "d.start.Add(" + gdur(t.Sub(x.d.start)) + ")" }

// gpush and gpushes write pushes for the reproducer.
func gpush(it queen.PushItem) string { return repro.PushItem(it, modelgen.GoPayload) }

func gpushes(items []queen.PushItem) string { return repro.PushItems(items, modelgen.GoPayload) }

// gpop writes a pop request for the reproducer.
func (x *dex) gpop(req queen.PopRequest) string { return repro.PopRequest(req, x.gtime) }

func gackFields(it queen.AckItem, leaseExpr string) string {
	return "queen.AckItem{" + strings.Join(repro.AckFields(it, leaseExpr), ", ") + "}"
}

func gconfig(c queen.QueueConfig) string {
	var f []string
	add := func(cond bool, s string) {
		if cond {
			f = append(f, s)
		}
	}
	add(c.LeaseTime != 0, "LeaseTime: "+gdur(c.LeaseTime))
	add(c.RetryLimit != 0, fmt.Sprintf("RetryLimit: %d", c.RetryLimit))
	add(c.RetryDelay != 0, "RetryDelay: "+gdur(c.RetryDelay))
	add(c.MaxSize != 0, fmt.Sprintf("MaxSize: %d", c.MaxSize))
	add(c.DelayedProcessing != 0, "DelayedProcessing: "+gdur(c.DelayedProcessing))
	add(c.WindowBuffer != 0, "WindowBuffer: "+gdur(c.WindowBuffer))
	add(c.Retention != 0, "Retention: "+gdur(c.Retention))
	add(c.CompletedRetention != 0, "CompletedRetention: "+gdur(c.CompletedRetention))
	add(c.MaxWaitTime != 0, "MaxWaitTime: "+gdur(c.MaxWaitTime))
	add(c.Priority != 0, fmt.Sprintf("Priority: %d", c.Priority))
	add(c.EncryptionEnabled, "EncryptionEnabled: true")
	add(c.Namespace != "", "Namespace: "+gq(c.Namespace))
	add(c.Task != "", "Task: "+gq(c.Task))
	return "queen.QueueConfig{" + strings.Join(f, ", ") + "}"
}

func (x *dex) gfilter(f queen.LetterFilter) string {
	var s []string
	add := func(cond bool, v string) {
		if cond {
			s = append(s, v)
		}
	}
	add(f.Queue != "", "Queue: "+gq(f.Queue))
	add(f.ConsumerGroup != "", "ConsumerGroup: "+gq(f.ConsumerGroup))
	add(f.Partition != "", "Partition: "+gq(f.Partition))
	add(!f.From.IsZero(), "From: "+x.gtime(f.From))
	add(!f.To.IsZero(), "To: "+x.gtime(f.To))
	add(f.Limit != 0, fmt.Sprintf("Limit: %d", f.Limit))
	add(f.Offset != 0, fmt.Sprintf("Offset: %d", f.Offset))
	return "queen.LetterFilter{" + strings.Join(s, ", ") + "}"
}

// Parameters.

// pastTime is an instant to seek or subscribe to: the start, now, a day
// ago, or the instant of an earlier push (which seeks to its offset).
func (x *dex) pastTime(r *rand.Rand) time.Time {
	now := x.d.clock.Now()
	switch r.IntN(6) {
	case 0:
		return now
	case 1:
		return now.Add(-24 * time.Hour)
	case 2:
		return x.d.start
	}
	if len(x.pushAt) == 0 {
		return now
	}
	return x.pushAt[r.IntN(len(x.pushAt))]
}

var diffSteps = []time.Duration{time.Millisecond, 100 * time.Millisecond, 999 * time.Millisecond, time.Second, 2 * time.Second,
	5 * time.Second, 5 * time.Second, 30 * time.Second, 61 * time.Second, 5 * time.Minute}

func (x *dex) opAdvance(r *rand.Rand) {
	d := diffSteps[r.IntN(len(diffSteps))]
	switch r.IntN(30) {
	case 0:
		d = 2 * time.Hour
	case 1: // fractions of a millisecond (see TestDifferential_Cases/AdminTimestampsToTheMillisecond)
		d = 1500 * time.Microsecond
	}
	x.d.emit("d.advance(%s)", gdur(d))
	x.d.advance(d)
}

func (x *dex) opPush(r *rand.Rand) {
	n := 1 + r.IntN(4)
	q := diffQueues.Pick(r)
	items := make([]queen.PushItem, n)
	parts := map[string]string{} // queue → the one partition this call pushes to there
	for j := range items {
		it := queen.PushItem{Queue: q, Payload: modelgen.Payload(r)}
		if r.IntN(5) == 0 {
			it.Queue = diffQueues.Pick(r)
		}
		it.Partition = x.partitionFor(r, it.Queue, parts)
		if it.Partition == queen.DefaultPartition && r.IntN(2) == 0 {
			it.Partition = "" // the default
		}
		switch r.IntN(6) {
		case 0, 1: // a generated transactionId
		case 2:
			if len(x.txids) > 0 { // a duplicate, or the same id in another partition
				t := x.txids[r.IntN(len(x.txids))]
				if t.queue == it.Queue || parts[t.queue] == "" || parts[t.queue] == t.partition {
					it.Queue, it.TransactionID = t.queue, t.tx
					it.Partition = x.partitionFor(r, t.queue, parts)
					break
				}
			}
			fallthrough
		default:
			it.TransactionID = fmt.Sprintf("t%06x-%d", r.Uint32()&0xffffff, j)
		}
		if r.IntN(6) == 0 {
			it.TraceID = "5f0c7e4a-1b2c-4d3e-8f90-a1b2c3d4e5f6"
		}
		if r.IntN(20) == 0 {
			it.Namespace, it.Task = "ns", "t"+strconv.Itoa(r.IntN(2))
		}
		if j > 0 && r.IntN(8) == 0 { // the same item twice in one call
			it = items[j-1]
		}
		items[j] = it
	}
	if r.IntN(40) == 0 {
		items[r.IntN(n)].Queue = "" // invalid: refused whole
	}
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.Push(ctx, %s)) })", "push", gpushes(items))
	x.d.do("push", func(k int, c queen.Client) any { return ans(c.Push(x.d.ctx, slices.Clone(items))) })
	for _, it := range items {
		if it.TransactionID != "" && it.Queue != "" {
			x.txids = append(x.txids, dtx{it.Queue, it.Partition, it.TransactionID})
		}
	}
	x.pushAt = append(x.pushAt, x.d.clock.Now())
}

// partitionFor picks the partition of a pushed item. One call pushes to
// one partition of each queue, and q2 has one partition: the brokers
// make the partitions of one write (and of a seek, and of a maintenance
// run) ready in no defined order ("there is no order between
// partitions"), so two backends may serve them to a pop in different
// orders. q2's pops, and pops of a named partition, draw any batch;
// other pops claim every ready partition in full (see opPop), which no
// order changes.
func (x *dex) partitionFor(r *rand.Rand, queue string, parts map[string]string) string {
	if queue == "q2" {
		return queen.DefaultPartition
	}
	if p, ok := parts[queue]; ok {
		return p
	}
	p := diffParts.Pick(r)
	if p == queen.DefaultPartition && r.IntN(2) == 0 {
		p = "" // the default
	}
	parts[queue] = p
	return p
}

func (x *dex) opPop(i int, r *rand.Rand, discover bool) {
	space := modelgen.Space{Queues: diffQueues, Partitions: diffParts, Groups: diffGroups, Past: x.pastTime}
	req := space.Pop(r, func(req *queen.PopRequest) {
		if discover {
			req.Queue, req.Namespace = "", "ns"
			if r.IntN(2) == 0 {
				req.Task = "t" + strconv.Itoa(r.IntN(2))
			}
		} else if r.IntN(3) == 0 {
			req.Partition = diffParts.Pick(r)
			if req.Queue == "q2" && r.IntN(3) > 0 {
				req.Partition = queen.DefaultPartition
			}
		}
		if req.Partition == "" && req.Queue != "q2" {
			req.Batch, req.Partitions = queen.MaxBatch, queen.MaxPartitions // claim everything ready
		}
	})
	switch r.IntN(40) {
	case 0:
		req.Batch = -1 // invalid
	case 1:
		req.Lease = 500 * time.Millisecond // invalid: below a second
		// A lease between two seconds is not drawn: over HTTP it is
		// rounded up to whole seconds by design (see package remote).
	}
	v := fmt.Sprintf("p%d", i)
	x.d.emit("%s := d.pop(func(k int, c queen.Client) (*queen.PopResult, error) { return c.Pop(ctx, %s) })", v, x.gpop(req))
	x.d.emit("_ = %s", v)
	res := x.d.pop(func(k int, c queen.Client) (*queen.PopResult, error) { return c.Pop(x.d.ctx, req) })
	if m := res[bMem]; m != nil && len(m.Messages) > 0 {
		x.pops = append(x.pops, &dpop{v: v, res: res, group: req.Group})
	}
}

// pickPop picks an earlier pop, mostly one no ack has named yet.
func (x *dex) pickPop(r *rand.Rand) *dpop {
	if len(x.pops) == 0 {
		return nil
	}
	if r.IntN(6) > 0 {
		var open []*dpop
		for _, p := range x.pops {
			if !p.acked {
				open = append(open, p)
			}
		}
		if len(open) > 0 {
			return open[r.IntN(len(open))]
		}
	}
	return x.pops[r.IntN(len(x.pops))]
}

var ackStatuses = []queen.AckStatus{queen.AckCompleted, queen.AckCompleted, queen.AckFailed, queen.AckFailed, queen.AckRetry,
	queen.AckDLQ, queen.AckPark, "", "success"}

// ackSpec is one ack of message j of a pop, built on each backend from
// that backend's result.
type ackSpec struct {
	pop     *dpop
	j       int
	it      queen.AckItem // LeaseID: "" the pop's, "-" none, else sent as is
	leaseOf *dpop         // when set, the lease of that pop instead
}

func (a ackSpec) item(k int) queen.AckItem {
	it := a.it
	if a.leaseOf != nil {
		it.LeaseID = lease(a.leaseOf.res[k])
	}
	return ack(a.pop.res[k], a.j, it)
}

func (a ackSpec) code(fn string) string {
	le := ""
	if a.leaseOf != nil {
		le = "lease(" + a.leaseOf.v + "[k])"
	}
	return fmt.Sprintf("%s(%s[k], %d, %s)", fn, a.pop.v, a.j, gackFields(a.it, le))
}

// ackSpecs draws acks of some messages of h.
func (x *dex) ackSpecs(r *rand.Rand, h *dpop, txn bool) []ackSpec {
	n := len(h.res[bMem].Messages)
	var js []int
	switch r.IntN(3) {
	case 0:
		for j := range n {
			js = append(js, j)
		}
	case 1:
		for j := range 1 + r.IntN(n) {
			js = append(js, j)
		}
	default:
		for j := range n {
			if r.IntN(2) == 0 {
				js = append(js, j)
			}
		}
		if len(js) == 0 {
			js = []int{r.IntN(n)}
		}
		r.Shuffle(len(js), func(a, b int) { js[a], js[b] = js[b], js[a] })
	}
	specs := make([]ackSpec, 0, len(js))
	for _, j := range js {
		a := ackSpec{pop: h, j: j, it: queen.AckItem{Group: h.group, Status: ackStatuses[r.IntN(len(ackStatuses))]}}
		if r.IntN(3) > 0 {
			a.it.Error = "boom " + strconv.Itoa(r.IntN(9))
		}
		if (a.it.Status == queen.AckFailed || a.it.Status == queen.AckRetry) && r.IntN(3) == 0 {
			a.it.Delay = time.Duration(1+r.IntN(8)) * time.Second
		}
		switch {
		case r.IntN(8) == 0:
			a.it.LeaseID = "-"
		case r.IntN(40) == 0:
			a.it.LeaseID = unknownID
		case r.IntN(40) == 0:
			if o := x.pickPop(r); o != nil && lease(o.res[bMem]) != "" {
				a.leaseOf = o
			}
		case r.IntN(60) == 0 && !txn:
			a.it.Status = "bogus"
		case r.IntN(30) == 0:
			a.it.Group = diffGroups.Pick(r)
		}
		if r.IntN(12) == 0 && len(specs) > 0 { // the same message twice
			a = specs[len(specs)-1]
			if r.IntN(2) == 0 {
				a.it.Status = ackStatuses[r.IntN(len(ackStatuses))]
			}
		}
		specs = append(specs, a)
	}
	return specs
}

func (x *dex) opAck(r *rand.Rand) {
	h := x.pickPop(r)
	if h == nil {
		return
	}
	h.acked = true
	specs := x.ackSpecs(r, h, false)
	codes := make([]string, len(specs))
	for j, a := range specs {
		codes[j] = a.code("ack")
	}
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.AckBatch(ctx, []queen.AckItem{%s})) })", "ackBatch", strings.Join(codes, ", "))
	x.d.do("ackBatch", func(k int, c queen.Client) any {
		items := make([]queen.AckItem, len(specs))
		for j, a := range specs {
			items[j] = a.item(k)
		}
		return ans(c.AckBatch(x.d.ctx, items))
	})
}

func (x *dex) opAckOne(r *rand.Rand) {
	h := x.pickPop(r)
	if h == nil {
		return
	}
	h.acked = true
	j := r.IntN(len(h.res[bMem].Messages))
	status := ackStatuses[r.IntN(len(ackStatuses))]
	ok := r.IntN(3) > 0
	opts := queen.AckOptions{Status: status}
	if !ok && r.IntN(2) == 0 {
		opts.Status = "" // failed, from ok
	}
	var f []string
	if opts.Status != "" {
		f = append(f, "Status: "+gq(string(opts.Status)))
	}
	if r.IntN(2) == 0 {
		opts.Error = "boom " + strconv.Itoa(r.IntN(9))
		f = append(f, "Error: "+gq(opts.Error))
	}
	if r.IntN(4) == 0 {
		opts.Delay = time.Duration(1+r.IntN(5)) * time.Second
		f = append(f, "Delay: "+gdur(opts.Delay))
	}
	if r.IntN(30) == 0 {
		opts.LeaseID = unknownID
		f = append(f, "LeaseID: "+gq(opts.LeaseID))
	}
	if r.IntN(20) == 0 {
		opts.ConsumerGroup = diffGroups.Pick(r)
		f = append(f, "ConsumerGroup: "+gq(opts.ConsumerGroup))
	}
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.Ack(ctx, msg(%s[k], %d), %v, queen.AckOptions{%s})) })", "ackOne",
		h.v, j, ok, strings.Join(f, ", "))
	x.d.do("ackOne", func(k int, c queen.Client) any { return ans(c.Ack(x.d.ctx, msg(h.res[k], j), ok, opts)) })
}

func (x *dex) opRenew(r *rand.Rand) {
	h := x.pickPop(r)
	switch {
	case h == nil || r.IntN(10) == 0:
		x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.RenewLease(ctx, %s, 10*time.Second)) })", "renewLease", gq(unknownID))
		x.d.do("renewLease", func(k int, c queen.Client) any { return ans(c.RenewLease(x.d.ctx, unknownID, 10*time.Second)) })
	case r.IntN(2) == 0:
		j := r.IntN(len(h.res[bMem].Messages))
		x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.Renew(ctx, msg(%s[k], %d))) })", "renew", h.v, j)
		x.d.do("renew", func(k int, c queen.Client) any { return ans(c.Renew(x.d.ctx, msg(h.res[k], j))) })
	default:
		d := []time.Duration{5 * time.Second, 30 * time.Second, 90 * time.Second}[r.IntN(3)]
		x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.RenewLease(ctx, lease(%s[k]), %s)) })", "renewLease", h.v, gdur(d))
		x.d.do("renewLease", func(k int, c queen.Client) any { return ans(c.RenewLease(x.d.ctx, lease(h.res[k]), d)) })
	}
}

func (x *dex) opTxn(r *rand.Rand) {
	type txop struct {
		ack  *ackSpec
		push *queen.PushItem
	}
	var ops []txop
	if h := x.pickPop(r); h != nil && r.IntN(5) > 0 {
		h.acked = true
		for _, a := range x.ackSpecs(r, h, true) {
			ops = append(ops, txop{ack: &a})
		}
	}
	parts := map[string]string{}
	for range r.IntN(3) {
		it := queen.PushItem{Queue: diffQueues.Pick(r), Payload: modelgen.Payload(r)}
		if r.IntN(2) == 0 {
			it.TransactionID = fmt.Sprintf("x%06x", r.Uint32()&0xffffff)
		} else if r.IntN(3) == 0 && len(x.txids) > 0 {
			t := x.txids[r.IntN(len(x.txids))]
			it.Queue, it.TransactionID = t.queue, t.tx
		}
		it.Partition = x.partitionFor(r, it.Queue, parts)
		ops = append(ops, txop{push: &it})
	}
	if len(ops) == 0 {
		return
	}
	r.Shuffle(len(ops), func(a, b int) { ops[a], ops[b] = ops[b], ops[a] })
	refused := queen.AckItem{TransactionID: "missing", PartitionID: unknownID}
	if r.IntN(2) == 0 {
		refused.PartitionID = "missing" // not a UUID: still "not found"
	}
	if r.IntN(15) == 0 { // refused: aborts the whole transaction
		ops = append(ops, txop{ack: &ackSpec{pop: &dpop{v: "noPop"}}})
	}
	codes := make([]string, len(ops))
	for j, o := range ops {
		if o.ack != nil {
			if o.ack.pop.v == "noPop" {
				codes[j] = fmt.Sprintf("{Ack: &queen.AckItem{TransactionID: %s, PartitionID: %s}}", gq(refused.TransactionID), gq(refused.PartitionID))
				continue
			}
			codes[j] = "{Ack: " + o.ack.code("ackp") + "}"
		} else {
			codes[j] = "{Push: &queen.PushItem" + gpush(*o.push) + "}"
		}
	}
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.ExecTransaction(ctx, []queen.TxOp{%s})) })", "txn", strings.Join(codes, ", "))
	x.d.do("txn", func(k int, c queen.Client) any {
		tx := make([]queen.TxOp, len(ops))
		for j, o := range ops {
			if o.ack != nil {
				if o.ack.pop.v == "noPop" {
					a := refused
					tx[j].Ack = &a
					continue
				}
				a := o.ack.item(k)
				tx[j].Ack = &a
			} else {
				it := *o.push
				tx[j].Push = &it
			}
		}
		return ans(c.ExecTransaction(x.d.ctx, tx))
	})
	for _, o := range ops {
		if o.push != nil && o.push.TransactionID != "" {
			x.txids = append(x.txids, dtx{o.push.Queue, o.push.Partition, o.push.TransactionID})
		}
	}
	x.pushAt = append(x.pushAt, x.d.clock.Now())
}

func (x *dex) seekOptions(r *rand.Rand) (queen.SeekOptions, string) {
	switch r.IntN(4) {
	case 0:
		return queen.SeekOptions{ToEnd: true}, "queen.SeekOptions{ToEnd: true}"
	case 1:
		return queen.SeekOptions{}, "queen.SeekOptions{}" // the end too
	}
	t := x.pastTime(r)
	return queen.SeekOptions{Timestamp: t}, "queen.SeekOptions{Timestamp: " + x.gtime(t) + "}"
}

// adminGroup is a group for the admin calls: queue mode by either of its
// names.
func adminGroup(r *rand.Rand) string {
	g := diffGroups.Pick(r)
	if g == "" && r.IntN(2) == 0 {
		g = queen.QueueModeGroup
	}
	return g
}

func (x *dex) opSeek(r *rand.Rand, onePart bool) {
	g, q := adminGroup(r), diffQueues.Pick(r)
	opts, oc := x.seekOptions(r)
	if !onePart {
		x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.SeekGroup(ctx, %s, %s, %s)) })", "seekGroup", gq(g), gq(q), oc)
		x.d.do("seekGroup", func(k int, c queen.Client) any { return ans(c.SeekGroup(x.d.ctx, g, q, opts)) })
		return
	}
	p := diffParts.Pick(r)
	switch r.IntN(20) {
	case 0:
		p = "zz" // unknown
	case 1:
		p = "" // invalid
	}
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(d.seekPartition(k, c, %s, %s, %s, %s)) })", "seekPartition", gq(g), gq(q), gq(p), oc)
	x.d.do("seekPartition", func(k int, c queen.Client) any { return ans(x.d.seekPartition(k, c, g, q, p, opts)) })
}

func (x *dex) opSetSub(r *rand.Rand) {
	g := adminGroup(r)
	t := x.pastTime(r)
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.SetGroupSubscription(ctx, %s, %s)) })", "setSubscription", gq(g), x.gtime(t))
	x.d.do("setSubscription", func(k int, c queen.Client) any { return ans(c.SetGroupSubscription(x.d.ctx, g, t)) })
}

func (x *dex) opFetch(r *rand.Rand) {
	q, p := diffQueues.Pick(r), diffParts.Pick(r)
	if r.IntN(15) == 0 {
		p = "zz"
	}
	from, limit := int64(r.IntN(6)), r.IntN(5)
	if r.IntN(20) == 0 {
		from = -1 // invalid
	}
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.Fetch(ctx, %s, %s, %d, %d)) })", "fetch", gq(q), gq(p), from, limit)
	x.d.do("fetch", func(k int, c queen.Client) any { return ans(c.Fetch(x.d.ctx, q, p, from, limit)) })
}

// opPositions reads a group's positions (named partitions or all of
// them), or sets or forgets one.
func (x *dex) opPositions(r *rand.Rand) {
	g := adminGroup(r)
	if r.IntN(3) == 0 {
		g = diffGroups[r.IntN(len(diffGroups))]
		pos := queen.Position{Group: g, Queue: diffQueues.Pick(r), Partition: diffParts.Pick(r), Offset: int64(r.IntN(7))}
		switch r.IntN(6) {
		case 0:
			pos.Forget = true
		case 1:
			pos.Metadata = "m" + strconv.Itoa(r.IntN(3))
		case 2:
			pos.Offset = -1 // invalid
		}
		x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(0, c.SetPosition(ctx, queen.Position{Group: %s, Queue: %s, Partition: %s, Offset: %d, Metadata: %s, Forget: %v})) })",
			"setPosition", gq(pos.Group), gq(pos.Queue), gq(pos.Partition), pos.Offset, gq(pos.Metadata), pos.Forget)
		x.d.do("setPosition", func(k int, c queen.Client) any { return ans(0, c.SetPosition(x.d.ctx, pos)) })
		return
	}
	var parts []queen.PartitionRef
	code := "nil"
	if r.IntN(3) > 0 {
		var refs []string
		parts = []queen.PartitionRef{}
		for range 1 + r.IntN(3) {
			ref := queen.PartitionRef{Queue: diffQueues.Pick(r), Partition: diffParts.Pick(r)}
			parts = append(parts, ref)
			refs = append(refs, fmt.Sprintf("{Queue: %s, Partition: %s}", gq(ref.Queue), gq(ref.Partition)))
		}
		code = "[]queen.PartitionRef{" + strings.Join(refs, ", ") + "}"
	}
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.GroupPositions(ctx, %s, %s)) })", "positions", gq(g), code)
	x.d.do("positions", func(k int, c queen.Client) any { return ans(c.GroupPositions(x.d.ctx, g, parts)) })
}

// opFetchPartitions reads a few partitions by offset at once (never
// waiting: the brokers share a fake clock).
func (x *dex) opFetchParts(r *rand.Rand) {
	var req queen.FetchRequest
	var code []string
	for range 1 + r.IntN(3) {
		fp := queen.FetchPartition{Queue: diffQueues.Pick(r), Partition: diffParts.Pick(r), Offset: int64(r.IntN(6))}
		switch r.IntN(12) {
		case 0:
			fp.Queue = "nope"
		case 1:
			fp.MaxBytes = 1 + r.IntN(12)
		case 2:
			fp.Offset = -1 // invalid
		}
		req.Partitions = append(req.Partitions, fp)
		code = append(code, fmt.Sprintf("{Queue: %s, Partition: %s, Offset: %d, MaxBytes: %d}", gq(fp.Queue), gq(fp.Partition), fp.Offset, fp.MaxBytes))
	}
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.FetchPartitions(ctx, queen.FetchRequest{Partitions: []queen.FetchPartition{%s}})) })",
		"fetchPartitions", strings.Join(code, ", "))
	x.d.do("fetchPartitions", func(k int, c queen.Client) any { return ans(c.FetchPartitions(x.d.ctx, req)) })
}

func (x *dex) opLetters(r *rand.Rand, dead bool) {
	f := queen.LetterFilter{Limit: 1000}
	if r.IntN(2) == 0 {
		f.Queue = diffQueues.Pick(r)
	}
	if r.IntN(3) == 0 {
		f.ConsumerGroup = diffGroups.Pick(r)
		if f.ConsumerGroup == "" {
			f.ConsumerGroup = queen.QueueModeGroup
		}
	}
	if r.IntN(4) == 0 {
		f.Partition = diffParts.Pick(r)
	}
	if r.IntN(5) == 0 {
		f.From = x.pastTime(r)
	}
	if r.IntN(5) == 0 {
		f.To = x.pastTime(r)
	}
	if r.IntN(4) == 0 {
		f.Limit, f.Offset = 1+r.IntN(3), r.IntN(3)
	}
	label, call := "parked", "ParkedMessages"
	if dead {
		label, call = "deadLetters", "DeadLetters"
	}
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { f := %s; return letters(f)(c.%s(ctx, f)) })", label, x.gfilter(f), call)
	x.d.do(label, func(k int, c queen.Client) any {
		list := c.ParkedMessages
		if dead {
			list = c.DeadLetters
		}
		return letters(f)(list(x.d.ctx, f))
	})
}

// opLetter replays or deletes a dead letter or a parked message: one the
// memory broker lists, or (sometimes) one past the end, which no backend
// knows.
func (x *dex) opLetter(r *rand.Rand, dead, replay bool) {
	list := x.d.b[bMem].ParkedMessages
	if dead {
		list = x.d.b[bMem].DeadLetters
	}
	page, err := list(x.d.ctx, queen.LetterFilter{Limit: 1000})
	n := 0
	if err == nil {
		n = len(page.Letters)
	}
	i := n
	if n > 0 && r.IntN(10) > 0 {
		i = r.IntN(n)
	}
	var label, call string
	switch {
	case dead && replay:
		label, call = "replayDead", "ReplayDeadLetter"
	case dead:
		label, call = "deleteDead", "DeleteDeadLetter"
	case replay:
		label, call = "replayParked", "ReplayParked"
	default:
		label, call = "deleteParked", "DeleteParked"
	}
	if replay {
		x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.%s(ctx, d.letterID(k, %v, %d))) })", label, call, dead, i)
	} else {
		x.d.emit("d.do(%q, func(k int, c queen.Client) any { return c.%s(ctx, d.letterID(k, %v, %d)) })", label, call, dead, i)
	}
	x.d.do(label, func(k int, c queen.Client) any {
		id := x.d.letterID(k, dead, i)
		switch {
		case dead && replay:
			return ans(c.ReplayDeadLetter(x.d.ctx, id))
		case dead:
			return c.DeleteDeadLetter(x.d.ctx, id)
		case replay:
			return ans(c.ReplayParked(x.d.ctx, id))
		}
		return c.DeleteParked(x.d.ctx, id)
	})
	if replay {
		x.pushAt = append(x.pushAt, x.d.clock.Now())
	}
}

func (x *dex) opConfigure(r *rand.Rand) {
	q := diffQueues.Pick(r)
	var c queen.QueueConfig
	if r.IntN(2) == 0 {
		c.LeaseTime = []time.Duration{5 * time.Second, 30 * time.Second, 120 * time.Second}[r.IntN(3)]
	}
	c.RetryLimit = r.IntN(4)
	if r.IntN(2) == 0 {
		c.RetryDelay = []time.Duration{time.Second, 5 * time.Second}[r.IntN(2)]
	}
	if r.IntN(4) == 0 {
		c.MaxSize = 3 + r.IntN(6)
	}
	if r.IntN(8) == 0 {
		c.DelayedProcessing = 2 * time.Second
	}
	if r.IntN(8) == 0 {
		c.WindowBuffer = 2 * time.Second
	}
	if r.IntN(8) == 0 {
		c.Retention = 10 * time.Minute
	}
	if r.IntN(8) == 0 {
		c.CompletedRetention = time.Minute
	}
	if r.IntN(10) == 0 {
		c.MaxWaitTime = 3 * time.Minute
	}
	c.Priority = r.IntN(3)
	if r.IntN(10) == 0 {
		c.EncryptionEnabled = true
	}
	if r.IntN(3) == 0 {
		c.Namespace, c.Task = "ns", "t"+strconv.Itoa(r.IntN(2))
	}
	if r.IntN(40) == 0 {
		c.LeaseTime = 100 * time.Millisecond // invalid
	}
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.ConfigureQueue(ctx, %s, %s)) })", "configure", gq(q), gconfig(c))
	x.d.do("configure", func(k int, cl queen.Client) any { return ans(cl.ConfigureQueue(x.d.ctx, q, c)) })
}

func (x *dex) opDeleteGroup(r *rand.Rand) {
	g, q := adminGroup(r), diffQueues.Pick(r)
	if r.IntN(5) == 0 {
		q = ""
	}
	meta := r.IntN(2) == 0
	x.d.emit("d.do(%q, func(k int, c queen.Client) any { return ans(c.DeleteGroup(ctx, %s, %s, %v)) })", "deleteGroup", gq(g), gq(q), meta)
	x.d.do("deleteGroup", func(k int, c queen.Client) any { return ans(c.DeleteGroup(x.d.ctx, g, q, meta)) })
}
