package queen_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// How the consume loop writes its acks: a lane's accepted messages share
// AckBatch calls, the handler never waits for an ack, and the acks of a
// lane stay in its order behind failures and stops.

// ackCalls counts, through the Observer, the ack calls that completed
// messages (one EventAck per call, queue, group and status) and how many
// each completed. gate, when set, runs inside the first such call, after
// its commit and before it returns.
type ackCalls struct {
	mu    sync.Mutex
	sizes []int
	gate  func()
	once  sync.Once
}

func (a *ackCalls) Observe(e queen.Event) {
	if e.Kind != queen.EventAck || e.Status != queen.AckCompleted {
		return
	}
	a.mu.Lock()
	a.sizes = append(a.sizes, e.Count)
	gate := a.gate
	a.mu.Unlock()
	if gate != nil {
		a.once.Do(gate)
	}
}

func (a *ackCalls) list() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.sizes...)
}

// observed runs fn on an in-memory broker and on one in a directory, each
// with an Observer of its own.
func observed(t *testing.T, fn func(t *testing.T, b *queen.Broker, calls *ackCalls)) {
	for _, disk := range []bool{false, true} {
		name := map[bool]string{false: "memory", true: "disk"}[disk]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			calls := &ackCalls{}
			opts := &queen.Options{Observer: calls}
			fn(t, itest.Open(t, disk, opts), calls)
		})
	}
}

func TestConsume_LaneAcksShareAckBatches(t *testing.T) {
	t.Parallel()
	observed(t, func(t *testing.T, b *queen.Broker, calls *ackCalls) {
		lastSeen := make(chan struct{})
		// The first ack call is held until the handler has seen message
		// 100 (the 101st): a loop that waited for each ack before the next
		// message would never get there (the wait gives up after `within`
		// and the count below then fails). With one handler at a time,
		// messages 0 to 99 are all accepted by then; the 101st may be
		// accepted after the held call returns, so it may take a call of
		// its own (closing the gate in the 100th handler raced its own
		// accept: [85 14 1] under load).
		var f faults
		calls.mu.Lock()
		calls.gate = func() { f.check(await(lastSeen), "the lane waited for an ack") }
		calls.mu.Unlock()
		pushTo(t, b, "lane", "p", numbered(101)...)
		var seen atomic.Int64
		col := newCollector()
		err := b.Queue("lane").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(101).Concurrency(1).Each().Limit(101).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				if seen.Add(1) == 101 {
					close(lastSeen)
				}
				return nil
			}).OnSettled(col.add).Execute(context.Background())
		require.NoError(t, err)
		f.none(t)
		sizes := calls.list()
		total := 0
		for _, n := range sizes {
			total += n
		}
		require.Equal(t, 101, total, "ack calls %v", sizes)
		if len(sizes) >= 2 { // else the sender woke once, after every accept
			require.GreaterOrEqual(t, sizes[0]+sizes[1], 100,
				"what was accepted while the first call was held went in the very next one: %v", sizes)
		}
		require.LessOrEqual(t, len(sizes), 3, "101 accepted messages of one lane were acked in %d calls: %v", len(sizes), sizes)
		require.Len(t, col.list(), 101)
		for _, s := range col.list() {
			require.Equal(t, queen.OutcomeAccepted, s.Outcome)
			require.NoError(t, s.AckErr)
		}
		require.EqualValues(t, 101, cursorOf(t, b, "lane", "p", "g").Offset)
	})
}

func TestConsume_SlowHandlerDoesNotHoldEarlierAcks(t *testing.T) {
	t.Parallel()
	observed(t, func(t *testing.T, b *queen.Broker, calls *ackCalls) {
		acked := make(chan struct{})
		calls.mu.Lock()
		calls.gate = func() { close(acked) }
		calls.mu.Unlock()
		pushTo(t, b, "slow", "p", numbered(3)...)
		var f faults
		err := b.Queue("slow").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(3).Each().Limit(3).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				if msg.Offset == 1 {
					// Message 0 was accepted: its ack is written while
					// this handler runs, not when the lane ends.
					f.check(await(acked), "message 0 not acked while message 1's handler ran")
				}
				return nil
			}).Execute(context.Background())
		require.NoError(t, err)
		f.none(t)
		require.Equal(t, 1, calls.list()[0], "the first ack call holds message 0 alone")
		require.EqualValues(t, 3, cursorOf(t, b, "slow", "p", "g").Offset)
	})
}

