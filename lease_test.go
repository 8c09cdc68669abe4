package queen_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"log/slog"
	"strings"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestLease_PopCarriesEveryField(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		res, err := b.Push(bg, []queen.PushItem{{Queue: "orders", Partition: "p7", TransactionID: "order-1", TraceID: "trace-1", Payload: []byte(`{"orderId":1}`)}})
		require.NoError(t, err)
		pr := pop(t, b, queen.PopRequest{Queue: "orders", Group: "billing", SubscriptionMode: queen.SubscriptionModeAll})
		require.Len(t, pr.Messages, 1)
		m := pr.Messages[0]
		require.Equal(t, res[0].MessageID, m.ID)
		require.Equal(t, "order-1", m.TransactionID)
		require.Equal(t, "orders", m.Queue)
		require.Equal(t, "p7", m.Partition)
		require.Equal(t, res[0].PartitionID, m.PartitionID)
		require.Equal(t, "billing", m.ConsumerGroup)
		require.Equal(t, pr.LeaseID, m.LeaseID)
		require.NotEmpty(t, m.LeaseID)
		require.Equal(t, int64(0), m.Offset)
		require.Equal(t, 1, m.DeliveryAttempt)
		require.Equal(t, "trace-1", m.TraceID)
		require.False(t, m.CreatedAt.IsZero())
		require.Equal(t, "p7", pr.Partition)
		require.Equal(t, 1, pr.PartitionsClaimed)
		data, err := m.Decode()
		require.NoError(t, err)
		require.Equal(t, float64(1), data["orderId"])
	})
}

func TestLease_PartitionIsExclusivePerGroup(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "q", "", 4)
		first := pop(t, b, queen.PopRequest{Queue: "q", Batch: 2})
		require.Equal(t, []int64{0, 1}, offsets(first.Messages))
		// The partition is leased: another worker of queue mode gets nothing,
		second := pop(t, b, queen.PopRequest{Queue: "q", Batch: 2})
		require.Empty(t, second.Messages)
		// also by naming it,
		second = pop(t, b, queen.PopRequest{Queue: "q", Partition: queen.DefaultPartition, Batch: 2})
		require.Empty(t, second.Messages)
		// but another group is not held back.
		other := pop(t, b, queen.PopRequest{Queue: "q", Group: "g2", SubscriptionMode: queen.SubscriptionModeAll, Batch: 10})
		require.Equal(t, []int64{0, 1, 2, 3}, offsets(other.Messages))
		ackAll(t, b, first.Messages, queen.AckCompleted)
		next := pop(t, b, queen.PopRequest{Queue: "q", Batch: 10})
		require.Equal(t, []int64{2, 3}, offsets(next.Messages))
	})
}

func TestLease_ExpiryRedeliversWithNextAttempt(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "exp", "", 3)
		first := pop(t, b, queen.PopRequest{Queue: "exp", Batch: 2, Lease: 10 * time.Second})
		require.Equal(t, []int{1, 1}, attemptsOf(first.Messages))
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "exp"}).Messages)

		clock.Advance(11 * time.Second)
		again := pop(t, b, queen.PopRequest{Queue: "exp", Batch: 3})
		require.Equal(t, []int64{0, 1, 2}, offsets(again.Messages))
		require.Equal(t, []int{2, 2, 1}, attemptsOf(again.Messages), "redelivered ones count up, the new one starts at 1")
		require.NotEqual(t, first.LeaseID, again.LeaseID)

		// Expiry never spends the retry budget: checked before any ack, since
		// a completed batch restores the budget and would hide a spent unit.
		st, err := b.QueueStats(bg, "exp")
		require.NoError(t, err)
		require.Equal(t, 0, st.Partitions[0].Cursors[0].Retries, "the expiry spent retry budget")

		// The old lease is dead: a fenced ack with it is refused and changes nothing.
		res := ack(t, b, ackItems(first.Messages, queen.AckCompleted)...)
		require.False(t, res[0].Success)
		require.ErrorIs(t, res[0].Err, queen.ErrLeaseExpired)
		ackAll(t, b, again.Messages, queen.AckCompleted)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "exp"}).Messages)
	})
}

