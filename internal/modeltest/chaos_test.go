package modeltest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestModel_ConcurrentChaos runs -model.workers goroutines drawing from
// every Broker operation at once (admin ones included: deletes of
// messages, groups, queues and letters, seeks, subscription changes,
// replays, retention and eviction, transactions, clock jumps), on an
// in-memory and an on-disk broker that is closed and reopened now and
// then. The order of the steps is not deterministic, so it checks what
// holds whatever the order: no panic and no hang, only documented
// sentinel errors, counts never negative, a message settled by a group is
// not delivered to it again (unless a seek, a group delete or a
// subscription change could have moved the group back), no delivery
// attempt seen twice, each partition in offset order within a pop,
// every group reading everything in the end, letter counts matching the
// lists, and a restart changing nothing.
func TestModel_ConcurrentChaos(t *testing.T) {
	t.Parallel()
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	steps := max(*modelSteps/3, 20)
	if testing.Short() {
		steps = min(steps, 40)
	}
	workers := max(*modelWorkers-2, 2)
	for _, disk := range []bool{false, true} {
		name := "memory"
		if disk {
			name = "disk"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newChaos(t, seed, disk)
			c.run(workers, steps)
			if len(c.errs) > 0 {
				// The seed fixes each worker's choice of operations, not
				// how the workers interleave: a rerun with it may pass.
				t.Fatalf("chaos (seed %d; the same operations, though not their interleaving: go test -run 'TestModel_ConcurrentChaos/%s' -count=1 -model.seed=%d -model.steps=%d -model.workers=%d): %d broken promises, first:\n%s",
					seed, name, seed, *modelSteps, *modelWorkers, len(c.errs), strings.Join(c.errs[:min(len(c.errs), 8)], "\n"))
			}
			t.Logf("seed %d: %v", seed, c.counts)
		})
	}
}

type chaos struct {
	t     *testing.T
	seed  uint64
	disk  bool
	dir   string
	opts  *queen.Options
	clock *queentest.Clock

	world sync.RWMutex // held shared by each step; Close and reopen take it alone
	b     *queen.Broker

	mu       sync.Mutex
	errs     []string
	counts   map[string]int
	epoch    map[string]int          // per queue/group: bumped as anything that may move the group back starts, and as it returns
	moving   map[string]int          // per queue/group: how many such operations run now
	settled  map[string]chaosSettled // group/pid/offset → when settled
	tick     int64                   // bookkeeping order: one more at each pop's start and each settle
	attempts map[string]map[int]bool // group/pid/offset/epoch → attempts seen
	restarts int
	txn      atomic.Int64
}

func newChaos(t *testing.T, seed uint64, disk bool) *chaos {
	c := &chaos{t: t, seed: seed, disk: disk, clock: itest.NewClock(), counts: map[string]int{}, epoch: map[string]int{}, moving: map[string]int{},
		settled: map[string]chaosSettled{}, attempts: map[string]map[int]bool{}}
	c.opts = &queen.Options{Clock: c.clock, MaintenanceInterval: time.Hour, EncryptionKey: modelKey, MemoryBudget: modelBudget}
	if disk {
		c.dir = t.TempDir()
		c.opts.Durability = queen.SyncNever
		b, err := queen.Open(c.dir, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		c.b = b
	} else {
		c.b = queentest.NewBroker(t, c.opts)
	}
	t.Cleanup(func() { c.b.Close() })
	return c
}

func (c *chaos) failf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) < 50 {
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
	}
}

func (c *chaos) count(k string) {
	c.mu.Lock()
	c.counts[k]++
	c.mu.Unlock()
}

// documented are the errors a call may return here: the sentinels.
var documented = []error{queen.ErrNotFound, queen.ErrLeaseExpired, queen.ErrAlreadySettled, queen.ErrWrongGroup, queen.ErrQueueFull, queen.ErrTooLarge, queen.ErrTransactionAborted, queen.ErrInvalidArgument, context.Canceled, context.DeadlineExceeded}

