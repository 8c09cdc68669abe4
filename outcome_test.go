package queen_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// consumeOne runs a consumer over the single message of queue "q" once,
// with result as the handler's answer, and returns its settlement.
func consumeOne(t *testing.T, b *queen.Broker, qb *queen.QueueBuilder, result error) queen.Settlement {
	t.Helper()
	col := newCollector()
	err := qb.Each().Limit(1).Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
		return result
	}).OnSettled(col.add).Execute(context.Background())
	require.NoError(t, err)
	for _, s := range col.list() {
		if s.Handled {
			return s
		}
	}
	t.Fatal("no handled settlement")
	return queen.Settlement{}
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	cause := errors.New("no such SKU")
	for _, tc := range []struct {
		name     string
		result   error
		status   queen.AckStatus
		outcome  queen.Outcome
		retries  int   // of the queue's budget, spent
		offset   int64 // the group's cursor after it
		dlq      string
		parked   string
		holdBack time.Duration // before the message is delivered again
	}{
		{name: "nil completes", result: nil, status: queen.AckCompleted, outcome: queen.OutcomeAccepted, offset: 1},
		{name: "plain error fails", result: cause, status: queen.AckFailed, outcome: queen.OutcomeRetried, retries: 1},
		{name: "Retry without a policy fails", result: queen.Retry(cause), status: queen.AckFailed, outcome: queen.OutcomeRetried, retries: 1},
		{name: "Reject dead-letters at once", result: queen.Reject(cause), status: queen.AckDLQ, outcome: queen.OutcomeDeadLettered, offset: 1, dlq: "no such SKU"},
		{name: "Fatal is Reject", result: queen.Fatal(cause), status: queen.AckDLQ, outcome: queen.OutcomeDeadLettered, offset: 1, dlq: "no such SKU"},
		{name: "Park parks", result: queen.Park(cause), status: queen.AckPark, outcome: queen.OutcomeParked, offset: 1, parked: "no such SKU"},
		{name: "wrapped outcomes count", result: fmt.Errorf("reserve: %w", queen.Park(cause)), status: queen.AckPark, outcome: queen.OutcomeParked, offset: 1, parked: "reserve: no such SKU"},
		{name: "the outermost outcome wins", result: queen.Reject(queen.Park(cause)), status: queen.AckDLQ, outcome: queen.OutcomeDeadLettered, offset: 1, dlq: "no such SKU"},
		{name: "InProgress waits without spending", result: queen.InProgress(5 * time.Second), status: queen.AckRetry, outcome: queen.OutcomeInProgress, holdBack: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, clock := clocked(t, nil)
			configure(t, b, "q", 3)
			pushTo(t, b, "q", "Default", `{"sku":"A-1"}`)
			s := consumeOne(t, b, b.Queue("q").Group("g").SubscriptionMode(queen.SubscriptionModeAll), tc.result)
			require.NoError(t, s.AckErr)
			require.Equal(t, tc.status, s.Status)
			require.Equal(t, tc.outcome, s.Outcome)
			require.Equal(t, tc.holdBack, s.Delay)
			c := cursorOf(t, b, "q", "Default", "g")
			require.Equal(t, tc.retries, c.Retries)
			require.Equal(t, tc.offset, c.Offset)
			require.Empty(t, c.LeaseID)

			dl, err := b.DeadLetters(context.Background(), queen.LetterFilter{Queue: "q"})
			require.NoError(t, err)
			pk, err := b.ParkedMessages(context.Background(), queen.LetterFilter{Queue: "q"})
			require.NoError(t, err)
			if tc.dlq != "" {
				require.Len(t, dl.Letters, 1)
				require.Equal(t, tc.dlq, dl.Letters[0].Error)
				require.Equal(t, "g", dl.Letters[0].ConsumerGroup)
			} else {
				require.Empty(t, dl.Letters)
			}
			if tc.parked != "" {
				require.Len(t, pk.Letters, 1)
				require.Equal(t, tc.parked, pk.Letters[0].Error)
			} else {
				require.Empty(t, pk.Letters)
			}
			if tc.offset == 1 {
				return
			}
			// It comes back, after the hold-back if any.
			again := b.Queue("q").Group("g").Wait(false)
			if tc.holdBack > 0 {
				msgs, err := again.Pop(context.Background())
				require.NoError(t, err)
				require.Empty(t, msgs, "held back")
				clock.Advance(tc.holdBack)
			}
			msgs, err := again.Pop(context.Background())
			require.NoError(t, err)
			require.Len(t, msgs, 1)
			require.Equal(t, 2, msgs[0].DeliveryAttempt)
		})
	}
}

