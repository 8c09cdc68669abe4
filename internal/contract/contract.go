// Package contract is the behaviour every [queen.Client] must show,
// written once against the interface and run on each backend: an
// in-memory broker, a broker on disk, and a remote client talking to a
// broker through package httpapi. A test that only some backends can pass
// does not belong here.
package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// Backend makes clients of one kind.
type Backend struct {
	Name string
	// New returns a fresh client on an empty broker whose clock is clock,
	// closed when t ends. Closing the client (or the broker behind it)
	// early is allowed.
	New func(t *testing.T, clock queen.Clock) queen.Client
	// Server, when not empty, names a server that is not ours, with its
	// own clock and one store for every case (Queen's own): the cases run
	// one at a time, New must empty the server first and ignores clock,
	// and a case skips itself, saying why, where it would move the fake
	// clock or depend on what Lacks names.
	Server string
	// Lacks lists what Server does not have, each with the reason: a step
	// that needs it is skipped, and one that calls it must get
	// [queen.ErrUnsupported] (anything else fails the case).
	Lacks map[Feature]string
}

// Feature is something a server may lack.
type Feature string

// The features a Backend's server may lack.
const (
	// Offsets: messages, pushes, fetches and dead letters carry no
	// offset, messages no DeliveryAttempt, partition seeks no cursor.
	Offsets Feature = "offsets"
	// FetchByOffset: Fetch and the builder's Fetch.
	FetchByOffset Feature = "fetch"
	// ParkedStore: acks of status park and the parked store.
	ParkedStore Feature = "parked store"
	// LetterAdmin: replaying and deleting dead letters, their ids and the
	// total of a page.
	LetterAdmin Feature = "dead-letter replay and delete"
	// Conflation: conflating pops.
	Conflation Feature = "conflation"
	// ShortPopLease: a pop Lease shorter than the queue's LeaseTime.
	ShortPopLease Feature = "a pop lease shorter than the queue's"
	// RetryDelay: a failed message held back for the queue's RetryDelay.
	RetryDelay Feature = "retry delay"
	// FullConfig: DescribeQueue reads back the whole QueueConfig.
	FullConfig Feature = "the whole queue configuration read back"
	// GroupDetails: ListGroups' Mode, From, JoinedAt and Lag.
	GroupDetails Feature = "group mode, join time and lag"
	// AckReasons: a refused ack says why beyond not found and lease
	// expired (another group's lease, settled before, unknown group).
	AckReasons Feature = "ack refusal reasons"
	// UnknownNames: seeks, group deletes and subscriptions naming an
	// unknown queue or group are refused, not a success moving nothing.
	UnknownNames Feature = "refusals of unknown queues and groups"
	// MaxSize: a queue's MaxSize is enforced.
	MaxSize Feature = "MaxSize enforced"
	// KeyCheck: an encrypted queue is refused without a key.
	KeyCheck Feature = "encryption refused without a key"
)

// within bounds every wait of the suite; reaching it is a failure.
const within = 10 * time.Second

// env is one test's client and the fake clock of the broker behind it.
type env struct {
	t     *testing.T
	c     queen.Client
	clock *queentest.Clock
	ctx   context.Context
	b     *Backend
}

// Run runs the whole suite on each backend, as parallel subtests (one at
// a time on a Backend with a Server).
func Run(t *testing.T, backends []Backend) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					if b.Server == "" {
						t.Parallel()
					}
					clock := itest.NewClock()
					// Every call is bounded: a regression fails the test
					// instead of hanging the suite.
					ctx, cancel := context.WithTimeout(context.Background(), 3*within)
					defer cancel()
					tc.fn(&env{t: t, c: b.New(t, clock), clock: clock, ctx: ctx, b: &b})
				})
			}
		})
	}
}

// advance moves the fake clock of the broker; on a Server, which runs on
// its own clock, the case is skipped from here.
func (e *env) advance(d time.Duration) {
	e.t.Helper()
	if e.b.Server != "" {
		e.t.Skipf("moves the broker's fake clock (by %v), which %s does not follow", d, e.b.Server)
	}
	e.clock.Advance(d)
}

// frozen reports whether the broker's clock is the fake one, which stands
// still between calls: times read back equal it.
func (e *env) frozen() bool { return e.b.Server == "" }

// has reports whether the backend has f.
func (e *env) has(f Feature) bool {
	_, lacks := e.b.Lacks[f]
	return !lacks
}

// needs skips the case from here when the backend lacks f.
func (e *env) needs(f Feature) {
	e.t.Helper()
	if why, lacks := e.b.Lacks[f]; lacks {
		e.t.Skipf("needs %s: %s", f, why)
	}
}

// unsupported ends the case as skipped when the backend lacks f and err
// is the ErrUnsupported it must then be; it returns otherwise, for the
// case to check err.
func (e *env) unsupported(f Feature, err error) {
	e.t.Helper()
	if why, lacks := e.b.Lacks[f]; lacks {
		require.ErrorIs(e.t, err, queen.ErrUnsupported, "%s lacks %s", e.b.Server, f)
		e.t.Skipf("unsupported: %s (%s): %v", f, why, err)
	}
}

var cases = []struct {
	name string
	fn   func(e *env)
}{
	{"PushPopAck", testPushPopAck},
	{"DuplicatePush", testDuplicatePush},
	{"BuilderPushIDs", testBuilderPushIDs},
	{"CommitOnDelivery", testCommitOnDelivery},
	{"BuilderLease", testBuilderLease},
	{"ConsumeEach", testConsumeEach},
	{"ConsumeBatch", testConsumeBatch},
	{"ConsumeConcurrency", testConsumeConcurrency},
	{"Outcomes", testOutcomes},
	{"HandlerSettles", testHandlerSettles},
	{"RetryPolicy", testRetryPolicy},
	{"LostLease", testLostLease},
	{"FailedAckSpendsBudget", testFailedAck},
	{"Transaction", testTransaction},
	{"TransactionAborts", testTransactionAborts},
	{"LeaseExpiry", testLeaseExpiry},
	{"RenewLease", testRenewLease},
	{"QueueAdmin", testQueueAdmin},
	{"Fetch", testFetch},
	{"Seek", testSeek},
	{"DeadLettersAndParked", testLetters},
	{"Stats", testStats},
	{"Groups", testGroups},
	{"Errors", testErrors},
	{"AckAnswers", testAckAnswers},
	{"ParkAnswers", testParkAnswers},
	{"WrongGroupExpired", testWrongGroupExpired},
	{"UnknownGroups", testUnknownGroups},
	{"Caps", testCaps},
	{"QueueFull", testQueueFull},
	{"TooLarge", testTooLarge},
	{"WaitingPopWakes", testWaitingPopWakes},
	{"ContextCancel", testContextCancel},
	{"CloseDrains", testCloseDrains},
	{"FetchPartitions", testFetchPartitions},
	{"OffsetForTime", testOffsetForTime},
	{"Positions", testPositions},
	{"TransactionPositions", testTransactionPositions},
}

// push pushes one message per payload to queue/partition and checks they
// were queued.
func (e *env) push(queue, partition string, payloads ...string) []queen.PushResult {
	e.t.Helper()
	items := make([]queen.PushItem, len(payloads))
	for i, p := range payloads {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(p)}
	}
	res, err := e.c.Push(e.ctx, items)
	require.NoError(e.t, err)
	require.Len(e.t, res, len(items))
	for _, r := range res {
		require.Equal(e.t, queen.PushQueued, r.Status)
	}
	return res
}

func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	return out
}

func nOf(m *queen.Message) int {
	d, _ := m.Decode()
	f, _ := d["n"].(float64)
	return int(f)
}

// pop pops without waiting.
func (e *env) pop(b *queen.QueueBuilder) []*queen.Message {
	e.t.Helper()
	msgs, err := e.again(func() ([]*queen.Message, error) { return b.Wait(false).Pop(e.ctx) })
	if errors.Is(err, queen.ErrUnsupported) {
		e.unsupported(ShortPopLease, err)
	}
	require.NoError(e.t, err)
	return msgs
}

