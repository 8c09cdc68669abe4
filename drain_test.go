package queen_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// An ack being written when the drain runs out of time lands,
// and its message never comes back; an accepted message whose ack was
// still queued then is not acked by the loop any more and does come back.
// The list is exactly what comes back.
func TestDrain_ListsExactlyWhatComesBack(t *testing.T) {
	t.Parallel()
	t.Run("accepted acks in flight and queued", func(t *testing.T) {
		t.Parallel()
		gate := newStatusGate(queen.AckCompleted)
		b, clock := clocked(t, &queen.Options{Observer: gate})
		pushTo(t, b, "dq", "p", numbered(4)...)
		abandoned, started := make(chan struct{}), make(chan struct{})
		var f faults
		col := newCollector()
		c := b.Queue("dq").Autopilot(false).Batch(4).Each().DrainTimeout(time.Millisecond).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				switch msg.Offset {
				case 1: // accepted while message 0's ack is being written
					f.check(await(gate.entered), "message 0's ack never written")
				case 2: // still running when the drain gives up
					close(started)
					<-ctx.Done()
					close(abandoned)
				}
				return nil
			}).OnSettled(col.add)
		go func() { <-abandoned; close(gate.release) }()
		require.NoError(t, c.Start(context.Background()))
		recv(t, started)

		err := c.Stop(context.Background())
		var de *queen.DrainError
		require.ErrorAs(t, err, &de)
		recv(t, c.Done())
		f.none(t)
		recv(t, gate.left)
		require.True(t, gate.held, "the ack of message 0 was held until the drain gave up")

		back := comeBack(t, b, clock.Advance, "dq")
		require.Equal(t, []int64{1, 2, 3}, offsets(back), "message 0's ack landed; 1's was never sent")
		require.Equal(t, sortedTxids(back), sortedTxids(de.Unsettled), "DrainError.Unsettled is exactly what came back")
		// Message 1 is reported once its lane ends, after the drain gave
		// up and message 2's handler returned: wait for the reports.
		byOffset := map[int64]queen.Settlement{}
		for byOffset[0].Message == nil || byOffset[1].Message == nil {
			s := recv(t, col.ch)
			byOffset[s.Message.Offset] = s
		}
		require.Equal(t, queen.OutcomeAccepted, byOffset[0].Outcome)
		require.Equal(t, queen.OutcomeDiscarded, byOffset[1].Outcome, "its ack was not sent after the drain gave up")
		require.True(t, byOffset[1].Handled)
		require.Empty(t, byOffset[1].Status)
	})
	t.Run("failure ack in flight", func(t *testing.T) {
		t.Parallel()
		gate := newStatusGate(queen.AckDLQ)
		b, clock := clocked(t, &queen.Options{Observer: gate})
		pushTo(t, b, "dq", "a", numbered(1)...)
		pushTo(t, b, "dq", "b", numbered(2)...)
		abandoned, started := make(chan struct{}), make(chan struct{})
		c := b.Queue("dq").Autopilot(false).Batch(3).Partitions(2).Each().Concurrency(2).DrainTimeout(time.Millisecond).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				if msg.Partition == "a" {
					return queen.Reject(errors.New("never"))
				}
				close(started)
				<-ctx.Done()
				close(abandoned)
				return nil
			})
		go func() { <-abandoned; close(gate.release) }()
		require.NoError(t, c.Start(context.Background()))
		recv(t, started)
		recv(t, gate.entered)

		err := c.Stop(context.Background())
		var de *queen.DrainError
		require.ErrorAs(t, err, &de)
		recv(t, c.Done())
		recv(t, gate.left)
		require.True(t, gate.held)

		back := comeBack(t, b, clock.Advance, "dq")
		require.Len(t, back, 2, "partition a's message was dead-lettered")
		for _, m := range back {
			require.Equal(t, "b", m.Partition)
		}
		require.Equal(t, sortedTxids(back), sortedTxids(de.Unsettled), "DrainError.Unsettled is exactly what came back")
	})
}

