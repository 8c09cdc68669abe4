package queen

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A commit-on-delivery pop that reads up to a message still on hold
// (DelayedProcessing) leaves its cursor on that message with the hold:
// off the ready list until the message is visible, so the next pop does
// not read it again (a spin) nor deliver it early.
func TestCursor_CommitOnDeliveryLeavesTheHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &stepClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	b, err := Open("", &Options{InMemory: true, Clock: clock})
	require.NoError(t, err)
	defer b.Close()
	for _, c := range []struct {
		queue  string
		window time.Duration
	}{{"delayed", 0}, {"delayed-and-windowed", 2 * time.Second}} {
		cfg := DefaultQueueConfig()
		cfg.DelayedProcessing = 10 * time.Second
		cfg.WindowBuffer = c.window
		_, err = b.ConfigureQueue(ctx, c.queue, cfg)
		require.NoError(t, err)
		_, err = b.Push(ctx, []PushItem{{Queue: c.queue, Payload: []byte(`0`)}})
		require.NoError(t, err)
		clock.Advance(4 * time.Second)
		res, err := b.Push(ctx, []PushItem{{Queue: c.queue, Payload: []byte(`1`)}})
		require.NoError(t, err)
		visible := clock.Now().Add(10 * time.Second).UnixMicro()
		clock.Advance(6 * time.Second) // the first is visible, the second in 4 s
		req := PopRequest{Queue: c.queue, Group: "g", SubscriptionMode: SubscriptionModeAll, CommitOnDelivery: true, Batch: 10}
		pr, err := b.Pop(ctx, req)
		require.NoError(t, err)
		require.Len(t, pr.Messages, 1, c.queue)
		require.Equal(t, int64(0), pr.Messages[0].Offset)

		var cur cursor // a copy, checked outside b.mu
		b.mu.Lock()
		q := b.queues[c.queue]
		if cp := q.parts[DefaultPartition].cursorOf(q.groups["g"]); cp != nil {
			cur = *cp
		}
		b.mu.Unlock()
		require.NotNil(t, cur.p)
		require.Equal(t, res[0].Offset, cur.offset, "%s: the cursor stands on the held message", c.queue)
		require.Equal(t, visible, cur.notBefore, "%s: with its hold", c.queue)
		require.True(t, cur.held, c.queue)
		require.False(t, cur.ready, "%s: not ready before the hold ends", c.queue)

		clock.Advance(3 * time.Second) // a second before it is visible
		pr, err = b.Pop(ctx, req)
		require.NoError(t, err)
		require.Empty(t, pr.Messages, c.queue)
		clock.Advance(time.Second)
		pr, err = b.Pop(ctx, req)
		require.NoError(t, err)
		require.Len(t, pr.Messages, 1, c.queue)
		require.Equal(t, res[0].Offset, pr.Messages[0].Offset)
		pr, err = b.Pop(ctx, req)
		require.NoError(t, err)
		require.Empty(t, pr.Messages, "%s: delivered once", c.queue)
	}
}

// A group waiting on a queue that is deleted and created again receives
// the new queue's messages from its first, whether its pop looks again
// while the queue is gone or only once it is back. The steps of Pop's
// loop are run one by one, so both interleavings are certain.
func TestCursor_WaitingGroupAcrossQueueRecreate(t *testing.T) {
	t.Parallel()
	for _, lookWhileGone := range []bool{false, true} {
		ctx := context.Background()
		b, err := Open("", &Options{InMemory: true})
		require.NoError(t, err)
		defer b.Close()
		_, err = b.Push(ctx, []PushItem{{Queue: "re", TransactionID: "old"}})
		require.NoError(t, err)

		req := PopRequest{Queue: "re", Group: "g", Wait: true, Timeout: 30 * time.Second}
		require.NoError(t, req.normalize())
		var ps popState
		res, w, _, err := b.tryPop(ctx, &req, &ps)
		require.NoError(t, err)
		require.Nil(t, res, "mode new: old is not for g; the pop parks")
		require.NotNil(t, w)

		_, err = b.DeleteQueue(ctx, "re")
		require.NoError(t, err)
		<-w.ch // the delete woke it
		if lookWhileGone {
			res, w, wl, err := b.tryPop(ctx, &req, &ps)
			require.NoError(t, err)
			require.Nil(t, res)
			require.NotNil(t, w, "parked until the queue exists")
			defer func() { b.mu.Lock(); wl.leave(w); b.mu.Unlock() }()
		}
		_, err = b.Push(ctx, []PushItem{{Queue: "re", TransactionID: "new1"}, {Queue: "re", TransactionID: "new2"}})
		require.NoError(t, err)
		res, _, _, err = b.tryPop(ctx, &req, &ps)
		require.NoError(t, err)
		require.NotNil(t, res)
		require.Len(t, res.Messages, 1, "lookWhileGone=%v", lookWhileGone)
		require.Equal(t, "new1", res.Messages[0].TransactionID)
	}
}
