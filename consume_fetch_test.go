package queen_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sync/atomic"

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