func TestConsume_FailureAcksAcceptedMatesFirst(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		configure(t, b, "mates", 5)
		pushTo(t, b, "mates", "p", numbered(6)...)
		var mu sync.Mutex
		var seen []int64
		err := b.Queue("mates").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(6).Each().Limit(7).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				mu.Lock()
				seen = append(seen, msg.Offset)
				mu.Unlock()
				if msg.Offset == 3 && msg.DeliveryAttempt == 1 {
					return errors.New("not yet")
				}
				return nil
			}).Execute(context.Background())
		require.NoError(t, err)
		// 0-2 accepted and never seen again; 3 fails, 4 and 5 come back
		// behind it, in order.
		require.Equal(t, []int64{0, 1, 2, 3, 3, 4, 5}, seen)
		require.EqualValues(t, 6, cursorOf(t, b, "mates", "p", "g").Offset)
	})
}

func TestConsume_StopAcksAcceptedBeforeGivingBack(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		configure(t, b, "stop", 5)
		pushTo(t, b, "stop", "p", numbered(6)...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		col := newCollector()
		err := b.Queue("stop").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(6).Each().
			Consume(ctx, func(_ context.Context, msg *queen.Message) error {
				if msg.Offset == 1 {
					cancel() // the loop stops after this message
				}
				return nil
			}).OnSettled(col.add).Execute(ctx)
		require.NoError(t, err)
		var accepted, released []int64
		for _, s := range col.list() {
			switch s.Outcome {
			case queen.OutcomeAccepted:
				require.NoError(t, s.AckErr)
				accepted = append(accepted, s.Message.Offset)
			case queen.OutcomeReleased:
				require.NoError(t, s.AckErr)
				released = append(released, s.Message.Offset)
			}
		}
		require.Equal(t, []int64{0, 1}, accepted)
		require.Equal(t, []int64{2, 3, 4, 5}, released)
		// 0 and 1 stay settled; the rest comes back at once, its first
		// delivery given back without spending a retry.
		res := pop(t, b, queen.PopRequest{Queue: "stop", Group: "g", Batch: 10})
		require.Equal(t, []int64{2, 3, 4, 5}, offsets(res.Messages))
		require.Zero(t, cursorOf(t, b, "stop", "p", "g").Retries)
	})
}

func TestConsume_LostLeaseReportsAcceptedFirst(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushTo(t, b, "gone", "p", numbered(3)...)
		col := newCollector()
		err := b.Queue("gone").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(3).Each().Limit(3).IdleMillis(200).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				if msg.Offset == 0 {
					// The group's leases go with it, under the handler.
					_, err := b.DeleteGroup(ctx, "g", "gone", true)
					return err
				}
				return nil
			}).OnSettled(col.add).Execute(context.Background())
		require.NoError(t, err)
		all := col.list()
		require.GreaterOrEqual(t, len(all), 3)
		// Message 0 was accepted before the lease went: its ack is tried
		// (and refused) and reported before the rest of the lane is
		// released unhandled, in the lane's order.
		require.EqualValues(t, 0, all[0].Message.Offset)
		require.True(t, all[0].Handled)
		require.Equal(t, queen.OutcomeReleased, all[0].Outcome)
		require.Error(t, all[0].AckErr)
		require.EqualValues(t, []int64{1, 2}, []int64{all[1].Message.Offset, all[2].Message.Offset})
		require.False(t, all[1].Handled)
		require.False(t, all[2].Handled)
	})
}

func TestConsume_AckOfMessageSettledByHandlerIsHandled(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushTo(t, b, "self", "p", numbered(2)...)
		col := newCollector()
		err := b.Queue("self").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(2).Each().Limit(2).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				if msg.Offset == 0 { // settles it itself, then returns nil
					_, err := b.Ack(ctx, msg, true, queen.AckOptions{})
					return err
				}
				return nil
			}).OnSettled(col.add).Execute(context.Background())
		require.NoError(t, err)
		all := col.list()
		require.Len(t, all, 2)
		require.Equal(t, queen.OutcomeHandled, all[0].Outcome, "settled by the handler: the loop's ack changes nothing")
		require.NoError(t, all[0].AckErr)
		require.Equal(t, queen.OutcomeAccepted, all[1].Outcome)
		require.EqualValues(t, 2, cursorOf(t, b, "self", "p", "g").Offset)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "self", Group: "g"}).Messages)
	})
}