// check fails on an error that is not a documented sentinel (ErrClosed
// only while the broker is closing).
func (c *chaos) check(op string, err error, closing bool) {
	if err == nil {
		return
	}
	for _, e := range documented {
		if errors.Is(err, e) {
			if errors.Is(err, queen.ErrInvalidArgument) {
				c.failf("%s: refused valid input: %v", op, err)
			}
			return
		}
	}
	if closing && errors.Is(err, queen.ErrClosed) {
		return
	}
	c.failf("%s: undocumented error %T %v", op, err, err)
}

func (c *chaos) run(workers, steps int) {
	var wg sync.WaitGroup
	var busy [64]atomic.Int64 // start of the call each worker is in, µs of real time; 0 when idle
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() { // hang detector
		defer watch.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for w := range workers {
					if s := busy[w].Load(); s != 0 && time.Since(time.UnixMicro(s)) > 30*time.Second {
						buf := make([]byte, 1<<20)
						buf = buf[:runtime.Stack(buf, true)]
						c.failf("worker %d stuck in a call for 30s:\n%s", w, buf)
						busy[w].Store(0)
					}
				}
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					c.failf("worker %d panicked: %v", w, r)
				}
			}()
			r := rand.New(rand.NewPCG(c.seed, uint64(w)+100))
			var helds []*chaosHeld
			for range steps {
				c.mu.Lock()
				n := len(c.errs)
				c.mu.Unlock()
				if n > 0 {
					return
				}
				if r.IntN(150) == 0 {
					c.restart()
					helds = nil
					continue
				}
				busy[w].Store(time.Now().UnixMicro())
				c.world.RLock()
				helds = c.step(r, w, helds)
				c.world.RUnlock()
				busy[w].Store(0)
			}
		}()
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	if len(c.errs) == 0 {
		c.finish()
	}
}

// chaosSettled is when a message was settled: the group's epoch, the
// bookkeeping's tick (after the call that settled it returned) and the
// restarts so far.
type chaosSettled struct {
	epoch    int
	tick     int64
	restarts int
}

type chaosHeld struct {
	popping // the pop that delivered it
	res     *queen.PopResult
	acked   map[int]bool // message index → settled by an accepted ack
	back    bool         // something came back: the batch is not settled as a whole
}

var chaosQueues = []string{"c0", "c1"}

// epochOf is the epoch of group on queue, or -1 while an operation that
// may move the group back runs (see moveBack).
func (c *chaos) epochOf(queue, group string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := queue + "/" + groupOf(group)
	if c.moving[k] > 0 {
		return -1
	}
	return c.epoch[k]
}

