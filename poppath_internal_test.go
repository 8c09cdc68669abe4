package queen

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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