func TestConsume_BatchHandlerGoesOnWhileItsAckIsWritten(t *testing.T) {
	t.Parallel()
	observed(t, func(t *testing.T, b *queen.Broker, calls *ackCalls) {
		second := make(chan struct{})
		// The first batch's ack is held until the handler has the second
		// batch: the worker does not wait for an ack before its next job.
		var f faults
		calls.mu.Lock()
		calls.gate = func() { f.check(await(second), "the second batch waited for the first one's ack") }
		calls.mu.Unlock()
		pushTo(t, b, "batches", "a", numbered(10)...)
		pushTo(t, b, "batches", "b", numbered(10)...)
		var n atomic.Int64
		col := newCollector()
		err := b.Queue("batches").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(10).Partitions(1).Concurrency(1).Limit(20).
			ConsumeBatch(context.Background(), func(ctx context.Context, msgs []*queen.Message) error {
				if n.Add(1) == 2 {
					close(second)
				}
				return nil
			}).OnSettled(col.add).Execute(context.Background())
		require.NoError(t, err)
		f.none(t)
		require.EqualValues(t, 2, n.Load())
		require.Len(t, col.list(), 20)
		for _, s := range col.list() {
			require.Equal(t, queen.OutcomeAccepted, s.Outcome)
		}
		require.Equal(t, []int{10, 10}, calls.list(), "one AckBatch per batch")
		require.EqualValues(t, 10, cursorOf(t, b, "batches", "a", "g").Offset)
		require.EqualValues(t, 10, cursorOf(t, b, "batches", "b", "g").Offset)
	})
}

// popsSeen closes third once the Observer has seen three pops that
// brought messages, and passes the ack events on to acks.
type popsSeen struct {
	acks  *ackCalls
	n     atomic.Int64
	third chan struct{}
}

func (p *popsSeen) Observe(e queen.Event) {
	if e.Kind == queen.EventPop && e.Count > 0 && p.n.Add(1) == 3 {
		close(p.third)
	}
	p.acks.Observe(e)
}

func TestConsume_NextPopDoesNotWaitForTheLaneBeforeAcks(t *testing.T) {
	t.Parallel()
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "disk"}[disk], func(t *testing.T) {
			t.Parallel()
			// The first lane's ack is held until the loop has popped the
			// third lane: once it has handled the second lane, the one
			// worker frees its slot for the next pop before it waits for
			// the first lane's ack, so that pop overlaps the wait.
			calls := &ackCalls{}
			seen := &popsSeen{acks: calls, third: make(chan struct{})}
			var f faults
			calls.gate = func() { f.check(await(seen.third), "the third pop waited for the first lane's ack") }
			b := itest.Open(t, disk, &queen.Options{Observer: seen})
			for _, p := range []string{"a", "b", "c"} {
				pushTo(t, b, "overlap", p, numbered(1)...)
			}
			col := newCollector()
			err := b.Queue("overlap").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(1).Concurrency(1).Each().Limit(3).
				Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error { return nil }).
				OnSettled(col.add).Execute(context.Background())
			require.NoError(t, err)
			f.none(t)
			require.Len(t, col.list(), 3)
			for _, s := range col.list() {
				require.Equal(t, queen.OutcomeAccepted, s.Outcome)
				require.NoError(t, s.AckErr)
			}
			for _, p := range []string{"a", "b", "c"} {
				require.EqualValues(t, 1, cursorOf(t, b, "overlap", p, "g").Offset)
			}
		})
	}
}

// An ack accepted while the lane's previous AckBatch is being written goes
// out in the very next AckBatch, not when the lane ends: the handler of
// the message after it waits for that ack.
func TestConsume_AckAcceptedDuringABatchGoesInTheNext(t *testing.T) {
	t.Parallel()
	acks := &laneAcks{calls: make(chan int, 10), release: make(chan struct{})}
	b, _ := clocked(t, &queen.Options{Observer: acks})
	pushTo(t, b, "next", "p", numbered(3)...)
	var f faults
	var sizes []int
	err := b.Queue("next").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(3).Each().Limit(3).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			switch msg.Offset {
			case 1: // accepted while message 0's AckBatch is held
				n, ok := awaitValue(acks.calls)
				f.check(ok, "message 0 was not acked while message 1's handler ran")
				sizes = append(sizes, n)
			case 2:
				close(acks.release)
				// Message 1's ack is written next, while this handler
				// runs: the lane is not over yet.
				n, ok := awaitValue(acks.calls)
				f.check(ok, "message 1's ack waited for the lane to end")
				sizes = append(sizes, n)
			}
			return nil
		}).Execute(context.Background())
	require.NoError(t, err)
	f.none(t)
	require.Equal(t, []int{1, 1}, sizes, "message 0's AckBatch, then message 1's alone")
	require.Equal(t, 1, recv(t, acks.calls), "message 2's AckBatch")
	require.EqualValues(t, 3, cursorOf(t, b, "next", "p", "g").Offset)
}
