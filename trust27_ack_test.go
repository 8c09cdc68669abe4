package queen_test

import (
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// A failed ack's Delay holds the partition exactly that long, whether it
// is shorter or longer than the queue's RetryDelay: one microsecond
// before, a pop of the partition gets nothing; at it, the message again
// (issue 27). Both ways of giving it: AckItem.Delay and AckOptions.Delay.
func TestTrust27_FailedAckDelayHoldsThatLong(t *testing.T) {
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

// A message dead-lettered because its failed acks used up RetryLimit
// carries "Retries exhausted" when the last ack gave no error text, and
// the ack's own text when it gave one (issue 27).
func TestTrust27_ExhaustedRetriesSayWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ given, want string }{
		{"", "Retries exhausted"},
		{"card declined", "card declined"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			b := queentest.NewBroker(t, nil)
			configureWith(t, b, "q", func(c *queen.QueueConfig) { c.RetryLimit, c.RetryDelay = 1, 0 })
			pushOne(t, b, "q", "p", "", `1`)
			req := queen.PopRequest{Queue: "q", Partition: "p"}
			for attempt := 1; attempt <= 2; attempt++ {
				pr := pop(t, b, req)
				require.Len(t, pr.Messages, 1, "attempt %d", attempt)
				res, err := b.Ack(bg, pr.Messages[0], false, queen.AckOptions{Error: tc.given})
				require.NoError(t, err)
				require.Equal(t, attempt == 2, res.DeadLettered, "dead-lettered on the attempt past RetryLimit, not before")
			}
			require.Empty(t, pop(t, b, req).Messages)
			page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "q"})
			require.NoError(t, err)
			require.Equal(t, 1, page.Total)
			require.Equal(t, tc.want, page.Letters[0].Error)
			require.Equal(t, 1, page.Letters[0].RetryCount, "the failed acks spent")
		})
	}
}