func TestLease_RenewExtendsAndExpiredCannotRenew(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "r", "a", 1)
		pushN(t, b, "r", "b", 1)
		pr := pop(t, b, queen.PopRequest{Queue: "r", Partitions: 2, Batch: 10, Lease: 10 * time.Second})
		require.Len(t, pr.Messages, 2)
		require.Equal(t, 2, pr.PartitionsClaimed)

		clock.Advance(8 * time.Second)
		ren, err := b.RenewLease(bg, pr.LeaseID, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, clock.Now().Add(30*time.Second), ren.ExpiresAt)
		require.Equal(t, 2, ren.Partitions, "one lease, both partitions renewed")
		clock.Advance(25 * time.Second) // past the original expiry, within the renewal
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "r", Partitions: 2, Batch: 10}).Messages, "both partitions stay leased")

		clock.Advance(10 * time.Second)
		_, err = b.RenewLease(bg, pr.LeaseID, time.Minute)
		require.ErrorIs(t, err, queen.ErrLeaseExpired)
		_, err = b.RenewLease(bg, pr.LeaseID, time.Minute)
		require.ErrorIs(t, err, queen.ErrLeaseExpired, "still expired, not unknown, once the broker has dropped it")
		again := pop(t, b, queen.PopRequest{Queue: "r", Partitions: 2, Batch: 10})
		require.Len(t, again.Messages, 2)
		require.Equal(t, []int{2, 2}, attemptsOf(again.Messages))
	})
}

func TestLease_MultiPartitionPopSharesOneLease(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		for _, p := range []string{"a", "b", "c", "d"} {
			pushN(t, b, "mp", p, 3)
		}
		pr := pop(t, b, queen.PopRequest{Queue: "mp", Partitions: 3, Batch: 7})
		require.Len(t, pr.Messages, 7, "batch is the total over the partitions")
		require.Equal(t, 3, pr.PartitionsClaimed)
		parts := map[string]bool{}
		for _, m := range pr.Messages {
			require.Equal(t, pr.LeaseID, m.LeaseID)
			parts[m.Partition] = true
		}
		require.Len(t, parts, 3)
		// Acking one partition's messages releases only that partition.
		var first []*queen.Message
		for _, m := range pr.Messages {
			if m.Partition == pr.Messages[0].Partition {
				first = append(first, m)
			}
		}
		res := ackAll(t, b, first, queen.AckCompleted)
		require.True(t, res[len(res)-1].LeaseReleased)
		_, err := b.RenewLease(bg, pr.LeaseID, time.Minute)
		require.NoError(t, err, "the lease still holds the other partitions")
	})
}

func TestLease_WaitingPopWakesOnPush(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		got := make(chan *queen.PopResult, 1)
		go func() {
			res, err := b.Pop(bg, queen.PopRequest{Queue: "later", Wait: true, Timeout: 50 * time.Second})
			if err == nil {
				got <- res
			}
			close(got)
		}()
		itest.AwaitWaiting(t, b, 1)
		pushN(t, b, "later", "", 1)
		select {
		case res := <-got:
			require.NotNil(t, res)
			require.Len(t, res.Messages, 1)
		case <-time.After(10 * time.Second):
			t.Fatal("a push did not wake the waiting pop")
		}
	})
}

func TestLease_WaitEndsWithContextAndClose(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	ctx, cancel := context.WithCancel(bg)
	errc := make(chan error, 1)
	go func() {
		_, err := b.Pop(ctx, queen.PopRequest{Queue: "q", Wait: true, Timeout: 60 * time.Second})
		errc <- err
	}()
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)

	b2, err := queen.Open("", &queen.Options{InMemory: true})
	require.NoError(t, err)
	pushN(t, b2, "q", "", 1)
	_ = pop(t, b2, queen.PopRequest{Queue: "q"}) // leased: the next pop waits
	go func() {
		_, err := b2.Pop(bg, queen.PopRequest{Queue: "q", Wait: true, Timeout: 60 * time.Second})
		errc <- err
	}()
	itest.AwaitWaiting(t, b2, 1)
	require.NoError(t, b2.Close())
	require.ErrorIs(t, <-errc, queen.ErrClosed)
	_, err = b2.Push(bg, []queen.PushItem{{Queue: "q"}})
	require.ErrorIs(t, err, queen.ErrClosed)
	require.NoError(t, b2.Close(), "Close is idempotent")
}