// moveBack marks that group (every group when "*"), on queue (every queue
// when ""), may be moved back by an operation about to be called; call
// the returned func once it has returned. The operation takes effect at
// some moment between the two, so a pop that overlaps any part of that
// span may come before or after it: such a pop holds no promise (its
// epoch is -1, see epochOf). The epoch changes at both ends, so two pops
// with the same epoch have no move between them.
func (c *chaos) moveBack(queue, group string) (done func()) {
	var ks []string
	for _, q := range chaosQueues {
		if queue != "" && q != queue {
			continue
		}
		for _, g := range []string{queen.QueueModeGroup, "g1", "g2", "cf"} {
			if group == "*" || g == groupOf(group) {
				ks = append(ks, q+"/"+g)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range ks {
		c.epoch[k]++
		c.moving[k]++
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, k := range ks {
			c.moving[k]--
			c.epoch[k]++
		}
	}
}

// pop pops and checks what it delivered (see observe); it returns the
// batch, or nil when nothing came.
func (c *chaos) pop(req queen.PopRequest) *chaosHeld {
	p := c.startPop(req)
	res, err := c.b.Pop(bg, req)
	return c.endPop(p, res, err)
}

// popping is a pop under way, as the bookkeeping saw it start.
type popping struct {
	req      queen.PopRequest
	epoch    int
	restarts int
	tick     int64
}

// startPop notes a pop of req about to be made.
func (c *chaos) startPop(req queen.PopRequest) popping {
	p := popping{req: req, epoch: c.epochOf(req.Queue, req.Group)}
	c.mu.Lock()
	c.tick++
	p.tick, p.restarts = c.tick, c.restarts
	c.mu.Unlock()
	return p
}

// endPop checks what the pop p returned (see observe) and returns it as a
// held batch, or nil when nothing came.
func (c *chaos) endPop(p popping, res *queen.PopResult, err error) *chaosHeld {
	c.check("pop", err, false)
	if err != nil || len(res.Messages) == 0 {
		return nil
	}
	c.count("pop")
	if c.epochOf(p.req.Queue, p.req.Group) != p.epoch || c.restartsNow() != p.restarts {
		p.epoch = -1 // moved meanwhile: no promise to check
	}
	c.observe(res, p)
	return &chaosHeld{popping: p, res: res, acked: map[int]bool{}}
}

// acked records the answers res to acks items, of h's messages idx, and
// settles h once every message of it is settled and none came back.
func (c *chaos) acked(h *chaosHeld, items []queen.AckItem, idx []int, res []queen.AckResult) {
	for k, ar := range res {
		c.check("ack item", ar.Err, false)
		if !ar.Success {
			continue
		}
		switch {
		case items[k].Status == queen.AckRetry, items[k].Status == queen.AckFailed && !ar.DeadLettered:
			h.back = true
		default:
			h.acked[idx[k]] = true
		}
	}
	if len(h.acked) == len(h.res.Messages) && !h.back && h.epoch >= 0 {
		c.settle(h)
	}
}

func (c *chaos) step(r *rand.Rand, w int, helds []*chaosHeld) []*chaosHeld {
	b := c.b
	qn := chaosQueues[r.IntN(2)]
	part := seqPartNames[r.IntN(3)]
	group := seqGroups[r.IntN(4)]
	switch x := r.IntN(100); {
	case x < 22:
		n := 1 + r.IntN(4)
		items := make([]queen.PushItem, n)
		for i := range items {
			items[i] = queen.PushItem{Queue: qn, Partition: seqPartNames[r.IntN(3)], TransactionID: fmt.Sprintf("w%d-%d", w, c.txn.Add(1)), Payload: []byte(`{"w":1}`)}
		}
		res, err := b.Push(bg, items)
		c.check("push", err, false)
		for _, pr := range res {
			if pr.Status == queen.PushFailed && !errors.Is(pr.Err, queen.ErrQueueFull) {
				c.failf("push item failed with %v", pr.Err)
			}
		}
		c.count("push")
	case x < 44 && len(helds) < 6:
		req := queen.PopRequest{Queue: qn, Group: group, Batch: 1 + r.IntN(6), Partitions: 1 + r.IntN(3), Conflation: group == "cf"}
		if r.IntN(5) == 0 {
			req.Lease = 5 * time.Second
		}
		if r.IntN(8) == 0 {
			req.Wait, req.Timeout = true, time.Duration(1+r.IntN(5))*time.Millisecond
		}
		req.CommitOnDelivery = group != "cf" && r.IntN(10) == 0
		if h := c.pop(req); h != nil && !req.CommitOnDelivery {
			helds = append(helds, h)
		}
	case x < 64 && len(helds) > 0:
		i := r.IntN(len(helds))
		h := helds[i]
		var items []queen.AckItem
		var idx []int
		for k, msg := range h.res.Messages {
			if h.acked[k] || r.IntN(4) == 0 {
				continue
			}
			st := []queen.AckStatus{queen.AckCompleted, queen.AckCompleted, queen.AckCompleted, queen.AckFailed, queen.AckRetry, queen.AckDLQ, queen.AckPark}[r.IntN(7)]
			items = append(items, queen.AckItem{TransactionID: msg.TransactionID, PartitionID: msg.PartitionID, LeaseID: h.res.LeaseID, Group: h.req.Group, Status: st})
			idx = append(idx, k)
		}
		if len(items) == 0 {
			return helds
		}
		var res []queen.AckResult
		var err error
		if r.IntN(5) == 0 {
			var ops []queen.TxOp
			for k := range items {
				ops = append(ops, queen.TxOp{Ack: &items[k]})
			}
			ops = append(ops, queen.TxOp{Push: &queen.PushItem{Queue: qn, Partition: part, TransactionID: fmt.Sprintf("x%d-%d", w, c.txn.Add(1)), Payload: []byte(`{"x":1}`)}})
			var tr *queen.TxResult
			tr, err = b.ExecTransaction(bg, ops)
			c.check("transaction", err, false)
			if err == nil {
				for k := range items {
					res = append(res, *tr.Results[k].Ack)
				}
			}
			c.count("txn")
		} else {
			res, err = b.AckBatch(bg, items)
			c.check("ack", err, false)
			c.count("ack")
		}
		c.acked(h, items, idx, res)
		if len(h.acked) == len(h.res.Messages) || h.back || r.IntN(4) == 0 {
			helds = slices.Delete(helds, i, i+1)
		}
	case x < 68 && len(helds) > 0:
		h := helds[r.IntN(len(helds))]
		_, err := b.RenewLease(bg, h.res.LeaseID, time.Duration(r.IntN(90))*time.Second)
		c.check("renew", err, false)
	case x < 73:
		c.clock.Advance([]time.Duration{time.Second, 3 * time.Second, 31 * time.Second, 61 * time.Second}[r.IntN(4)])
		c.count("advance")
	case x < 76:
		c.check("maintain", b.Maintain(bg), false)
	case x < 79:
		defer c.moveBack(qn, group)()
		opts := queen.SeekOptions{ToEnd: r.IntN(2) == 0, Timestamp: c.clock.Now().Add(-time.Duration(r.IntN(600)) * time.Second)}
		var err error
		if r.IntN(2) == 0 {
			_, err = b.SeekGroup(bg, group, qn, opts)
		} else {
			_, err = b.SeekPartition(bg, group, qn, part, opts)
		}
		c.check("seek", err, false)
		c.count("seek")
	case x < 81:
		defer c.moveBack("", group)()
		_, err := b.SetGroupSubscription(bg, group, c.clock.Now().Add(-time.Duration(r.IntN(600))*time.Second))
		c.check("setSubscription", err, false)
	case x < 83:
		meta := r.IntN(2) == 0
		defer c.moveBack(qn, group)()
		_, err := b.DeleteGroup(bg, group, qn, meta)
		c.check("deleteGroup", err, false)
		c.count("deleteGroup")
	case x < 86:
		res, err := b.Fetch(bg, qn, part, 0, 20)
		c.check("fetch", err, false)
		if err == nil && len(res.Records) > 0 {
			rec := res.Records[r.IntN(len(res.Records))]
			qs, err := b.QueueStats(bg, qn)
			c.check("stats", err, false)
			if err == nil {
				for _, ps := range qs.Partitions {
					if ps.Name == part {
						err := b.DeleteMessage(bg, ps.ID, rec.TransactionID)
						c.check("deleteMessage", err, false)
						c.count("deleteMessage")
					}
				}
			}
		}
	case x < 87:
		c.deleteQueue(qn)
	case x < 89:
		c.configure(r, qn)
	case x < 93:
		c.letterOp(r, qn)
	case x < 97:
		c.checkStats(qn, false)
	default:
		_, err := b.ListGroups(bg, queen.GroupFilter{})
		c.check("listGroups", err, false)
		_, err = b.ListMessages(bg, queen.MessageFilter{Queue: qn, Limit: 100})
		c.check("listMessages", err, false)
	}
	return helds
}

func (c *chaos) deleteQueue(qn string) {
	defer c.moveBack(qn, "*")()
	_, err := c.b.DeleteQueue(bg, qn)
	c.check("deleteQueue", err, false)
	c.count("deleteQueue")
}

func (c *chaos) configure(r *rand.Rand, qn string) {
	cfg := queen.DefaultQueueConfig()
	cfg.LeaseTime, cfg.RetryLimit = 30*time.Second, r.IntN(3)
	if r.IntN(3) == 0 {
		cfg.MaxSize = 30
	}
	if r.IntN(3) == 0 {
		cfg.Retention, cfg.MaxWaitTime = 300*time.Second, 200*time.Second
	}
	if r.IntN(3) == 0 {
		cfg.CompletedRetention = 60 * time.Second
	}
	_, err := c.b.ConfigureQueue(bg, qn, cfg)
	c.check("configure", err, false)
	c.count("configure")
}

func (c *chaos) restartsNow() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts
}

// observe checks what pop p returned: each partition in offset order,
// nothing settled before the pop started delivered again, no attempt seen
// twice. Pops are observed in any order once they returned: one that
// started before a message was settled may have delivered it first.
func (c *chaos) observe(res *queen.PopResult, p popping) {
	group, epoch, restarts := p.req.Group, p.epoch, p.restarts
	last := map[string]int64{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, msg := range res.Messages {
		if o, ok := last[msg.PartitionID]; ok && msg.Offset <= o {
			c.errs = append(c.errs, fmt.Sprintf("pop of %s: partition %s offsets not increasing (%d after %d)", group, msg.Partition, msg.Offset, o))
		}
		last[msg.PartitionID] = msg.Offset
		if epoch < 0 {
			continue
		}
		key := fmt.Sprintf("%s/%s/%d", groupOf(group), msg.PartitionID, msg.Offset)
		if s, ok := c.settled[key]; ok && s.epoch == epoch && s.tick < p.tick {
			c.errs = append(c.errs, fmt.Sprintf("%s/%s@%d settled by %q, delivered to it again (attempt %d, epoch %d, restarts %d, settled at restart %d)", res.Queue, msg.Partition, msg.Offset, group, msg.DeliveryAttempt, epoch, restarts, s.restarts))
		}
		if p.req.CommitOnDelivery {
			c.tick++
			c.settled[key] = chaosSettled{epoch: epoch, tick: c.tick, restarts: restarts}
		}
		ak := fmt.Sprintf("%s/%d/%d", key, epoch, restarts)
		if c.attempts[ak] == nil {
			c.attempts[ak] = map[int]bool{}
		}
		if c.attempts[ak][msg.DeliveryAttempt] {
			c.errs = append(c.errs, fmt.Sprintf("%s@%d delivered to %s twice with attempt %d", msg.Partition, msg.Offset, group, msg.DeliveryAttempt))
		}
		if msg.DeliveryAttempt < 1 {
			c.errs = append(c.errs, fmt.Sprintf("%s@%d delivery attempt %d", msg.Partition, msg.Offset, msg.DeliveryAttempt))
		}
		c.attempts[ak][msg.DeliveryAttempt] = true
	}
}

// settle records a batch settled as a whole by accepted acks.
func (c *chaos) settle(h *chaosHeld) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch[h.res.Queue+"/"+groupOf(h.req.Group)] != h.epoch || c.restarts != h.restarts {
		return
	}
	c.tick++
	for _, msg := range h.res.Messages {
		c.settled[fmt.Sprintf("%s/%s/%d", groupOf(h.req.Group), msg.PartitionID, msg.Offset)] = chaosSettled{epoch: h.epoch, tick: c.tick, restarts: c.restarts}
	}
}

func (c *chaos) letterOp(r *rand.Rand, qn string) {
	b := c.b
	dead := r.IntN(3) > 0
	list, replay, del := b.DeadLetters, b.ReplayDeadLetter, b.DeleteDeadLetter
	if !dead {
		list, replay, del = b.ParkedMessages, b.ReplayParked, b.DeleteParked
	}
	page, err := list(bg, queen.LetterFilter{Queue: qn, Limit: 50})
	c.check("letters", err, false)
	if err != nil || len(page.Letters) == 0 {
		return
	}
	id := page.Letters[r.IntN(len(page.Letters))].ID
	switch r.IntN(3) {
	case 0:
		_, err := replay(bg, id)
		c.check("replay", err, false)
		c.count("replay")
	case 1:
		c.check("deleteLetter", del(bg, id), false)
		c.count("deleteLetter")
	default:
		// The same id deleted twice at once: one wins, the other is ErrNotFound.
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for k := range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); errs[k] = del(bg, id) }()
		}
		wg.Wait()
		for _, err := range errs {
			c.check("deleteLetter twice", err, false)
		}
		if errs[0] == nil && errs[1] == nil {
			c.failf("deleting letter %s twice at once succeeded twice", id)
		}
		c.count("deleteLetterTwice")
	}
}

