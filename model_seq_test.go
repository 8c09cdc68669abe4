package queen_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/internal/repro"
	"github.com/queenlite/queen/queentest"
)

// The sequential model test: a seeded generator draws a list of
// operations over every exported operation of *queen.Broker (pushes,
// pops, acks, renewals, transactions, seeks, subscription changes,
// deletes of messages, groups, queues and letters, replays, retention and
// eviction, clock jumps across every time-based feature, Close and
// reopen, reads and listings, invalid inputs, a waiting pop on another
// goroutine), runs them one at a time against a broker and the reference
// model of model_state_test.go, and checks the model after every step.
// Single-threaded runs are deterministic, so a failing list is shrunk by
// delta debugging to a short one and printed as a Go test that calls the
// Broker API (a reproducer to paste into a file). The concurrent checks
// live in TestModel_RandomOpsMatchModel and TestModel_ConcurrentChaos.
//
// Long run (the README's command):
//
//	go test -race -run 'TestModel' -count=1 -timeout 2h . -model.runs=400 -model.ops=600 -model.steps=3000 -model.workers=8
//
// Reproduce one sequence: -model.seed=N -model.runs=1 (the failure message
// prints the exact command).

var (
	modelRuns   = flag.Int("model.runs", 0, "sequential model runs per storage mode (0: 2, or 1 with -short)")
	modelOps    = flag.Int("model.ops", 0, "operations per sequential model run (0: 200, or 120 with -short)")
	modelShrink = flag.Duration("model.shrink", 90*time.Second, "time spent shrinking a failing sequence (0: no shrinking)")
)

// TestModel_SequentialOps runs -model.runs seeded sequences of -model.ops
// operations on an in-memory and an on-disk broker (which also closes and
// reopens), checking the model after every step, then drains every group
// (eventual delivery) and closes the broker.
func TestModel_SequentialOps(t *testing.T) {
	t.Parallel()
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	runs, n := *modelRuns, *modelOps
	if runs == 0 {
		runs = 2
		if testing.Short() {
			runs = 1
		}
	}
	if n == 0 {
		n = 200
		if testing.Short() {
			n = 120
		}
	}
	for _, disk := range []bool{false, true} {
		name := "memory"
		if disk {
			name = "disk"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			counts := map[string]int{}
			for r := range runs {
				s := seed + uint64(r)
				ops := genSeqOps(s, n)
				res := runSeq(s, ops, disk, false, 30*time.Second)
				for k, v := range res.counts {
					counts[k] += v
				}
				if res.fail == nil {
					continue
				}
				t.Errorf("sequential model failed with seed %d at op %d of %d: %s\nrerun: go test -run 'TestModel_SequentialOps/%s' -count=1 -model.seed=%d -model.runs=1 -model.ops=%d .",
					s, res.fail.step, len(ops), res.fail, name, s, n)
				shrunk, tries := shrinkSeq(s, ops, disk, res.fail, *modelShrink)
				final := runSeq(s, shrunk, disk, true, 30*time.Second)
				again := 0
				for range 3 {
					if f := runSeq(s, shrunk, disk, false, 30*time.Second).fail; f != nil && f.kind == res.fail.kind {
						again++
					}
				}
				t.Errorf("shrunk to %d ops in %d runs (fails again %d/3); reproducer:\n%s", len(shrunk), tries, again, final.code)
				return
			}
			t.Logf("seed %d, %d runs of %d ops: %v", seed, runs, n, counts)
		})
	}
}

// seqKind is an operation of the sequential model.
type seqKind int

const (
	skPush seqKind = iota
	skPushBuilder
	skPushLarge
	skPop
	skPopBuilder
	skDiscover
	skAck
	skAckOne
	skAbandon
	skRenew
	skRenewMsg
	skAdvance
	skMaintain
	skSeekGroup
	skSeekPartition
	skSetSub
	skDeleteGroup
	skDeleteMessage
	skDeleteQueue
	skConfigure
	skReplay
	skDeleteLetter
	skTxn
	skWaitStart
	skWaitCancel
	skReopen
	skVerify
	skFetch
	skGetMessage
	skListMessages
	skTrace
	skTraceRead
	skMisc
	skInvalid
	skMaintenance
	skCount
)

var seqKindNames = [...]string{"push", "pushBuilder", "pushLarge", "pop", "popBuilder", "discover", "ack", "ackOne", "abandon", "renew",
	"renewMsg", "advance", "maintain", "seekGroup", "seekPartition", "setSubscription", "deleteGroup", "deleteMessage", "deleteQueue",
	"configure", "replay", "deleteLetter", "txn", "waitStart", "waitCancel", "reopen", "verify", "fetch", "getMessage", "listMessages",
	"trace", "traceRead", "misc", "invalid", "maintenanceMode"}

func (k seqKind) String() string { return seqKindNames[k] }