func TestLease_WaitTimesOutEmpty(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	res, err := b.Pop(bg, queen.PopRequest{Queue: "none", Wait: true, Timeout: 30 * time.Millisecond})
	require.NoError(t, err)
	require.Empty(t, res.Messages)
}

func TestLease_CommitOnDelivery(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "metrics", "", 5)
		pr := pop(t, b, queen.PopRequest{Queue: "metrics", Group: "live", SubscriptionMode: queen.SubscriptionModeAll, CommitOnDelivery: true, Batch: 3})
		require.Len(t, pr.Messages, 3)
		require.Empty(t, pr.LeaseID)
		for _, m := range pr.Messages {
			require.Empty(t, m.LeaseID)
		}
		// No lease: the rest is available at once, and the first three never come back.
		rest := pop(t, b, queen.PopRequest{Queue: "metrics", Group: "live", CommitOnDelivery: true, Batch: 10})
		require.Equal(t, []int64{3, 4}, offsets(rest.Messages))
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "metrics", Group: "live", Batch: 10}).Messages)
	})
}

func TestLease_DelayedProcessingAndWindowBuffer(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.DelayedProcessing = 5 * time.Second
		_, err := b.ConfigureQueue(bg, "delayed", cfg)
		require.NoError(t, err)
		pushN(t, b, "delayed", "", 1)
		clock.Advance(3 * time.Second)
		pushN(t, b, "delayed", "", 1)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "delayed", Batch: 10}).Messages)
		clock.Advance(2 * time.Second)
		require.Equal(t, []int64{0}, offsets(pop(t, b, queen.PopRequest{Queue: "delayed", Batch: 10, CommitOnDelivery: true}).Messages), "only the first is visible")
		clock.Advance(3 * time.Second)
		require.Equal(t, []int64{1}, offsets(pop(t, b, queen.PopRequest{Queue: "delayed", Batch: 10, CommitOnDelivery: true}).Messages))

		cfg = queen.DefaultQueueConfig()
		cfg.WindowBuffer = 10 * time.Second
		_, err = b.ConfigureQueue(bg, "window", cfg)
		require.NoError(t, err)
		pushN(t, b, "window", "", 2)
		clock.Advance(6 * time.Second)
		pushN(t, b, "window", "", 1)
		clock.Advance(6 * time.Second)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "window", Batch: 10}).Messages, "the partition is not quiet yet")
		clock.Advance(5 * time.Second)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "window", Batch: 10}).Messages, 3, "everything accumulated comes together")
	})
}

func TestLease_DiscoveryPopByLabels(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	for name, prio := range map[string]int{"low": 1, "high": 9} {
		cfg := queen.DefaultQueueConfig()
		cfg.Namespace, cfg.Task, cfg.Priority = "billing", "invoices", prio
		_, err := b.ConfigureQueue(bg, name, cfg)
		require.NoError(t, err)
		pushN(t, b, name, "", 1)
	}
	pushN(t, b, "billing.other", "", 1) // labels from the dotted name: billing / other
	res := pop(t, b, queen.PopRequest{Namespace: "billing", Task: "invoices"})
	require.Equal(t, "high", res.Queue, "higher priority first")
	require.Equal(t, "high", res.Messages[0].Queue)
	res = pop(t, b, queen.PopRequest{Namespace: "billing", Task: "invoices"})
	require.Equal(t, "low", res.Queue)
	require.Empty(t, pop(t, b, queen.PopRequest{Namespace: "billing", Task: "invoices"}).Messages)
	res = pop(t, b, queen.PopRequest{Task: "other"})
	require.Equal(t, "billing.other", res.Queue)
	_, err := b.Pop(bg, queen.PopRequest{})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

func TestLease_AutopilotSizesBatchAndKeepsExplicitValues(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "auto", "a", 150)
	pushN(t, b, "auto", "b", 150)
	res := pop(t, b, queen.PopRequest{Queue: "auto", Autopilot: true})
	require.GreaterOrEqual(t, len(res.Messages), 100, "autopilot takes at least 100")
	ackAll(t, b, res.Messages, queen.AckCompleted)
	res = pop(t, b, queen.PopRequest{Queue: "auto", Autopilot: true, Batch: 5})
	require.Len(t, res.Messages, 5, "an explicit batch is never overridden")
}

