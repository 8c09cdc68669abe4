package modeltest_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// The model test drives one queue with many goroutines and checks every
// result against a single-threaded model of the semantics.
//
// Concurrency and exactness are reconciled with two locks. Ordinary steps
// (push, pop, ack with a lease, renew) run together under world.RLock;
// steps that touch many partitions or move time (clock advance, seek,
// joining a group, unfenced acks, dead-letter replay, full verification)
// run alone under world.Lock, so the model knows exactly what the broker
// holds then. A partition is handed from one lease to the next only by an
// ack, which holds the model cursor's lock from before the call until the
// model is updated, so a pop that got the partition next checks against
// the updated model. The clock only moves under world.Lock, so lease
// liveness and retry delays are exact during ordinary steps.

var (
	modelSeed    = flag.Uint64("model.seed", 0, "model test seed (0: from the clock)")
	modelSteps   = flag.Int("model.steps", 300, "model test steps per worker")
	modelWorkers = flag.Int("model.workers", 6, "model test goroutines")
)

const mQueue = "model"

var mParts = []string{"a", "b", "c", "d", "e"}

type groupKind int

const (
	kindNormal groupKind = iota
	kindAuto             // autoAck pops only
	kindConf             // conflation
)

type mGroup struct {
	api     string // name in requests: "" for queue mode
	kind    groupKind
	mode    queen.SubscriptionMode
	from    time.Time
	cursors map[string]*mCursor
	popMu   sync.Mutex // autoAck pops free their partition themselves: one at a time
}

func (g *mGroup) name() string {
	if g.api == "" {
		return queen.QueueModeGroup
	}
	return g.api
}

type mFlight struct {
	off     int64
	settled bool
}

// mCursor is the model of one group's cursor in one partition. Its fields
// are guarded by model.mu; lock is held across acks (see above).
type mCursor struct {
	lock      sync.Mutex
	g         *mGroup
	part      string
	offset    int64
	retries   int
	notBefore int64
	attempts  map[int64]int
	lease     *mLease
	flights   []mFlight
	end       int64
}

type mLease struct {
	id       string
	expires  int64
	shares   map[*mCursor]bool
	expired  bool // ran out on the clock
	released bool // every share released by acks or seeks
}

type mMsg struct {
	txid    string
	payload string
	at      int64
}

type mObs struct {
	part          string
	off           int64
	txid, payload string
	at            int64
}

type letterKey struct {
	kind, group, part string
	off               int64
}

type mLetter struct {
	retries int
	err     string
}

type model struct {
	t      *testing.T
	seed   uint64
	b      *queen.Broker
	clock  *queentest.Clock
	cfg    queen.QueueConfig
	world  sync.RWMutex
	mu     sync.Mutex
	msgs   map[string]map[int64]mMsg
	maxOff map[string]int64 // highest confirmed offset
	txOff  map[string]map[string]int64
	pids   map[string]string
	groups []*mGroup
	leases map[string]*mLease
	// letters holds, per entry, its retry count and error; a message may
	// be dead-lettered again after a seek back, hence the slice.
	letters  map[letterKey][]mLetter
	letterID map[string]letterKey // entry id → entry, learnt at verification
	replayed map[string]int64     // entry id → offset of its copy
	pending  []mObs
	late     int
	errs     []string
	counts   map[string]int
}

func (m *model) now() int64 { return m.clock.Now().UnixMicro() }

// fail records a broken promise, under m.mu.
func (m *model) fail(format string, args ...any) {
	if len(m.errs) < 20 {
		m.errs = append(m.errs, fmt.Sprintf(format, args...))
	}
}

func (m *model) failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.errs) > 0
}

// TestModel_RandomOpsMatchModel runs -model.workers goroutines for
// -model.steps steps each on an in-memory and an on-disk broker, checking
// each step against the model: per (partition, group) order, at-least-once
// delivery, nothing settled delivered again, exact ack outcomes, retry
// budget and dead-letter accounting, delivery attempts, lease exclusivity,
// renewals and expiry on the fake clock, retry delays, seeks, subscription
// start points, conflation and autoAck. A failure prints the seed.
func TestModel_RandomOpsMatchModel(t *testing.T) {
	t.Parallel()
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	steps := *modelSteps
	if testing.Short() {
		steps = min(steps, 100)
	}
	for _, disk := range []bool{false, true} {
		name := "memory"
		if disk {
			name = "disk"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := itest.NewClock()
			b := itest.Open(t, disk, &queen.Options{Clock: clock, MaintenanceInterval: time.Hour, MemoryBudget: modelBudget})
			m := newModel(t, seed, b, clock)
			m.run(steps, *modelWorkers)
			t.Logf("seed %d: %v", seed, m.counts)
			require.Empty(t, m.errs, "model test failed with seed %d (rerun: go test -run TestModel -model.seed=%d -model.steps=%d -model.workers=%d)", seed, seed, steps, *modelWorkers)
		})
	}
}

