package queen_test

import (
	"testing"
	"time"

	"context"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// popTimeout is the wait of the pops below; wakeBound is how soon they
// must be woken, far under it, so a pop that merely timed out fails.
const (
	popTimeout = 30 * time.Second
	wakeBound  = 2 * time.Second
)

type popOutcome struct {
	res     *queen.PopResult
	err     error
	elapsed time.Duration
}

// parkPop starts req (a waiting pop) and returns once it is parked.
func parkPop(t *testing.T, b *queen.Broker, req queen.PopRequest) <-chan popOutcome {
	t.Helper()
	before := itest.Waiting(b)
	out := make(chan popOutcome, 1)
	go func() {
		start := time.Now()
		res, err := b.Pop(bg, req)
		out <- popOutcome{res, err, time.Since(start)}
	}()
	itest.AwaitWaiting(t, b, before+1)
	return out
}

// woken waits for a waiting pop to end, for at most wakeBound past now.
func woken(t *testing.T, out <-chan popOutcome, what string) popOutcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(wakeBound):
		t.Fatalf("%s did not wake the waiting pop within %s", what, wakeBound)
		return popOutcome{}
	}
}

// TestWait_PushWakesPopOnExistingQueue: a pop waiting on a queue that
// exists (its group has read everything) ends with the message pushed.
func TestWait_PushWakesPopOnExistingQueue(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "q", "p0", 1)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", CommitOnDelivery: true}).Messages, 1)
		out := parkPop(t, b, queen.PopRequest{Queue: "q", Wait: true, Timeout: popTimeout})
		pushOne(t, b, "q", "p1", "wake", `{}`)
		o := woken(t, out, "a push to the queue")
		require.NoError(t, o.err)
		require.Len(t, o.res.Messages, 1)
		require.Equal(t, "wake", o.res.Messages[0].TransactionID)
	})
}

// TestWait_PushWakesPopOnNamedPartition: a pop waiting on one partition
// ends with a message pushed to it, and is not taken by another one.
func TestWait_PushWakesPopOnNamedPartition(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "q", "mine", 1)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", Partition: "mine", CommitOnDelivery: true}).Messages, 1)
		out := parkPop(t, b, queen.PopRequest{Queue: "q", Partition: "mine", Wait: true, Timeout: popTimeout})
		pushOne(t, b, "q", "other", "not-mine", `{}`)
		pushOne(t, b, "q", "mine", "wake", `{}`)
		o := woken(t, out, "a push to the partition")
		require.NoError(t, o.err)
		require.Len(t, o.res.Messages, 1)
		require.Equal(t, "wake", o.res.Messages[0].TransactionID)
		require.Equal(t, "mine", o.res.Messages[0].Partition)
	})
}

// TestWait_PushWakesPopOfConsumerGroup: a pop of a named consumer group
// ends with the message pushed, although another group read it first.
func TestWait_PushWakesPopOfConsumerGroup(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "q", "", 1)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, CommitOnDelivery: true}).Messages, 1)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "other", CommitOnDelivery: true}).Messages, 0, "group other starts after the first message")
		out := parkPop(t, b, queen.PopRequest{Queue: "q", Group: "g", Wait: true, Timeout: popTimeout})
		pushOne(t, b, "q", "", "wake", `{}`)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "other", CommitOnDelivery: true}).Messages, 1, "each group gets the message")
		o := woken(t, out, "a push to the queue of the group")
		require.NoError(t, o.err)
		require.Len(t, o.res.Messages, 1)
		require.Equal(t, "g", o.res.Messages[0].ConsumerGroup)
		require.Equal(t, "wake", o.res.Messages[0].TransactionID)
	})
}

// TestWait_CloseWakesEveryWaitingPop: Close ends every kind of waiting pop
// with ErrClosed at once, not at the pops' timeout.
func TestWait_CloseWakesEveryWaitingPop(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "q", "part", 1)
		_ = pop(t, b, queen.PopRequest{Queue: "q", CommitOnDelivery: true})
		_ = pop(t, b, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, CommitOnDelivery: true})
		reqs := map[string]queen.PopRequest{
			"unknown queue":   {Queue: "nowhere"},
			"existing queue":  {Queue: "q"},
			"named partition": {Queue: "q", Partition: "part"},
			"new partition":   {Queue: "q", Partition: "later"},
			"consumer group":  {Queue: "q", Group: "g"},
		}
		outs := map[string]<-chan popOutcome{}
		for name, req := range reqs {
			req.Wait, req.Timeout = true, popTimeout
			outs[name] = parkPop(t, b, req)
		}
		require.Equal(t, len(reqs), itest.Waiting(b))
		require.NoError(t, b.Close())
		for name, out := range outs {
			o := woken(t, out, "Close (pop on "+name+")")
			require.ErrorIs(t, o.err, queen.ErrClosed, name)
		}
		_, err := b.Pop(bg, queen.PopRequest{Queue: "q", Wait: true, Timeout: popTimeout})
		require.ErrorIs(t, err, queen.ErrClosed, "a pop after Close does not wait")
	})
}