func TestLease_PopValidation(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	for name, req := range map[string]queen.PopRequest{
		"negative batch":         {Queue: "q", Batch: -1},
		"negative partitions":    {Queue: "q", Partitions: -1},
		"negative timeout":       {Queue: "q", Timeout: -1},
		"batch above the cap":    {Queue: "q", Batch: 1 << 30},
		"bad mode":               {Queue: "q", Group: "g", SubscriptionMode: "sometimes"},
		"conflation, queue mode": {Queue: "q", Conflation: true},
		"conflation + autoAck":   {Queue: "q", Group: "g", Conflation: true, CommitOnDelivery: true},
	} {
		_, err := b.Pop(bg, req)
		require.ErrorIs(t, err, queen.ErrInvalidArgument, name)
	}
	// At the cap, a batch takes what there is.
	pushN(t, b, "q", "", 3)
	require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", Batch: queen.MaxBatch}).Messages, 3)
}

func TestLease_PopOfUnknownPartitionTakesNothingElse(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "q", "real", 1)
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q", Partition: "missing"}).Messages)
	got := make(chan int, 1)
	go func() {
		res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Partition: "later", Wait: true, Timeout: 20 * time.Second})
		if err != nil {
			got <- -1
			return
		}
		got <- len(res.Messages)
	}()
	itest.AwaitWaiting(t, b, 1)
	pushN(t, b, "q", "later", 1)
	require.Equal(t, 1, <-got, "a wait on a partition that does not exist yet ends when it gets a message")
	require.Len(t, pop(t, b, queen.PopRequest{Queue: "q"}).Messages, 1, "the other partition was never taken")
}

func TestLease_FakeClockWakesWaitingPop(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.RetryDelay = time.Hour
	_, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	pushN(t, b, "q", "", 1)
	pr := pop(t, b, queen.PopRequest{Queue: "q"})
	ackAll(t, b, pr.Messages, queen.AckFailed) // held back for an hour of fake time
	got := make(chan *queen.PopResult, 1)
	go func() {
		res, _ := b.Pop(bg, queen.PopRequest{Queue: "q", Wait: true, Timeout: 60 * time.Second})
		got <- res
	}()
	itest.AwaitWaiting(t, b, 1)
	clock.Advance(time.Hour)
	select {
	case res := <-got:
		require.Len(t, res.Messages, 1)
		require.Equal(t, 2, res.Messages[0].DeliveryAttempt)
	case <-time.After(30 * time.Second):
		t.Fatal("moving the fake clock did not wake the waiting pop")
	}
}

// A pop that commits on delivery counts delivery attempts like a leased
// pop: the rest of a batch that came back keeps its count after that pop
// took its head.
func TestLease_CommitOnDeliveryKeepsAttemptsOfTheRestOfABatch(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		for _, autoAck := range []bool{false, true} {
			q := "leased"
			if autoAck {
				q = "auto"
			}
			pushN(t, b, q, "", 2)
			first := pop(t, b, queen.PopRequest{Queue: q, Batch: 2})
			require.Equal(t, []int{1, 1}, attemptsOf(first.Messages))
			ack(t, b, ackItems(first.Messages[:1], queen.AckRetry)...)
			head := pop(t, b, queen.PopRequest{Queue: q, CommitOnDelivery: autoAck})
			require.Equal(t, []int64{0}, offsets(head.Messages))
			require.Equal(t, []int{2}, attemptsOf(head.Messages))
			if !autoAck {
				ackAll(t, b, head.Messages, queen.AckCompleted)
			}
			rest := pop(t, b, queen.PopRequest{Queue: q})
			require.Equal(t, []int64{1}, offsets(rest.Messages))
			require.Equal(t, []int{2}, attemptsOf(rest.Messages), "autoAck=%v", autoAck)
		}
	})
}