// popReq is pop for a PopRequest (not waiting).
func (e *env) popReq(req queen.PopRequest) []*queen.Message {
	e.t.Helper()
	msgs, err := e.again(func() ([]*queen.Message, error) {
		res, err := e.c.Pop(e.ctx, req)
		if err != nil {
			return nil, err
		}
		return res.Messages, nil
	})
	require.NoError(e.t, err)
	return msgs
}

// again runs pop, and on a Server runs it again for up to a second while
// it finds nothing: Queen's own server may not see a partition for a
// moment after the push that made it.
func (e *env) again(pop func() ([]*queen.Message, error)) ([]*queen.Message, error) {
	msgs, err := pop()
	for end := time.Now().Add(time.Second); err == nil && len(msgs) == 0 && e.b.Server != "" && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond) // polling another process's state: no event to wait for
		msgs, err = pop()
	}
	return msgs, err
}

func (e *env) ackAll(msgs []*queen.Message) {
	e.t.Helper()
	for _, m := range msgs {
		_, err := e.c.Ack(e.ctx, m, true, queen.AckOptions{})
		require.NoError(e.t, err)
	}
}

// settlements collects what a consumer reports.
type settlements struct {
	mu  sync.Mutex
	all []queen.Settlement
}

func (s *settlements) add(x queen.Settlement) {
	s.mu.Lock()
	s.all = append(s.all, x)
	s.mu.Unlock()
}

func (s *settlements) outcomes() map[int]queen.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]queen.Outcome)
	for _, x := range s.all {
		if x.Handled {
			out[nOf(x.Message)] = x.Outcome
		}
	}
	return out
}

func testPushPopAck(e *env) {
	t := e.t
	res, err := e.c.Queue("orders").Partition("p1").Push(e.ctx, map[string]any{"n": 0}, json.RawMessage(`{"n":1}`), []byte(`{"n":2}`))
	require.NoError(t, err)
	require.Len(t, res, 3)
	for i, r := range res {
		require.Equal(t, queen.PushQueued, r.Status)
		require.Equal(t, "orders", r.Queue)
		require.Equal(t, "p1", r.Partition)
		require.NotEmpty(t, r.MessageID)
		require.NotEmpty(t, r.TransactionID)
		require.NotEmpty(t, r.PartitionID)
		if e.has(Offsets) {
			require.EqualValues(t, i, r.Offset)
		}
	}

	msgs := e.pop(e.c.Queue("orders").Batch(10))
	require.Len(t, msgs, 3)
	for i, m := range msgs {
		require.Equal(t, i, nOf(m), "in push order")
		require.Equal(t, res[i].MessageID, m.ID)
		require.Equal(t, res[i].TransactionID, m.TransactionID)
		require.Equal(t, "orders", m.Queue)
		require.Equal(t, "p1", m.Partition)
		require.Equal(t, res[i].PartitionID, m.PartitionID)
		require.Equal(t, queen.QueueModeGroup, m.ConsumerGroup)
		require.NotEmpty(t, m.LeaseID)
		if e.has(Offsets) {
			require.EqualValues(t, i, m.Offset)
			require.Equal(t, 1, m.DeliveryAttempt)
		}
		if e.frozen() {
			require.Equal(t, e.clock.Now().UTC(), m.CreatedAt.UTC().Truncate(time.Microsecond))
		}
		require.NotNil(t, m.Data, "the builder decodes object payloads")
	}
	require.Empty(t, e.pop(e.c.Queue("orders")), "the partition is leased")

	results, err := e.c.AckBatch(e.ctx, []queen.AckItem{
		{TransactionID: msgs[0].TransactionID, PartitionID: msgs[0].PartitionID, LeaseID: msgs[0].LeaseID},
		{TransactionID: msgs[1].TransactionID, PartitionID: msgs[1].PartitionID, LeaseID: msgs[1].LeaseID, Status: queen.AckCompleted},
	})
	require.NoError(t, err)
	require.Len(t, results, 2)
	for i, r := range results {
		require.True(t, r.Success, "item %d: %v", i, r.Err)
		require.Equal(t, msgs[i].TransactionID, r.TransactionID)
		require.Equal(t, "orders", r.Queue)
		require.Equal(t, "p1", r.Partition)
	}
	r, err := e.c.Ack(e.ctx, msgs[2], true, queen.AckOptions{})
	require.NoError(t, err)
	require.True(t, r.Success)
	require.True(t, r.LeaseReleased, "the last ack of the batch frees the partition")
	require.Empty(t, e.pop(e.c.Queue("orders")))

	// An empty payload is JSON null; a scalar stays as pushed.
	e.push("scalars", "", ``, `7`, `"s"`)
	got := e.pop(e.c.Queue("scalars").Batch(3))
	require.Len(t, got, 3)
	require.JSONEq(t, `null`, string(got[0].Payload))
	require.JSONEq(t, `7`, string(got[1].Payload))
	require.JSONEq(t, `"s"`, string(got[2].Payload))
	require.Nil(t, got[1].Data)
}

func testDuplicatePush(e *env) {
	t := e.t
	item := queen.PushItem{Queue: "dup", TransactionID: "order-1", Payload: json.RawMessage(`{"n":1}`)}
	first, err := e.c.Push(e.ctx, []queen.PushItem{item})
	require.NoError(t, err)
	item.Payload = json.RawMessage(`{"n":2}`)
	again, err := e.c.Push(e.ctx, []queen.PushItem{item, {Queue: "dup", TransactionID: "order-2"}})
	require.NoError(t, err)
	require.Equal(t, queen.PushDuplicate, again[0].Status)
	require.Equal(t, first[0].MessageID, again[0].MessageID)
	require.Equal(t, "order-1", again[0].TransactionID)
	require.Equal(t, queen.PushQueued, again[1].Status)
	msgs := e.pop(e.c.Queue("dup").Batch(10))
	require.Len(t, msgs, 2)
	require.Equal(t, 1, nOf(msgs[0]), "the first push wins")
}

// The builder's Push sets transaction and trace ids per payload: the
// same transaction id twice stores one message.
func testBuilderPushIDs(e *env) {
	t := e.t
	const trace = "0190b5a4-7c1e-7d3a-9f00-000000000001"
	q := e.c.Queue("idem").Partition("p")
	first, err := q.Push(e.ctx, queen.Payload{Data: map[string]any{"n": 1}, TransactionID: "order-1", TraceID: trace}, map[string]any{"n": 2})
	require.NoError(t, err)
	require.Equal(t, []queen.PushStatus{queen.PushQueued, queen.PushQueued}, []queen.PushStatus{first[0].Status, first[1].Status})
	require.Equal(t, "order-1", first[0].TransactionID)
	again, err := q.Push(e.ctx, &queen.Payload{Data: map[string]any{"n": 3}, TransactionID: "order-1"})
	require.NoError(t, err)
	require.Equal(t, queen.PushDuplicate, again[0].Status)
	require.Equal(t, first[0].MessageID, again[0].MessageID)
	msgs := e.pop(e.c.Queue("idem").Batch(10))
	require.Len(t, msgs, 2, "one message per transaction id")
	require.Equal(t, 1, nOf(msgs[0]), "the first push wins")
	require.Equal(t, "order-1", msgs[0].TransactionID)
	require.Equal(t, trace, msgs[0].TraceID)
	require.Empty(t, msgs[1].TraceID)
}

// A pop that commits on delivery hands messages out with no lease and
// moves the cursor, whether asked by PopRequest.CommitOnDelivery or the
// builder.
func testCommitOnDelivery(e *env) {
	t := e.t
	e.push("live", "", numbered(3)...)
	base := queen.PopRequest{Queue: "live", Group: "g", SubscriptionMode: queen.SubscriptionModeAll}
	pops := []func() []*queen.Message{
		func() []*queen.Message {
			req := base
			req.CommitOnDelivery = true
			return e.popReq(req)
		},
		func() []*queen.Message {
			return e.pop(e.c.Queue("live").Group("g").Autopilot(false).CommitOnDelivery(true))
		},
	}
	for i, pop := range pops {
		msgs := pop()
		require.Len(t, msgs, 1, "pop %d", i)
		require.Equal(t, i, nOf(msgs[0]), "each pop moved the cursor past its message")
		require.Empty(t, msgs[0].LeaseID, "no lease to ack")
	}
	// The last one is leased as usual: committing was per pop.
	msgs := e.pop(e.c.Queue("live").Group("g"))
	require.Len(t, msgs, 1)
	require.Equal(t, 2, nOf(msgs[0]))
	require.NotEmpty(t, msgs[0].LeaseID)

	_, err := e.c.Pop(e.ctx, queen.PopRequest{Queue: "live", Group: "c", Conflation: true, CommitOnDelivery: true})
	require.ErrorIs(t, err, queen.ErrInvalidArgument, "conflation refuses it")
}

