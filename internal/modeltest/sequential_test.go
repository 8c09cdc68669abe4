package modeltest_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/modelgen"
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
				ops := seqWeights.Sequence(s, n)
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

// seqWeights are the relative frequencies of the operations.
var seqWeights = modelgen.Weights{
	modelgen.Push: 140, modelgen.PushBuilder: 15, modelgen.PushLarge: 3, modelgen.Pop: 120, modelgen.PopBuilder: 20,
	modelgen.Discover: 12, modelgen.Ack: 120, modelgen.AckOne: 20, modelgen.Abandon: 8, modelgen.Renew: 18,
	modelgen.RenewMsg: 8, modelgen.Advance: 55, modelgen.Maintain: 25, modelgen.SeekGroup: 12, modelgen.SeekPartition: 12,
	modelgen.SetSubscription: 10, modelgen.DeleteGroup: 10, modelgen.DeleteMessage: 22, modelgen.DeleteQueue: 4,
	modelgen.Configure: 14, modelgen.Replay: 14, modelgen.DeleteLetter: 14, modelgen.Txn: 40, modelgen.WaitStart: 8,
	modelgen.WaitCancel: 3, modelgen.Reopen: 5, modelgen.Verify: 12, modelgen.Fetch: 10, modelgen.GetMessage: 10,
	modelgen.ListMessages: 6, modelgen.Trace: 12, modelgen.TraceRead: 6, modelgen.Misc: 6, modelgen.Invalid: 12,
	modelgen.MaintenanceMode: 4,
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
func runSeq(seed uint64, ops []modelgen.Op, disk, record bool, hang time.Duration) seqResult {
	m := newSeqModel(seed, disk, record)
	defer m.cleanup()
	if m.fail == nil {
		for i, o := range ops {
			m.step = i
			t0 := time.Now()
			m.guard(hang, func() { m.exec(i, o) })
			if os.Getenv("MODEL_TIMING") != "" {
				m.counts["~ms."+o.Kind.String()] += int(time.Since(t0).Microseconds())
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
func shrinkSeq(seed uint64, ops []modelgen.Op, disk bool, f *seqFailure, budget time.Duration) ([]modelgen.Op, int) {
	cur := append([]modelgen.Op(nil), ops[:min(len(ops), f.step+1)]...)
	fails := func(cand []modelgen.Op) ([]modelgen.Op, bool) {
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
		gs, err := b.ListGroups(ctx, queen.GroupFilter{Group: group})
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
func (m *seqModel) exec(i int, o modelgen.Op) {
	r := o.Rand()
	m.counts[o.Kind.String()]++
	switch o.Kind {
	case modelgen.Push:
		m.opPush(i, r, false)
	case modelgen.PushBuilder:
		m.opPush(i, r, true)
	case modelgen.PushLarge:
		m.opPushLarge(i, r)
	case modelgen.Pop:
		m.opPop(i, r, false)
	case modelgen.PopBuilder:
		m.opPop(i, r, true)
	case modelgen.Discover:
		m.opDiscover(i, r)
	case modelgen.Ack:
		m.opAck(i, r, false)
	case modelgen.AckOne:
		m.opAck(i, r, true)
	case modelgen.Abandon:
		if len(m.helds) > 0 {
			k := r.IntN(len(m.helds))
			m.helds = append(m.helds[:k], m.helds[k+1:]...)
		}
	case modelgen.Renew:
		m.opRenew(i, r, false)
	case modelgen.RenewMsg:
		m.opRenew(i, r, true)
	case modelgen.Advance:
		m.opAdvance(r)
	case modelgen.Maintain:
		m.opMaintain()
	case modelgen.SeekGroup:
		m.opSeek(i, r, false)
	case modelgen.SeekPartition:
		m.opSeek(i, r, true)
	case modelgen.SetSubscription:
		m.opSetSub(r)
	case modelgen.DeleteGroup:
		m.opDeleteGroup(r)
	case modelgen.DeleteMessage:
		m.opDeleteMessage(r)
	case modelgen.DeleteQueue:
		m.opDeleteQueue(r)
	case modelgen.Configure:
		m.opConfigure(r)
	case modelgen.Replay:
		m.opReplay(r)
	case modelgen.DeleteLetter:
		m.opDeleteLetter(r)
	case modelgen.Txn:
		m.opTxn(i, r)
	case modelgen.WaitStart:
		m.opWaitStart(i, r)
	case modelgen.WaitCancel:
		m.opWaitCancel()
	case modelgen.Reopen:
		m.opReopen()
	case modelgen.Verify:
		m.verify()
	case modelgen.Fetch:
		m.opFetch(r)
	case modelgen.GetMessage:
		m.opGetMessage(r)
	case modelgen.ListMessages:
		m.opListMessages(r)
	case modelgen.Trace:
		m.opTrace(r)
	case modelgen.TraceRead:
		m.opTraceRead(r)
	case modelgen.Misc:
		m.opMisc(r)
	case modelgen.Invalid:
		m.opInvalid(r)
	case modelgen.MaintenanceMode:
		m.opMaintenance(r)
	}
}
