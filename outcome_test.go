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
