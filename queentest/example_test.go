package queentest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// start is where the examples' fake clocks start: a fixed day, so a test
// never depends on the day it runs.
var start = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

// A test that a message a worker took and never acked (it crashed) is
// delivered again when its lease runs out. The fake clock jumps past the
// lease; the pop already waiting for work gets the message at once.
func Example_leaseExpiry() {
	t := &testing.T{} // in a test: the test's t
	ctx := context.Background()
	clock := queentest.NewClock(start)
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})

	_, err := b.Queue("emails").Push(ctx, map[string]any{"to": "ada@example.com"})
	require.NoError(t, err)

	// A worker takes the message under a 30 s lease, then crashes.
	crashed, err := b.Pop(ctx, queen.PopRequest{Queue: "emails", Lease: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, crashed.Messages, 1)

	// Another worker waits for work.
	next := make(chan *queen.PopResult, 1)
	go func() {
		res, err := b.Pop(ctx, queen.PopRequest{Queue: "emails", Wait: true, Timeout: 5 * time.Second})
		if err != nil {
			res = &queen.PopResult{}
		}
		next <- res
	}()

	clock.Advance(30 * time.Second) // the crashed worker's lease runs out
	res := <-next
	require.Len(t, res.Messages, 1)
	m := res.Messages[0]
	fmt.Println(string(m.Payload), "delivery attempt", m.DeliveryAttempt)
	// Output: {"to":"ada@example.com"} delivery attempt 2
}

// A test that a failed send is retried a minute later, not before, by a
// consume loop with a retry policy. WaitOutcome waits until the failure
// has been given back (its retry delay then runs from the clock's time);
// the clock jumps the minute; WaitDrained waits for the retry to succeed.
func Example_retryDelay() {
	t := &testing.T{} // in a test: the test's t
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // stops the consume loop
	clock := queentest.NewClock(start)
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})

	// The code under test: a worker that sends e-mails and retries a
	// failed send a minute later.
	sent := make(chan string, 10)
	worker := b.Queue("emails").RetryPolicy(queen.FixedRetry(5, time.Minute)).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			if msg.DeliveryAttempt == 1 {
				sent <- fmt.Sprintf("attempt 1 at %s: 421 try again later", clock.Now().Format(time.TimeOnly))
				return errors.New("smtp: 421 try again later")
			}
			sent <- fmt.Sprintf("attempt %d at %s: sent", msg.DeliveryAttempt, clock.Now().Format(time.TimeOnly))
			return nil
		})
	require.NoError(t, worker.Start(ctx))

	_, err := b.Queue("emails").Push(ctx, map[string]any{"to": "ada@example.com"})
	require.NoError(t, err)

	queentest.WaitOutcome(t, b, queen.OutcomeRetried, 1)
	clock.Advance(time.Minute)
	queentest.WaitDrained(t, b, "emails", "")

	fmt.Println(<-sent)
	fmt.Println(<-sent)
	// Output:
	// attempt 1 at 09:00:00: 421 try again later
	// attempt 2 at 09:01:00: sent
}

// A broker for one test: in memory, closed when the test ends.
func ExampleNewBroker() {
	t := &testing.T{} // in a test: the test's t
	b := queentest.NewBroker(t, nil)

	_, err := b.Queue("orders").Push(context.Background(), map[string]any{"id": 1})
	require.NoError(t, err)
	fmt.Println(len(queentest.RequirePushed(t, b, "orders", 1)))
	// Output: 1
}

// A queue that delays each message by ten minutes: the message shows up
// when the fake clock has moved ten minutes, not before.
func ExampleClock_Advance() {
	t := &testing.T{} // in a test: the test's t
	ctx := context.Background()
	clock := queentest.NewClock(start)
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	_, err := b.ConfigureQueue(ctx, "reminders", queen.QueueConfig{DelayedProcessing: 10 * time.Minute})
	require.NoError(t, err)
	_, err = b.Queue("reminders").Push(ctx, map[string]any{"text": "stand up"})
	require.NoError(t, err)

	for _, d := range []time.Duration{9 * time.Minute, time.Minute} {
		clock.Advance(d)
		res, err := b.Pop(ctx, queen.PopRequest{Queue: "reminders"})
		require.NoError(t, err)
		fmt.Println(clock.Now().Format(time.TimeOnly), len(res.Messages), "message(s)")
	}
	// Output:
	// 09:09:00 0 message(s)
	// 09:10:00 1 message(s)
}

// Waiting for a consumer running in the background to finish what was
// pushed, before checking what it did.
func ExampleWaitDrained() {
	t := &testing.T{} // in a test: the test's t
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := queentest.NewBroker(t, nil)

	totals := make(chan float64, 10)
	worker := b.Queue("invoices").Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
		totals <- msg.Data["total"].(float64)
		return nil
	})
	require.NoError(t, worker.Start(ctx))
	_, err := b.Queue("invoices").Push(ctx, map[string]any{"total": 12.5}, map[string]any{"total": 30})
	require.NoError(t, err)

	queentest.WaitDrained(t, b, "invoices", "")
	fmt.Println(<-totals + <-totals)
	// Output: 42.5
}

// Checking what the code under test pushed.
func ExampleRequirePushed() {
	t := &testing.T{} // in a test: the test's t
	b := queentest.NewBroker(t, nil)

	// The code under test.
	welcome := func(ctx context.Context, b *queen.Broker, user string) error {
		_, err := b.Queue("emails").Partition(user).Push(ctx, map[string]any{"template": "welcome", "user": user})
		return err
	}
	require.NoError(t, welcome(context.Background(), b, "u-1"))

	msgs := queentest.RequirePushed(t, b, "emails", 1)
	fmt.Println(string(msgs[0].Payload))
	// Output: {"template":"welcome","user":"u-1"}
}

// Waiting until a consume loop has given up on a message, then reading
// the dead letter.
func ExampleWaitOutcome() {
	t := &testing.T{} // in a test: the test's t
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := queentest.NewBroker(t, nil)

	worker := b.Queue("payments").RetryPolicy(queen.NoRetry()).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			return errors.New("card declined")
		})
	require.NoError(t, worker.Start(ctx))
	_, err := b.Queue("payments").Push(ctx, map[string]any{"amount": 10})
	require.NoError(t, err)

	queentest.WaitOutcome(t, b, queen.OutcomeDeadLettered, 1)
	fmt.Println(b.Counters().Consumed[queen.OutcomeDeadLettered], "dead-lettered")
	// Output: 1 dead-lettered
}

// Reading the messages a consumer gave up on, with the errors that ended
// them.
func ExampleDeadLetters() {
	t := &testing.T{} // in a test: the test's t
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	_, err := b.Queue("payments").Push(ctx, map[string]any{"amount": 10}, map[string]any{"amount": 20})
	require.NoError(t, err)

	// The code under test gives up on both.
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "payments", Batch: 2})
	require.NoError(t, err)
	for _, m := range res.Messages {
		_, err := b.Ack(ctx, m, false, queen.AckOptions{Status: queen.AckDLQ, Error: "declined: " + string(m.Payload)})
		require.NoError(t, err)
	}

	for _, dl := range queentest.DeadLetters(t, b, "payments") {
		fmt.Println(dl.Error)
	}
	// Output:
	// declined: {"amount":10}
	// declined: {"amount":20}
}