func newModel(t *testing.T, seed uint64, b *queen.Broker, clock *queentest.Clock) *model {
	m := &model{
		t: t, seed: seed, b: b, clock: clock,
		msgs: map[string]map[int64]mMsg{}, maxOff: map[string]int64{}, txOff: map[string]map[string]int64{},
		pids: map[string]string{}, leases: map[string]*mLease{}, letters: map[letterKey][]mLetter{},
		letterID: map[string]letterKey{}, replayed: map[string]int64{}, counts: map[string]int{},
	}
	m.cfg = queen.DefaultQueueConfig()
	m.cfg.LeaseTime, m.cfg.RetryLimit, m.cfg.RetryDelay = 30*time.Second, 2, 2*time.Second
	_, err := b.ConfigureQueue(bg, mQueue, m.cfg)
	require.NoError(t, err)
	for _, p := range mParts {
		m.msgs[p], m.maxOff[p], m.txOff[p] = map[int64]mMsg{}, -1, map[string]int64{}
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, p := range mParts { // every partition exists before any group
		m.push(-1, rng, p)
	}
	for _, g := range []*mGroup{{api: "", kind: kindNormal}, {api: "g1", kind: kindNormal}, {api: "auto", kind: kindAuto}, {api: "conf", kind: kindConf}} {
		g.mode = queen.SubscriptionModeAll
		m.join(g, rng)
	}
	return m
}

func (m *model) run(steps, workers int) {
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(m.seed, uint64(w+1)))
		wg.Add(1)
		go func() { defer wg.Done(); m.worker(w, rng, steps) }()
	}
	wg.Wait()
	if m.failed() {
		return
	}
	m.world.Lock()
	defer m.world.Unlock()
	m.drain()
	m.verify()
}

// held is a leased batch a worker has not finished with.
type held struct {
	lease string
	g     *mGroup
	msgs  []*queen.Message
}

func (m *model) worker(id int, rng *rand.Rand, steps int) {
	var helds []*held
	for step := 0; step < steps && !m.failed(); step++ {
		r := rng.IntN(100)
		if r < 10 {
			m.world.Lock()
			m.exclusive(rng, &helds)
			m.world.Unlock()
			continue
		}
		m.world.RLock()
		switch {
		case r < 35:
			m.push(id, rng, "")
		case r < 62 && len(helds) < 5:
			m.mu.Lock()
			g := m.groups[rng.IntN(len(m.groups))]
			m.mu.Unlock()
			if h, _ := m.pop(g, rng, queen.PopRequest{}); h != nil {
				helds = append(helds, h)
			}
		case r < 92 && len(helds) > 0:
			i := rng.IntN(len(helds))
			if m.ackSome(helds[i], rng, false) {
				helds = slices.Delete(helds, i, i+1)
			}
		case r < 97 && len(helds) > 0:
			m.renew(helds[rng.IntN(len(helds))], rng)
		case len(helds) > 0:
			i := rng.IntN(len(helds))
			helds = slices.Delete(helds, i, i+1) // abandoned: left to expire
		}
		m.world.RUnlock()
	}
}

// exclusive runs one step that needs the broker to itself.
func (m *model) exclusive(rng *rand.Rand, helds *[]*held) {
	switch r := rng.IntN(100); {
	case r < 35:
		m.advance([]time.Duration{time.Second, 3 * time.Second, 31 * time.Second, 61 * time.Second, 200 * time.Second}[rng.IntN(5)])
	case r < 50:
		m.seek(rng)
	case r < 60 && m.late < 4:
		m.late++
		g := &mGroup{api: fmt.Sprintf("late%d", m.late), kind: kindNormal}
		switch rng.IntN(3) {
		case 0:
			g.mode = queen.SubscriptionModeNew
		case 1:
			g.mode = queen.SubscriptionModeAll
		default:
			g.from = m.pastTime(rng)
		}
		m.join(g, rng)
	case r < 75 && len(*helds) > 0:
		i := rng.IntN(len(*helds))
		if m.ackSome((*helds)[i], rng, true) {
			*helds = slices.Delete(*helds, i, i+1)
		}
	case r < 85:
		m.replay(rng)
	default:
		m.verify()
	}
}