func TestOutcomes_InProgressKeepsTheAttemptCount(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushTo(t, b, "q", "Default", `{}`)
	var answers []error
	answers = append(answers, queen.InProgress(0), queen.InProgress(0), errors.New("first real failure"), nil)
	calls := 0
	col := newCollector()
	err := b.Queue("q").RetryPolicy(queen.FixedRetry(2, 0)).Each().Limit(4).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			calls++
			return answers[calls-1]
		}).OnSettled(col.add).Execute(context.Background())
	require.NoError(t, err)
	// Two in-progress answers then one failure: attempt 1 of 2, so it is
	// retried rather than dead-lettered, and the fourth call completes it.
	require.Equal(t, 4, calls)
	require.Equal(t, []queen.Outcome{queen.OutcomeInProgress, queen.OutcomeInProgress, queen.OutcomeRetried, queen.OutcomeAccepted}, col.outcomesOf())
}

func TestOutcomes_ErrorTexts(t *testing.T) {
	t.Parallel()
	cause := errors.New("the cause")
	for _, err := range []error{queen.Retry(cause), queen.Reject(cause), queen.Fatal(cause), queen.Park(cause)} {
		require.Equal(t, "the cause", err.Error())
		require.ErrorIs(t, err, cause)
	}
	require.Equal(t, "rejected", queen.Reject(nil).Error())
	var ip *queen.InProgressError
	require.ErrorAs(t, fmt.Errorf("x: %w", queen.InProgress(-time.Second)), &ip)
	require.Zero(t, ip.Delay)
	pe := &queen.PanicError{Value: cause}
	require.ErrorIs(t, pe, cause)
	require.Equal(t, "panic: the cause", pe.Error())
}

// A handler that always asks for a retry, with no RetryPolicy: the queue's
// RetryDelay spaces the attempts and its RetryLimit ends them in the
// dead-letter store; the message never comes back in a loop.
func TestOutcomes_RetryWithoutPolicyNeverSpins(t *testing.T) {
	t.Parallel()
	b, clock := clocked(t, nil)
	configureWith(t, b, "q", func(c *queen.QueueConfig) { c.RetryLimit, c.RetryDelay = 3, 2*time.Second })
	pushTo(t, b, "q", "Default", `{"n":1}`)
	var mu sync.Mutex
	var seen []time.Time
	var attempts []int
	col := newCollector()
	c := b.Queue("q").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Each().Limit(4).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			mu.Lock()
			seen = append(seen, clock.Now())
			attempts = append(attempts, msg.DeliveryAttempt)
			mu.Unlock()
			return queen.Retry(errors.New("warehouse busy"))
		}).OnSettled(col.add)
	require.NoError(t, c.Start(context.Background()))
	for range 3 {
		s := recv(t, col.ch)
		require.Equal(t, queen.OutcomeRetried, s.Outcome)
		require.Equal(t, queen.AckFailed, s.Status)
		clock.Advance(2 * time.Second) // the partition comes back now, not before
	}
	last := recv(t, col.ch)
	require.Equal(t, queen.OutcomeDeadLettered, last.Outcome)
	<-c.Done()
	require.NoError(t, c.Err())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, 2, 3, 4}, attempts, "RetryLimit 3: tried 4 times in all")
	for i := 1; i < len(seen); i++ {
		require.GreaterOrEqual(t, seen[i].Sub(seen[i-1]), 2*time.Second, "attempt %d came back before RetryDelay", i+1)
	}
	dl, err := b.DeadLetters(context.Background(), queen.LetterFilter{Queue: "q"})
	require.NoError(t, err)
	require.Len(t, dl.Letters, 1)
	require.Equal(t, "warehouse busy", dl.Letters[0].Error)
}

// A handler that settled its own message and then returned an error gets
// no second ack from the loop: the settlement says so (OutcomeHandled, no
// Status), and the message stays settled as the handler left it.
func TestOutcome_SelfSettledFailureSendsNoSecondAck(t *testing.T) {
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
func TestOutcome_LostLeaseReportsTheMessageAtTheCursor(t *testing.T) {
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