// The builder's Duration forms reach the backend: a Lease(d) pop's lease
// runs out after d.
func testBuilderLease(e *env) {
	t := e.t
	e.push("short", "", `{"n":1}`)
	msgs := e.pop(e.c.Queue("short").Lease(5 * time.Second))
	require.Len(t, msgs, 1)
	e.advance(4 * time.Second)
	require.Empty(t, e.pop(e.c.Queue("short")), "still leased")
	e.advance(2 * time.Second)
	again := e.pop(e.c.Queue("short"))
	require.Len(t, again, 1, "delivered again after the 5 s lease ran out")
	if e.has(Offsets) {
		require.Equal(t, 2, again[0].DeliveryAttempt)
	}

	empty, err := e.c.Queue("none").Timeout(time.Millisecond).Pop(e.ctx)
	require.NoError(t, err)
	require.Empty(t, empty, "a short wait ends empty")
}

func testConsumeEach(e *env) {
	t := e.t
	e.push("work", "a", numbered(5)...)
	var mu sync.Mutex
	var seen []int
	err := e.c.Queue("work").Each().Limit(5).Consume(e.ctx, func(ctx context.Context, m *queen.Message) error {
		mu.Lock()
		seen = append(seen, nOf(m))
		mu.Unlock()
		return nil
	}).Execute(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2, 3, 4}, seen)
	require.Empty(t, e.pop(e.c.Queue("work")), "all acked")
}

func testConsumeBatch(e *env) {
	t := e.t
	e.push("events", "", numbered(25)...)
	var mu sync.Mutex
	total := 0
	err := e.c.Queue("events").Group("archiver").SubscriptionMode(queen.SubscriptionModeAll).Batch(10).Limit(25).
		ConsumeBatch(e.ctx, func(ctx context.Context, msgs []*queen.Message) error {
			mu.Lock()
			defer mu.Unlock()
			require.LessOrEqual(t, len(msgs), 10)
			total += len(msgs)
			return nil
		}).Execute(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 25, total)
	require.Empty(t, e.pop(e.c.Queue("events").Group("archiver")))
}

func testConsumeConcurrency(e *env) {
	t := e.t
	for p := range 4 {
		e.push("tasks", fmt.Sprintf("p%d", p), numbered(5)...)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	running, most := 0, 0
	err := e.c.Queue("tasks").Group("w").SubscriptionMode(queen.SubscriptionModeAll).Concurrency(4).Each().Limit(20).
		Consume(e.ctx, func(ctx context.Context, m *queen.Message) error {
			mu.Lock()
			running++
			most = max(most, running)
			seen[fmt.Sprintf("%s/%d", m.Partition, nOf(m))]++
			mu.Unlock()
			time.Sleep(time.Millisecond) // a little work, so handlers overlap
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		}).Execute(e.ctx)
	require.NoError(t, err)
	require.Len(t, seen, 20)
	for k, n := range seen {
		require.Equal(t, 1, n, "%s handled once", k)
	}
	require.LessOrEqual(t, most, 4)
}

var errBoom = errors.New("boom")

func testOutcomes(e *env) {
	t := e.t
	e.needs(ParkedStore)
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit, cfg.RetryDelay = 5, 0
	_, err := e.c.ConfigureQueue(e.ctx, "jobs", cfg)
	require.NoError(t, err)
	// One partition per message, so a failure holds back nothing else.
	for i := range 5 {
		e.push("jobs", fmt.Sprintf("p%d", i), fmt.Sprintf(`{"n":%d}`, i))
	}
	var s settlements
	var mu sync.Mutex
	tries := map[int]int{}
	err = e.c.Queue("jobs").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Partitions(5).Batch(5).Limit(6).Each().
		Consume(e.ctx, func(ctx context.Context, m *queen.Message) error {
			mu.Lock()
			tries[nOf(m)]++
			try := tries[nOf(m)]
			mu.Unlock()
			switch nOf(m) {
			case 1:
				return queen.Reject(errors.New("no such sku"))
			case 2:
				return queen.Park(errors.New("schema v9"))
			case 3:
				if try == 1 {
					return errBoom // failed, then accepted
				}
			case 4:
				panic("handler bug")
			}
			return nil
		}).OnSettled(s.add).Execute(e.ctx)
	require.NoError(t, err)
	out := s.outcomes()
	require.Equal(t, queen.OutcomeAccepted, out[0])
	require.Equal(t, queen.OutcomeDeadLettered, out[1])
	require.Equal(t, queen.OutcomeParked, out[2])
	require.Equal(t, queen.OutcomeAccepted, out[3], "accepted at the second try")
	require.Equal(t, 2, tries[3])

	dl, err := e.c.DeadLetters(e.ctx, queen.LetterFilter{Queue: "jobs"})
	require.NoError(t, err)
	require.Len(t, dl.Letters, 1)
	require.Equal(t, "no such sku", dl.Letters[0].Error)
	require.Equal(t, "g", dl.Letters[0].ConsumerGroup)
	pk, err := e.c.ParkedMessages(e.ctx, queen.LetterFilter{Queue: "jobs"})
	require.NoError(t, err)
	require.Len(t, pk.Letters, 1)
	require.Equal(t, "schema v9", pk.Letters[0].Error)
}

func testHandlerSettles(e *env) {
	t := e.t
	items := make([]queen.PushItem, 3)
	for i := range items {
		items[i] = queen.PushItem{Queue: "manual", TransactionID: fmt.Sprintf("t%d", i), Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	_, err := e.c.Push(e.ctx, items)
	require.NoError(t, err)
	calls := 0
	err = e.c.Queue("manual").AutoAck(false).Batch(3).Limit(3).Each().
		Consume(e.ctx, func(ctx context.Context, m *queen.Message) error {
			calls++
			// Settles the whole batch ahead: the loop must not hand the
			// others to the handler.
			acks := make([]queen.AckItem, 3)
			for i := range acks {
				acks[i] = queen.AckItem{TransactionID: fmt.Sprintf("t%d", i), PartitionID: m.PartitionID, LeaseID: m.LeaseID}
			}
			res, err := e.c.AckBatch(ctx, acks)
			if err == nil {
				for _, r := range res {
					err = errors.Join(err, r.Err)
				}
			}
			return err
		}).Execute(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, calls)
	require.Empty(t, e.pop(e.c.Queue("manual")))

	// A handler that fails the message itself and returns the error: the
	// loop does not settle it a second time.
	e.needs(RetryDelay) // else the failed message comes back within the idle time
	e.push("manual2", "", `{"n":0}`, `{"n":1}`)
	var s settlements
	err = e.c.Queue("manual2").AutoAck(false).Batch(2).IdleMillis(300).Each().
		Consume(e.ctx, func(ctx context.Context, m *queen.Message) error {
			_, err := e.c.Ack(ctx, m, false, queen.AckOptions{Error: "nope"})
			require.NoError(t, err)
			return errBoom
		}).OnSettled(s.add).Execute(e.ctx)
	require.NoError(t, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.all, 2)
	require.Equal(t, queen.OutcomeHandled, s.all[0].Outcome)
	require.ErrorIs(t, s.all[0].Err, errBoom)
	require.NoError(t, s.all[0].AckErr)
	require.Equal(t, queen.OutcomeReleased, s.all[1].Outcome, "given back behind the failure")
	require.False(t, s.all[1].Handled)
}

// A lease lost while a handler runs: the loop does not hand the rest of
// the lane to the handler; everything comes back.
func testLostLease(e *env) {
	t := e.t
	if !e.frozen() { // skipped here: the handler's goroutine could not skip the case
		e.t.Skipf("moves the broker's fake clock under a running handler, which %s does not follow", e.b.Server)
	}
	e.push("lost", "", `{"n":0}`, `{"n":1}`)
	var s settlements
	var mu sync.Mutex
	calls := map[int]int{}
	err := e.c.Queue("lost").Batch(2).LeaseSeconds(10).IdleMillis(500).Each().
		Consume(e.ctx, func(ctx context.Context, m *queen.Message) error {
			mu.Lock()
			defer mu.Unlock()
			if calls[nOf(m)]++; nOf(m) == 0 && calls[0] == 1 {
				e.advance(11 * time.Second) // the lease runs out under the handler
			}
			return nil
		}).OnSettled(s.add).Execute(e.ctx)
	require.NoError(t, err)
	require.Equal(t, map[int]int{0: 2, 1: 1}, calls, "1 was not handed over under the lost lease")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.GreaterOrEqual(t, len(s.all), 4)
	require.Equal(t, queen.OutcomeReleased, s.all[0].Outcome)
	require.True(t, s.all[0].Handled)
	require.ErrorIs(t, s.all[0].AckErr, queen.ErrLeaseExpired)
	require.Equal(t, queen.OutcomeReleased, s.all[1].Outcome)
	require.False(t, s.all[1].Handled)
	require.Equal(t, 1, nOf(s.all[1].Message))
}

func testRetryPolicy(e *env) {
	t := e.t
	e.push("flaky", "", `{"n":1}`)
	var s settlements
	var mu sync.Mutex
	tries := 0
	c := e.c.Queue("flaky").RetryPolicy(queen.FixedRetry(2, time.Minute)).Each().
		Consume(e.ctx, func(ctx context.Context, m *queen.Message) error {
			mu.Lock()
			tries++
			mu.Unlock()
			return errBoom
		}).OnSettled(s.add)
	require.NoError(t, c.Start(e.ctx))
	// First failure: given back with a minute's delay, no budget spent.
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.all) == 1 }, within, time.Millisecond)
	s.mu.Lock()
	first := s.all[0]
	s.mu.Unlock()
	require.Equal(t, queen.OutcomeRetried, first.Outcome)
	require.Equal(t, queen.AckRetry, first.Status)
	require.Equal(t, time.Minute, first.Delay)
	e.advance(time.Minute)
	// Second failure: attempts spent, dead-lettered.
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.all) == 2 }, within, time.Millisecond)
	require.NoError(t, c.Stop(e.ctx))
	s.mu.Lock()
	require.Equal(t, queen.OutcomeDeadLettered, s.all[1].Outcome)
	if e.has(Offsets) {
		require.Equal(t, 2, s.all[1].Message.DeliveryAttempt)
	}
	s.mu.Unlock()
	require.Equal(t, 2, tries)
	dl, err := e.c.DeadLetters(e.ctx, queen.LetterFilter{Queue: "flaky"})
	require.NoError(t, err)
	require.Len(t, dl.Letters, 1)
	require.Equal(t, "boom", dl.Letters[0].Error)
}