// pastTime picks the creation time of a stored message, or now.
func (m *model) pastTime(rng *rand.Rand) time.Time {
	p := mParts[rng.IntN(len(mParts))]
	m.mu.Lock()
	defer m.mu.Unlock()
	n := int64(len(m.msgs[p]))
	if n == 0 || rng.IntN(5) == 0 {
		return m.clock.Now()
	}
	return time.UnixMicro(m.msgs[p][rng.Int64N(n)].at)
}

// push pushes 1–4 messages (to part, or random partitions); some reuse a
// confirmed transactionId and must come back duplicate at its offset.
func (m *model) push(id int, rng *rand.Rand, part string) {
	n := 1 + rng.IntN(4)
	if part != "" {
		n = 1
	}
	items := make([]queen.PushItem, n)
	wantOff := make([]int64, n)
	m.mu.Lock()
	for i := range items {
		p := part
		if p == "" {
			p = mParts[rng.IntN(len(mParts))]
		}
		wantOff[i] = -1
		txid := fmt.Sprintf("w%d-%d", id, rng.Uint64())
		if rng.IntN(10) == 0 && len(m.txOff[p]) > 0 {
			for tx, off := range m.txOff[p] {
				txid, wantOff[i] = tx, off
				break
			}
		}
		items[i] = queen.PushItem{Queue: mQueue, Partition: p, TransactionID: txid, Payload: []byte(fmt.Sprintf(`{"tx":%q,"k":[%d]}`, txid, rng.IntN(1000)))}
	}
	m.mu.Unlock()
	res, err := m.b.Push(bg, items)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.fail("push: %v", err)
		return
	}
	at := m.now()
	for i, r := range res {
		p := items[i].Partition
		if wantOff[i] >= 0 {
			if r.Status != queen.PushDuplicate || r.Offset != wantOff[i] {
				m.fail("re-push of %s/%s: %s at %d, want duplicate at %d", p, r.TransactionID, r.Status, r.Offset, wantOff[i])
			}
			continue
		}
		if r.Status == queen.PushDuplicate {
			// Two workers drew the same random id: only a confirmed one may match.
			if off, ok := m.txOff[p][r.TransactionID]; ok && off == r.Offset {
				continue
			}
		}
		if r.Status != queen.PushQueued {
			m.fail("push %s/%s: %s (%v)", p, r.TransactionID, r.Status, r.Err)
			continue
		}
		m.counts["push"]++
		m.record(p, r.PartitionID, r.Offset, mMsg{txid: r.TransactionID, payload: string(items[i].Payload), at: at})
	}
}

// record adds a confirmed message, under m.mu.
func (m *model) record(p, pid string, off int64, msg mMsg) {
	if old, ok := m.msgs[p][off]; ok {
		m.fail("%s@%d given to %s and %s", p, off, old.txid, msg.txid)
	}
	if prev, ok := m.pids[p]; ok && prev != pid {
		m.fail("%s: partition id changed from %s to %s", p, prev, pid)
	}
	m.pids[p] = pid
	m.msgs[p][off] = msg
	m.txOff[p][msg.txid] = off
	m.maxOff[p] = max(m.maxOff[p], off)
}

// next is one past the last message of p, in exclusive steps (every push
// has returned). Under m.mu.
func (m *model) next(p string) int64 { return int64(len(m.msgs[p])) }

// firstAtOrAfter is the first offset of p created at or after at. Under m.mu.
func (m *model) firstAtOrAfter(p string, at int64) int64 {
	for o := range m.next(p) {
		if m.msgs[p][o].at >= at {
			return o
		}
	}
	return m.next(p)
}