// Pops racing DeleteGroup (which rewrites cursors in place) read nothing
// of a cursor outside the broker's lock. The race detector sees such a
// read only when a DeleteGroup lands inside the pop's window, so many of
// both run at once; run under -race.
func TestLease_PopsRaceDeleteGroup(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	parts := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, p := range parts {
		pushN(t, b, "race", p, 20)
	}
	ctx, cancel := context.WithTimeout(bg, 2*time.Minute) // a hang guard only: the machine may be slow under -race
	defer cancel()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 16)
	run := func(fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := fn(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < 6; i++ {
		run(func() error {
			res, err := b.Pop(ctx, queen.PopRequest{Queue: "race", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 20, Partitions: 4})
			if err == nil && len(res.Messages) > 0 {
				_, err = b.AckBatch(ctx, ackItems(res.Messages, queen.AckCompleted))
			}
			return err
		})
	}
	for i := 0; i < 2; i++ {
		run(func() error {
			_, err := b.DeleteGroup(ctx, "g", "race", false)
			if errors.Is(err, queen.ErrGroupNotFound) { // before the first pop
				err = nil
			}
			return err
		})
	}
	for i := 0; i < 500; i++ {
		_, err := b.DeleteGroup(ctx, "g", "race", false)
		if !errors.Is(err, queen.ErrGroupNotFound) {
			require.NoError(t, err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err := b.QueueStats(bg, "race")
	require.NoError(t, err)
	require.LessOrEqual(t, st.Pending, st.Messages)
}

// Leases are counted in whole seconds by Queen: below 1 s a pop's lease or
// a queue's LeaseTime is refused; from 1 s on it is kept as given.
func TestLease_SubSecondLeaseIsRefused(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	for _, d := range []time.Duration{time.Nanosecond, time.Microsecond, 500 * time.Millisecond, time.Second - 1} {
		_, err := b.Pop(bg, queen.PopRequest{Queue: "q", Lease: d})
		require.ErrorIs(t, err, queen.ErrInvalidArgument, "%v", d)
		var ae *queen.ArgumentError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, "PopRequest.Lease", ae.Field)
		cfg := queen.DefaultQueueConfig()
		cfg.LeaseTime = d
		_, err = b.ConfigureQueue(bg, "q", cfg)
		require.ErrorAs(t, err, &ae, "%v", d)
		require.Equal(t, "QueueConfig.LeaseTime", ae.Field)
	}
	cfg := queen.DefaultQueueConfig()
	cfg.LeaseTime = 1500 * time.Millisecond
	info, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, info.Config.LeaseTime)
	pushN(t, b, "q", "", 1)
	first := pop(t, b, queen.PopRequest{Queue: "q"})
	require.Len(t, first.Messages, 1)
	clock.Advance(1499 * time.Millisecond)
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q"}).Messages, "still leased")
	clock.Advance(time.Millisecond)
	again := pop(t, b, queen.PopRequest{Queue: "q", Lease: time.Second})
	require.Equal(t, []int{2}, attemptsOf(again.Messages), "expired at 1.5 s exactly")
}

// A commit-on-delivery pop that reads up to a message still on hold
// (DelayedProcessing) leaves the cursor on it: the next pop delivers
// nothing before the hold ends and the held message once after.
func TestPop_CommitOnDeliveryStopsAtHeldMessage(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.DelayedProcessing = 10 * time.Second
	_, err := b.ConfigureQueue(bg, "d", cfg)
	require.NoError(t, err)
	pushN(t, b, "d", "", 1)
	clock.Advance(4 * time.Second)
	pushN(t, b, "d", "", 1) // visible at 14 s
	clock.Advance(6 * time.Second)
	req := queen.PopRequest{Queue: "d", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, CommitOnDelivery: true, Batch: 10}
	require.Equal(t, []int64{0}, offsets(pop(t, b, req).Messages))
	st, err := b.QueueStats(bg, "d")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Partitions[0].Cursors[0].Offset, "the cursor stands on the held message")
	require.Empty(t, pop(t, b, req).Messages)
	clock.Advance(3 * time.Second) // 13 s: still held
	require.Empty(t, pop(t, b, req).Messages)
	clock.Advance(time.Second)
	require.Equal(t, []int64{1}, offsets(pop(t, b, req).Messages))
	require.Empty(t, pop(t, b, req).Messages, "delivered once")
}

// stillClock is a fake clock that does not tell when it moves (it is not
// a queen.SignalingClock): the broker's timers then look at it only once
// a second of real time, so what a test calls right after moving it is
// what meets the new instant first, not the broker's expiry timer.
type stillClock struct{ c *queentest.Clock }

func (s stillClock) Now() time.Time { return s.c.Now() }

// A lease holds until, not through, its expiry instant: renewed one
// microsecond before it, it runs d from then; at the very instant it
// expires, RenewLease answers ErrLeaseExpired (and again when asked
// again), and the message is delivered again.
func TestLease_NotRenewedAtItsExpiryInstant(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: stillClock{clock}})
	pushOne(t, b, "q", "p", "", `1`)
	const lease = 10 * time.Second
	pr := pop(t, b, queen.PopRequest{Queue: "q", Partition: "p", Lease: lease})
	require.Len(t, pr.Messages, 1)
	id := pr.Messages[0].LeaseID
	require.NotEmpty(t, id)

	clock.Advance(lease - time.Microsecond)
	r, err := b.RenewLease(bg, id, lease)
	require.NoError(t, err, "one microsecond before its expiry a lease is renewed")
	require.Equal(t, clock.Now().Add(lease), r.ExpiresAt, "renewed to d from now")

	clock.Advance(lease) // exactly the renewed expiry
	_, err = b.RenewLease(bg, id, lease)
	require.ErrorIs(t, err, queen.ErrLeaseExpired, "at its expiry instant a lease is not renewed")
	_, err = b.RenewLease(bg, id, lease)
	require.ErrorIs(t, err, queen.ErrLeaseExpired, "asked again")
	again := pop(t, b, queen.PopRequest{Queue: "q", Partition: "p", Lease: lease})
	require.Len(t, again.Messages, 1, "the expired lease's message is delivered again")
	require.Equal(t, pr.Messages[0].TransactionID, again.Messages[0].TransactionID)

	// The same instant, met by the second lease.
	clock.Advance(lease)
	_, err = b.RenewLease(bg, again.Messages[0].LeaseID, lease)
	require.ErrorIs(t, err, queen.ErrLeaseExpired, "RenewLease at the expiry instant")
}

