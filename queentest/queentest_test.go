package queentest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// within bounds, in real time, a wait the fake clock should end at once.
const within = 5 * time.Second

// fakeTB records what a helper reports, so a test can check that it fails
// when it should. Fatalf ends the goroutine, as testing.T's does.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	fatals   []string
	errors   []string
	cleanups []func()
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

// cleanup runs the registered cleanups, last first.
func (f *fakeTB) cleanup() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.cleanups = nil
}

// run calls fn with f on its own goroutine (Fatalf ends it) and returns
// the fatal failure it reported, "" if none.
func (f *fakeTB) run(fn func(tb testing.TB)) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.fatals, "\n")
}

func push(t *testing.T, b *queen.Broker, queue, partition string, payloads ...string) {
	t.Helper()
	items := make([]queen.PushItem, len(payloads))
	for i, p := range payloads {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(p)}
	}
	res, err := b.Push(context.Background(), items)
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
}

func TestClock_MovesAndSignals(t *testing.T) {
	start := itest.Epoch()
	c := queentest.NewClock(start)
	require.Equal(t, start, c.Now())

	ch := c.Changed()
	require.Equal(t, ch, c.Changed(), "the same channel until the clock moves")
	select {
	case <-ch:
		t.Fatal("Changed fired before the clock moved")
	default:
	}
	c.Advance(time.Minute)
	require.Equal(t, start.Add(time.Minute), c.Now())
	recvWithin(t, ch)
	next := c.Changed()
	select {
	case <-next:
		t.Fatal("the next Changed channel is already closed")
	default:
	}

	c.Set(start.Add(-time.Hour))
	require.Equal(t, start.Add(-time.Hour), c.Now(), "Set moves back too")
	recvWithin(t, next)

	c.Advance(-time.Minute)
	require.Equal(t, start.Add(-time.Hour-time.Minute), c.Now())
}

func recvWithin(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatal("not signalled")
	}
}

// wakeWithin bounds, in real time, how long a waiting pop may take to wake
// once the fake clock passed its deadline. Without the clock's signal the
// broker would look at the clock again only after a second.
const wakeWithin = 800 * time.Millisecond

// popAfterAdvance parks a waiting pop on queue, moves clock by d, and
// returns what the pop got. The pop's own Timeout (20 s) is far beyond
// wakeWithin: only the clock's signal can end it in time.
func popAfterAdvance(t *testing.T, b *queen.Broker, clock *queentest.Clock, queue string, d time.Duration) *queen.PopResult {
	t.Helper()
	got := make(chan *queen.PopResult, 1)
	errs := make(chan error, 1)
	go func() {
		res, err := b.Pop(context.Background(), queen.PopRequest{Queue: queue, Wait: true, Timeout: 20 * time.Second})
		if err != nil {
			errs <- err
			return
		}
		got <- res
	}()
	itest.AwaitWaiting(t, b, 1)
	clock.Advance(d)
	select {
	case res := <-got:
		return res
	case err := <-errs:
		t.Fatalf("pop: %v", err)
	case <-time.After(wakeWithin):
		t.Fatalf("the waiting pop did not wake within %s when the clock moved %s", wakeWithin, d)
	}
	return nil
}

// The clock's signal wakes a pop parked on a leased partition when the
// lease runs out, on a partition held back by a retry delay when the delay
// passes, and on a delayed message when it comes due.
func TestClock_WakesWaitingPops(t *testing.T) {
	ctx := context.Background()
	t.Run("lease expiry", func(t *testing.T) {
		clock := itest.NewClock()
		b := queentest.NewBroker(t, &queen.Options{Clock: clock})
		push(t, b, "q", "", `{"n":1}`)
		first, err := b.Pop(ctx, queen.PopRequest{Queue: "q", Lease: 30 * time.Second})
		require.NoError(t, err)
		require.Len(t, first.Messages, 1)

		res := popAfterAdvance(t, b, clock, "q", 30*time.Second)
		require.Len(t, res.Messages, 1)
		require.Equal(t, 2, res.Messages[0].DeliveryAttempt)
	})
	t.Run("retry delay", func(t *testing.T) {
		clock := itest.NewClock()
		b := queentest.NewBroker(t, &queen.Options{Clock: clock})
		push(t, b, "q", "", `{"n":1}`)
		first, err := b.Pop(ctx, queen.PopRequest{Queue: "q"})
		require.NoError(t, err)
		require.Len(t, first.Messages, 1)
		_, err = b.Ack(ctx, first.Messages[0], false, queen.AckOptions{Status: queen.AckRetry, Delay: time.Minute})
		require.NoError(t, err)

		res := popAfterAdvance(t, b, clock, "q", time.Minute)
		require.Len(t, res.Messages, 1)
		require.Equal(t, first.Messages[0].TransactionID, res.Messages[0].TransactionID)
	})
	t.Run("delayed processing", func(t *testing.T) {
		clock := itest.NewClock()
		b := queentest.NewBroker(t, &queen.Options{Clock: clock})
		_, err := b.ConfigureQueue(ctx, "q", queen.QueueConfig{DelayedProcessing: time.Hour})
		require.NoError(t, err)
		push(t, b, "q", "", `{"n":1}`)

		res := popAfterAdvance(t, b, clock, "q", time.Hour)
		require.Len(t, res.Messages, 1)
	})
}