// checkStats checks counts are never negative; when quiet (nothing else
// running), that letter counts match the lists.
func (c *chaos) checkStats(qn string, quiet bool) {
	qs, err := c.b.QueueStats(bg, qn)
	if errors.Is(err, queen.ErrNotFound) {
		return
	}
	c.check("stats", err, false)
	if err != nil {
		return
	}
	if qs.Messages < 0 || qs.Pending < 0 || qs.InFlight < 0 || qs.DeadLetters < 0 || qs.Parked < 0 {
		c.failf("QueueStats(%s) negative: %+v", qn, qs)
	}
	for _, ps := range qs.Partitions {
		if ps.Messages < 0 || ps.NextOffset < ps.FirstOffset {
			c.failf("QueueStats(%s) partition %s: %+v", qn, ps.Name, ps)
		}
		for _, cs := range ps.Cursors {
			if cs.Lag < 0 || cs.InFlight < 0 || cs.Consumed < 0 || cs.Retries < 0 {
				c.failf("QueueStats(%s) partition %s cursor %+v", qn, ps.Name, cs)
			}
		}
	}
	if !quiet {
		return
	}
	for kind, list := range map[string]func(context.Context, queen.LetterFilter) (*queen.LetterPage, error){"dead letters": c.b.DeadLetters, "parked": c.b.ParkedMessages} {
		page, err := list(bg, queen.LetterFilter{Queue: qn, Limit: 1000})
		c.check("letters", err, false)
		if err != nil {
			continue
		}
		n := qs.DeadLetters
		if kind == "parked" {
			n = qs.Parked
		}
		if int64(page.Total) != n {
			c.failf("QueueStats(%s) counts %d %s, the list has %d", qn, n, kind, page.Total)
		}
	}
	var stored int64
	for _, ps := range qs.Partitions {
		res, err := c.b.Fetch(bg, qn, ps.Name, 0, 1000)
		c.check("fetch", err, false)
		if err == nil {
			stored += int64(len(res.Records))
		}
	}
	if stored != qs.Messages {
		c.failf("QueueStats(%s) counts %d messages, Fetch finds %d", qn, qs.Messages, stored)
	}
}

