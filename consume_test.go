package queen_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// Helpers shared by the consumer tests.

// within bounds every wait of these tests; reaching it is a failure.
const within = 10 * time.Second

// recv waits for a value on ch.
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("timed out waiting on channel")
	}
	var zero T
	return zero
}

// pushTo pushes one message per payload to queue/partition.
func pushTo(t testing.TB, b *queen.Broker, queue, partition string, payloads ...string) []queen.PushResult {
	t.Helper()
	items := make([]queen.PushItem, len(payloads))
	for i, p := range payloads {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(p)}
	}
	res, err := b.Push(context.Background(), items)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, queen.PushQueued, r.Status)
	}
	return res
}

// numbered returns n payloads {"n":0}, {"n":1}, ...
func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	return out
}

// configure creates queue with no retry delay and the given retry limit.
func configure(t testing.TB, b *queen.Broker, queue string, retryLimit int) {
	t.Helper()
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit, cfg.RetryDelay = retryLimit, 0
	_, err := b.ConfigureQueue(context.Background(), queue, cfg)
	require.NoError(t, err)
}

// cursorOf returns group's cursor in queue/partition ("" group: queue mode).
func cursorOf(t testing.TB, b *queen.Broker, queue, partition, group string) queen.CursorStats {
	t.Helper()
	if group == "" {
		group = queen.QueueModeGroup
	}
	st, err := b.QueueStats(context.Background(), queue)
	require.NoError(t, err)
	for _, p := range st.Partitions {
		if p.Name != partition {
			continue
		}
		for _, c := range p.Cursors {
			if c.Group == group {
				return c
			}
		}
	}
	t.Fatalf("no cursor of %q in %s/%s", group, queue, partition)
	return queen.CursorStats{}
}

// collector gathers settlements.
type collector struct {
	mu  sync.Mutex
	all []queen.Settlement
	ch  chan queen.Settlement
}

func newCollector() *collector { return &collector{ch: make(chan queen.Settlement, 10000)} }

func (c *collector) add(s queen.Settlement) {
	c.mu.Lock()
	c.all = append(c.all, s)
	c.mu.Unlock()
	c.ch <- s
}

func (c *collector) list() []queen.Settlement {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]queen.Settlement(nil), c.all...)
}

// outcomesOf lists the outcomes of handled settlements, in order.
func (c *collector) outcomesOf() []queen.Outcome {
	var out []queen.Outcome
	for _, s := range c.list() {
		if s.Handled {
			out = append(out, s.Outcome)
		}
	}
	return out
}

// clocked opens an in-memory broker on a fake clock.
func clocked(t testing.TB, opts *queen.Options) (*queen.Broker, *queentest.Clock) {
	clock := itest.NewClock()
	o := queen.Options{}
	if opts != nil {
		o = *opts
	}
	o.Clock = clock
	return queentest.NewBroker(t, &o), clock
}

// kick makes the broker look at its timers now, after the fake clock
// moved (a pop of an unknown queue fires them and changes nothing).
func kick(t testing.TB, b *queen.Broker) {
	t.Helper()
	_, err := b.Pop(context.Background(), queen.PopRequest{Queue: "kick-timers"})
	require.NoError(t, err)
}

// faults collects failed checks made on goroutines other than the test's
// (handlers, observers), where require must not be called.
type faults struct {
	mu   sync.Mutex
	msgs []string
}

func (f *faults) check(ok bool, format string, args ...any) bool {
	if !ok {
		f.mu.Lock()
		f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
		f.mu.Unlock()
	}
	return ok
}

func (f *faults) none(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Empty(t, f.msgs)
}

// await waits for a value on ch from a handler; false if it never comes.
func await[T any](ch <-chan T) bool {
	select {
	case <-ch:
		return true
	case <-time.After(within):
		return false
	}
}

// dataN reads the "n" field of a message's data.
func dataN(m *queen.Message) int { return int(m.Data["n"].(float64)) }