func testFailedAck(e *env) {
	t := e.t
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit, cfg.RetryDelay = 1, 0
	_, err := e.c.ConfigureQueue(e.ctx, "orders", cfg)
	require.NoError(t, err)
	e.push("orders", "", `{"n":0}`, `{"n":1}`)
	msgs := e.pop(e.c.Queue("orders").Batch(2))
	require.Len(t, msgs, 2)
	r, err := e.c.Ack(e.ctx, msgs[0], false, queen.AckOptions{Error: "nope"})
	require.NoError(t, err)
	require.True(t, r.Success)
	require.False(t, r.DeadLettered, "one retry left")
	require.True(t, r.LeaseReleased, "the rest of the batch is given back")
	_, err = e.c.Ack(e.ctx, msgs[1], true, queen.AckOptions{})
	require.ErrorIs(t, err, queen.ErrLeaseExpired, "given back with its partition")

	again := e.pop(e.c.Queue("orders").Batch(2))
	require.Len(t, again, 2)
	require.Equal(t, 0, nOf(again[0]))
	if e.has(Offsets) {
		require.Equal(t, 2, again[0].DeliveryAttempt)
	}
	r, err = e.c.Ack(e.ctx, again[0], false, queen.AckOptions{Error: "still nope"})
	require.NoError(t, err)
	require.True(t, r.DeadLettered, "no retry left")
	dl, err := e.c.DeadLetters(e.ctx, queen.LetterFilter{Queue: "orders"})
	require.NoError(t, err)
	require.Len(t, dl.Letters, 1)
	require.Equal(t, "still nope", dl.Letters[0].Error)
	require.Equal(t, 1, dl.Letters[0].RetryCount)
}

func testTransaction(e *env) {
	t := e.t
	e.push("in", "", `{"n":1}`)
	msgs := e.pop(e.c.Queue("in"))
	require.Len(t, msgs, 1)
	res, err := e.c.Transaction().
		Ack(msgs[0], queen.AckCompleted, queen.AckOptions{}).
		Push(queen.PushItem{Queue: "out", Payload: json.RawMessage(`{"n":2}`)}, queen.PushItem{Queue: "out", Partition: "x", TransactionID: "t-1"}).
		Commit(e.ctx)
	require.NoError(t, err)
	require.NotEmpty(t, res.ID)
	require.Len(t, res.Results, 3)
	require.True(t, res.Results[0].Ack.Success)
	require.Equal(t, queen.PushQueued, res.Results[1].Push.Status)
	require.NotEmpty(t, res.Results[1].Push.MessageID)
	require.Equal(t, "out", res.Results[1].Push.Queue)
	require.Equal(t, "t-1", res.Results[2].Push.TransactionID)
	require.Empty(t, e.pop(e.c.Queue("in")), "acked")
	out := e.pop(e.c.Queue("out").Batch(10).Partitions(2))
	require.Len(t, out, 2)

	_, err = e.c.ExecTransaction(e.ctx, nil)
	var ae *queen.ArgumentError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "ops", ae.Field)
}

func testTransactionAborts(e *env) {
	t := e.t
	e.push("in", "", `{"n":1}`)
	msgs := e.pop(e.c.Queue("in"))
	require.Len(t, msgs, 1)
	stale := *msgs[0]
	stale.LeaseID = "01900000-0000-7000-8000-000000000000"
	res, err := e.c.Transaction().
		Push(queen.PushItem{Queue: "out", Payload: json.RawMessage(`{"n":2}`)}).
		Ack(&stale, queen.AckCompleted, queen.AckOptions{}).
		Commit(e.ctx)
	require.ErrorIs(t, err, queen.ErrTransactionAborted)
	require.ErrorIs(t, err, queen.ErrLeaseExpired)
	var te *queen.TransactionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 1, te.Index)
	require.Equal(t, "ack", te.Op)
	require.NotNil(t, res)
	require.Empty(t, e.pop(e.c.Queue("out")), "nothing pushed")
	_, err = e.c.Ack(e.ctx, msgs[0], true, queen.AckOptions{})
	require.NoError(t, err, "the lease stayed as it was")
}

func testLeaseExpiry(e *env) {
	t := e.t
	e.push("slow", "", `{"n":1}`)
	msgs := e.pop(e.c.Queue("slow").LeaseSeconds(10))
	require.Len(t, msgs, 1)
	e.advance(11 * time.Second)
	again := e.pop(e.c.Queue("slow"))
	require.Len(t, again, 1, "delivered again after the lease ran out")
	if e.has(Offsets) {
		require.Equal(t, 2, again[0].DeliveryAttempt)
	}
	_, err := e.c.Ack(e.ctx, msgs[0], true, queen.AckOptions{})
	require.ErrorIs(t, err, queen.ErrLeaseExpired)
	_, err = e.c.RenewLease(e.ctx, msgs[0].LeaseID, time.Minute)
	require.ErrorIs(t, err, queen.ErrLeaseExpired)
	_, err = e.c.Ack(e.ctx, again[0], true, queen.AckOptions{})
	require.NoError(t, err)
}