// restart closes the broker and opens it again (on disk; in memory it
// only checks the broker's answers are stable), checking nothing changed.
func (c *chaos) restart() {
	c.world.Lock()
	defer c.world.Unlock()
	for _, q := range chaosQueues {
		c.checkStats(q, true)
	}
	if !c.disk {
		return
	}
	pre := c.snapshot()
	if err := c.b.Close(); err != nil {
		c.failf("Close: %v", err)
	}
	if _, err := c.b.Push(bg, []queen.PushItem{{Queue: "c0"}}); !errors.Is(err, queen.ErrClosed) {
		c.failf("Push after Close: %v", err)
	}
	b, err := queen.Open(c.dir, c.opts)
	if err != nil {
		c.failf("reopen: %v", err)
		return
	}
	c.b = b
	c.mu.Lock()
	c.restarts++
	c.counts["restart"]++
	c.mu.Unlock()
	post := c.snapshot()
	for k, v := range pre {
		if post[k] != v {
			c.failf("after a restart %s is %q, was %q", k, post[k], v)
		}
	}
	for k, v := range post {
		if _, ok := pre[k]; !ok && !strings.HasPrefix(k, "cursor ") {
			c.failf("after a restart %s appeared: %q", k, v)
		}
	}
}

// snapshot is what a restart must keep: messages, cursors (but leases),
// letters, groups.
func (c *chaos) snapshot() map[string]string {
	out := map[string]string{}
	for _, qn := range chaosQueues {
		qs, err := c.b.QueueStats(bg, qn)
		if err != nil {
			continue
		}
		out["queue "+qn] = fmt.Sprintf("%s %d %d %d %v", qs.ID, qs.Messages, qs.DeadLetters, qs.Parked, qs.Groups)
		for _, ps := range qs.Partitions {
			out["partition "+qn+"/"+ps.Name] = fmt.Sprintf("%s %d %d %d", ps.ID, ps.Messages, ps.FirstOffset, ps.NextOffset)
			res, err := c.b.Fetch(bg, qn, ps.Name, 0, 1000)
			if err == nil {
				var offs []int64
				for _, rec := range res.Records {
					offs = append(offs, rec.Offset)
				}
				out["records "+qn+"/"+ps.Name] = fmt.Sprint(offs)
				for _, cs := range ps.Cursors {
					// Compare where the cursor really stands: its next stored message.
					next := ps.NextOffset
					for _, o := range offs {
						if o >= cs.Offset {
							next = o
							break
						}
					}
					out["cursor "+qn+"/"+ps.Name+"/"+cs.Group] = fmt.Sprintf("%d %d %d", next, cs.Retries, cs.Consumed)
				}
			}
		}
		for kind, list := range map[string]func(context.Context, queen.LetterFilter) (*queen.LetterPage, error){"dl": c.b.DeadLetters, "pk": c.b.ParkedMessages} {
			page, err := list(bg, queen.LetterFilter{Queue: qn, Limit: 1000})
			if err == nil {
				for _, e := range page.Letters {
					out[kind+" "+e.ID] = fmt.Sprintf("%s %s@%d %q %d", e.ConsumerGroup, e.Partition, e.Offset, e.Error, e.RetryCount)
				}
			}
		}
	}
	return out
}

