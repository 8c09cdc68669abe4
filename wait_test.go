package queen_test

import (
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
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

// woken waits for a parked pop to end, for at most wakeBound past now.
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