func TestConsume_AcksOnNilAndNacksOnError(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		configure(t, b, "orders", 3)
		pushTo(t, b, "orders", "Default", numbered(3)...)
		var seen []string
		col := newCollector()
		err := b.Queue("orders").Autopilot(false).Batch(3).Each().Limit(4).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				seen = append(seen, fmt.Sprintf("%d/%d", dataN(msg), msg.DeliveryAttempt))
				if dataN(msg) == 1 && msg.DeliveryAttempt == 1 {
					return errors.New("warehouse said no")
				}
				return nil
			}).OnSettled(col.add).Execute(context.Background())
		require.NoError(t, err)
		// 1 fails, 2 is skipped behind it, both come back in order.
		require.Equal(t, []string{"0/1", "1/1", "1/2", "2/2"}, seen)
		c := cursorOf(t, b, "orders", "Default", "")
		require.EqualValues(t, 3, c.Offset)
		require.Zero(t, c.Retries, "the completed batch resets the budget")
		require.Equal(t, []queen.Outcome{queen.OutcomeAccepted, queen.OutcomeRetried, queen.OutcomeAccepted, queen.OutcomeAccepted}, col.outcomesOf())
		require.EqualValues(t, 1, b.Counters().Acked[queen.AckFailed])
	})
}

func TestConsume_PanicIsAFailure(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	configure(t, b, "jobs", 3)
	pushTo(t, b, "jobs", "Default", `{"n":0}`)
	col := newCollector()
	calls := 0
	err := b.Queue("jobs").Each().Limit(2).Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
		calls++
		if calls == 1 {
			panic("boom")
		}
		return nil
	}).OnSettled(col.add).Execute(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, calls)
	first := col.list()[0]
	var pe *queen.PanicError
	require.ErrorAs(t, first.Err, &pe)
	require.Equal(t, "boom", pe.Value)
	require.Equal(t, queen.AckFailed, first.Status)
	require.EqualValues(t, 1, b.Counters().Acked[queen.AckFailed])
}

func TestConsume_EachFailureSkipsOnlyItsPartition(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	configure(t, b, "q", 3)
	pushTo(t, b, "q", "A", numbered(3)...)
	pushTo(t, b, "q", "B", numbered(3)...)
	var order []string
	err := b.Queue("q").Autopilot(false).Batch(6).Partitions(2).Each().Limit(7).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			order = append(order, fmt.Sprintf("%s%d", msg.Partition, dataN(msg)))
			if msg.Partition == "A" && dataN(msg) == 0 && msg.DeliveryAttempt == 1 {
				return errors.New("transient")
			}
			return nil
		}).Execute(context.Background())
	require.NoError(t, err)
	// The first pop holds A0..A2 and B0..B2 (partitions in either order):
	// A0 fails, A1 and A2 are skipped, B is handled; then A comes back in
	// order.
	var a, bs []string
	lastB, secondA := -1, -1
	for i, m := range order {
		if m[0] == 'A' {
			a = append(a, m)
			if len(a) == 2 {
				secondA = i
			}
		} else {
			bs = append(bs, m)
			lastB = i
		}
	}
	require.Equal(t, []string{"A0", "A0", "A1", "A2"}, a)
	require.Equal(t, []string{"B0", "B1", "B2"}, bs)
	require.Less(t, lastB, secondA, "B is handled before A comes back")
}

func TestConsume_AutoAckOff(t *testing.T) {
	t.Parallel()
	t.Run("the handler acks, the loop does not ack again", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, nil)
		pushTo(t, b, "q", "Default", numbered(2)...)
		col := newCollector()
		err := b.Queue("q").Group("g").SubscriptionMode(queen.SubscriptionModeAll).AutoAck(false).Each().Limit(2).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				_, err := b.Ack(ctx, msg, true, queen.AckOptions{ConsumerGroup: "g"})
				return err
			}).OnSettled(col.add).Execute(context.Background())
		require.NoError(t, err)
		require.EqualValues(t, 2, b.Counters().Acked[queen.AckCompleted])
		require.Equal(t, []queen.Outcome{queen.OutcomeHandled, queen.OutcomeHandled}, col.outcomesOf())
		require.EqualValues(t, 2, cursorOf(t, b, "q", "Default", "g").Offset)
	})
	t.Run("a failing handler is nacked for what it had not acked", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, nil)
		configure(t, b, "q", 3)
		pushTo(t, b, "q", "Default", numbered(3)...)
		var f faults
		err := b.Queue("q").AutoAck(false).Autopilot(false).Batch(3).Limit(3).
			ConsumeBatch(context.Background(), func(ctx context.Context, msgs []*queen.Message) error {
				_, err := b.Ack(ctx, msgs[0], true, queen.AckOptions{})
				f.check(err == nil, "ack: %v", err)
				return errors.New("the second one broke")
			}).Execute(context.Background())
		require.NoError(t, err)
		f.none(t)
		c := cursorOf(t, b, "q", "Default", "")
		require.EqualValues(t, 1, c.Offset, "the handler's own ack stands")
		require.Equal(t, 1, c.Retries, "one failed ack for the rest")
		require.Empty(t, c.LeaseID, "the partition is free at once")
		require.EqualValues(t, 1, b.Counters().Acked[queen.AckFailed])
	})
}