// finish drains every group (each must read everything left), checks the
// counts once more and closes the broker under load.
func (c *chaos) finish() {
	c.clock.Advance(3 * time.Hour)
	for _, qn := range chaosQueues {
		gs, err := c.b.ListGroups(bg, queen.GroupFilter{})
		c.check("listGroups", err, false)
		for _, g := range gs {
			if g.Queue != qn {
				continue
			}
			api := g.Group
			if api == queen.QueueModeGroup {
				api = ""
			}
			for range 200 {
				res, err := c.b.Pop(bg, queen.PopRequest{Queue: qn, Group: api, Batch: 100, Partitions: 10})
				c.check("drain pop", err, false)
				if err != nil || len(res.Messages) == 0 {
					break
				}
				_, err = c.b.AckBatch(bg, ackItems(res.Messages, queen.AckCompleted))
				c.check("drain ack", err, false)
			}
		}
		qs, err := c.b.QueueStats(bg, qn)
		if err != nil {
			continue
		}
		for _, ps := range qs.Partitions {
			res, err := c.b.Fetch(bg, qn, ps.Name, 0, 1000)
			c.check("fetch", err, false)
			if err != nil {
				continue
			}
			for _, cs := range ps.Cursors {
				for _, rec := range res.Records {
					if rec.Offset >= cs.Offset {
						c.failf("drain: %s/%s@%d left unread by %s (cursor %d)", qn, ps.Name, rec.Offset, cs.Group, cs.Offset)
						break
					}
				}
			}
		}
		c.checkStats(qn, true)
	}
	// Close while calls run: they may only fail with ErrClosed.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					c.failf("call racing Close panicked: %v", r)
				}
			}()
			r := rand.New(rand.NewPCG(c.seed, uint64(w)+900))
			var helds []*chaosHeld
			for range 40 {
				helds = c.stepClosing(r, helds)
			}
		}()
	}
	time.Sleep(time.Millisecond)
	if err := c.b.Close(); err != nil {
		c.failf("Close under load: %v", err)
	}
	wg.Wait()
}