func testRenewLease(e *env) {
	t := e.t
	e.push("long", "", `{"n":1}`)
	msgs := e.pop(e.c.Queue("long").LeaseSeconds(10))
	require.Len(t, msgs, 1)
	e.advance(8 * time.Second)
	ren, err := e.c.RenewLease(e.ctx, msgs[0].LeaseID, 30*time.Second)
	require.NoError(t, err)
	require.WithinDuration(t, e.clock.Now().Add(30*time.Second), ren.ExpiresAt, time.Millisecond)
	require.Equal(t, 1, ren.Partitions)
	e.advance(20 * time.Second)
	require.Empty(t, e.pop(e.c.Queue("long")), "still leased")
	exp, err := e.c.Renew(e.ctx, msgs[0])
	require.NoError(t, err)
	require.WithinDuration(t, e.clock.Now().Add(60*time.Second), exp, time.Millisecond, "a push-created queue leases 60 s")
	_, err = e.c.Ack(e.ctx, msgs[0], true, queen.AckOptions{})
	require.NoError(t, err)
	_, err = e.c.RenewLease(e.ctx, msgs[0].LeaseID, time.Minute)
	require.ErrorIs(t, err, queen.ErrNotFound, "released once settled")
	_, err = e.c.RenewLease(e.ctx, "01900000-0000-7000-8000-000000000001", time.Minute)
	require.ErrorIs(t, err, queen.ErrNotFound)
	_, err = e.c.RenewLease(e.ctx, msgs[0].LeaseID, -time.Second)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

func testQueueAdmin(e *env) {
	t := e.t
	_, err := e.c.DescribeQueue(e.ctx, "billing.invoices")
	require.ErrorIs(t, err, queen.ErrNotFound)
	cfg := queen.DefaultQueueConfig()
	cfg.LeaseTime, cfg.RetryLimit, cfg.RetryDelay, cfg.MaxSize, cfg.Priority = 45*time.Second, 7, 250*time.Millisecond, 1000, 3
	cfg.DelayedProcessing, cfg.Retention, cfg.Namespace, cfg.Task = 2*time.Second, time.Hour, "billing", "invoices"
	info, err := e.c.ConfigureQueue(e.ctx, "billing.invoices", cfg)
	require.NoError(t, err)
	require.Equal(t, "billing.invoices", info.Name)
	require.NotEmpty(t, info.ID)
	require.NotEmpty(t, info.DefaultPartitionID)
	require.Equal(t, cfg, info.Config)

	got, err := e.c.DescribeQueue(e.ctx, "billing.invoices")
	require.NoError(t, err)
	require.Equal(t, info.ID, got.ID)
	require.Equal(t, info.DefaultPartitionID, got.DefaultPartitionID)
	if e.has(FullConfig) {
		require.Equal(t, cfg, got.Config)
	} else {
		require.Equal(t, []any{cfg.LeaseTime, cfg.RetryLimit, cfg.RetryDelay, cfg.MaxSize, cfg.Priority, cfg.Namespace, cfg.Task},
			[]any{got.Config.LeaseTime, got.Config.RetryLimit, got.Config.RetryDelay, got.Config.MaxSize, got.Config.Priority,
				got.Config.Namespace, got.Config.Task})
	}
	if e.frozen() {
		require.Equal(t, e.clock.Now().Truncate(time.Millisecond), got.CreatedAt.Truncate(time.Millisecond))
	}

	admin, err := e.c.Admin().GetQueue(e.ctx, "billing.invoices")
	require.NoError(t, err)
	require.Equal(t, got.ID, admin.ID)

	existed, err := e.c.DeleteQueue(e.ctx, "billing.invoices")
	require.NoError(t, err)
	require.True(t, existed)
	existed, err = e.c.DeleteQueue(e.ctx, "billing.invoices")
	require.NoError(t, err)
	require.False(t, existed)
	_, err = e.c.DescribeQueue(e.ctx, "billing.invoices")
	require.ErrorIs(t, err, queen.ErrNotFound)
}

func testFetch(e *env) {
	t := e.t
	e.push("orders", "customer-42", `{"event":"created"}`, `{"event":"paid"}`, `{"event":"shipped"}`)
	read, err := e.c.Queue("orders").FromOffset(1).Batch(5).Fetch(e.ctx, []string{"customer-42"})
	e.unsupported(FetchByOffset, err)
	require.NoError(t, err)
	page := read["customer-42"]
	require.Len(t, page.Records, 2)
	require.EqualValues(t, 1, page.Records[0].Offset)
	require.JSONEq(t, `{"event":"paid"}`, string(page.Records[0].Payload))
	require.NotEmpty(t, page.Records[0].MessageID)
	require.NotEmpty(t, page.Records[0].TransactionID)
	require.EqualValues(t, 3, page.NextOffset)
	_, err = e.c.Fetch(e.ctx, "orders", "nobody", 0, 10)
	require.ErrorIs(t, err, queen.ErrNotFound)
	_, err = e.c.Fetch(e.ctx, "nothing", "Default", 0, 10)
	require.ErrorIs(t, err, queen.ErrNotFound)
	groups, err := e.c.ListGroups(e.ctx, queen.GroupFilter{})
	require.NoError(t, err)
	require.Empty(t, groups, "a read by offset makes no group")
}

func testSeek(e *env) {
	t := e.t
	e.push("events", "", `{"n":0}`)
	e.advance(48 * time.Hour)
	mid := e.clock.Now()
	e.push("events", "", `{"n":1}`, `{"n":2}`)
	g := e.c.Queue("events").Group("archiver").SubscriptionMode(queen.SubscriptionModeAll).Batch(10)
	readAll := func() []int {
		t.Helper()
		msgs := e.pop(g)
		var ns []int
		for _, m := range msgs {
			ns = append(ns, nOf(m))
		}
		e.ackAll(msgs)
		return ns
	}
	require.Equal(t, []int{0, 1, 2}, readAll())
	res, err := e.c.SeekGroup(e.ctx, "archiver", "events", queen.SeekOptions{Timestamp: mid.Add(-time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 1, res.PartitionsUpdated)
	require.Equal(t, []int{1, 2}, readAll())
	_, err = e.c.Admin().SeekConsumerGroup(e.ctx, "archiver", "events", queen.SeekConsumerGroupOptions{Timestamp: mid.Add(-72 * time.Hour).Format(time.RFC3339)})
	require.NoError(t, err)
	e.push("events", "", `{"n":3}`)
	res, err = e.c.SeekPartition(e.ctx, "archiver", "events", queen.DefaultPartition, queen.SeekOptions{ToEnd: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.PartitionsUpdated)
	require.EqualValues(t, 4, res.CursorMovedTo)
	require.Empty(t, readAll(), "the backlog is skipped")
	_, err = e.c.SeekPartition(e.ctx, "archiver", "events", "nope", queen.SeekOptions{ToEnd: true})
	require.ErrorIs(t, err, queen.ErrNotFound)
}

func testLetters(e *env) {
	t := e.t
	e.push("mail", "", `{"n":0}`, `{"n":1}`)
	msgs := e.pop(e.c.Queue("mail").Batch(2))
	require.Len(t, msgs, 2)
	_, err := e.c.Ack(e.ctx, msgs[0], false, queen.AckOptions{Status: queen.AckDLQ, Error: "bounced"})
	require.NoError(t, err)
	r, err := e.c.Ack(e.ctx, msgs[1], false, queen.AckOptions{Status: queen.AckPark, Error: "unreadable"})
	e.unsupported(ParkedStore, err)
	require.NoError(t, err)
	require.True(t, r.Parked)

	dl, err := e.c.DeadLetters(e.ctx, queen.LetterFilter{Queue: "mail"})
	require.NoError(t, err)
	require.Equal(t, 1, dl.Total)
	require.Len(t, dl.Letters, 1)
	l := dl.Letters[0]
	require.NotEmpty(t, l.ID)
	require.Equal(t, msgs[0].ID, l.MessageID)
	require.Equal(t, msgs[0].TransactionID, l.TransactionID)
	require.Equal(t, msgs[0].PartitionID, l.PartitionID)
	require.Equal(t, "mail", l.Queue)
	require.Equal(t, "bounced", l.Error)
	require.EqualValues(t, 0, l.Offset)
	require.JSONEq(t, `{"n":0}`, string(l.Payload))

	rep, err := e.c.ReplayDeadLetter(e.ctx, l.ID)
	require.NoError(t, err)
	require.Equal(t, "dlq:"+l.ID, rep.TransactionID)
	require.False(t, rep.Duplicate)
	rep, err = e.c.ReplayDeadLetter(e.ctx, l.ID)
	require.NoError(t, err)
	require.True(t, rep.Duplicate)
	copies := e.pop(e.c.Queue("mail").Batch(5))
	require.Len(t, copies, 1)
	require.JSONEq(t, `{"n":0}`, string(copies[0].Payload))
	e.ackAll(copies)
	require.NoError(t, e.c.DeleteDeadLetter(e.ctx, l.ID))
	require.ErrorIs(t, e.c.DeleteDeadLetter(e.ctx, l.ID), queen.ErrNotFound)
	_, err = e.c.ReplayDeadLetter(e.ctx, l.ID)
	require.ErrorIs(t, err, queen.ErrNotFound)

	pk, err := e.c.ParkedMessages(e.ctx, queen.LetterFilter{})
	require.NoError(t, err)
	require.Len(t, pk.Letters, 1)
	require.Equal(t, "unreadable", pk.Letters[0].Error)
	rep, err = e.c.ReplayParked(e.ctx, pk.Letters[0].ID)
	require.NoError(t, err)
	require.Equal(t, "parked:"+pk.Letters[0].ID, rep.TransactionID)
	require.NoError(t, e.c.DeleteParked(e.ctx, pk.Letters[0].ID))
	pk, err = e.c.ParkedMessages(e.ctx, queen.LetterFilter{})
	require.NoError(t, err)
	require.Empty(t, pk.Letters)
	require.ErrorIs(t, e.c.DeleteParked(e.ctx, "not-an-id"), queen.ErrNotFound)
}

func testStats(e *env) {
	t := e.t
	e.push("s", "a", numbered(3)...)
	e.push("s", "b", numbered(2)...)
	msgs := e.pop(e.c.Queue("s").Partition("a").Batch(1))
	require.Len(t, msgs, 1)
	qs, err := e.c.QueueStats(e.ctx, "s")
	require.NoError(t, err)
	require.Equal(t, "s", qs.Name)
	require.Equal(t, 2, qs.PartitionN)
	require.EqualValues(t, 5, qs.Messages)
	require.EqualValues(t, 5, qs.Pending)
	require.EqualValues(t, 1, qs.InFlight)
	require.Len(t, qs.Partitions, 2)
	names := []string{qs.Partitions[0].Name, qs.Partitions[1].Name}
	sort.Strings(names)
	require.Equal(t, []string{"a", "b"}, names)
	for _, p := range qs.Partitions {
		require.NotEmpty(t, p.ID)
		if p.Name == "a" {
			require.EqualValues(t, 3, p.Messages)
			if e.has(Offsets) {
				require.EqualValues(t, 3, p.NextOffset)
			}
		}
	}
	_, err = e.c.QueueStats(e.ctx, "nope")
	require.ErrorIs(t, err, queen.ErrNotFound)

	all, err := e.c.ListQueues(e.ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, "s", all[0].Name)
	require.Equal(t, 2, all[0].PartitionN)
	require.EqualValues(t, 5, all[0].Messages)
	require.NoError(t, e.c.Ping(e.ctx))
}

func testGroups(e *env) {
	t := e.t
	e.push("g", "", numbered(3)...)
	msgs := e.pop(e.c.Queue("g").Group("billing").SubscriptionMode(queen.SubscriptionModeAll).Batch(1))
	require.Len(t, msgs, 1)
	require.Equal(t, "billing", msgs[0].ConsumerGroup)
	e.ackAll(msgs)
	gs, err := e.c.ListGroups(e.ctx, queen.GroupFilter{Group: "billing"})
	require.NoError(t, err)
	require.Len(t, gs, 1)
	require.Equal(t, "g", gs[0].Queue)
	require.Equal(t, "billing", gs[0].Group)
	require.Equal(t, 1, gs[0].Partitions)
	if e.has(GroupDetails) {
		require.Equal(t, queen.SubscriptionModeAll, gs[0].Mode)
		require.EqualValues(t, 2, gs[0].Lag)
	}
	n, err := e.c.SetGroupSubscription(e.ctx, "billing", e.clock.Now())
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 0)
	n, err = e.c.DeleteGroup(e.ctx, "billing", "g", true)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	gs, err = e.c.Admin().ListConsumerGroups(e.ctx, "billing")
	require.NoError(t, err)
	require.Empty(t, gs)
}

// argField requires an *ArgumentError and returns its field.
func argField(t *testing.T, err error) string {
	t.Helper()
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	var ae *queen.ArgumentError
	require.ErrorAs(t, err, &ae)
	require.NotEmpty(t, ae.Field)
	require.NotEmpty(t, ae.Reason)
	return ae.Field
}

func testErrors(e *env) {
	t := e.t
	_, err := e.c.Queue("q").Batch(-1).Pop(e.ctx)
	require.Equal(t, "QueueBuilder.Batch", argField(t, err))
	_, err = e.c.Pop(e.ctx, queen.PopRequest{Queue: "q", Batch: -1})
	require.Equal(t, "PopRequest.Batch", argField(t, err))
	_, err = e.c.Pop(e.ctx, queen.PopRequest{Queue: "q", Conflation: true})
	require.Equal(t, "PopRequest.Conflation", argField(t, err))
	_, err = e.c.Push(e.ctx, []queen.PushItem{{Queue: ""}})
	require.Contains(t, argField(t, err), "Queue")
	_, err = e.c.Push(e.ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`{`)}})
	require.Contains(t, argField(t, err), "Payload")
	_, err = e.c.Push(e.ctx, []queen.PushItem{{Queue: strings.Repeat("q", queen.MaxNameLen+1)}})
	argField(t, err)
	_, err = e.c.AckBatch(e.ctx, []queen.AckItem{{TransactionID: "t"}})
	require.Contains(t, argField(t, err), "PartitionID")
	_, err = e.c.Ack(e.ctx, nil, true, queen.AckOptions{})
	argField(t, err)
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit = -1
	_, err = e.c.ConfigureQueue(e.ctx, "q", cfg)
	require.Equal(t, "QueueConfig.RetryLimit", argField(t, err))
	if e.has(KeyCheck) {
		cfg = queen.DefaultQueueConfig()
		cfg.EncryptionEnabled = true
		_, err = e.c.ConfigureQueue(e.ctx, "q", cfg)
		require.Equal(t, "QueueConfig.EncryptionEnabled", argField(t, err), "the broker has no key")
	}
	err = e.c.Queue("q").Consume(e.ctx, nil).Execute(e.ctx)
	require.Equal(t, "fn", argField(t, err))

	// An ack naming a message that does not exist is refused per item.
	e.push("q", "", `{}`)
	msgs := e.pop(e.c.Queue("q"))
	require.Len(t, msgs, 1)
	res, err := e.c.AckBatch(e.ctx, []queen.AckItem{
		{TransactionID: "nobody", PartitionID: msgs[0].PartitionID, LeaseID: msgs[0].LeaseID},
		{TransactionID: msgs[0].TransactionID, PartitionID: msgs[0].PartitionID, LeaseID: msgs[0].LeaseID, Status: "maybe"},
	})
	require.NoError(t, err)
	require.False(t, res[0].Success)
	require.ErrorIs(t, res[0].Err, queen.ErrNotFound)
	require.False(t, res[1].Success)
	require.ErrorIs(t, res[1].Err, queen.ErrInvalidArgument)
}