func TestConsume_OnSuccessAndOnError(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushTo(t, b, "emails", "Default", `{"to":"a@example.com"}`, `{"to":"nobody"}`)
	errPermanent := errors.New("no such address")
	var succeeded, failed []string
	err := b.Queue("emails").Group("mailer").SubscriptionMode(queen.SubscriptionModeAll).Each().Limit(2).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			if msg.Data["to"] == "nobody" {
				return errPermanent
			}
			return nil
		}).
		OnSuccess(func(ctx context.Context, msg *queen.Message) error {
			succeeded = append(succeeded, msg.Data["to"].(string))
			_, err := b.Ack(ctx, msg, true, queen.AckOptions{ConsumerGroup: "mailer"})
			return err
		}).
		OnError(func(ctx context.Context, msg *queen.Message, err error) error {
			failed = append(failed, msg.Data["to"].(string))
			_, aerr := b.Transaction().Ack(msg, queen.AckDLQ, queen.AckOptions{ConsumerGroup: "mailer", Error: err.Error()}).Commit(ctx)
			return aerr
		}).
		Execute(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"a@example.com"}, succeeded)
	require.Equal(t, []string{"nobody"}, failed)
	dl, err := b.DeadLetters(context.Background(), queen.LetterFilter{Queue: "emails"})
	require.NoError(t, err)
	require.Len(t, dl.Letters, 1)
	require.Equal(t, "no such address", dl.Letters[0].Error)
}

func TestConsume_ConcurrencyRunsHandlersOnDistinctPartitions(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	const parts, per, n = 8, 3, 4
	for p := range parts {
		pushTo(t, b, "q", fmt.Sprintf("p%d", p), numbered(per)...)
	}
	var (
		mu      sync.Mutex
		busy    = map[string]bool{}
		running int
		peak    int
		handled int
		last    = map[string]int{}
	)
	allIn := make(chan struct{})
	var once sync.Once
	var f faults
	err := b.Queue("q").Batch(parts*per).Partitions(parts).Concurrency(n).Each().Limit(parts*per).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			mu.Lock()
			f.check(!busy[msg.Partition], "two handlers on %s", msg.Partition)
			if prev, ok := last[msg.Partition]; ok {
				f.check(prev+1 == dataN(msg), "order in %s: %d after %d", msg.Partition, dataN(msg), prev)
			}
			last[msg.Partition] = dataN(msg)
			busy[msg.Partition] = true
			running++
			peak = max(peak, running)
			if running == n {
				once.Do(func() { close(allIn) })
			}
			mu.Unlock()
			<-allIn // the first n handlers wait until n run at once
			mu.Lock()
			busy[msg.Partition] = false
			running--
			handled++
			mu.Unlock()
			return nil
		}).Execute(context.Background())
	require.NoError(t, err)
	f.none(t)
	require.Equal(t, n, peak)
	require.Equal(t, parts*per, handled)
}

func TestConsume_RenewLeaseKeepsLongHandlersLeased(t *testing.T) {
	t.Parallel()
	for _, renew := range []bool{true, false} {
		t.Run(fmt.Sprintf("renew=%v", renew), func(t *testing.T) {
			t.Parallel()
			renewed := make(chan struct{}, 100)
			b, clock := clocked(t, &queen.Options{Observer: queen.ObserverFunc(func(e queen.Event) {
				if e.Kind == queen.EventLeaseRenewed {
					select {
					case renewed <- struct{}{}:
					default:
					}
				}
			})})
			pushTo(t, b, "long", "Default", `{"n":0}`)
			col := newCollector()
			qb := b.Queue("long").LeaseSeconds(10).Each().Limit(1)
			if renew {
				qb = qb.RenewLease(true, 1)
			}
			var f faults
			// renewedSince waits for a renewal made after this call: the
			// second event after emptying the channel was computed after it.
			renewedSince := func() {
				for len(renewed) > 0 {
					<-renewed
				}
				first := await(renewed)
				f.check(first && await(renewed), "no renewal")
			}
			err := qb.Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				for range 3 { // 24 s of work on a 10 s lease
					if renew {
						renewedSince()
					}
					clock.Advance(8 * time.Second)
				}
				if renew {
					renewedSince()
				}
				return nil
			}).OnSettled(col.add).Execute(context.Background())
			require.NoError(t, err)
			f.none(t)
			s := col.list()[0]
			if renew {
				require.NoError(t, s.AckErr)
				require.Equal(t, queen.OutcomeAccepted, s.Outcome)
				require.EqualValues(t, 1, cursorOf(t, b, "long", "Default", "").Offset)
			} else {
				require.ErrorIs(t, s.AckErr, queen.ErrLeaseExpired)
				require.Zero(t, cursorOf(t, b, "long", "Default", "").Offset)
			}
		})
	}
}

