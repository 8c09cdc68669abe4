package queen_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sync/atomic"

	"github.com/queenlite/queen"
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
	rt := queen.NewRuntime(c, nil)
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