func testQueueFull(e *env) {
	t := e.t
	e.needs(MaxSize)
	cfg := queen.DefaultQueueConfig()
	cfg.MaxSize = 2
	_, err := e.c.ConfigureQueue(e.ctx, "capped", cfg)
	require.NoError(t, err)
	res, err := e.c.Push(e.ctx, []queen.PushItem{{Queue: "capped"}, {Queue: "capped"}, {Queue: "capped"}})
	require.NoError(t, err)
	require.Equal(t, queen.PushQueued, res[0].Status)
	require.Equal(t, queen.PushQueued, res[1].Status)
	require.Equal(t, queen.PushFailed, res[2].Status)
	require.ErrorIs(t, res[2].Err, queen.ErrQueueFull)
	_, err = e.c.Transaction().Push(queen.PushItem{Queue: "capped"}).Commit(e.ctx)
	require.ErrorIs(t, err, queen.ErrQueueFull)
	var te *queen.TransactionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "push", te.Op)
}

func testTooLarge(e *env) {
	t := e.t
	// More operations than one storage transaction holds at the default
	// memory budget (a few thousand; two records per push), on every
	// backend: a payload's size alone no longer tells, since large values
	// go to Badger's value log and cost the transaction a pointer only.
	tx := e.c.Transaction()
	for range 50_000 {
		tx.Push(queen.PushItem{Queue: "big", Payload: json.RawMessage(`1`)})
	}
	_, err := tx.Commit(e.ctx)
	require.ErrorIs(t, err, queen.ErrTooLarge)
	require.Empty(t, e.pop(e.c.Queue("big")), "nothing written")
}