// seqWeights are the relative frequencies of the operations.
var seqWeights = [skCount]int{
	skPush: 140, skPushBuilder: 15, skPushLarge: 3, skPop: 120, skPopBuilder: 20, skDiscover: 12, skAck: 120, skAckOne: 20,
	skAbandon: 8, skRenew: 18, skRenewMsg: 8, skAdvance: 55, skMaintain: 25, skSeekGroup: 12, skSeekPartition: 12, skSetSub: 10,
	skDeleteGroup: 10, skDeleteMessage: 22, skDeleteQueue: 4, skConfigure: 14, skReplay: 14, skDeleteLetter: 14, skTxn: 40,
	skWaitStart: 8, skWaitCancel: 3, skReopen: 5, skVerify: 12, skFetch: 10, skGetMessage: 10, skListMessages: 6, skTrace: 12,
	skTraceRead: 6, skMisc: 6, skInvalid: 12, skMaintenance: 4,
}

// seqOp is one generated operation. Its parameters are drawn from seed
// against the state at the time it runs, so an operation keeps a meaning
// when the shrinker removes the ones before it.
type seqOp struct {
	kind seqKind
	seed uint64
}

func genSeqOps(seed uint64, n int) []seqOp {
	rng := rand.New(rand.NewPCG(seed, 0x5e9))
	total := 0
	for _, w := range seqWeights {
		total += w
	}
	ops := make([]seqOp, n)
	for i := range ops {
		x := rng.IntN(total)
		k := seqKind(0)
		for x >= seqWeights[k] {
			x -= seqWeights[k]
			k++
		}
		ops[i] = seqOp{kind: k, seed: rng.Uint64()}
	}
	return ops
}

// seqFailure is the first broken promise of a run.
type seqFailure struct {
	step int    // index of the operation
	kind string // which check, the shrinker's signature
	msg  string
}

func (f *seqFailure) String() string { return f.kind + ": " + f.msg }

type seqResult struct {
	fail   *seqFailure
	code   string
	counts map[string]int
}

// runSeq runs ops on a fresh broker (in a temporary directory when disk).
// With record it also returns the Go code of the run.
func runSeq(seed uint64, ops []seqOp, disk, record bool, hang time.Duration) seqResult {
	m := newSeqModel(seed, disk, record)
	defer m.cleanup()
	if m.fail == nil {
		for i, o := range ops {
			m.step = i
			t0 := time.Now()
			m.guard(hang, func() { m.exec(i, o) })
			if os.Getenv("MODEL_TIMING") != "" {
				m.counts["~ms."+o.kind.String()] += int(time.Since(t0).Microseconds())
			}
			if m.fail != nil {
				break
			}
			t1 := time.Now()
			m.guard(hang, func() { m.syncWaiter(); m.quick() })
			if os.Getenv("MODEL_TIMING") != "" {
				m.counts["~ms.quick"] += int(time.Since(t1).Microseconds())
			}
			if m.fail != nil {
				break
			}
		}
	}
	if m.fail == nil {
		m.step = len(ops)
		t1 := time.Now()
		m.guard(hang, m.finish)
		if os.Getenv("MODEL_TIMING") != "" {
			m.counts["~ms.finish"] += int(time.Since(t1).Microseconds())
		}
	}
	res := seqResult{fail: m.fail, counts: m.counts}
	if record {
		res.code = m.reproducer()
	}
	return res
}

// guard runs fn, turning a panic or a hang into a failure.
func (m *seqModel) guard(hang time.Duration, fn func()) {
	if m.hung {
		return
	}
	done := make(chan any, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprintf("%v\n%s", r, debug.Stack())
				return
			}
			done <- nil
		}()
		fn()
	}()
	t := time.NewTimer(hang)
	defer t.Stop()
	select {
	case r := <-done:
		if r != nil {
			m.failf("panic", "%v", r)
		}
	case <-t.C:
		m.hung = true
		m.failf("hang", "step did not return within %v", hang)
	}
}

// shrinkSeq removes operations from a failing list while it still fails
// the same check: halves, quarters, ... then single operations, until no
// removal keeps it failing or the time is up.
func shrinkSeq(seed uint64, ops []seqOp, disk bool, f *seqFailure, budget time.Duration) ([]seqOp, int) {
	cur := append([]seqOp(nil), ops[:min(len(ops), f.step+1)]...)
	fails := func(cand []seqOp) ([]seqOp, bool) {
		r := runSeq(seed, cand, disk, false, 10*time.Second)
		if r.fail == nil || r.fail.kind != f.kind {
			return nil, false
		}
		return cand[:min(len(cand), r.fail.step+1)], true
	}
	return repro.Shrink(cur, budget, fails)
}

