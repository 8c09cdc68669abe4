package queen_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sync/atomic"

	"errors"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/clientrt"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// A loop with Concurrency ≥ 2, Wait(false) and Idle reads its
// last-activity time under its lock after an empty pop, while another
// fetcher or a worker writes it: the race detector (go test -race) would
// report a read without it; without -race the test only checks that every
// message is handled.
func TestConsume_IdleLoopReadsLastActivityUnderLock(t *testing.T) {
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

// TestConsume_PopsAgainWhileUnavailable: a loop whose pops fail with
// ErrUnavailable pops again, however many times in a row, and handles the
// message once the broker is back; it does not end with that error.
func TestConsume_PopsAgainWhileUnavailable(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	c := &flakyPops{Broker: b}
	c.failures.Store(3) // waits of 100, 200 and 400 ms
	_, err := b.Push(context.Background(), []queen.PushItem{{Queue: "flaky", Payload: []byte(`1`)}})
	require.NoError(t, err)
	rt := clientrt.New(c, clientrt.Options{}).(interface {
		Queue(string) *queen.QueueBuilder
	})
	var handled atomic.Int32
	err = rt.Queue("flaky").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Limit(1).
		Consume(context.Background(), func(ctx context.Context, m *queen.Message) error {
			handled.Add(1)
			return nil
		}).Execute(context.Background())
	require.NoError(t, err, "three unavailable pops in a row do not end the loop")
	require.EqualValues(t, 1, handled.Load())
	require.LessOrEqual(t, c.failures.Load(), int32(-1), "every failure was popped through")
}

// flakyPops is a Client whose first pops fail with ErrUnavailable, as a
// remote client's do while its server is out of reach.
type flakyPops struct {
	*queen.Broker
	failures atomic.Int32
}

func (f *flakyPops) Pop(ctx context.Context, req queen.PopRequest) (*queen.PopResult, error) {
	if f.failures.Add(-1) >= 0 {
		return nil, fmt.Errorf("%w: server out of reach", queen.ErrUnavailable)
	}
	return f.Broker.Pop(ctx, req)
}

// TestConsume_RefusedAckIsNotReportedAsSettled: when the loop's ack is
// refused (the lease ran out while the handler ran), the message is not
// accepted, dead-lettered or parked, whatever the handler answered: it is
// reported released, and comes back.
func TestConsume_RefusedAckIsNotReportedAsSettled(t *testing.T) {
	t.Parallel()
	cause := errors.New("no such SKU")
	for _, tc := range []struct {
		name   string
		result error
		status queen.AckStatus
	}{
		{name: "nil", result: nil, status: queen.AckCompleted},
		{name: "plain error", result: cause, status: queen.AckFailed},
		{name: "Reject", result: queen.Reject(cause), status: queen.AckDLQ},
		{name: "Park", result: queen.Park(cause), status: queen.AckPark},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var obs eventLog
			b, clock := clocked(t, &queen.Options{Observer: &obs})
			configure(t, b, "q", 3)
			pushTo(t, b, "q", "Default", `{"n":0}`)
			col := newCollector()
			err := b.Queue("q").LeaseSeconds(10).Each().Limit(1).Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				clock.Advance(11 * time.Second) // the lease runs out under the handler
				return tc.result
			}).OnSettled(col.add).Execute(context.Background())
			require.NoError(t, err)
			s := recv(t, col.ch)
			require.ErrorIs(t, s.AckErr, queen.ErrLeaseExpired)
			require.Equal(t, queen.OutcomeReleased, s.Outcome)
			require.Equal(t, tc.status, s.Status, "the ack it tried")
			require.True(t, s.Handled)

			require.Equal(t, map[queen.Outcome]int{queen.OutcomeReleased: 1}, obs.consumed())
			cnt := b.Counters()
			for o, n := range cnt.Consumed {
				if o != queen.OutcomeReleased {
					require.Zero(t, n, "%s", o)
				}
			}
			require.EqualValues(t, 1, cnt.Consumed[queen.OutcomeReleased])
			for st, n := range cnt.Acked {
				require.Zero(t, n, "acked %s", st)
			}
			require.Zero(t, cnt.DeadLettered)
			require.Zero(t, cnt.Parked)
			c := cursorOf(t, b, "q", "Default", "")
			require.Zero(t, c.Offset)
			require.Zero(t, c.Retries)
			msgs, err := b.Queue("q").Wait(false).Pop(context.Background())
			require.NoError(t, err)
			require.Len(t, msgs, 1, "it comes back")
		})
	}
}

// TestConsume_ReleasedMessagesAreObserved: messages a loop gives back
// unhandled (on a stop, or behind a failure) reach the Observer and the
// counters as released.
func TestConsume_ReleasedMessagesAreObserved(t *testing.T) {
	t.Parallel()
	t.Run("given back on a stop", func(t *testing.T) {
		t.Parallel()
		var obs eventLog
		b := queentest.NewBroker(t, &queen.Options{Observer: &obs})
		pushTo(t, b, "q", "A", numbered(3)...)
		pushTo(t, b, "q", "B", numbered(3)...)
		started := make(chan struct{}, 1)
		c := b.Queue("q").Autopilot(false).Batch(6).Partitions(2).Each().
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				started <- struct{}{}
				<-queen.Stopping(ctx)
				return nil
			})
		require.NoError(t, c.Start(context.Background()))
		recv(t, started)
		require.NoError(t, c.Stop(context.Background()))
		want := map[queen.Outcome]int{queen.OutcomeAccepted: 1, queen.OutcomeReleased: 5}
		require.Equal(t, want, obs.consumed())
		cnt := b.Counters()
		require.EqualValues(t, 1, cnt.Consumed[queen.OutcomeAccepted])
		require.EqualValues(t, 5, cnt.Consumed[queen.OutcomeReleased])
	})
	t.Run("skipped behind a failure", func(t *testing.T) {
		t.Parallel()
		var obs eventLog
		b := queentest.NewBroker(t, &queen.Options{Observer: &obs})
		configure(t, b, "q", 3)
		pushTo(t, b, "q", "Default", numbered(3)...)
		err := b.Queue("q").Autopilot(false).Batch(3).Each().Limit(4).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				if dataN(msg) == 0 && msg.DeliveryAttempt == 1 {
					return errors.New("transient")
				}
				return nil
			}).Execute(context.Background())
		require.NoError(t, err)
		want := map[queen.Outcome]int{queen.OutcomeRetried: 1, queen.OutcomeReleased: 2, queen.OutcomeAccepted: 3}
		require.Equal(t, want, obs.consumed())
		require.EqualValues(t, 2, b.Counters().Consumed[queen.OutcomeReleased])
	})
}