// TestWait_PartitionWaiterWokenWhenWindowReopens: a pop waiting on
// one partition of a queue with a WindowBuffer wakes when the window opens.
// Here the partition's cursor is on the group's ready list (its window
// had opened once, then a push closed it again) and the named pop leaves
// it there: the check at the window's new end still wakes the waiter of a
// cursor already marked ready.
func TestWait_PartitionWaiterWokenWhenWindowReopens(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	configureWith(t, b, "q", func(c *queen.QueueConfig) { c.WindowBuffer = 3 * time.Second })
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "g"}).Messages) // g joins
	pushOne(t, b, "q", "p", "m1", `1`)
	clock.Advance(5 * time.Second)                                        // the window opens: p is ready for g
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "tick"}).Messages) // (a pop fires due timers now)
	pushOne(t, b, "q", "p", "m2", `2`)                                    // and closes again for 3 s
	got := make(chan *queen.PopResult, 1)
	go func() {
		res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", Partition: "p", Batch: 10, Wait: true, Timeout: queen.MaxPopTimeout})
		assert.NoError(t, err)
		got <- res
	}()
	itest.AwaitWaiting(t, b, 1)
	clock.Advance(3 * time.Second)
	select {
	case res := <-got:
		require.Len(t, res.Messages, 2)
	case <-time.After(10 * time.Second):
		t.Fatal("the pop waiting on p was not woken when p's window opened")
	}
}

// TestWait_WaiterOnAPartitionJoinsItWhenCreated: a pop waiting on a
// partition that does not exist yet looks again when the partition is
// created empty (ConfigureQueue makes Default): its group then has a
// cursor there, as if the pop had started after the partition existed.
func TestWait_WaiterOnAPartitionJoinsItWhenCreated(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = b.Pop(ctx, queen.PopRequest{Queue: "q", Group: "g", Partition: queen.DefaultPartition, Wait: true, Timeout: queen.MaxPopTimeout})
	}()
	itest.AwaitWaiting(t, b, 1)
	pushOne(t, b, "q", "other", "m", `1`) // creates q; the pop joins it and waits on
	itest.AwaitWaiting(t, b, 1)
	_, err := b.ConfigureQueue(bg, "q", queen.DefaultQueueConfig())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		qs, err := b.QueueStats(bg, "q")
		require.NoError(t, err)
		for _, p := range qs.Partitions {
			if p.Name == queen.DefaultPartition {
				return len(p.Cursors) == 1 && p.Cursors[0].Group == "g"
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the waiting pop's group has a cursor in the new partition")
	cancel()
	<-done
}

// TestWait_CloseEndsPartitionWaiters: Close wakes the pops waiting on one
// named partition (PopRequest.Partition with Wait) as it wakes those
// waiting on a queue or a group: they see ErrClosed at once, not at the
// end of their own Timeout.
func TestWait_CloseEndsPartitionWaiters(t *testing.T) {
	t.Parallel()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	require.NoError(t, err)
	pushN(t, b, "pw", "p", 1)
	got := pop(t, b, queen.PopRequest{Queue: "pw", Partition: "p"}) // p is leased: the next pop waits
	require.Len(t, got.Messages, 1)
	done := make(chan error, 1)
	go func() {
		_, err := b.Pop(context.Background(), queen.PopRequest{Queue: "pw", Partition: "p", Wait: true, Timeout: time.Minute})
		done <- err
	}()
	itest.AwaitWaiting(t, b, 1)
	require.NoError(t, b.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, queen.ErrClosed)
	case <-time.After(20 * time.Second): // Close ends it at once; its own Timeout is a minute
		t.Fatal("a pop waiting on a named partition outlived Close")
	}
}