// An ack at the very instant its lease expires is refused as the renewal
// is: the message is the next lease's.
func TestLease_AckAtTheExpiryInstantIsRefused(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: stillClock{clock}})
	pushOne(t, b, "q", "p", "", `1`)
	const lease = 10 * time.Second
	pr := pop(t, b, queen.PopRequest{Queue: "q", Partition: "p", Lease: lease})
	require.Len(t, pr.Messages, 1)
	clock.Advance(lease)
	res, err := b.AckBatch(bg, ackItems(pr.Messages, queen.AckCompleted))
	require.NoError(t, err)
	require.False(t, res[0].Success)
	require.ErrorIs(t, res[0].Err, queen.ErrLeaseExpired)
	require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", Partition: "p"}).Messages, 1, "not settled: delivered again")
}

// TestLease_RenewAfterBrokerExpiredIt: once the broker had expired a lease
// (and dropped it), RenewLease said ErrNotFound; its godoc promises
// ErrLeaseExpired. A lease released by acking its messages is unknown.
func TestLease_RenewAfterBrokerExpiredIt(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "r", "a", 2)
		pr := pop(t, b, queen.PopRequest{Queue: "r", Partition: "a", Lease: 10 * time.Second})
		clock.Advance(11 * time.Second)
		// This pop finds the lease expired, drops it and leases anew.
		again := pop(t, b, queen.PopRequest{Queue: "r", Partition: "a", Lease: 10 * time.Second})
		require.Len(t, again.Messages, 1)
		require.NotEqual(t, pr.LeaseID, again.LeaseID)
		_, err := b.RenewLease(bg, pr.LeaseID, time.Minute)
		require.ErrorIs(t, err, queen.ErrLeaseExpired)

		ackAll(t, b, again.Messages, queen.AckCompleted)
		_, err = b.RenewLease(bg, again.LeaseID, time.Minute)
		require.ErrorIs(t, err, queen.ErrNotFound, "released, not expired")
		_, err = b.RenewLease(bg, "0190aaaa-bbbb-7ccc-8ddd-eeeeffff0000", time.Minute)
		require.ErrorIs(t, err, queen.ErrNotFound)
	})
}

