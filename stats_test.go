package queen_test

import (
	"context"
	"encoding/json"
	"testing"

	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A partition's Pending is what its slowest group has not settled, leased
// messages included, and its InFlight counts a message once for each group
// leasing it; the queue's are their sums.
func TestQueueStats_PartitionCounts(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	ctx := context.Background()
	for _, p := range []string{"a", "a", "a", "b"} {
		_, err := b.Push(ctx, []queen.PushItem{{Queue: "q", Partition: p, Payload: json.RawMessage(`{}`)}})
		require.NoError(t, err)
	}
	counts := func() map[string][2]int64 {
		t.Helper()
		st, err := b.QueueStats(ctx, "q")
		require.NoError(t, err)
		out := map[string][2]int64{}
		var pending, inFlight int64
		for _, p := range st.Partitions {
			out[p.Name] = [2]int64{p.Pending, p.InFlight}
			pending, inFlight = pending+p.Pending, inFlight+p.InFlight
			require.LessOrEqual(t, p.Pending, p.Messages)
		}
		require.Equal(t, pending, st.Pending)
		require.Equal(t, inFlight, st.InFlight)
		return out
	}
	require.Equal(t, map[string][2]int64{"a": {3, 0}, "b": {1, 0}}, counts(), "no group: every message")
	pop := func(group string, n int) []*queen.Message {
		t.Helper()
		msgs, err := b.Queue("q").Partition("a").Group(group).SubscriptionMode(queen.SubscriptionModeAll).Batch(n).Wait(false).Pop(ctx)
		require.NoError(t, err)
		require.Len(t, msgs, n)
		return msgs
	}
	g1 := pop("g1", 2)
	pop("g2", 3)
	require.Equal(t, map[string][2]int64{"a": {3, 5}, "b": {1, 0}}, counts(), "two groups leasing the same messages")
	for _, m := range g1 {
		_, err := b.Ack(ctx, m, true, queen.AckOptions{})
		require.NoError(t, err)
	}
	require.Equal(t, map[string][2]int64{"a": {3, 3}, "b": {1, 0}}, counts(), "g2, the slowest, settled nothing")
}

// TestSetGroupSubscription_DropsTheOldHold: a group that started
// at the end of a queue with DelayedProcessing waits on the hold of the
// next (not yet visible) message. Moved back in time by
// SetGroupSubscription, its cursor stands on old, visible messages: they
// are served at once, not when the hold of the old position ends.
func TestSetGroupSubscription_DropsTheOldHold(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	start := clock.Now()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	pushOne(t, b, "q", "p", "old", `1`)
	clock.Advance(time.Minute)
	res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeNew})
	require.NoError(t, err)
	require.Empty(t, res.Messages, "a new group starts at the end")
	configureWith(t, b, "q", func(c *queen.QueueConfig) { c.DelayedProcessing = 30 * time.Second }) // the old message is a minute old
	pushOne(t, b, "q", "p", "new", `2`)
	res, err = b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g"})
	require.NoError(t, err)
	require.Empty(t, res.Messages, "the new message is held for 30 s")

	n, err := b.SetGroupSubscription(bg, "g", start)
	require.NoError(t, err)
	require.Equal(t, 2, n, "p and the Default partition configureWith made: g stands in both")
	res, err = b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1, "the old message is visible now")
	require.Equal(t, "old", res.Messages[0].TransactionID)
}

// TestDeleteGroup_RejoinedGroupKeepsItsStartAcrossRestart: a group deleted
// and joined again (mode new) while a push submitted before both waits for
// the writer: the push counts as before the join, so the new group starts
// after its message, live and after a restart (the old group's cursor,
// stored, is deleted with it; nothing of it is left to move the new one).
func TestDeleteGroup_RejoinedGroupKeepsItsStartAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	joinNew := func() {
		res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeNew})
		assert.NoError(t, err)
		assert.Empty(t, res.Messages)
	}
	pushOne(t, b, "q", "p", "a", `1`)
	joinNew()
	pushOne(t, b, "q", "p", "a2", `2`) // stores g's cursor in p

	inWriterOrder(t, b,
		func() { pushOne(t, b, "q", "p", "b", `3`) },
		func() {
			_, err := b.DeleteGroup(bg, "g", "q", true)
			assert.NoError(t, err)
		},
		joinNew) // g again, after b

	require.EqualValues(t, 3, cursorOf(t, b, "q", "p", "g").Offset, "live: g starts after b")
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, nil)
	require.EqualValues(t, 3, cursorOf(t, b, "q", "p", "g").Offset, "reopened: the same")
}

// TestDeleteGroup_RejoinedGroupKeepsItsStartOverAnOldWrite: as in
// TestDeleteGroup_RejoinedGroupKeepsItsStartAcrossRestart, a group is
// deleted and joined again (mode new) while a push waits for the writer,
// and a write of the old group's cursor (here a seek back to the start)
// was queued between the push and the delete. The old group's write does
// not outlive it: after a restart the group stands where the new one
// started, after the push's message, not where the old one was moved to,
// and reads nothing the new one never had.
func TestDeleteGroup_RejoinedGroupKeepsItsStartOverAnOldWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	pushOne(t, b, "q", "p", "a", `1`)
	pushOne(t, b, "q", "p", "b", `2`)
	res := pop(t, b, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
	require.Equal(t, []string{"a"}, txids(res.Messages))
	ackAll(t, b, res.Messages, queen.AckCompleted) // g's cursor is stored at 1

	inWriterOrder(t, b,
		func() { pushOne(t, b, "q", "p", "c", `3`) },
		func() {
			_, err := b.SeekPartition(bg, "g", "q", "p", queen.SeekOptions{Timestamp: time.Unix(0, 0)})
			assert.NoError(t, err)
		},
		func() {
			_, err := b.DeleteGroup(bg, "g", "q", true)
			assert.NoError(t, err)
		},
		func() { // g again, after c
			res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeNew})
			assert.NoError(t, err)
			assert.Empty(t, res.Messages)
		})

	require.EqualValues(t, 3, cursorOf(t, b, "q", "p", "g").Offset, "live: g starts after c")
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, nil)
	require.EqualValues(t, 3, cursorOf(t, b, "q", "p", "g").Offset, "reopened: the same")
}
