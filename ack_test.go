package queen_test

import (
	"testing"

	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// A live lease of a group of another queue is not "another group's lease"
// for an ack: it does not hold the message, so the ack is refused with
// ErrLeaseExpired, not ErrWrongGroup.
func TestAck_AnotherQueuesLeaseIsLeaseExpired(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "a", "", 1)
	pushN(t, b, "b", "", 1)
	inA := pop(t, b, queen.PopRequest{Queue: "a", Group: "ga", SubscriptionMode: queen.SubscriptionModeAll})
	inB := pop(t, b, queen.PopRequest{Queue: "b", Group: "gb", SubscriptionMode: queen.SubscriptionModeAll})
	require.Len(t, inA.Messages, 1)
	require.Len(t, inB.Messages, 1)
	_, err := b.Ack(bg, inB.Messages[0], true, queen.AckOptions{LeaseID: inA.LeaseID})
	require.ErrorIs(t, err, queen.ErrLeaseExpired)
	require.NotErrorIs(t, err, queen.ErrWrongGroup)
	// Another group's lease of the same queue is ErrWrongGroup.
	pushN(t, b, "b", "", 1)
	other := pop(t, b, queen.PopRequest{Queue: "b", Group: "gc", SubscriptionMode: queen.SubscriptionModeAll})
	require.NotEmpty(t, other.LeaseID)
	_, err = b.Ack(bg, inB.Messages[0], true, queen.AckOptions{LeaseID: other.LeaseID})
	require.ErrorIs(t, err, queen.ErrWrongGroup)
	ackAll(t, b, inB.Messages, queen.AckCompleted)
}

// A failed ack's Delay holds the partition exactly that long, whether it
// is shorter or longer than the queue's RetryDelay: one microsecond
// before, a pop of the partition gets nothing; at it, the message again.
// Both ways of giving it: AckItem.Delay and AckOptions.Delay.
func TestAck_FailedDelayHoldsThatLong(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		retryDelay, delay time.Duration
		viaAck            bool // Broker.Ack with AckOptions, else AckBatch with AckItem
	}{
		{"shorter than RetryDelay, AckItem", 10 * time.Second, 3 * time.Second, false},
		{"longer than RetryDelay, AckItem", time.Second, 5 * time.Second, false},
		{"shorter than RetryDelay, AckOptions", 10 * time.Second, 3 * time.Second, true},
		{"longer than RetryDelay, AckOptions", time.Second, 5 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := itest.NewClock()
			b := queentest.NewBroker(t, &queen.Options{Clock: clock})
			configureWith(t, b, "q", func(c *queen.QueueConfig) { c.RetryLimit, c.RetryDelay = 3, tc.retryDelay })
			pushOne(t, b, "q", "p", "", `1`)
			req := queen.PopRequest{Queue: "q", Partition: "p"}
			pr := pop(t, b, req)
			require.Len(t, pr.Messages, 1)
			if tc.viaAck {
				res, err := b.Ack(bg, pr.Messages[0], false, queen.AckOptions{Delay: tc.delay})
				require.NoError(t, err)
				require.True(t, res.Success)
			} else {
				items := ackItems(pr.Messages, queen.AckFailed)
				items[0].Delay = tc.delay
				res := ack(t, b, items...)
				require.True(t, res[0].Success, "%v", res[0].Err)
			}
			clock.Advance(tc.delay - time.Microsecond)
			require.Empty(t, pop(t, b, req).Messages, "held until the ack's Delay ends")
			clock.Advance(time.Microsecond)
			again := pop(t, b, req)
			require.Len(t, again.Messages, 1, "served when the ack's Delay ends")
			require.Equal(t, pr.Messages[0].TransactionID, again.Messages[0].TransactionID)
		})
	}
}