// A consumer whose handler is still running when the test ends holds the
// cleanup up for DrainTimeout (2 s), not the broker's 20 s default, and
// the drain's failure is reported; the broker is closed afterwards.
func TestNewBroker_CleanupDrainsShortlyAndReports(t *testing.T) {
	f := &fakeTB{}
	var b *queen.Broker
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	require.Empty(t, f.run(func(tb testing.TB) { b = queentest.NewBroker(tb, nil) }))
	c := b.Queue("q").Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
		close(started)
		<-release // stuck, even through the drain
		return nil
	})
	require.NoError(t, c.Start(context.Background()))
	push(t, b, "q", "", `{}`)
	<-started

	t0 := time.Now()
	f.cleanup()
	took := time.Since(t0)
	require.GreaterOrEqual(t, took, queentest.DrainTimeout)
	require.Less(t, took, queentest.DrainTimeout+3*time.Second, "not the 20 s default")
	require.Len(t, f.errors, 1)
	require.Contains(t, f.errors[0], "queentest: close:")
	require.Contains(t, f.errors[0], "drain")
	require.ErrorIs(t, b.Ping(context.Background()), queen.ErrClosed)
}

// Options are kept, InMemory forced, and an explicit DrainTimeout wins.
func TestNewBroker_KeepsOptions(t *testing.T) {
	f := &fakeTB{}
	var b *queen.Broker
	clock := itest.NewClock()
	f.run(func(tb testing.TB) {
		b = queentest.NewBroker(tb, &queen.Options{Clock: clock, DrainTimeout: 50 * time.Millisecond})
	})
	require.Equal(t, clock.Now(), b.Now())
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	c := b.Queue("q").Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
		close(started)
		<-release
		return nil
	})
	require.NoError(t, c.Start(context.Background()))
	push(t, b, "q", "", `{}`)
	<-started
	t0 := time.Now()
	f.cleanup()
	require.Less(t, time.Since(t0), queentest.DrainTimeout, "the test's own DrainTimeout")
	require.Len(t, f.errors, 1)

	bad := &fakeTB{}
	msg := bad.run(func(tb testing.TB) {
		queentest.NewBroker(tb, &queen.Options{EncryptionKey: []byte("short")})
	})
	require.Contains(t, msg, "queentest: open:")
	require.Contains(t, msg, "EncryptionKey")
}

func TestWaitDrained(t *testing.T) {
	defer queentest.SetWaitTimeout(100 * time.Millisecond)()
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)

	// Nothing pushed: drained, for queue mode and for a named group.
	queentest.WaitDrained(t, b, "none", "")
	queentest.WaitDrained(t, b, "none", "g")

	push(t, b, "q", "p1", `{"n":1}`, `{"n":2}`)
	push(t, b, "q", "p2", `{"n":3}`)
	f := &fakeTB{}
	msg := f.run(func(tb testing.TB) { queentest.WaitDrained(tb, b, "q", "") })
	require.Contains(t, msg, `WaitDrained("q", ""): not drained after 100ms`)
	require.Contains(t, msg, "has not joined the queue, which holds 3 message(s)")

	res, err := b.Pop(ctx, queen.PopRequest{Queue: "q", Batch: 10, Partitions: 2})
	require.NoError(t, err)
	require.Len(t, res.Messages, 3)
	f = &fakeTB{}
	msg = f.run(func(tb testing.TB) { queentest.WaitDrained(tb, b, "q", "") })
	require.Contains(t, msg, "3 message(s) not settled, 3 of them leased")

	// Settled by a goroutine while WaitDrained polls.
	go func() {
		for _, m := range res.Messages {
			_, _ = b.Ack(ctx, m, true, queen.AckOptions{})
		}
	}()
	f = &fakeTB{}
	restore := queentest.SetWaitTimeout(within)
	require.Empty(t, f.run(func(tb testing.TB) { queentest.WaitDrained(tb, b, "q", "") }))
	restore()

	// A named group is its own: it has read nothing yet.
	audit, err := b.Pop(ctx, queen.PopRequest{Queue: "q", Group: "audit", SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(t, err)
	require.Len(t, audit.Messages, 1)
	f = &fakeTB{}
	msg = f.run(func(tb testing.TB) { queentest.WaitDrained(tb, b, "q", "audit") })
	require.Contains(t, msg, "3 message(s) not settled, 1 of them leased")
	// Given back: none leased, still not drained.
	_, err = b.Ack(ctx, audit.Messages[0], false, queen.AckOptions{Status: queen.AckRetry})
	require.NoError(t, err)
	f = &fakeTB{}
	msg = f.run(func(tb testing.TB) { queentest.WaitDrained(tb, b, "q", "audit") })
	require.Contains(t, msg, "3 message(s) not settled, 0 of them leased")

	b2 := queentest.NewBroker(t, nil)
	require.NoError(t, b2.Close())
	f = &fakeTB{}
	msg = f.run(func(tb testing.TB) { queentest.WaitDrained(tb, b2, "q", "") })
	require.Contains(t, msg, "closed")
}

func TestWaitOutcome(t *testing.T) {
	defer queentest.SetWaitTimeout(100 * time.Millisecond)()
	b := queentest.NewBroker(t, nil)
	f := &fakeTB{}
	msg := f.run(func(tb testing.TB) { queentest.WaitOutcome(tb, b, queen.OutcomeRetried, 1) })
	require.Contains(t, msg, `WaitOutcome("retried", 1): 0 after 100ms`)

	push(t, b, "q", "", `{}`)
	err := b.Queue("q").Limit(1).Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error { return nil }).
		Execute(context.Background())
	require.NoError(t, err)
	queentest.WaitOutcome(t, b, queen.OutcomeAccepted, 1)
	queentest.WaitOutcome(t, b, queen.OutcomeRetried, 0)
}