// stepClosing is a step while the broker may be closing.
func (c *chaos) stepClosing(r *rand.Rand, helds []*chaosHeld) []*chaosHeld {
	b := c.b
	qn := chaosQueues[r.IntN(2)]
	switch r.IntN(4) {
	case 0:
		_, err := b.Push(bg, []queen.PushItem{{Queue: qn, Partition: "a", Payload: []byte(`1`)}})
		c.check("push while closing", err, true)
	case 1:
		res, err := b.Pop(bg, queen.PopRequest{Queue: qn, Batch: 3, Wait: r.IntN(2) == 0, Timeout: 20 * time.Millisecond})
		c.check("pop while closing", err, true)
		if err == nil && len(res.Messages) > 0 {
			helds = append(helds, &chaosHeld{res: res})
		}
	case 2:
		if len(helds) > 0 {
			_, err := b.AckBatch(bg, ackItems(helds[0].res.Messages, queen.AckCompleted))
			c.check("ack while closing", err, true)
			helds = helds[1:]
		}
	default:
		_, err := b.QueueStats(bg, qn)
		if !errors.Is(err, queen.ErrNotFound) {
			c.check("stats while closing", err, true)
		}
		c.check("maintain while closing", b.Maintain(bg), true)
	}
	return helds
}

// TestChaosChecker_PopBeforeAMoveTakesEffectHoldsNoPromise: the
// concurrent model test's checker, not the broker. A DeleteGroup, seek or
// subscription change may move a group back (for a deleted group the next
// pop starts a new one; a moved cursor forgets its counts), so the checker
// changes the group's epoch around such a call: a pop that ran after the
// call started but before it took effect shares no epoch with the pops
// after it, or the checker would report a message "delivered twice with
// attempt 1" (or "settled, delivered again") where the broker is right.
// The steps here are that interleaving, in order: such a pop holds no
// promise, and a pop wholly after the move still holds one.
func TestChaosChecker_PopBeforeAMoveTakesEffectHoldsNoPromise(t *testing.T) {
	t.Parallel()
	moves := map[string]func(b *queen.Broker) error{
		"deleteGroup": func(b *queen.Broker) error {
			_, err := b.DeleteGroup(bg, "g1", "c0", true)
			return err
		},
		"deleteGroupKeepingItsStart": func(b *queen.Broker) error {
			_, err := b.DeleteGroup(bg, "g1", "c0", false)
			return err
		},
		"seek": func(b *queen.Broker) error {
			_, err := b.SeekPartition(bg, "g1", "c0", "a", queen.SeekOptions{Timestamp: time.Unix(0, 0)})
			return err
		},
	}
	for name, move := range moves {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newChaos(t, 1, false)
			pushN(t, c.b, "c0", "a", 3)
			req := queen.PopRequest{Queue: "c0", Group: "g1", Batch: 3, SubscriptionMode: queen.SubscriptionModeAll}

			done := c.moveBack("c0", "g1") // the move is called ...
			first := c.pop(req)            // ... a pop runs before it takes effect ...
			require.NotNil(t, first)
			require.Equal(t, []int{1, 1, 1}, attemptsOf(first.res.Messages))
			items := ackItems(first.res.Messages, queen.AckCompleted)
			c.acked(first, items, []int{0, 1, 2}, ack(t, c.b, items...))
			require.NoError(t, move(c.b)) // ... the move takes effect ...
			done()                        // ... and returns.

			again := c.pop(req)
			require.NotNil(t, again)
			require.Equal(t, []int64{0, 1, 2}, offsets(again.res.Messages), "the group was moved back")
			require.Equal(t, []int{1, 1, 1}, attemptsOf(again.res.Messages), "its counts started over")
			require.Empty(t, c.errs, "the broker was right")

			c.observe(again.res, again.popping)
			require.Len(t, c.errs, 3, "a pop after the move still holds its promise: seen twice")
			require.Contains(t, c.errs[0], "twice with attempt 1")
		})
	}
}