func TestConsume_LimitAndIdleStopTheLoop(t *testing.T) {
	t.Parallel()
	t.Run("limit", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, nil)
		pushTo(t, b, "q", "Default", numbered(10)...)
		var n atomic.Int32
		err := b.Queue("q").Batch(10).Limit(3).Each().Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			n.Add(1)
			return nil
		}).Execute(context.Background())
		require.NoError(t, err)
		require.EqualValues(t, 3, n.Load())
		c := cursorOf(t, b, "q", "Default", "")
		require.EqualValues(t, 3, c.Offset)
		require.Empty(t, c.LeaseID, "nothing beyond the limit was taken")
	})
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, nil)
		pushTo(t, b, "q", "Default", numbered(2)...)
		var n atomic.Int32
		err := b.Queue("q").IdleMillis(50).Each().Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			n.Add(1)
			return nil
		}).Execute(context.Background())
		require.NoError(t, err)
		require.EqualValues(t, 2, n.Load())
	})
}

func TestConsume_CancelGivesBackWhatWasNotStarted(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushTo(t, b, "q", "A", numbered(3)...)
	pushTo(t, b, "q", "B", numbered(3)...)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan string, 1)
	col := newCollector()
	c := b.Queue("q").Autopilot(false).Batch(6).Partitions(2).Each().
		Consume(ctx, func(hctx context.Context, msg *queen.Message) error {
			started <- msg.Partition
			<-queen.Stopping(hctx) // the handler sees the stop and finishes
			return nil
		}).OnSettled(col.add)
	errc := make(chan error, 1)
	go func() { errc <- c.Execute(ctx) }()
	first := recv(t, started)
	cancel()
	require.NoError(t, recv(t, errc))

	// The first message (of A or B) completed; the two behind it and the
	// other partition went back without spending a retry.
	released := 0
	for _, s := range col.list() {
		if s.Outcome == queen.OutcomeReleased {
			released++
			require.False(t, s.Handled)
		}
	}
	require.Equal(t, 5, released, "%+v popped %d", col.list(), b.Counters().Popped)
	require.Zero(t, b.Counters().Acked[queen.AckFailed])
	for _, p := range []string{"A", "B"} {
		cs := cursorOf(t, b, "q", p, "")
		require.Empty(t, cs.LeaseID, "%s is free at once, not after its lease", p)
		require.Zero(t, cs.Retries)
	}
	require.EqualValues(t, 1, cursorOf(t, b, "q", first, "").Offset)
	msgs, err := b.Queue("q").Wait(false).Batch(6).Partitions(2).Pop(context.Background())
	require.NoError(t, err)
	require.Len(t, msgs, 5)
}

func TestConsume_DrainTimeoutLeavesRunningHandlers(t *testing.T) {
	t.Parallel()
	b, clock := clocked(t, nil)
	pushTo(t, b, "q", "Default", numbered(2)...)
	started, release := make(chan struct{}), make(chan struct{})
	col := newCollector()
	c := b.Queue("q").Autopilot(false).Batch(2).Each().DrainTimeout(time.Millisecond).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			close(started)
			<-release
			return nil
		}).OnSettled(col.add)
	require.NoError(t, c.Start(context.Background()))
	recv(t, started)

	err := c.Stop(context.Background())
	var de *queen.DrainError
	require.ErrorAs(t, err, &de)
	require.ErrorIs(t, err, queen.ErrDrainTimeout)
	require.Len(t, de.Unsettled, 2, "the running message and the one behind it")
	require.Contains(t, err.Error(), de.Unsettled[0].TransactionID)
	recv(t, c.Done())
	require.ErrorIs(t, c.Err(), queen.ErrDrainTimeout)

	close(release) // the late outcome is discarded
	s := recv(t, col.ch)
	require.Equal(t, queen.OutcomeDiscarded, s.Outcome)
	require.Empty(t, s.Status)
	require.Zero(t, b.Counters().Acked[queen.AckCompleted])
	cs := cursorOf(t, b, "q", "Default", "")
	require.Zero(t, cs.Offset)
	require.NotEmpty(t, cs.LeaseID, "left to its lease")

	clock.Advance(61 * time.Second) // the lease runs out: delivered again
	msgs, err := b.Queue("q").Wait(false).Batch(2).Pop(context.Background())
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.Equal(t, 2, msgs[0].DeliveryAttempt)
}