// join creates a group by its first pop, in an exclusive step.
func (m *model) join(g *mGroup, rng *rand.Rand) {
	g.cursors = map[string]*mCursor{}
	m.mu.Lock()
	for _, p := range mParts {
		c := &mCursor{g: g, part: p, attempts: map[int64]int{}}
		switch {
		case !g.from.IsZero():
			c.offset = m.firstAtOrAfter(p, g.from.UnixMicro())
		case g.mode == queen.SubscriptionModeNew:
			c.offset = m.next(p)
		}
		g.cursors[p] = c
	}
	m.groups = append(m.groups, g)
	m.mu.Unlock()
	req := queen.PopRequest{SubscriptionMode: g.mode, SubscriptionFrom: g.from, Conflation: g.kind == kindConf}
	if h, _ := m.pop(g, rng, req); h != nil {
		m.ackSome(h, rng, false)
	}
}

// pop pops for g with random options and checks the result.
func (m *model) pop(g *mGroup, rng *rand.Rand, req queen.PopRequest) (*held, int) {
	req.Queue, req.Group = mQueue, g.api
	if req.Batch == 0 { // random options unless the caller chose
		req.Batch = rng.IntN(8)
		req.Partitions = rng.IntN(4)
		if rng.IntN(5) == 0 {
			req.Partition = mParts[rng.IntN(len(mParts))]
		}
		if rng.IntN(6) == 0 {
			req.Wait, req.Timeout = true, 5*time.Millisecond
		}
		switch rng.IntN(4) {
		case 0:
			req.Lease = 5 * time.Second
		case 1:
			req.Lease = 120 * time.Second
		}
	}
	req.CommitOnDelivery = g.kind == kindAuto
	if g.kind == kindAuto {
		g.popMu.Lock()
		defer g.popMu.Unlock()
	}
	m.mu.Lock()
	floor := make(map[string]int64, len(mParts))
	for _, p := range mParts {
		floor[p] = m.maxOff[p]
	}
	m.mu.Unlock()

	res, err := m.b.Pop(bg, req)
	if err != nil {
		m.mu.Lock()
		m.fail("pop %s: %v", g.name(), err)
		m.mu.Unlock()
		return nil, 0
	}
	if len(res.Messages) == 0 {
		return nil, 0
	}
	byPart := map[string][]*queen.Message{}
	var parts []string
	for _, msg := range res.Messages {
		if byPart[msg.Partition] == nil {
			parts = append(parts, msg.Partition)
		}
		byPart[msg.Partition] = append(byPart[msg.Partition], msg)
	}
	sorted := slices.Clone(parts)
	sort.Strings(sorted)
	for _, p := range sorted {
		g.cursors[p].lock.Lock()
		defer g.cursors[p].lock.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts["pop"]++
	now := m.now()
	batch := max(req.Batch, 1)
	if len(res.Messages) > batch {
		m.fail("pop %s: %d messages for batch %d", g.name(), len(res.Messages), batch)
	}
	if req.Partition != "" && (len(parts) != 1 || parts[0] != req.Partition) {
		m.fail("pop %s of partition %s returned %v", g.name(), req.Partition, parts)
	}
	if len(parts) > max(req.Partitions, 1) && req.Partition == "" {
		m.fail("pop %s: %d partitions for Partitions=%d", g.name(), len(parts), req.Partitions)
	}
	var l *mLease
	if g.kind != kindAuto {
		if res.LeaseID == "" || m.leases[res.LeaseID] != nil {
			m.fail("pop %s: lease id %q empty or reused", g.name(), res.LeaseID)
			return nil, 0
		}
		d := req.Lease
		if d == 0 {
			d = m.cfg.LeaseTime
		}
		l = &mLease{id: res.LeaseID, expires: now + d.Microseconds(), shares: map[*mCursor]bool{}}
		m.leases[l.id] = l
	} else if res.LeaseID != "" {
		m.fail("autoAck pop returned lease %s", res.LeaseID)
	}
	for _, p := range parts {
		msgs := byPart[p]
		c := g.cursors[p]
		where := fmt.Sprintf("pop %s/%s %v", g.name(), p, offsets(msgs))
		if c.lease != nil {
			m.fail("%s: partition still leased to %s until %d (now %d)", where, c.lease.id, c.lease.expires, now)
		}
		if now < c.notBefore {
			m.fail("%s: served %dµs before its retry delay ends", where, c.notBefore-now)
		}
		first := msgs[0].Offset
		switch g.kind {
		case kindConf:
			if len(msgs) != 1 || first < c.offset || first < floor[p] {
				m.fail("%s: conflation must give one message at or after max(cursor %d, newest %d)", where, c.offset, floor[p])
			}
			c.offset = first
		default:
			if first != c.offset {
				m.fail("%s: batch starts at %d, cursor is %d", where, first, c.offset)
			}
		}
		if g.kind == kindAuto {
			clear(c.attempts)
		}
		c.flights = c.flights[:0]
		for i, msg := range msgs {
			if msg.Offset != first+int64(i) {
				m.fail("%s: not contiguous", where)
			}
			c.attempts[msg.Offset]++
			if msg.DeliveryAttempt != c.attempts[msg.Offset] {
				m.fail("%s: offset %d attempt %d, model says %d", where, msg.Offset, msg.DeliveryAttempt, c.attempts[msg.Offset])
			}
			if msg.ConsumerGroup != g.name() || msg.Queue != mQueue || msg.LeaseID != res.LeaseID {
				m.fail("%s: group %q queue %q lease %q", where, msg.ConsumerGroup, msg.Queue, msg.LeaseID)
			}
			m.observe(mObs{part: p, off: msg.Offset, txid: msg.TransactionID, payload: string(msg.Payload), at: msg.CreatedAt.UnixMicro()})
			c.flights = append(c.flights, mFlight{off: msg.Offset})
		}
		c.end = msgs[len(msgs)-1].Offset + 1
		if g.kind == kindAuto {
			c.offset, c.flights = c.end, nil
			clear(c.attempts)
			continue
		}
		c.lease = l
		l.shares[c] = true
	}
	if l == nil {
		return nil, len(res.Messages)
	}
	return &held{lease: l.id, g: g, msgs: res.Messages}, len(res.Messages)
}

// observe checks a delivered message against what was pushed, or keeps it
// for later when its push has not returned yet. Under m.mu.
func (m *model) observe(o mObs) {
	want, ok := m.msgs[o.part][o.off]
	if !ok {
		m.pending = append(m.pending, o)
		return
	}
	if want.txid != o.txid || want.payload != o.payload || want.at != o.at {
		m.fail("%s@%d delivered as %s %s at %d, pushed as %s %s at %d", o.part, o.off, o.txid, o.payload, o.at, want.txid, want.payload, want.at)
	}
}

var ackStatuses = []queen.AckStatus{
	queen.AckCompleted, queen.AckCompleted, queen.AckCompleted, queen.AckCompleted, queen.AckCompleted, queen.AckCompleted,
	queen.AckFailed, queen.AckFailed, queen.AckRetry, queen.AckRetry, queen.AckDLQ, queen.AckPark, "success",
}

// ackSome acks part or all of h with random statuses (unfenced when
// exclusive: any live lease's batch may be hit) and checks each result
// against the model's prediction. It reports whether h is finished.
func (m *model) ackSome(h *held, rng *rand.Rand, unfenced bool) bool {
	var pick []*queen.Message
	var rest []*queen.Message
	switch rng.IntN(3) {
	case 0: // all
		pick = h.msgs
	case 1: // a prefix
		k := 1 + rng.IntN(len(h.msgs))
		pick, rest = h.msgs[:k], h.msgs[k:]
	default: // a random subset
		for _, msg := range h.msgs {
			if rng.IntN(2) == 0 {
				pick = append(pick, msg)
			} else {
				rest = append(rest, msg)
			}
		}
		if len(pick) == 0 {
			return false
		}
	}
	items := make([]queen.AckItem, len(pick))
	for i, msg := range pick {
		it := queen.AckItem{TransactionID: msg.TransactionID, PartitionID: msg.PartitionID, LeaseID: h.lease, Group: h.g.api, Status: ackStatuses[rng.IntN(len(ackStatuses))]}
		if rng.IntN(3) > 0 {
			it.Error = "boom " + msg.TransactionID
		}
		if (it.Status == queen.AckFailed || it.Status == queen.AckRetry) && rng.IntN(3) == 0 {
			it.Delay = 5 * time.Second
		}
		switch {
		case unfenced:
			it.LeaseID = ""
		case rng.IntN(40) == 0:
			it.LeaseID = "00000000-0000-7000-8000-000000000000"
		case rng.IntN(60) == 0:
			it.Status = "bogus"
		}
		items[i] = it
	}
	var cs []*mCursor
	for _, msg := range pick {
		c := h.g.cursors[msg.Partition]
		if !slices.Contains(cs, c) {
			cs = append(cs, c)
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].part < cs[j].part })
	for _, c := range cs {
		c.lock.Lock()
		defer c.lock.Unlock()
	}
	results, err := m.b.AckBatch(bg, items)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.fail("ack: %v", err)
		return true
	}
	m.counts["ack"]++
	want := m.settle(h.g, pick, items)
	for i := range items {
		got, w := results[i], want[i]
		where := fmt.Sprintf("ack %s/%s@%d %s lease=%q", h.g.name(), pick[i].Partition, pick[i].Offset, items[i].Status, items[i].LeaseID)
		switch {
		case w.err != nil && !errors.Is(got.Err, w.err) && (w.alt == nil || !errors.Is(got.Err, w.alt)):
			m.fail("%s: err %v, model says %v", where, got.Err, w.err)
		case w.err == nil && got.Err != nil:
			m.fail("%s: refused (%v), model says success", where, got.Err)
		case got.Success != w.success || got.DeadLettered != w.dl || got.Parked != w.pk || got.LeaseReleased != w.released:
			m.fail("%s: success=%v dl=%v parked=%v released=%v, model says %+v", where, got.Success, got.DeadLettered, got.Parked, got.LeaseReleased, w)
		}
	}
	h.msgs = rest
	return len(rest) == 0
}