func testWaitingPopWakes(e *env) {
	t := e.t
	got := make(chan []*queen.Message, 1)
	errc := make(chan error, 1)
	go func() {
		msgs, err := e.c.Queue("later").TimeoutMillis(10000).Pop(e.ctx)
		errc <- err
		got <- msgs
	}()
	// Push until the waiting pop takes it: the pop may not have reached
	// the broker when the first push lands, and then takes the message at
	// once.
	e.push("later", "", `{"n":7}`)
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(within):
		t.Fatal("the waiting pop did not return")
	}
	msgs := <-got
	require.Len(t, msgs, 1)
	require.Equal(t, 7, nOf(msgs[0]))
}

func testContextCancel(e *env) {
	t := e.t
	ctx, cancel := context.WithCancel(e.ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := e.c.Queue("never").TimeoutMillis(30000).Pop(ctx)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(within):
		t.Fatal("cancelling ctx did not end the pop")
	}
	ctx, cancel = context.WithTimeout(e.ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.c.Queue("never").TimeoutMillis(30000).Pop(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), within)
}

func testCloseDrains(e *env) {
	t := e.t
	e.push("drain", "", `{"n":1}`, `{"n":2}`)
	var s settlements
	started := make(chan struct{})
	c := e.c.Queue("drain").Batch(2).Each().Consume(e.ctx, func(ctx context.Context, m *queen.Message) error {
		close(started)
		<-queen.Stopping(ctx) // finishes its work once asked to stop
		return nil
	}).OnSettled(s.add)
	require.NoError(t, c.Start(e.ctx))
	select {
	case <-started:
	case <-time.After(within):
		t.Fatal("the handler did not start")
	}
	require.NoError(t, e.c.Close())
	<-c.Done()
	require.NoError(t, c.Err())
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.all, 2)
	byN := map[int]queen.Settlement{}
	for _, x := range s.all {
		byN[nOf(x.Message)] = x
	}
	require.Equal(t, queen.OutcomeAccepted, byN[1].Outcome, "the running handler finished and was acked")
	require.Equal(t, queen.OutcomeReleased, byN[2].Outcome, "the message not started was given back")
	require.NoError(t, byN[2].AckErr)

	_, err := e.c.Push(e.ctx, []queen.PushItem{{Queue: "drain"}})
	require.ErrorIs(t, err, queen.ErrClosed)
	_, err = e.c.Queue("drain").Pop(e.ctx)
	require.ErrorIs(t, err, queen.ErrClosed)
	require.ErrorIs(t, e.c.Queue("drain").Consume(e.ctx, func(context.Context, *queen.Message) error { return nil }).Execute(e.ctx), queen.ErrClosed)
	require.NoError(t, e.c.Close(), "idempotent")
}

// testAckAnswers: each way an ack can be refused has its own error, the
// same in process and over HTTP, and a refused ack changes nothing.
func testAckAnswers(e *env) {
	t := e.t
	e.needs(AckReasons)
	e.push("acks", "", numbered(3)...)
	bill := e.pop(e.c.Queue("acks").Group("billing").SubscriptionMode(queen.SubscriptionModeAll).Batch(3))
	require.Len(t, bill, 3)
	audit := e.pop(e.c.Queue("acks").Group("audit").SubscriptionMode(queen.SubscriptionModeAll).Batch(3))
	require.Len(t, audit, 3)
	refused := func(res *queen.AckResult, err, want error, why string) {
		t.Helper()
		require.ErrorIs(t, err, want, why)
		require.NotNil(t, res, why)
		require.False(t, res.Success, why)
		require.ErrorIs(t, res.Err, want, why)
		require.False(t, res.DeadLettered, why)
	}

	// billing's lease, acked as audit's: the wrong group.
	res, err := e.c.Ack(e.ctx, bill[0], true, queen.AckOptions{ConsumerGroup: "audit"})
	refused(res, err, queen.ErrWrongGroup, "another group's lease")
	require.NotErrorIs(t, err, queen.ErrLeaseExpired)
	// A group that never popped the queue.
	res, err = e.c.Ack(e.ctx, bill[0], true, queen.AckOptions{ConsumerGroup: "billng"})
	refused(res, err, queen.ErrGroupNotFound, "a group that never popped")
	require.ErrorIs(t, err, queen.ErrNotFound, "a group not found is not found")
	require.NotErrorIs(t, queen.ErrNotFound, queen.ErrGroupNotFound, "an unknown message is not an unknown group")

	// A second ack of a settled message, whatever its status.
	res, err = e.c.Ack(e.ctx, bill[0], true, queen.AckOptions{})
	require.NoError(t, err)
	require.True(t, res.Success)
	for _, st := range []queen.AckStatus{queen.AckCompleted, queen.AckDLQ, queen.AckFailed} {
		res, err = e.c.Ack(e.ctx, bill[0], true, queen.AckOptions{Status: st})
		refused(res, err, queen.ErrAlreadySettled, "acked "+string(st)+" after completed")
	}
	unfenced, err := e.c.AckBatch(e.ctx, []queen.AckItem{{TransactionID: bill[0].TransactionID, PartitionID: bill[0].PartitionID, Group: "billing", Status: queen.AckDLQ}})
	require.NoError(t, err)
	refused(&unfenced[0], unfenced[0].Err, queen.ErrAlreadySettled, "unfenced, as Queen's clients may send it")
	dl, err := e.c.DeadLetters(e.ctx, queen.LetterFilter{Queue: "acks"})
	require.NoError(t, err)
	require.Zero(t, dl.Total, "a dlq ack of a completed message dead-letters nothing")

	// A failed ack gives the rest of the batch back and releases the
	// lease: an ack of the next message under it is refused as expired,
	// and that message comes back.
	res, err = e.c.Ack(e.ctx, bill[1], false, queen.AckOptions{})
	require.NoError(t, err)
	require.True(t, res.LeaseReleased)
	res, err = e.c.Ack(e.ctx, bill[2], true, queen.AckOptions{})
	refused(res, err, queen.ErrLeaseExpired, "after its lease was released")
	e.advance(2 * time.Second) // past the retry delay
	again := e.pop(e.c.Queue("acks").Group("billing").Batch(3))
	require.Len(t, again, 2)
	require.Equal(t, []int{1, 2}, []int{nOf(again[0]), nOf(again[1])}, "the refused ack settled nothing")
	e.ackAll(again)

	// The refusals left audit's lease alone.
	e.ackAll(audit)
	// A batch answers each item on its own.
	out, err := e.c.AckBatch(e.ctx, []queen.AckItem{
		{TransactionID: audit[0].TransactionID, PartitionID: audit[0].PartitionID, LeaseID: audit[0].LeaseID, Group: "audit"},
		{TransactionID: audit[1].TransactionID, PartitionID: audit[1].PartitionID, Group: "nobody"},
	})
	require.NoError(t, err)
	require.ErrorIs(t, out[0].Err, queen.ErrAlreadySettled)
	require.ErrorIs(t, out[1].Err, queen.ErrGroupNotFound)
}

