package mailer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"example.com/apptest/mailer"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// start is where the fake clocks start: a fixed day, so no test depends
// on the day it runs.
var start = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

// setup opens a broker on a fake clock and a context ended when the test
// ends (before the broker closes).
func setup(t *testing.T) (*queen.Broker, *queentest.Clock, context.Context) {
	clock := queentest.NewClock(start)
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return b, clock, ctx
}

// scriptedSender fails the sends it has errors for, in order, and records
// every send with the fake clock's time.
type scriptedSender struct {
	clock *queentest.Clock
	mu    sync.Mutex
	fails []error
	log   []string
}

func (s *scriptedSender) Send(ctx context.Context, e mailer.Email) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.clock.Now().Format(time.TimeOnly)
	if len(s.fails) > 0 {
		err := s.fails[0]
		s.fails = s.fails[1:]
		s.log = append(s.log, fmt.Sprintf("%s %s: %v", at, e.To, err))
		return err
	}
	s.log = append(s.log, fmt.Sprintf("%s %s: sent", at, e.To))
	return nil
}

func (s *scriptedSender) sends() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// hungSender never finishes a send until the test ends: an SMTP
// connection that hangs.
type hungSender struct {
	started chan struct{}
	release chan struct{}
}

func (h *hungSender) Send(ctx context.Context, e mailer.Email) error {
	close(h.started)
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return errors.New("connection reset")
}

func TestEnqueue_OncePerID(t *testing.T) {
	b, _, ctx := setup(t)
	svc := mailer.New(b, nil)
	require.NoError(t, svc.Enqueue(ctx, "welcome-1", mailer.Email{To: "ada@example.com", Subject: "Welcome"}))
	require.NoError(t, svc.Enqueue(ctx, "welcome-1", mailer.Email{To: "ada@example.com", Subject: "Welcome"}))

	msgs := queentest.RequirePushed(t, b, mailer.Queue, 1)
	require.JSONEq(t, `{"to":"ada@example.com","subject":"Welcome"}`, string(msgs[0].Payload))
	require.Equal(t, "welcome-1", msgs[0].TransactionID)
}

// A worker hangs on an e-mail; when its lease runs out another worker
// takes the e-mail over and sends it. The clock jumps the 30 s.
func TestWorker_HungWorkerLosesTheEmailWhenItsLeaseEnds(t *testing.T) {
	b, clock, ctx := setup(t)
	hung := &hungSender{started: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(hung.release) })
	_, err := mailer.New(b, hung).Start(ctx)
	require.NoError(t, err)

	healthy := &scriptedSender{clock: clock}
	svc := mailer.New(b, healthy)
	require.NoError(t, svc.Enqueue(ctx, "welcome-1", mailer.Email{To: "ada@example.com"}))
	select {
	case <-hung.started:
	case <-time.After(queentest.WaitTimeout):
		t.Fatal("the first worker never took the e-mail")
	}
	_, err = svc.Start(ctx) // a second worker, whose sends work
	require.NoError(t, err)

	clock.Advance(mailer.Lease - time.Second)
	clock.Advance(time.Second) // the hung worker's lease runs out
	queentest.WaitDrained(t, b, mailer.Queue, "")
	require.Equal(t, []string{"09:00:30 ada@example.com: sent"}, healthy.sends())
}

// A failed send is sent again a minute later. WaitOutcome makes sure the
// failure was given back (the minute then counts from 09:00:00) before
// the clock jumps.
func TestWorker_FailedSendIsRetriedAMinuteLater(t *testing.T) {
	b, clock, ctx := setup(t)
	sender := &scriptedSender{clock: clock, fails: []error{errors.New("421 try again later")}}
	svc := mailer.New(b, sender)
	_, err := svc.Start(ctx)
	require.NoError(t, err)
	require.NoError(t, svc.Enqueue(ctx, "welcome-1", mailer.Email{To: "ada@example.com"}))

	queentest.WaitOutcome(t, b, queen.OutcomeRetried, 1)
	clock.Advance(mailer.RetryDelay - time.Second)
	clock.Advance(time.Second)
	queentest.WaitDrained(t, b, mailer.Queue, "")
	require.Equal(t, []string{
		"09:00:00 ada@example.com: 421 try again later",
		"09:01:00 ada@example.com: sent",
	}, sender.sends())
}

// After Attempts failed sends the e-mail is dead-lettered with the last
// error.
func TestWorker_GivesUpAfterAttempts(t *testing.T) {
	b, clock, ctx := setup(t)
	fails := make([]error, mailer.Attempts)
	for i := range fails {
		fails[i] = fmt.Errorf("550 mailbox unavailable (attempt %d)", i+1)
	}
	sender := &scriptedSender{clock: clock, fails: fails}
	svc := mailer.New(b, sender)
	_, err := svc.Start(ctx)
	require.NoError(t, err)
	require.NoError(t, svc.Enqueue(ctx, "welcome-1", mailer.Email{To: "ada@example.com"}))

	for i := 1; i < mailer.Attempts; i++ {
		queentest.WaitOutcome(t, b, queen.OutcomeRetried, int64(i))
		clock.Advance(mailer.RetryDelay)
	}
	queentest.WaitOutcome(t, b, queen.OutcomeDeadLettered, 1)
	queentest.WaitDrained(t, b, mailer.Queue, "")

	require.Len(t, sender.sends(), mailer.Attempts)
	dead := queentest.DeadLetters(t, b, mailer.Queue)
	require.Len(t, dead, 1)
	require.Equal(t, "550 mailbox unavailable (attempt 5)", dead[0].Error)
	require.Equal(t, "welcome-1", dead[0].TransactionID)
}
