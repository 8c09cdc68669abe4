package queen_test

import (
	"fmt"
	"sync"
	"testing"

	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeleteQueue_RacingPushSurvivesReopen: a push racing
// DeleteQueue may re-create the queue; once both returned, what the broker
// serves (the queue and its messages, or no queue) is what it serves after
// a restart: the deletion's write does not remove the re-created queue's
// metadata, its messages or its acknowledgements.
func TestDeleteQueue_RacingPushSurvivesReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	const rounds, pushers, pushes = 60, 3, 4
	for r := range rounds {
		name := fmt.Sprintf("q%d", r)
		pushOne(t, b, name, "", "seed", `1`)
		var wg sync.WaitGroup
		wg.Add(1 + pushers)
		go func() {
			defer wg.Done()
			_, err := b.DeleteQueue(bg, name)
			require.NoError(t, err)
		}()
		for g := range pushers {
			go func() {
				defer wg.Done()
				for i := range pushes {
					_, err := b.Push(bg, []queen.PushItem{{Queue: name, TransactionID: fmt.Sprintf("t%d-%d", g, i), Payload: []byte(`1`)}})
					require.NoError(t, err)
				}
			}()
		}
		wg.Wait()
	}
	before := storedCounts(t, b)
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, nil)
	require.Equal(t, before, storedCounts(t, b))
}

// TestDeleteQueue_QueuedPushGoesWithTheQueue: a push waiting for the
// writer belongs to the queue it was submitted to, so a ConfigureQueue and
// a DeleteQueue submitted after it, whose writes wait behind it, delete it
// with the queue: the queue is gone live and after the next Open, and its
// name is free.
func TestDeleteQueue_QueuedPushGoesWithTheQueue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	pushOne(t, b, "q", "p", "first", `1`)
	inWriterOrder(t, b,
		func() { pushOne(t, b, "q", "p", "second", `2`) },
		func() {
			_, err := b.ConfigureQueue(bg, "q", queen.DefaultQueueConfig())
			assert.NoError(t, err)
		},
		func() {
			existed, err := b.DeleteQueue(bg, "q")
			assert.NoError(t, err)
			assert.True(t, existed)
		})

	before := storedCounts(t, b)
	require.NotContains(t, before, "q", "the queued push went with the queue")
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, nil)
	require.Equal(t, before, storedCounts(t, b))
	pushOne(t, b, "q", "p", "again", `3`)
	require.Equal(t, int64(1), storedCounts(t, b)["q"], "the name is free: a push makes a new queue")
}

// Deleting a queue drops its live leases: renewing or acking with one is
// refused, and a queue created again under the name pops at once, not
// once the old lease would have expired.
func TestDeleteQueue_DropsLiveLeases(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "doomed", "p", 2)
		for _, group := range []string{"", "g"} {
			req := queen.PopRequest{Queue: "doomed", Partition: "p", Group: group, SubscriptionMode: queen.SubscriptionModeAll, Lease: time.Hour}
			res := pop(t, b, req)
			require.Len(t, res.Messages, 1)
			require.NotEmpty(t, res.LeaseID)
			_, err := b.RenewLease(bg, res.LeaseID, time.Hour)
			require.NoError(t, err, "live before the delete")

			existed, err := b.DeleteQueue(bg, "doomed")
			require.NoError(t, err)
			require.True(t, existed)

			_, err = b.RenewLease(bg, res.LeaseID, time.Hour)
			require.ErrorIs(t, err, queen.ErrNotFound, "the lease went with its queue")
			ar, err := b.Ack(bg, res.Messages[0], true, queen.AckOptions{})
			require.Error(t, err, "an ack with the old lease is refused")
			require.False(t, ar.Success)

			// Created again: its messages are served now, with the clock
			// far from the old lease's expiry.
			pushN(t, b, "doomed", "p", 2)
			again := pop(t, b, req)
			require.Equal(t, []int64{0}, offsets(again.Messages))
			require.NotEqual(t, res.LeaseID, again.LeaseID)
			ackAll(t, b, again.Messages, queen.AckCompleted)
			// The new queue's lease is not disturbed by the old one's
			// time passing.
			clock.Advance(2 * time.Hour)
			require.Equal(t, []int64{1}, offsets(pop(t, b, req).Messages))
			_, err = b.DeleteQueue(bg, "doomed")
			require.NoError(t, err)
			pushN(t, b, "doomed", "p", 2)
		}
	})
}