// A handler that settles its own messages (OnSuccess and OnError, with
// Each or ConsumeBatch) and returns after a drain gave up on the loop runs
// no callback: its messages are reported discarded, stay leased, and come
// back once the lease runs out.
func TestDrain_GivenUpLoopRunsNoLateCallback(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		batch bool
		err   error
	}{{false, nil}, {true, nil}, {false, errTest}, {true, errTest}} {
		t.Run(fmt.Sprintf("batch=%v,err=%v", c.batch, c.err), func(t *testing.T) {
			t.Parallel()
			b, clock := clocked(t, nil)
			pushTo(t, b, "q", "Default", numbered(1)...)
			started, release := make(chan struct{}), make(chan struct{})
			wait := func() error { close(started); <-release; return c.err }
			var callbacks atomic.Int32
			col := newCollector()
			qb := b.Queue("q").Autopilot(false).Batch(1).DrainTimeout(time.Millisecond)
			var cons *queen.Consumer
			if c.batch {
				cons = qb.ConsumeBatch(context.Background(), func(context.Context, []*queen.Message) error { return wait() })
			} else {
				cons = qb.Each().Consume(context.Background(), func(context.Context, *queen.Message) error { return wait() })
			}
			cons = cons.OnSuccess(func(ctx context.Context, msg *queen.Message) error {
				callbacks.Add(1)
				_, err := b.Ack(ctx, msg, true, queen.AckOptions{})
				return err
			}).OnError(func(ctx context.Context, msg *queen.Message, _ error) error {
				callbacks.Add(1)
				_, err := b.Ack(ctx, msg, false, queen.AckOptions{})
				return err
			}).OnSettled(col.add)
			require.NoError(t, cons.Start(context.Background()))
			recv(t, started)

			err := cons.Stop(context.Background())
			require.ErrorIs(t, err, queen.ErrDrainTimeout)
			close(release) // the handler returns after the drain gave up
			s := recv(t, col.ch)
			require.Equal(t, queen.OutcomeDiscarded, s.Outcome)
			require.True(t, s.Handled)
			require.Equal(t, c.err, s.Err)
			recv(t, cons.Done())
			require.Zero(t, callbacks.Load(), "a callback ran after the drain gave up")
			require.Zero(t, b.Counters().Acked[queen.AckCompleted]+b.Counters().Acked[queen.AckFailed])
			require.NotEmpty(t, cursorOf(t, b, "q", "Default", "").LeaseID, "left to its lease")

			clock.Advance(61 * time.Second)
			msgs, err := b.Queue("q").Wait(false).Pop(context.Background())
			require.NoError(t, err)
			require.Len(t, msgs, 1, "delivered again once the lease ran out")
		})
	}
}

// eventKey names a count kept by an eventLog.
type eventKey struct {
	kind    queen.EventKind
	queue   string
	group   string
	outcome queen.Outcome
	status  queen.AckStatus
}

// eventLog is an Observer summing the counts of consume and ack events.
type eventLog struct {
	mu sync.Mutex
	n  map[eventKey]int
}

func (l *eventLog) Observe(e queen.Event) {
	if e.Kind != queen.EventConsume && e.Kind != queen.EventAck {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[eventKey]int{}
	}
	l.n[eventKey{e.Kind, e.Queue, e.Group, e.Outcome, e.Status}] += e.Count
}

// consumed returns the sums of the consume events, by outcome.
func (l *eventLog) consumed() map[queen.Outcome]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[queen.Outcome]int{}
	for k, n := range l.n {
		if k.kind == queen.EventConsume {
			out[k.outcome] += n
		}
	}
	return out
}

// acks returns the sums of the ack events, by queue, group and status.
func (l *eventLog) acks() map[eventKey]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[eventKey]int{}
	for k, n := range l.n {
		if k.kind == queen.EventAck {
			out[k] += n
		}
	}
	return out
}