func TestBroker_CloseDrainsEveryConsumer(t *testing.T) {
	t.Parallel()
	t.Run("handlers that finish are settled", func(t *testing.T) {
		t.Parallel()
		b, err := queen.Open("", &queen.Options{InMemory: true})
		require.NoError(t, err)
		var started sync.WaitGroup
		var consumers []*queen.Consumer
		for i := range 3 {
			q := fmt.Sprintf("q%d", i)
			pushTo(t, b, q, "Default", numbered(2)...)
			started.Add(1)
			c := b.Queue(q).Autopilot(false).Batch(2).Each().Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				if dataN(msg) == 0 {
					started.Done()
				}
				<-queen.Stopping(ctx)
				return nil
			})
			require.NoError(t, c.Start(context.Background()))
			consumers = append(consumers, c)
		}
		started.Wait()
		require.NoError(t, b.Close())
		for _, c := range consumers {
			recv(t, c.Done())
			require.NoError(t, c.Err())
		}
	})
	t.Run("one deadline for all", func(t *testing.T) {
		t.Parallel()
		b, err := queen.Open("", &queen.Options{InMemory: true, DrainTimeout: 5 * time.Millisecond})
		require.NoError(t, err)
		release := make(chan struct{})
		defer close(release)
		var started sync.WaitGroup
		for i := range 3 {
			q := fmt.Sprintf("q%d", i)
			pushTo(t, b, q, "Default", `{"n":0}`)
			started.Add(1)
			c := b.Queue(q).Each().Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				started.Done()
				<-release
				return nil
			})
			require.NoError(t, c.Start(context.Background()))
		}
		started.Wait()
		err = b.Close()
		require.ErrorIs(t, err, queen.ErrDrainTimeout)
		for i := range 3 {
			require.Contains(t, err.Error(), fmt.Sprintf(`queue "q%d"`, i))
		}
	})
	t.Run("each loop within its own DrainTimeout", func(t *testing.T) {
		t.Parallel()
		// Close's own bound is far off: the loop's 50 ms is what ends it.
		b, err := queen.Open("", &queen.Options{InMemory: true, DrainTimeout: time.Hour})
		require.NoError(t, err)
		release := make(chan struct{})
		defer close(release)
		pushTo(t, b, "q", "Default", `{"n":0}`)
		started := make(chan struct{})
		c := b.Queue("q").Each().DrainTimeout(50*time.Millisecond).Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			close(started)
			<-release
			return nil
		})
		require.NoError(t, c.Start(context.Background()))
		recv(t, started)
		closed := make(chan error, 1)
		go func() { closed <- b.Close() }()
		err = recv(t, closed) // within `within`, not the hour
		var de *queen.DrainError
		require.ErrorAs(t, err, &de, "Close reports what the loop left unsettled, as Stop does")
		require.Len(t, de.Unsettled, 1)
		recv(t, c.Done())
		require.ErrorIs(t, c.Err(), queen.ErrDrainTimeout)
	})
}

func TestConsume_Refusals(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	nop := func(ctx context.Context, msg *queen.Message) error { return nil }
	err := b.Queue("q").Group("g").CommitOnDelivery(true).Consume(context.Background(), nop).Execute(context.Background())
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	require.ErrorContains(t, err, "CommitOnDelivery")

	err = b.Queue("q").Group("g").Conflation(true).CommitOnDelivery(true).Consume(context.Background(), nop).Execute(context.Background())
	require.ErrorIs(t, err, queen.ErrInvalidArgument)

	err = b.Queue("q").Consume(context.Background(), nil).Execute(context.Background())
	require.ErrorIs(t, err, queen.ErrInvalidArgument)

	c := b.Queue("q").Wait(false).IdleMillis(1).Consume(context.Background(), nop)
	require.NoError(t, c.Execute(context.Background()))
	require.ErrorIs(t, c.Execute(context.Background()), queen.ErrConsumerStarted)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, b.Queue("q").Consume(ctx, nop).Execute(context.Background()), context.Canceled)
}