type ackWant struct {
	success, dl, pk, released bool
	err                       error
	alt                       error // also right: the model cannot tell which
}

// settle predicts and applies an ack batch, mirroring the cursor rule: per
// cursor, in offset order, the first message that comes back stops
// everything after it; the cursor moves through the leading run of settled
// messages, or past the batch when all settled. Under m.mu.
func (m *model) settle(g *mGroup, pick []*queen.Message, items []queen.AckItem) []ackWant {
	now := m.now()
	want := make([]ackWant, len(items))
	type target struct{ i, fi int }
	targets := map[*mCursor][]target{}
	for i, it := range items {
		switch it.Status {
		case queen.AckCompleted, queen.AckFailed, queen.AckRetry, queen.AckDLQ, queen.AckPark, "success":
		default:
			want[i].err = queen.ErrInvalidArgument
			continue
		}
		c := g.cursors[pick[i].Partition]
		fi := -1
		if c.lease != nil && len(c.flights) > 0 {
			fi = slices.IndexFunc(c.flights, func(f mFlight) bool { return f.off == pick[i].Offset })
		}
		switch {
		case fi >= 0 && c.flights[fi].settled: // by an earlier call, lease still live
			want[i].err = queen.ErrAlreadySettled
		case fi >= 0 && it.LeaseID != "" && c.lease.id != it.LeaseID:
			want[i].err = queen.ErrLeaseExpired
		case fi >= 0:
			targets[c] = append(targets[c], target{i, fi})
		case pick[i].Offset < c.offset:
			want[i].err = queen.ErrAlreadySettled // settled before
		default:
			want[i].err = queen.ErrLeaseExpired
			if g.kind == kindConf {
				// A conflating pop moves the cursor to the newest message as
				// it delivers; one running now may have moved the broker's
				// past this message before the model hears of it.
				want[i].alt = queen.ErrAlreadySettled
			}
		}
	}
	for c, ts := range targets {
		sort.SliceStable(ts, func(a, b int) bool { return ts[a].fi < ts[b].fi })
		comeback := false
		for _, t := range ts {
			it, w, f := items[t.i], &want[t.i], &c.flights[t.fi]
			w.success = true
			if comeback || f.settled {
				continue
			}
			switch it.Status {
			case queen.AckCompleted, "success":
				f.settled = true
			case queen.AckDLQ:
				f.settled, w.dl = true, true
				m.letter("dl", c, f.off, orDefault(it.Error, "Unknown error"))
			case queen.AckPark:
				f.settled, w.pk = true, true
				m.letter("pk", c, f.off, it.Error)
			case queen.AckFailed:
				if c.retries < m.cfg.RetryLimit {
					c.retries++
					comeback = true
					d := m.cfg.RetryDelay
					if it.Delay > 0 {
						d = it.Delay
					}
					if d > 0 {
						c.notBefore = now + d.Microseconds()
					}
				} else {
					f.settled, w.dl = true, true
					m.letter("dl", c, f.off, orDefault(it.Error, "Retries exhausted"))
				}
			case queen.AckRetry:
				comeback = true
				if it.Delay > 0 {
					c.notBefore = now + it.Delay.Microseconds()
				}
			}
		}
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
		k := 0
		for k < len(c.flights) && c.flights[k].off < prefix {
			k++
		}
		c.flights = c.flights[k:]
		c.offset = prefix
		if comeback || allDone {
			m.release(c)
			for _, t := range ts {
				want[t.i].released = true
			}
		}
	}
	return want
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (m *model) letter(kind string, c *mCursor, off int64, errText string) {
	k := letterKey{kind, c.g.name(), c.part, off}
	m.letters[k] = append(m.letters[k], mLetter{retries: c.retries, err: errText})
	m.counts[kind]++
}

// release ends c's share of its lease. Under m.mu.
func (m *model) release(c *mCursor) {
	if l := c.lease; l != nil {
		delete(l.shares, c)
		if len(l.shares) == 0 && !l.expired {
			l.released = true
		}
	}
	c.lease, c.flights = nil, nil
}

func (m *model) renew(h *held, rng *rand.Rand) {
	d := []time.Duration{0, 10 * time.Second, 90 * time.Second}[rng.IntN(3)]
	got, err := m.b.RenewLease(bg, h.lease, d)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts["renew"]++
	l := m.leases[h.lease]
	if d == 0 {
		d = 60 * time.Second
	}
	switch {
	case l.expired:
		if !errors.Is(err, queen.ErrLeaseExpired) && !errors.Is(err, queen.ErrNotFound) {
			m.fail("renew of expired lease %s: %v", l.id, err)
		}
	case l.released:
		if !errors.Is(err, queen.ErrNotFound) {
			m.fail("renew of released lease %s: %v", l.id, err)
		}
	case err != nil:
		m.fail("renew of live lease %s: %v", l.id, err)
	default:
		l.expires = max(l.expires, m.now()+d.Microseconds())
		if got.ExpiresAt.UnixMicro() != l.expires {
			m.fail("renew of %s: expires %d, model says %d", l.id, got.ExpiresAt.UnixMicro(), l.expires)
		}
	}
}

// advance moves the clock; leases that run out are gone. Exclusive.
func (m *model) advance(d time.Duration) {
	m.clock.Advance(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts["advance"]++
	now := m.now()
	for _, l := range m.leases {
		if !l.expired && !l.released && l.expires <= now {
			l.expired = true
			for c := range l.shares {
				c.lease, c.flights = nil, nil
			}
			l.shares = map[*mCursor]bool{}
		}
	}
}

// seek moves a normal group to the end or to a time. Exclusive.
func (m *model) seek(rng *rand.Rand) {
	m.mu.Lock()
	var normal []*mGroup
	for _, g := range m.groups {
		if g.kind == kindNormal {
			normal = append(normal, g)
		}
	}
	m.mu.Unlock()
	g := normal[rng.IntN(len(normal))]
	opts := queen.SeekOptions{ToEnd: true}
	if rng.IntN(2) == 0 {
		opts = queen.SeekOptions{Timestamp: m.pastTime(rng)}
	}
	res, err := m.b.SeekGroup(bg, g.api, mQueue, opts)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts["seek"]++
	if err != nil || res.PartitionsUpdated != len(mParts)+1 { // and the Default partition ConfigureQueue made
		m.fail("seek %s: %v %+v", g.name(), err, res)
		return
	}
	for _, p := range mParts {
		c := g.cursors[p]
		m.release(c)
		clear(c.attempts)
		c.retries, c.notBefore = 0, 0
		if opts.ToEnd {
			c.offset = m.next(p)
		} else {
			c.offset = m.firstAtOrAfter(p, opts.Timestamp.UnixMicro())
		}
	}
}

// replay replays a known dead letter: a copy at the end of its partition
// the first time, a duplicate at the same offset after. Exclusive.
func (m *model) replay(rng *rand.Rand) {
	m.mu.Lock()
	var ids []string
	for id := range m.letterID {
		if m.letterID[id].kind == "dl" {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	sort.Strings(ids)
	id := ids[rng.IntN(len(ids))]
	res, err := m.b.ReplayDeadLetter(bg, id)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts["replay"]++
	if err != nil {
		m.fail("replay %s: %v", id, err)
		return
	}
	k := m.letterID[id]
	if off, ok := m.replayed[id]; ok {
		if !res.Duplicate || res.Offset != off {
			m.fail("second replay of %s: %+v, want duplicate at %d", id, res, off)
		}
		return
	}
	if res.Duplicate || res.Offset != m.next(k.part) {
		m.fail("replay of %s: %+v, want a copy at %d", id, res, m.next(k.part))
		return
	}
	m.replayed[id] = res.Offset
	src := m.msgs[k.part][k.off]
	m.record(k.part, m.pids[k.part], res.Offset, mMsg{txid: "dlq:" + id, payload: src.payload, at: m.now()})
}

// verify compares everything the broker lists with the model. Exclusive.
func (m *model) verify() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts["verify"]++
	for _, p := range mParts {
		for o := range m.next(p) {
			if _, ok := m.msgs[p][o]; !ok {
				m.fail("%s: offset %d missing below %d", p, o, m.next(p))
			}
		}
	}
	pending := m.pending
	m.pending = nil
	for _, o := range pending {
		if _, ok := m.msgs[o.part][o.off]; !ok {
			m.fail("%s@%d (%s) was delivered but no push confirmed it", o.part, o.off, o.txid)
			continue
		}
		m.observe(o)
	}
	// Dead letters and parked messages: exactly the model's.
	want := map[string]int{}
	for k, ls := range m.letters {
		for _, l := range ls {
			want[fmt.Sprintf("%s %s %s@%d retries=%d err=%q", k.kind, k.group, k.part, k.off, l.retries, l.err)]++
		}
	}
	got := map[string]int{}
	for _, kind := range []string{"dl", "pk"} {
		list := m.b.DeadLetters
		if kind == "pk" {
			list = m.b.ParkedMessages
		}
		var letters []queen.DeadLetter
		for {
			page, err := list(bg, queen.LetterFilter{Queue: mQueue, Limit: 1000, Offset: len(letters)})
			if err != nil {
				m.fail("list %s: %v", kind, err)
				return
			}
			letters = append(letters, page.Letters...)
			if len(page.Letters) == 0 || len(letters) >= page.Total {
				break
			}
		}
		for _, e := range letters {
			k := letterKey{kind, e.ConsumerGroup, e.Partition, e.Offset}
			got[fmt.Sprintf("%s %s %s@%d retries=%d err=%q", kind, e.ConsumerGroup, e.Partition, e.Offset, e.RetryCount, e.Error)]++
			m.letterID[e.ID] = k
			src, ok := m.msgs[e.Partition][e.Offset]
			if !ok || src.txid != e.TransactionID || src.payload != string(e.Payload) {
				m.fail("%s entry %v is not the message it names (%s %s)", kind, k, e.TransactionID, e.Payload)
			}
		}
	}
	for s, n := range want {
		if got[s] != n {
			m.fail("dead letters: model has %d× %s, broker %d", n, s, got[s])
		}
	}
	for s, n := range got {
		if want[s] != n {
			m.fail("dead letters: broker has %d× %s, model %d", n, s, want[s])
		}
	}
}

// drain expires everything and reads every group to the end, acking all:
// each group must get every message from its cursor on. Exclusive.
func (m *model) drain() {
	m.advance(2 * time.Hour)
	rng := rand.New(rand.NewPCG(m.seed, 1<<40))
	for _, g := range m.groups {
		misses := 0
		for !m.emptyFor(g) && !m.failed() {
			h, n := m.pop(g, rng, queen.PopRequest{Batch: 50, Partitions: len(mParts)})
			if n == 0 {
				// Only a retry delay may hold messages back; after it, nothing.
				if misses++; misses > 2 {
					m.mu.Lock()
					m.fail("drain: broker gives %s nothing, model says messages remain", g.name())
					m.mu.Unlock()
					return
				}
				m.advance(time.Hour)
				continue
			}
			misses = 0
			if h == nil { // autoAck
				continue
			}
			items := ackItems(h.msgs, queen.AckCompleted)
			res, err := m.b.AckBatch(bg, items)
			m.mu.Lock()
			if err != nil {
				m.fail("drain ack: %v", err)
			} else {
				want := m.settle(g, h.msgs, items)
				for j := range res {
					if !res[j].Success || !want[j].success {
						m.fail("drain ack of %s@%d refused: %v", h.msgs[j].Partition, h.msgs[j].Offset, res[j].Err)
					}
				}
			}
			m.mu.Unlock()
		}
	}
}

// emptyFor reports whether g's cursors are all at the end.
func (m *model) emptyFor(g *mGroup) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range mParts {
		if g.cursors[p].offset < m.next(p) {
			return false
		}
	}
	return true
}