// TestPop_DurableDefaultWritesNothing: a lease lives in memory (a lost
// lease only means redelivery), so a pop that leases messages of an
// existing group commits nothing, and so waits for no fsync; the ack is
// what is written.
func TestPop_DurableDefaultWritesNothing(t *testing.T) {
	b := openDurable(t)
	for p := range 4 {
		_, err := b.Push(bg, []queen.PushItem{{Queue: "q", Partition: string(rune('a' + p)), Payload: []byte(`1`)}, {Queue: "q", Partition: string(rune('a' + p)), Payload: []byte(`2`)}})
		require.NoError(t, err)
	}
	req := queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 1}
	first, err := b.Pop(bg, req) // the group's first pop writes its start point
	require.NoError(t, err)
	require.Len(t, first.Messages, 1)

	before := queen.CommitsForTest(b)
	var leased []*queen.Message
	for range 3 {
		res, err := b.Pop(bg, req)
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		leased = append(leased, res.Messages...)
	}
	res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", Batch: 10}) // nothing free: every partition leased
	require.NoError(t, err)
	require.Empty(t, res.Messages)
	require.Equal(t, before, queen.CommitsForTest(b), "pops committed")

	_, err = b.Ack(bg, leased[0], true, queen.AckOptions{})
	require.NoError(t, err)
	require.Equal(t, before+1, queen.CommitsForTest(b), "an ack is one commit")
}

// A group's first pop is reported with how many retained messages its
// start point skips, and a join that skips some is logged at Info level:
// a group that starts in mode "new" (the default) past a backlog is not
// silent about it.
func TestJoin_ReportsSkippedMessages(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	var obs joinLog
	logs := &itest.LogBuffer{}
	// With a clock, the two backends run one after the other.
	itest.Run(t, &queen.Options{Clock: clock, Observer: &obs, Logger: slog.New(slog.NewTextHandler(logs, nil))}, func(t *testing.T, b *queen.Broker) {
		logged := strings.Count(logs.String(), "consumer group joined")
		pushN(t, b, "orders", "a", 3)
		pushN(t, b, "orders", "b", 2)
		clock.Advance(time.Minute)
		mid := clock.Now()
		pushN(t, b, "orders", "b", 1)
		require.NoError(t, b.DeleteMessage(bg, pushOne(t, b, "orders", "a", "gone", `{}`).PartitionID, "gone"))

		join := func(req queen.PopRequest, skipped int) {
			t.Helper()
			req.Queue, req.Batch, req.Partitions = "orders", 10, 2
			pop(t, b, req)
			require.Equal(t, []queen.Event{{Kind: queen.EventGroupJoined, Queue: "orders", Group: groupOr(req.Group), Count: skipped}}, obs.take(), "%+v", req)
			pop(t, b, req)
			require.Empty(t, obs.take(), "only the first pop joins")
		}
		join(queen.PopRequest{Group: "late"}, 6) // mode new, the default: all 6 retained (not the deleted one)
		require.Contains(t, logs.String(), "level=INFO")
		require.Contains(t, logs.String(), "consumer group joined past existing messages")
		require.Contains(t, logs.String(), "queue=orders group=late skipped=6")
		join(queen.PopRequest{Group: "mid", SubscriptionFrom: mid}, 5)
		require.Contains(t, logs.String(), "queue=orders group=mid skipped=5")
		join(queen.PopRequest{Group: "all", SubscriptionMode: queen.SubscriptionModeAll}, 0)
		join(queen.PopRequest{}, 0) // queue mode reads everything
		require.NotContains(t, logs.String(), "group=all")
		require.NotContains(t, logs.String(), "group="+queen.QueueModeGroup)

		// A group that popped before the queue existed skips nothing.
		pop(t, b, queen.PopRequest{Queue: "later", Group: "early"})
		require.Empty(t, obs.take(), "no queue, no join")
		pushN(t, b, "later", "", 2)
		pop(t, b, queen.PopRequest{Queue: "later", Group: "early"})
		require.Equal(t, []queen.Event{{Kind: queen.EventGroupJoined, Queue: "later", Group: "early"}}, obs.take())
		require.NotContains(t, logs.String(), "group=early")
		require.Equal(t, logged+2, strings.Count(logs.String(), "consumer group joined"), "late and mid, once each")
	})
}

// joinLog records the EventGroupJoined events.
type joinLog struct {
	mu  sync.Mutex
	got []queen.Event
}

func (l *joinLog) Observe(e queen.Event) {
	if e.Kind != queen.EventGroupJoined {
		return
	}
	l.mu.Lock()
	l.got = append(l.got, e)
	l.mu.Unlock()
}

func (l *joinLog) take() []queen.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

func groupOr(g string) string {
	if g == "" {
		return queen.QueueModeGroup
	}
	return g
}