func TestConsume_ObserverSeesOutcomesAndInFlight(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var f faults
	byOutcome := map[queen.Outcome]int{}
	inflight, peak := 0, 0
	b := queentest.NewBroker(t, &queen.Options{Observer: queen.ObserverFunc(func(e queen.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case queen.EventConsume:
			f.check(e.Queue == "q" && e.Group == "g", "event of %s/%s", e.Queue, e.Group)
			byOutcome[e.Outcome] += e.Count
		case queen.EventInFlight:
			inflight += e.Count
			peak = max(peak, inflight)
		}
	})})
	pushTo(t, b, "q", "Default", `{"do":"ok"}`, `{"do":"park"}`, `{"do":"reject"}`, `{"do":"wait"}`)
	err := b.Queue("q").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Each().Limit(5).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			switch msg.Data["do"] {
			case "park":
				return queen.Park(errors.New("unknown schema"))
			case "reject":
				return queen.Reject(errors.New("no such SKU"))
			case "wait":
				if msg.DeliveryAttempt == 1 {
					return queen.InProgress(0)
				}
			}
			return nil
		}).Execute(context.Background())
	require.NoError(t, err)
	f.none(t)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[queen.Outcome]int{
		queen.OutcomeAccepted: 2, queen.OutcomeParked: 1, queen.OutcomeDeadLettered: 1, queen.OutcomeInProgress: 1,
	}, byOutcome)
	require.Zero(t, inflight)
	require.Equal(t, 1, peak)
	cnt := b.Counters()
	require.EqualValues(t, 2, cnt.Consumed[queen.OutcomeAccepted])
	require.EqualValues(t, 1, cnt.Consumed[queen.OutcomeParked])
	require.Zero(t, cnt.HandlersInFlight)
	require.EqualValues(t, 1, cnt.Parked)
	require.EqualValues(t, 1, cnt.DeadLettered)
}

func TestConsume_TypedHandlersAndCodecs(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	type order struct {
		ID    int     `json:"id"`
		Total float64 `json:"total"`
	}
	raw := `{ "id": 7,   "total": 12.50 }`
	pushTo(t, b, "orders", "Default", raw, `{"id":"not a number"}`, `{"id":8,"total":1}`)
	var got []order
	var payloads []string
	col := newCollector()
	err := b.Queue("orders").Each().Limit(3).Consume(context.Background(),
		queen.Typed(func(ctx context.Context, msg *queen.Message, o order) error {
			got = append(got, o)
			payloads = append(payloads, string(msg.Payload))
			return nil
		})).OnSettled(col.add).Execute(context.Background())
	require.NoError(t, err)
	require.Equal(t, []order{{7, 12.5}, {8, 1}}, got)
	require.Equal(t, raw, payloads[0], "payloads are delivered byte for byte")
	parked, err := b.ParkedMessages(context.Background(), queen.LetterFilter{Queue: "orders"})
	require.NoError(t, err)
	require.Len(t, parked.Letters, 1)
	require.Equal(t, `{"id":"not a number"}`, string(parked.Letters[0].Payload))
	require.Contains(t, parked.Letters[0].Error, "cannot decode payload")
	var de *queen.DecodeError
	require.ErrorAs(t, col.list()[1].Err, &de)

	t.Run("strict codec", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, nil)
		pushTo(t, b, "q", "Default", `{"id":1,"extra":true}`)
		called := false
		err := b.Queue("q").Each().Limit(1).Consume(context.Background(),
			queen.TypedWith(queen.JSONCodec{DisallowUnknownFields: true}, func(ctx context.Context, msg *queen.Message, o order) error {
				called = true
				return nil
			})).Execute(context.Background())
		require.NoError(t, err)
		require.False(t, called, "parked before the handler runs")
		require.EqualValues(t, 1, b.Counters().Parked)
	})
}

