package queen_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// Issue 27: a drain's list of unsettled messages is exactly what comes
// back, the idle check reads the last activity under its lock, and the
// lane's acks, self-settled failures and lost leases behave as documented.

// statusGate is an Observer that holds the first ack call applying items
// of one status, after its commit and before it returns, until release is
// closed; entered is closed once that call is held, left once it goes on.
type statusGate struct {
	status  queen.AckStatus
	entered chan struct{}
	release chan struct{}
	left    chan struct{}
	once    sync.Once
	held    bool // the call was released by release, not by a timeout; read after left
}

func newStatusGate(st queen.AckStatus) *statusGate {
	return &statusGate{status: st, entered: make(chan struct{}), release: make(chan struct{}), left: make(chan struct{})}
}

func (g *statusGate) Observe(e queen.Event) {
	if e.Kind != queen.EventAck || e.Status != g.status {
		return
	}
	g.once.Do(func() {
		close(g.entered)
		g.held = await(g.release)
		close(g.left)
	})
}

// sortedTxids lists the transaction ids of msgs, sorted.
func sortedTxids(msgs []*queen.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.TransactionID
	}
	sort.Strings(out)
	return out
}

// comeBack expires every lease on clock and pops what is delivered again
// from queue (queue mode).
func comeBack(t *testing.T, b *queen.Broker, advance func(time.Duration), queue string) []*queen.Message {
	t.Helper()
	advance(61 * time.Second) // the leases run out
	msgs, err := b.Queue(queue).Autopilot(false).Wait(false).Batch(100).Partitions(10).Pop(context.Background())
	require.NoError(t, err)
	return msgs
}

// Defect 2: an ack being written when the drain runs out of time lands,
// and its message never comes back; an accepted message whose ack was
// still queued then is not acked by the loop any more and does come back.
// The list is exactly what comes back.
func TestTrust27_DrainListsExactlyWhatComesBack(t *testing.T) {
	t.Parallel()
	t.Run("accepted acks in flight and queued", func(t *testing.T) {
		t.Parallel()
		gate := newStatusGate(queen.AckCompleted)
		b, clock := clocked(t, &queen.Options{Observer: gate})
		pushTo(t, b, "dq", "p", numbered(4)...)
		abandoned, started := make(chan struct{}), make(chan struct{})
		var f faults
		col := newCollector()
		c := b.Queue("dq").Autopilot(false).Batch(4).Each().DrainTimeout(time.Millisecond).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				switch msg.Offset {
				case 1: // accepted while message 0's ack is being written
					f.check(await(gate.entered), "message 0's ack never written")
				case 2: // still running when the drain gives up
					close(started)
					<-ctx.Done()
					close(abandoned)
				}
				return nil
			}).OnSettled(col.add)
		go func() { <-abandoned; close(gate.release) }()
		require.NoError(t, c.Start(context.Background()))
		recv(t, started)

		err := c.Stop(context.Background())
		var de *queen.DrainError
		require.ErrorAs(t, err, &de)
		recv(t, c.Done())
		f.none(t)
		recv(t, gate.left)
		require.True(t, gate.held, "the ack of message 0 was held until the drain gave up")

		back := comeBack(t, b, clock.Advance, "dq")
		require.Equal(t, []int64{1, 2, 3}, offsets(back), "message 0's ack landed; 1's was never sent")
		require.Equal(t, sortedTxids(back), sortedTxids(de.Unsettled), "DrainError.Unsettled is exactly what came back")
		byOffset := map[int64]queen.Settlement{}
		for _, s := range col.list() {
			byOffset[s.Message.Offset] = s
		}
		require.Equal(t, queen.OutcomeAccepted, byOffset[0].Outcome)
		require.Equal(t, queen.OutcomeDiscarded, byOffset[1].Outcome, "its ack was not sent after the drain gave up")
		require.True(t, byOffset[1].Handled)
		require.Empty(t, byOffset[1].Status)
	})
	t.Run("failure ack in flight", func(t *testing.T) {
		t.Parallel()
		gate := newStatusGate(queen.AckDLQ)
		b, clock := clocked(t, &queen.Options{Observer: gate})
		pushTo(t, b, "dq", "a", numbered(1)...)
		pushTo(t, b, "dq", "b", numbered(2)...)
		abandoned, started := make(chan struct{}), make(chan struct{})
		c := b.Queue("dq").Autopilot(false).Batch(3).Partitions(2).Each().Concurrency(2).DrainTimeout(time.Millisecond).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				if msg.Partition == "a" {
					return queen.Reject(errors.New("never"))
				}
				close(started)
				<-ctx.Done()
				close(abandoned)
				return nil
			})
		go func() { <-abandoned; close(gate.release) }()
		require.NoError(t, c.Start(context.Background()))
		recv(t, started)
		recv(t, gate.entered)

		err := c.Stop(context.Background())
		var de *queen.DrainError
		require.ErrorAs(t, err, &de)
		recv(t, c.Done())
		recv(t, gate.left)
		require.True(t, gate.held)

		back := comeBack(t, b, clock.Advance, "dq")
		require.Len(t, back, 2, "partition a's message was dead-lettered")
		for _, m := range back {
			require.Equal(t, "b", m.Partition)
		}
		require.Equal(t, sortedTxids(back), sortedTxids(de.Unsettled), "DrainError.Unsettled is exactly what came back")
	})
}