func TestRequirePushed(t *testing.T) {
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	require.Empty(t, queentest.RequirePushed(t, b, "none", 0))

	f := &fakeTB{}
	msg := f.run(func(tb testing.TB) { queentest.RequirePushed(tb, b, "none", 1) })
	require.Contains(t, msg, `RequirePushed("none"): no such queue, want 1 message(s)`)
	f = &fakeTB{}
	msg = f.run(func(tb testing.TB) { queentest.RequirePushed(tb, b, "none", -1) })
	require.Contains(t, msg, "must not be negative")

	// More than a page on one partition, pushed in order, plus another
	// partition read after it by name; consumed messages still count.
	const many = 1005
	payloads := make([]string, many)
	for i := range payloads {
		payloads[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	push(t, b, "q", "b", payloads...)
	push(t, b, "q", "a", `{"first":true}`)
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "q", Partition: "a"})
	require.NoError(t, err)
	_, err = b.Ack(ctx, res.Messages[0], true, queen.AckOptions{})
	require.NoError(t, err)

	recs := queentest.RequirePushed(t, b, "q", many+1)
	require.JSONEq(t, `{"first":true}`, string(recs[0].Payload))
	for i, r := range recs[1:] {
		require.EqualValues(t, i, r.Offset)
		require.JSONEq(t, payloads[i], string(r.Payload))
	}

	f = &fakeTB{}
	msg = f.run(func(tb testing.TB) { queentest.RequirePushed(tb, b, "q", 2) })
	require.Contains(t, msg, `RequirePushed("q"): 1006 message(s), want 2:`)
	require.Contains(t, msg, `{"first":true}`)
	require.Contains(t, msg, "and 1001 more")
}

func TestDeadLetters(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	require.Empty(t, queentest.DeadLetters(t, b, "q"))

	push(t, b, "q", "", `{"n":1}`, `{"n":2}`, `{"n":3}`)
	push(t, b, "other", "", `{"n":4}`)
	for _, queue := range []string{"q", "q", "q", "other"} {
		res, err := b.Pop(ctx, queen.PopRequest{Queue: queue})
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		_, err = b.Ack(ctx, res.Messages[0], false, queen.AckOptions{Status: queen.AckDLQ, Error: "bad " + string(res.Messages[0].Payload)})
		require.NoError(t, err)
		clock.Advance(time.Second)
	}
	var got []string
	for _, dl := range queentest.DeadLetters(t, b, "q") {
		got = append(got, dl.Error)
	}
	require.Equal(t, []string{`bad {"n":1}`, `bad {"n":2}`, `bad {"n":3}`}, got, "oldest failure first")
	require.Len(t, queentest.DeadLetters(t, b, ""), 4, "every queue")

	require.NoError(t, b.Close())
	f := &fakeTB{}
	msg := f.run(func(tb testing.TB) { queentest.DeadLetters(tb, b, "q") })
	require.Contains(t, msg, `DeadLetters("q"):`)
	require.True(t, errors.Is(b.Ping(ctx), queen.ErrClosed))
}