// TestChaosChecker_PopCheckedAfterALaterOneHoldsNoPromise: the concurrent
// model test's checker, not the broker. A pop delivers a message, a later
// pop delivers it again once the first lease ran out (attempt 2) and
// settles it, and the first pop's worker checks what it got only after
// the second pop's worker did: the checker does not report "settled, delivered
// again", for a message settled after a pop started may have been
// delivered by it.
func TestChaosChecker_PopCheckedAfterALaterOneHoldsNoPromise(t *testing.T) {
	t.Parallel()
	c := newChaos(t, 1, false)
	pushN(t, c.b, "c0", "a", 1)
	req := queen.PopRequest{Queue: "c0", Group: "g1", SubscriptionMode: queen.SubscriptionModeAll}

	early := c.startPop(req)
	res := pop(t, c.b, req)
	require.Equal(t, []int{1}, attemptsOf(res.Messages))
	c.clock.Advance(2 * time.Minute) // its lease runs out
	req.CommitOnDelivery = true
	late := c.pop(req)
	require.NotNil(t, late)
	require.Equal(t, []int{2}, attemptsOf(late.res.Messages), "delivered again and settled")
	c.endPop(early, res, nil) // the first pop's worker checks only now
	require.Empty(t, c.errs, "the broker was right")

	c.observe(late.res, c.startPop(req))
	require.NotEmpty(t, c.errs, "a pop that started after the settle still holds its promise")
	require.Contains(t, c.errs[0], "settled by \"g1\", delivered to it again")
}