// Defect 4: a loop with Concurrency ≥ 2, Wait(false) and Idle read its
// last-activity time without its lock after an empty pop while another
// fetcher or a worker wrote it. The race detector (go test -race) reports
// it; without -race the test only checks that every message is handled.
func TestTrust27_IdleLoopReadsLastActivityUnderLock(t *testing.T) {
	t.Parallel()
	b, _ := clocked(t, nil)
	got := make(chan int64, 1)
	c := b.Queue("idle").Concurrency(2).Wait(false).Idle(time.Hour).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			got <- msg.Offset
			return nil
		})
	require.NoError(t, c.Start(context.Background()))
	// Each message is popped by one fetcher while the other sleeps
	// after an empty pop, having read the last activity.
	for i := range 12 {
		pushTo(t, b, "idle", fmt.Sprintf("p%d", i), numbered(1)...)
		require.EqualValues(t, 0, recv(t, got))
	}
	require.NoError(t, c.Stop(context.Background()))
}

// laneAcks is an Observer that reports the size of each ack call that
// completed messages on calls, holding the first one, after its commit
// and before it returns, until release is closed.
type laneAcks struct {
	calls   chan int
	release chan struct{}
	once    sync.Once
}

func (l *laneAcks) Observe(e queen.Event) {
	if e.Kind != queen.EventAck || e.Status != queen.AckCompleted {
		return
	}
	l.calls <- e.Count
	l.once.Do(func() { await(l.release) })
}

// An ack accepted while the lane's previous AckBatch is being written goes
// out in the very next AckBatch, not when the lane ends: the handler of
// the message after it waits for that ack.
func TestTrust27_AckAcceptedDuringABatchGoesInTheNext(t *testing.T) {
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

// awaitValue waits for a value on ch, up to `within`.
func awaitValue[T any](ch <-chan T) (T, bool) {
	select {
	case v := <-ch:
		return v, true
	case <-time.After(within):
		var zero T
		return zero, false
	}
}

// A handler that settled its own message and then returned an error gets
// no second ack from the loop: the settlement says so (OutcomeHandled, no
// Status), and the message stays settled as the handler left it.
func TestTrust27_SelfSettledFailureSendsNoSecondAck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  func(q *queen.QueueBuilder) *queen.QueueBuilder
		on   func(c *queen.Consumer) *queen.Consumer
	}{
		{"AutoAck(false)", func(q *queen.QueueBuilder) *queen.QueueBuilder { return q.AutoAck(false) }, nil},
		{"OnError", nil, func(c *queen.Consumer) *queen.Consumer {
			return c.OnError(func(ctx context.Context, msg *queen.Message, err error) error { return err })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, _ := clocked(t, nil)
			configure(t, b, "self", 5)
			pushTo(t, b, "self", "p", numbered(2)...)
			col := newCollector()
			q := b.Queue("self").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(2).Each().Limit(2)
			if tc.cfg != nil {
				q = tc.cfg(q)
			}
			c := q.Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				// Settled by the handler, completed, then a failure.
				if _, err := b.Ack(ctx, msg, true, queen.AckOptions{}); err != nil {
					return fmt.Errorf("own ack: %w", err)
				}
				return errors.New("failed after settling")
			}).OnSettled(col.add)
			if tc.on != nil {
				c = tc.on(c)
			}
			require.NoError(t, c.Execute(context.Background()))
			all := col.list()
			require.Len(t, all, 2)
			for _, s := range all {
				require.Equal(t, queen.OutcomeHandled, s.Outcome, "offset %d", s.Message.Offset)
				require.Empty(t, s.Status, "offset %d: the loop sent a second ack", s.Message.Offset)
				require.NoError(t, s.AckErr)
			}
			cs := cursorOf(t, b, "self", "p", "g")
			require.EqualValues(t, 2, cs.Offset)
			require.Zero(t, cs.Retries, "no failed ack spent a retry")
			require.EqualValues(t, 2, b.Counters().Acked[queen.AckCompleted])
			require.Zero(t, b.Counters().Acked[queen.AckFailed])
		})
	}
}

// When the lane's lease is lost, the message at the group's cursor (its
// predecessors settled) is reported released, unhandled, and comes back:
// it is never taken as settled and skipped.
func TestTrust27_LostLeaseReportsTheMessageAtTheCursor(t *testing.T) {
	t.Parallel()
	b, clock := clocked(t, nil)
	pushTo(t, b, "cur", "p", numbered(3)...)
	col := newCollector()
	var handled []int64
	err := b.Queue("cur").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(3).Each().Limit(3).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			handled = append(handled, msg.Offset)
			if msg.Offset == 0 {
				// Settled here, so the cursor moves to 1; then the lease
				// runs out under the handler.
				if _, err := b.Ack(ctx, msg, true, queen.AckOptions{}); err != nil {
					return err
				}
				clock.Advance(61 * time.Second)
			}
			return nil
		}).OnSettled(col.add).Execute(context.Background())
	require.NoError(t, err)
	// 1 and 2 were released and taken again (Limit counts what was
	// handled, not what was released).
	require.Equal(t, []int64{0, 1, 2}, handled)
	all := col.list()
	require.Len(t, all, 5)
	require.EqualValues(t, 0, all[0].Message.Offset)
	require.Equal(t, queen.OutcomeHandled, all[0].Outcome)
	for i, off := range []int64{1, 2} {
		s := all[1+i]
		require.Equal(t, off, s.Message.Offset)
		require.Equal(t, queen.OutcomeReleased, s.Outcome, "offset %d: its lease was lost", off)
		require.False(t, s.Handled)
		require.Equal(t, 1, s.Message.DeliveryAttempt)
		s = all[3+i]
		require.Equal(t, off, s.Message.Offset)
		require.Equal(t, queen.OutcomeAccepted, s.Outcome)
		require.Equal(t, 2, s.Message.DeliveryAttempt)
	}
	require.EqualValues(t, 3, cursorOf(t, b, "cur", "p", "g").Offset)
}