// testUnknownGroups: seeks, deletes and subscriptions that name an
// unknown queue or a group that never popped are not found, never a
// success that changed nothing; once the group has popped they work.
func testUnknownGroups(e *env) {
	t := e.t
	e.needs(UnknownNames)
	e.push("known", "", numbered(2)...)
	notFound := func(err error, group bool, why string) {
		t.Helper()
		require.ErrorIs(t, err, queen.ErrNotFound, why)
		if group {
			require.ErrorIs(t, err, queen.ErrGroupNotFound, why)
		} else {
			require.NotErrorIs(t, err, queen.ErrGroupNotFound, why)
		}
	}
	_, err := e.c.SeekGroup(e.ctx, "billing", "unknown", queen.SeekOptions{ToEnd: true})
	notFound(err, false, "seek, unknown queue")
	_, err = e.c.SeekGroup(e.ctx, "billing", "known", queen.SeekOptions{ToEnd: true})
	notFound(err, true, "seek, group never popped")
	_, err = e.c.SeekPartition(e.ctx, "billing", "known", queen.DefaultPartition, queen.SeekOptions{ToEnd: true})
	notFound(err, true, "partition seek, group never popped")
	_, err = e.c.DeleteGroup(e.ctx, "billing", "unknown", true)
	notFound(err, false, "delete, unknown queue")
	_, err = e.c.DeleteGroup(e.ctx, "billing", "known", false)
	notFound(err, true, "delete, group never popped")
	_, err = e.c.DeleteGroup(e.ctx, "billing", "", true)
	notFound(err, true, "delete on every queue, group on none")
	_, err = e.c.SetGroupSubscription(e.ctx, "billing", e.clock.Now())
	notFound(err, true, "subscription, group on no queue")

	msgs := e.pop(e.c.Queue("known").Group("billing").SubscriptionMode(queen.SubscriptionModeAll).Batch(2))
	require.Len(t, msgs, 2)
	res, err := e.c.SeekGroup(e.ctx, "billing", "known", queen.SeekOptions{ToEnd: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.PartitionsUpdated)
	n, err := e.c.SetGroupSubscription(e.ctx, "billing", e.clock.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = e.c.DeleteGroup(e.ctx, "billing", "", true)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = e.c.DeleteGroup(e.ctx, "billing", "", true)
	notFound(err, true, "deleted already")
}

// testCaps: a value above a cap is refused with an *ArgumentError naming
// the field and the limit, in the builder and in the request structs, and
// a push or transaction of too many items with ErrTooLarge naming the cap;
// the cap itself is accepted.
func testCaps(e *env) {
	t := e.t
	refused := func(err error, field, limit string) {
		t.Helper()
		require.Equal(t, field, argField(t, err))
		require.Contains(t, err.Error(), "at most "+limit)
	}
	for _, c := range []struct {
		req          queen.PopRequest
		field, limit string
	}{
		{queen.PopRequest{Queue: "caps", Batch: queen.MaxBatch + 1}, "PopRequest.Batch", "10000"},
		{queen.PopRequest{Queue: "caps", Batch: 100000000}, "PopRequest.Batch", "10000"},
		{queen.PopRequest{Queue: "caps", Partitions: 1000}, "PopRequest.Partitions", "64"},
		{queen.PopRequest{Queue: "caps", Timeout: 10 * time.Minute}, "PopRequest.Timeout", "1m0s"}, // refused, waiting or not
		{queen.PopRequest{Queue: "caps", Lease: queen.MaxLease + time.Second}, "PopRequest.Lease", "8760h0m0s"},
	} {
		_, err := e.c.Pop(e.ctx, c.req)
		refused(err, c.field, c.limit)
	}
	for _, c := range []struct {
		b            *queen.QueueBuilder
		field, limit string
	}{
		{e.c.Queue("caps").Batch(100000000), "QueueBuilder.Batch", "10000"},
		{e.c.Queue("caps").Partitions(1000), "QueueBuilder.Partitions", "64"},
		{e.c.Queue("caps").Timeout(10 * time.Minute), "QueueBuilder.Timeout", "1m0s"},
		{e.c.Queue("caps").TimeoutMillis(60001), "QueueBuilder.TimeoutMillis", "60000"},
		{e.c.Queue("caps").Lease(queen.MaxLease + time.Second), "QueueBuilder.Lease", "8760h0m0s"},
		{e.c.Queue("caps").LeaseSeconds(31536001), "QueueBuilder.LeaseSeconds", "31536000"},
	} {
		_, err := c.b.Wait(false).Pop(e.ctx)
		refused(err, c.field, c.limit)
	}
	_, err := e.c.RenewLease(e.ctx, "01900000-0000-7000-8000-000000000001", queen.MaxLease+time.Second)
	refused(err, "d", "8760h0m0s")
	cfg := queen.DefaultQueueConfig()
	cfg.LeaseTime = queen.MaxLease + time.Second
	_, err = e.c.ConfigureQueue(e.ctx, "caps", cfg)
	refused(err, "QueueConfig.LeaseTime", "8760h0m0s")
	over := make([]queen.PushItem, queen.MaxPushItems+1)
	ops := make([]queen.TxOp, queen.MaxTxOps+1)
	for i := range over {
		over[i] = queen.PushItem{Queue: "caps-over", Payload: json.RawMessage(`1`)}
		ops[i].Push = &over[i]
	}
	_, err = e.c.Push(e.ctx, over)
	require.ErrorIs(t, err, queen.ErrTooLarge)
	require.Contains(t, err.Error(), "at most 10000 items (queen.MaxPushItems)")
	_, err = e.c.ExecTransaction(e.ctx, ops)
	require.ErrorIs(t, err, queen.ErrTooLarge)
	require.Contains(t, err.Error(), "at most 10000 operations (queen.MaxTxOps)")

	// At the caps.
	e.push("caps", "", numbered(3)...)
	msgs := e.pop(e.c.Queue("caps").Batch(queen.MaxBatch).Partitions(queen.MaxPartitions).Timeout(queen.MaxPopTimeout).Lease(queen.MaxLease))
	require.Len(t, msgs, 3)
	_, err = e.c.RenewLease(e.ctx, msgs[0].LeaseID, queen.MaxLease)
	require.NoError(t, err)
	cfg.LeaseTime = queen.MaxLease
	_, err = e.c.ConfigureQueue(e.ctx, "caps", cfg)
	require.NoError(t, err)
}

// testWrongGroupExpired: once another group's lease has run out, an ack
// naming it is answered from the named group's own state, not as the
// wrong group.
func testWrongGroupExpired(e *env) {
	t := e.t
	e.push("wg", "", `{"n":0}`)
	bill := e.pop(e.c.Queue("wg").Group("billing").SubscriptionMode(queen.SubscriptionModeAll).LeaseSeconds(10))
	require.Len(t, bill, 1)
	audit := e.pop(e.c.Queue("wg").Group("audit").SubscriptionMode(queen.SubscriptionModeAll))
	require.Len(t, audit, 1)
	_, err := e.c.Ack(e.ctx, bill[0], true, queen.AckOptions{ConsumerGroup: "audit"})
	require.ErrorIs(t, err, queen.ErrWrongGroup, "billing's lease is live")
	e.advance(11 * time.Second)
	_, err = e.c.Ack(e.ctx, bill[0], true, queen.AckOptions{ConsumerGroup: "audit"})
	require.ErrorIs(t, err, queen.ErrLeaseExpired, "billing's lease ran out: it does not hold audit's message")
	e.ackAll(audit)

	// The same group's lease on another queue is not another group's.
	e.push("wg2", "", `{"n":1}`)
	other := e.pop(e.c.Queue("wg2").Group("audit").SubscriptionMode(queen.SubscriptionModeAll))
	require.Len(t, other, 1)
	e.push("wg", "", `{"n":2}`)
	next := e.pop(e.c.Queue("wg").Group("audit"))
	require.Len(t, next, 1)
	_, err = e.c.Ack(e.ctx, next[0], true, queen.AckOptions{LeaseID: other[0].LeaseID})
	require.ErrorIs(t, err, queen.ErrLeaseExpired, "a lease of audit on wg2 does not hold audit's message of wg")
	require.NotErrorIs(t, err, queen.ErrWrongGroup)
	e.ackAll(next)
	e.ackAll(other)
}