// TestConsume_ManyConsumersRandomOutcomes runs 4 consumers of one group,
// each with 4 handlers, over 50 partitions, with scripted random outcomes,
// and checks per-partition order, that nothing is completed twice, and
// that every message ends exactly where its outcomes say.
func TestConsume_ManyConsumersRandomOutcomes(t *testing.T) {
	t.Parallel()
	const (
		consumers, concurrency = 4, 4
		partitions, perPart    = 50, 8
		total                  = partitions * perPart
		maxAttempts            = 3
	)
	b := queentest.NewBroker(t, nil)
	rng := rand.New(rand.NewPCG(1, 2))

	type step int
	const (
		ok step = iota
		fail
		panics
		retry
		inProgress
		park
		reject
	)
	weights := []struct {
		s step
		w int
	}{{ok, 50}, {fail, 15}, {panics, 5}, {retry, 5}, {inProgress, 10}, {park, 7}, {reject, 8}}
	draw := func() step {
		n := rng.IntN(100)
		for _, w := range weights {
			if n < w.w {
				return w.s
			}
			n -= w.w
		}
		return ok
	}
	// A script lists the outcomes of successive handler calls; its end is
	// where the message must end up.
	type key struct {
		part string
		off  int64
	}
	scripts := map[key][]step{}
	want := map[key]queen.Outcome{}
	for p := range partitions {
		part := fmt.Sprintf("p%02d", p)
		pushTo(t, b, "tasks", part, numbered(perPart)...)
		for off := range int64(perPart) {
			var sc []step
			failures, waits := 0, 0
		script:
			for {
				s := draw()
				if s == inProgress && waits == 2 {
					continue
				}
				sc = append(sc, s)
				switch s {
				case ok:
					want[key{part, off}] = queen.OutcomeAccepted
					break script
				case park:
					want[key{part, off}] = queen.OutcomeParked
					break script
				case reject:
					want[key{part, off}] = queen.OutcomeDeadLettered
					break script
				case inProgress:
					waits++
				default:
					if failures++; failures == maxAttempts {
						want[key{part, off}] = queen.OutcomeDeadLettered
						break script
					}
				}
			}
			scripts[key{part, off}] = sc
		}
	}

	var (
		mu        sync.Mutex
		f         faults
		calls     = map[key]int{}
		finished  = map[key]bool{} // its last scripted outcome was returned
		busy      = map[string]bool{}
		completed = map[key]int{}
		settled   = map[key]queen.Outcome{}
	)
	allSettled := make(chan struct{})
	handler := func(ctx context.Context, msg *queen.Message) error {
		k := key{msg.Partition, msg.Offset}
		mu.Lock()
		i := calls[k]
		calls[k]++
		sc := scripts[k]
		f.check(i < len(sc), "%v called after its last outcome", k)
		f.check(!busy[k.part], "two handlers on %s", k.part)
		for off := range k.off {
			f.check(finished[key{k.part, off}], "%v handled before %s@%d finished", k, k.part, off)
		}
		if i >= len(sc) {
			mu.Unlock()
			return nil
		}
		busy[k.part] = true
		if i == len(sc)-1 {
			finished[k] = true
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			busy[k.part] = false
			mu.Unlock()
		}()
		switch sc[i] {
		case fail:
			return fmt.Errorf("attempt %d failed", i+1)
		case panics:
			panic("handler blew up")
		case retry:
			return queen.Retry(errors.New("try later"))
		case inProgress:
			return queen.InProgress(0)
		case park:
			return queen.Park(errors.New("unreadable"))
		case reject:
			return queen.Reject(errors.New("never works"))
		}
		return nil
	}
	onSettled := func(s queen.Settlement) {
		k := key{s.Message.Partition, s.Message.Offset}
		switch s.Outcome {
		case queen.OutcomeAccepted, queen.OutcomeDeadLettered, queen.OutcomeParked:
		default:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		f.check(s.AckErr == nil, "ack of %v refused: %v", k, s.AckErr)
		if s.Outcome == queen.OutcomeAccepted {
			completed[k]++
		}
		_, again := settled[k]
		f.check(!again, "%v settled twice", k)
		settled[k] = s.Outcome
		if len(settled) == total {
			close(allSettled)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, consumers)
	for range consumers {
		c := b.Queue("tasks").Group("workers").SubscriptionMode(queen.SubscriptionModeAll).
			Batch(16).Concurrency(concurrency).RetryPolicy(queen.FixedRetry(maxAttempts, 0)).Each().
			Consume(ctx, handler).OnSettled(onSettled)
		go func() { errs <- c.Execute(ctx) }()
	}
	recv(t, allSettled)
	cancel()
	for range consumers {
		require.NoError(t, recv(t, errs))
	}
	f.none(t)

	mu.Lock()
	defer mu.Unlock()
	wantDLQ, wantParked := map[key]bool{}, map[key]bool{}
	for k, o := range want {
		require.Equal(t, o, settled[k], "%v after %v", k, scripts[k])
		require.Equal(t, len(scripts[k]), calls[k], "%v calls", k)
		if o == queen.OutcomeAccepted {
			require.Equal(t, 1, completed[k], "%v completions", k)
		} else {
			require.Zero(t, completed[k], "%v completions", k)
		}
		switch o {
		case queen.OutcomeDeadLettered:
			wantDLQ[k] = true
		case queen.OutcomeParked:
			wantParked[k] = true
		}
	}
	lettersOf := func(list func(context.Context, queen.LetterFilter) (*queen.LetterPage, error)) map[key]bool {
		page, err := list(context.Background(), queen.LetterFilter{Queue: "tasks", ConsumerGroup: "workers", Limit: 1000})
		require.NoError(t, err)
		got := map[key]bool{}
		for _, l := range page.Letters {
			got[key{l.Partition, l.Offset}] = true
		}
		return got
	}
	require.Equal(t, wantDLQ, lettersOf(b.DeadLetters))
	require.Equal(t, wantParked, lettersOf(b.ParkedMessages))
	groups, err := b.ListGroups(context.Background(), queen.GroupFilter{Group: "workers"})
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Zero(t, groups[0].Lag)
	require.Zero(t, b.Counters().Acked[queen.AckFailed], "the policy never spends the queue's budget")
}

// One ctx is enough for a loop's life, given in either place or both: its
// end stops the loop gracefully, and its values reach the handlers.
func TestConsume_OneContextGovernsTheLoop(t *testing.T) {
	t.Parallel()
	type key struct{}
	for name, place := range map[string]struct{ consume, execute bool }{
		"same ctx twice":  {true, true},
		"Consume's alone": {true, false},
		"Execute's alone": {false, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := queentest.NewBroker(t, nil)
			pushTo(t, b, "q", "Default", numbered(3)...)
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "tenant-7"))
			defer cancel()
			consumeCtx, executeCtx := context.Background(), context.Background()
			if place.consume {
				consumeCtx = ctx
			}
			if place.execute {
				executeCtx = ctx
			}
			started := make(chan struct{}, 1)
			type seen struct {
				value   any
				stopped bool
				ended   error
			}
			got := make(chan seen, 3)
			col := newCollector()
			c := b.Queue("q").Batch(3).Each().Consume(consumeCtx, func(hctx context.Context, msg *queen.Message) error {
				started <- struct{}{}
				_, stopped := <-queen.Stopping(hctx)
				got <- seen{hctx.Value(key{}), !stopped, hctx.Err()}
				return nil
			}).OnSettled(col.add)
			errc := make(chan error, 1)
			go func() { errc <- c.Execute(executeCtx) }()
			recv(t, started)
			cancel()
			require.NoError(t, recv(t, errc), "a stop by ctx is a clean end")
			s := recv(t, got)
			require.Equal(t, "tenant-7", s.value, "the handler's ctx carries ctx's values")
			require.True(t, s.stopped, "the handler learnt of the stop")
			require.NoError(t, s.ended, "the stop does not cancel a running handler")
			require.Empty(t, got, "one message handled")
			outcomes := map[queen.Outcome]int{}
			for _, x := range col.list() {
				outcomes[x.Outcome]++
			}
			require.Equal(t, map[queen.Outcome]int{queen.OutcomeAccepted: 1, queen.OutcomeReleased: 2}, outcomes, "the rest was given back")
			require.EqualValues(t, 1, cursorOf(t, b, "q", "Default", "").Offset)
		})
	}
}