// TestConsume_RollingRestartsSpendNoRetries restarts a consumer seven
// times while its handler is busy with the same message; the handler
// answers each stop with an error. None of those deliveries may spend the
// retry budget or an attempt of the retry policy: the message must not be
// dead-lettered, and is handled afterwards.
func TestConsume_RollingRestartsSpendNoRetries(t *testing.T) {
	t.Parallel()
	const restarts = 7
	// Each way to stop starts a consumer built by build and returns what
	// stops it.
	stopped := func(t *testing.T, build func(ctx context.Context) *queen.Consumer) func() {
		c := build(context.Background())
		require.NoError(t, c.Start(context.Background()))
		return func() { require.NoError(t, c.Stop(context.Background())); recv(t, c.Done()) }
	}
	cancelled := func(t *testing.T, build func(ctx context.Context) *queen.Consumer) func() {
		ctx, cancel := context.WithCancel(context.Background())
		c := build(ctx)
		require.NoError(t, c.Start(ctx))
		return func() { cancel(); recv(t, c.Done()); require.NoError(t, c.Err()) }
	}
	parentCancelled := func(t *testing.T, build func(ctx context.Context) *queen.Consumer) func() {
		ctx, cancel := context.WithCancel(context.Background())
		c := build(ctx) // only Consume gets ctx
		require.NoError(t, c.Start(context.Background()))
		return func() { cancel(); recv(t, c.Done()); require.NoError(t, c.Err()) }
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, build func(ctx context.Context) *queen.Consumer) func()
		// ownCtx: the handler waits for the loop's ctx (the one given to
		// Consume, which the test cancels) instead of Stopping, and
		// returns its error, as a handler whose own calls use that ctx.
		ownCtx bool
		policy bool // a RetryPolicy instead of the queue's budget
		batch  bool // a batch handler
		manual bool // AutoAck(false) with an OnError that acks failed
	}{
		{name: "Stop, handler returns after Stopping", run: stopped},
		{name: "Stop, batch handler", run: stopped, batch: true},
		{name: "Stop, retry policy", run: stopped, policy: true},
		{name: "Stop, OnError is not called", run: stopped, manual: true},
		{name: "Start ctx cancelled, handler returns context.Canceled", run: cancelled},
		{name: "Consume ctx cancelled, handler returns that ctx's error", run: parentCancelled, ownCtx: true},
		{name: "Consume ctx cancelled, retry policy", run: parentCancelled, ownCtx: true, policy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var obs eventLog
			b := queentest.NewBroker(t, &queen.Options{Observer: &obs})
			configure(t, b, "q", 1) // one failure left in the budget
			pushTo(t, b, "q", "Default", `{"n":0}`)
			qb := b.Queue("q").Group("g").SubscriptionMode(queen.SubscriptionModeAll)
			if tc.policy {
				qb = qb.RetryPolicy(queen.FixedRetry(2, 0))
			}
			col := newCollector()
			var onErrorCalls int
			var mu sync.Mutex
			for i := range restarts {
				started := make(chan struct{})
				build := func(ctx context.Context) *queen.Consumer {
					wait := func(hctx context.Context) error {
						close(started)
						if tc.ownCtx {
							<-ctx.Done()
							return fmt.Errorf("charge card: %w", ctx.Err())
						}
						<-queen.Stopping(hctx)
						return fmt.Errorf("charge card: %w", context.Canceled)
					}
					var c *queen.Consumer
					switch {
					case tc.batch:
						c = qb.ConsumeBatch(ctx, func(hctx context.Context, msgs []*queen.Message) error { return wait(hctx) })
					case tc.manual:
						c = qb.AutoAck(false).Each().Consume(ctx, func(hctx context.Context, msg *queen.Message) error { return wait(hctx) }).
							OnError(func(ctx context.Context, msg *queen.Message, err error) error {
								mu.Lock()
								onErrorCalls++
								mu.Unlock()
								_, aerr := b.Ack(ctx, msg, false, queen.AckOptions{Error: err.Error()})
								return aerr
							})
					default:
						c = qb.Each().Consume(ctx, func(hctx context.Context, msg *queen.Message) error { return wait(hctx) })
					}
					return c.OnSettled(col.add)
				}
				stop := tc.run(t, build)
				recv(t, started)
				stop()
				s := recv(t, col.ch)
				require.Equal(t, queen.OutcomeReleased, s.Outcome, "restart %d", i)
				require.True(t, s.Handled)
				require.Equal(t, queen.AckRetry, s.Status)
				require.ErrorIs(t, s.Err, context.Canceled)
				require.NoError(t, s.AckErr)
				c := cursorOf(t, b, "q", "Default", "g")
				require.Zero(t, c.Retries, "restart %d spent the budget", i)
				require.Empty(t, c.LeaseID, "given back at once, not left to its lease")
			}
			mu.Lock()
			require.Zero(t, onErrorCalls, "a stop is not a failure")
			mu.Unlock()

			// Afterwards: one genuine failure is still a failure, and
			// leaves an attempt of the policy (or the budget) for the next.
			var attempts []int
			err := qb.Each().Limit(2).Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				attempts = append(attempts, msg.DeliveryAttempt)
				if len(attempts) == 1 {
					return errors.New("card declined")
				}
				return nil
			}).OnSettled(col.add).Execute(context.Background())
			require.NoError(t, err)
			require.Equal(t, []int{restarts + 1, restarts + 2}, attempts)
			require.Equal(t, queen.OutcomeRetried, recv(t, col.ch).Outcome)
			require.Equal(t, queen.OutcomeAccepted, recv(t, col.ch).Outcome)

			dl, err := b.DeadLetters(context.Background(), queen.LetterFilter{Queue: "q"})
			require.NoError(t, err)
			require.Empty(t, dl.Letters)
			require.EqualValues(t, 1, cursorOf(t, b, "q", "Default", "g").Offset)
			cnt := b.Counters()
			require.EqualValues(t, restarts, cnt.Consumed[queen.OutcomeReleased])
			require.EqualValues(t, 1, cnt.Consumed[queen.OutcomeRetried])
			require.EqualValues(t, 1, cnt.Consumed[queen.OutcomeAccepted])
			require.Equal(t, map[queen.Outcome]int{queen.OutcomeReleased: restarts, queen.OutcomeRetried: 1, queen.OutcomeAccepted: 1}, obs.consumed())
			if !tc.policy {
				require.EqualValues(t, 1, cnt.Acked[queen.AckFailed])
			}
		})
	}
}

