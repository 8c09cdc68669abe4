package queen_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

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