// A handler that ends the loop's ctx (as a signal would) sees no further
// message started, even before the ctx's hook has stopped the loop.
func TestConsume_CancelInHandlerStartsNoMoreMessages(t *testing.T) {
	t.Parallel()
	for _, inConsume := range []bool{true, false} {
		t.Run(fmt.Sprintf("ctx in Consume %v", inConsume), func(t *testing.T) {
			t.Parallel()
			for range 10 { // the hook runs on its own goroutine: give it chances to lose
				b := queentest.NewBroker(t, nil)
				pushTo(t, b, "q", "Default", numbered(3)...)
				ctx, cancel := context.WithCancel(context.Background())
				consumeCtx, executeCtx := ctx, context.Background()
				if !inConsume {
					consumeCtx, executeCtx = context.Background(), ctx
				}
				var handled []int
				err := b.Queue("q").Batch(3).Each().Consume(consumeCtx, func(_ context.Context, msg *queen.Message) error {
					handled = append(handled, dataN(msg))
					if dataN(msg) == 1 {
						cancel()
					}
					return nil
				}).Execute(executeCtx)
				require.NoError(t, err)
				require.Equal(t, []int{0, 1}, handled)
				require.EqualValues(t, 2, cursorOf(t, b, "q", "Default", "").Offset, "2 went back")
				require.Empty(t, cursorOf(t, b, "q", "Default", "").LeaseID)
				cancel()
			}
		})
	}
}