// emit adds a line of Go code to the reproducer.
func (m *seqModel) emit(format string, args ...any) {
	if m.code != nil {
		fmt.Fprintf(m.code, "\t"+format+"\n", args...)
	}
}

// failf records the first broken promise.
func (m *seqModel) failf(kind, format string, args ...any) {
	m.failAt(kind, nil, format, args...)
}

// failAt is failf with the assertions that fail in the reproducer.
func (m *seqModel) failAt(kind string, asserts []string, format string, args ...any) {
	if m.fail == nil {
		m.fail = &seqFailure{step: m.step, kind: kind, msg: fmt.Sprintf(format, args...)}
		m.emit("// MODEL CHECK FAILED (%s): %s", kind, strings.ReplaceAll(m.fail.msg, "\n", "\n\t// "))
		for _, a := range asserts {
			m.emit("%s", a)
		}
	}
}

func (m *seqModel) reproducer() string {
	var sb strings.Builder
	open := `b, err := queen.Open("", &queen.Options{InMemory: true, Clock: clock, MaintenanceInterval: time.Hour, EncryptionKey: key, MemoryBudget: 64 << 20})`
	if m.disk {
		open = "dir := t.TempDir()\n\topts := &queen.Options{Clock: clock, MaintenanceInterval: time.Hour, EncryptionKey: key, Durability: queen.SyncNever}\n\tb, err := queen.Open(dir, opts)"
	}
	fmt.Fprintf(&sb, `package queen_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// Found by the sequential model test, seed %d (%s).
func TestModelRepro(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	start := clock.Now() // times below are relative to it (QUEENTEST_EPOCH moves it)
	key := []byte(%q)
	%s
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	pid := func(queue, part string) string {
		t.Helper()
		qs, err := b.QueueStats(ctx, queue)
		require.NoError(t, err)
		for _, p := range qs.Partitions {
			if p.Name == part {
				return p.ID
			}
		}
		t.Fatalf("no partition %%s/%%s", queue, part)
		return ""
	}
	letterID := func(dead bool, queue, group, part string, off int64) string {
		t.Helper()
		list := b.ParkedMessages
		if dead {
			list = b.DeadLetters
		}
		page, err := list(ctx, queen.LetterFilter{Queue: queue, ConsumerGroup: group, Partition: part, Limit: 1000})
		require.NoError(t, err)
		for _, l := range page.Letters {
			if l.Offset == off {
				return l.ID
			}
		}
		t.Fatalf("no letter for %%s/%%s@%%d", queue, part, off)
		return ""
	}
	hasGroup := func(queue, group string) bool {
		gs, err := b.ListGroups(ctx, group)
		require.NoError(t, err)
		for _, g := range gs {
			if g.Queue == queue {
				return true
			}
		}
		return false
	}
	big := func(n int) json.RawMessage { return json.RawMessage("\"" + strings.Repeat("x", n-2) + "\"") }
	stats := func(queue string) *queen.QueueStats {
		t.Helper()
		qs, err := b.QueueStats(ctx, queue)
		require.NoError(t, err)
		return qs
	}
	cursor := func(queue, part, group string) queen.CursorStats {
		t.Helper()
		for _, p := range stats(queue).Partitions {
			for _, c := range p.Cursors {
				if p.Name == part && c.Group == group {
					return c
				}
			}
		}
		t.Fatalf("no cursor of %%s in %%s/%%s", group, queue, part)
		return queen.CursorStats{}
	}
	type popRes struct {
		r   *queen.PopResult
		err error
	}
	recv := func(ch chan popRes) popRes {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("the waiting pop did not return")
			return popRes{}
		}
	}
	_, _, _, _, _, _, _ = pid, letterID, hasGroup, big, cursor, recv, start
`, m.seed, map[bool]string{false: "memory", true: "disk"}[m.disk], string(modelKey), open)
	if m.code != nil {
		sb.WriteString(m.code.String())
	}
	sb.WriteString("}\n")
	return sb.String()
}

var modelKey = []byte("0123456789abcdef0123456789abcdef")

// seqModel is one run: the broker, the reference model and the executor's state.
type seqModel struct {
	seed   uint64
	disk   bool
	dir    string
	opts   *queen.Options
	clock  *queentest.Clock
	start  int64 // the clock's first reading, µs: the reproducer's times are relative to it
	b      *queen.Broker
	closed bool

	queues   map[string]*smQueue
	gens     map[string]int
	pids     map[string]*smPart
	letters  []*smLetter
	leases   map[string]*smLease
	helds    []*smHeld
	waiter   *smWaiter
	early    map[string]int64 // queue\x00group → first pop of a named group before its queue existed
	maint    bool             // maintenance mode
	nextTx   int
	nextVar  int
	counters smCounters
	// batchKinds are the letters of the settle being applied, for Counters.
	batchKinds []string

	step   int
	fail   *seqFailure
	hung   bool
	code   *strings.Builder
	counts map[string]int
}