// TestConsume_ForeignCancellationIsAFailure: an error wrapping
// context.Canceled or DeadlineExceeded from a context other than the
// loop's, while the loop runs, is a genuine failure.
func TestConsume_ForeignCancellationIsAFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		result func(ctx context.Context) error
	}{
		{name: "deadline of the handler's own call", result: func(ctx context.Context) error {
			cctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
			defer cancel()
			<-cctx.Done()
			return fmt.Errorf("GET /stock: %w", cctx.Err())
		}},
		{name: "a cancelled request", result: func(ctx context.Context) error {
			return fmt.Errorf("upstream: %w", context.Canceled)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := queentest.NewBroker(t, nil)
			configure(t, b, "q", 3)
			pushTo(t, b, "q", "Default", `{"n":0}`)
			col := newCollector()
			err := b.Queue("q").Each().Limit(1).Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				return tc.result(ctx)
			}).OnSettled(col.add).Execute(context.Background())
			require.NoError(t, err)
			s := recv(t, col.ch)
			require.Equal(t, queen.OutcomeRetried, s.Outcome)
			require.Equal(t, queen.AckFailed, s.Status)
			require.Equal(t, 1, cursorOf(t, b, "q", "Default", "").Retries)
		})
	}
}

func TestConsume_ClosedBroker(t *testing.T) {
	t.Parallel()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	nop := func(ctx context.Context, msg *queen.Message) error { return nil }
	require.ErrorIs(t, b.Queue("q").Consume(context.Background(), nop).Start(context.Background()), queen.ErrClosed)
	require.ErrorIs(t, b.Queue("q").Consume(context.Background(), nop).Execute(context.Background()), queen.ErrClosed)
}