// smHeld is a batch popped under a lease that the run has not finished with.
type smHeld struct {
	msgs  []*queen.Message
	exprs []string // Go expression of each message in the reproducer
	lease string
	lexpr string // Go expression of the lease id
	group string // as requests name it
}

// smWaiter is a waiting pop running on its own goroutine.
type smWaiter struct {
	v       string // Go variable suffix
	req     queen.PopRequest
	ch      chan popAnswer
	cancel  context.CancelFunc
	seenGen int // the generation of its queue it last saw
}

type popAnswer struct {
	res *queen.PopResult
	err error
}

// smCounters are what Broker.Counters should say since the broker opened.
type smCounters struct {
	pushed, popped, renewed, expired, dead, parked int64
	acked                                          map[queen.AckStatus]int64
}

func newSeqModel(seed uint64, disk, record bool) *seqModel {
	m := &seqModel{
		seed: seed, disk: disk, clock: itest.NewClock(),
		queues: map[string]*smQueue{}, gens: map[string]int{}, early: map[string]int64{}, pids: map[string]*smPart{}, leases: map[string]*smLease{},
		counts: map[string]int{},
	}
	m.start = m.clock.Now().UnixMicro()
	m.counters.acked = map[queen.AckStatus]int64{}
	if record {
		m.code = &strings.Builder{}
	}
	m.opts = &queen.Options{Clock: m.clock, MaintenanceInterval: time.Hour, EncryptionKey: modelKey, MemoryBudget: modelBudget}
	var err error
	if disk {
		m.opts.Durability = queen.SyncNever
		if m.dir, err = os.MkdirTemp("", "queen-model-"); err == nil {
			m.b, err = queen.Open(m.dir, m.opts)
		}
	} else {
		o := *m.opts
		o.InMemory = true
		m.b, err = queen.Open("", &o)
	}
	if err != nil {
		m.failf("open", "%v", err)
	}
	return m
}

func (m *seqModel) cleanup() {
	if m.hung {
		return // a call still runs on the broker: leave it (the test fails anyway)
	}
	if m.waiter != nil {
		m.waiter.cancel()
		<-m.waiter.ch
		m.waiter = nil
	}
	if m.b != nil && !m.closed {
		m.b.Close()
	}
	if m.dir != "" {
		os.RemoveAll(m.dir)
	}
}

func (m *seqModel) now() int64 { return m.clock.Now().UnixMicro() }

var mctx = context.Background()

// exec runs operation i.
func (m *seqModel) exec(i int, o seqOp) {
	r := rand.New(rand.NewPCG(o.seed, uint64(o.kind)))
	m.counts[o.kind.String()]++
	switch o.kind {
	case skPush:
		m.opPush(i, r, false)
	case skPushBuilder:
		m.opPush(i, r, true)
	case skPushLarge:
		m.opPushLarge(i, r)
	case skPop:
		m.opPop(i, r, false)
	case skPopBuilder:
		m.opPop(i, r, true)
	case skDiscover:
		m.opDiscover(i, r)
	case skAck:
		m.opAck(i, r, false)
	case skAckOne:
		m.opAck(i, r, true)
	case skAbandon:
		if len(m.helds) > 0 {
			k := r.IntN(len(m.helds))
			m.helds = append(m.helds[:k], m.helds[k+1:]...)
		}
	case skRenew:
		m.opRenew(i, r, false)
	case skRenewMsg:
		m.opRenew(i, r, true)
	case skAdvance:
		m.opAdvance(r)
	case skMaintain:
		m.opMaintain()
	case skSeekGroup:
		m.opSeek(i, r, false)
	case skSeekPartition:
		m.opSeek(i, r, true)
	case skSetSub:
		m.opSetSub(r)
	case skDeleteGroup:
		m.opDeleteGroup(r)
	case skDeleteMessage:
		m.opDeleteMessage(r)
	case skDeleteQueue:
		m.opDeleteQueue(r)
	case skConfigure:
		m.opConfigure(r)
	case skReplay:
		m.opReplay(r)
	case skDeleteLetter:
		m.opDeleteLetter(r)
	case skTxn:
		m.opTxn(i, r)
	case skWaitStart:
		m.opWaitStart(i, r)
	case skWaitCancel:
		m.opWaitCancel()
	case skReopen:
		m.opReopen()
	case skVerify:
		m.verify()
	case skFetch:
		m.opFetch(r)
	case skGetMessage:
		m.opGetMessage(r)
	case skListMessages:
		m.opListMessages(r)
	case skTrace:
		m.opTrace(r)
	case skTraceRead:
		m.opTraceRead(r)
	case skMisc:
		m.opMisc(r)
	case skInvalid:
		m.opInvalid(r)
	case skMaintenance:
		m.opMaintenance(r)
	}
}
