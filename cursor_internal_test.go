package queen

import (
	"context"
	"encoding/json"
	"strconv"
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

// madeCursors counts the cursors g's queue holds for it in memory.
func madeCursors(b *Broker, queue, group string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[queue]
	g := q.groups[group]
	n := 0
	for _, p := range q.order {
		if p.cursorOf(g) != nil {
			n++
		}
	}
	return n
}

// A group joining a queue of many partitions makes a cursor only where it
// claims: its first pop costs the partitions it reads, not all of them,
// and so does a restart. Its pops still reach every partition.
func TestCursor_JoinMakesCursorsAsPartitionsAreClaimed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	const n = 200
	items := make([]PushItem, n)
	for i := range items {
		items[i] = PushItem{Queue: "many", Partition: "c" + strconv.Itoa(i)}
	}
	_, err = b.Push(ctx, items)
	require.NoError(t, err)

	res, err := b.Pop(ctx, PopRequest{Queue: "many", Group: "g", SubscriptionMode: SubscriptionModeAll, Batch: 3, Partitions: 3})
	require.NoError(t, err)
	require.Len(t, res.Messages, 3)
	require.LessOrEqual(t, madeCursors(b, "many", "g"), 3, "a cursor per claimed partition, not per partition")
	_, err = b.AckBatch(ctx, ackItemsOf(res.Messages))
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b, err = Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, 3, madeCursors(b, "many", "g"), "a restart makes the stored cursors only")
	seen := map[string]bool{}
	for _, m := range res.Messages {
		seen[m.Partition] = true
	}
	for len(seen) < n {
		res, err := b.Pop(ctx, PopRequest{Queue: "many", Group: "g", Batch: 7, Partitions: 7})
		require.NoError(t, err)
		require.NotEmpty(t, res.Messages, "%d of %d partitions read", len(seen), n)
		for _, m := range res.Messages {
			require.False(t, seen[m.Partition], "partition %s delivered twice", m.Partition)
			seen[m.Partition] = true
		}
		_, err = b.AckBatch(ctx, ackItemsOf(res.Messages))
		require.NoError(t, err)
	}
	res, err = b.Pop(ctx, PopRequest{Queue: "many", Group: "g", Batch: 10, Partitions: 10})
	require.NoError(t, err)
	require.Empty(t, res.Messages)
}

func ackItemsOf(msgs []*Message) []AckItem {
	items := make([]AckItem, len(msgs))
	for i, m := range msgs {
		items[i] = AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: m.ConsumerGroup}
	}
	return items
}

// A group joining in mode "new" makes no cursor either: it stands at the
// end of every partition there was. The first push to such a partition
// stores the group's cursor where it stood, whether the group had one in
// memory (a pop of that partition made it) or not, so a restart delivers
// exactly what was pushed after the join.
func TestCursor_NewGroupJoinsWithoutCursorsAndKeepsItsStartAcrossRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	var items []PushItem
	for i := 0; i < 50; i++ {
		items = append(items, PushItem{Queue: "nq", Partition: "c" + strconv.Itoa(i), TransactionID: "old" + strconv.Itoa(i)})
	}
	_, err = b.Push(ctx, items)
	require.NoError(t, err)

	res, err := b.Pop(ctx, PopRequest{Queue: "nq", Group: "n", SubscriptionMode: SubscriptionModeNew, Batch: 10, Partitions: 10})
	require.NoError(t, err)
	require.Empty(t, res.Messages)
	require.Zero(t, madeCursors(b, "nq", "n"), "no cursor per partition at the join")
	res, err = b.Pop(ctx, PopRequest{Queue: "nq", Group: "n", Partition: "c1"})
	require.NoError(t, err)
	require.Empty(t, res.Messages)
	require.Zero(t, madeCursors(b, "nq", "n"), "nor a pop of c1: nothing there is for n before a push after its join")

	_, err = b.Push(ctx, []PushItem{{Queue: "nq", Partition: "c1", TransactionID: "new1"}, {Queue: "nq", Partition: "c2", TransactionID: "new2"}, {Queue: "nq", Partition: "late", TransactionID: "new3"}})
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b, err = Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	defer b.Close()
	var got []string
	for {
		res, err := b.Pop(ctx, PopRequest{Queue: "nq", Group: "n", Batch: 10, Partitions: 10})
		require.NoError(t, err)
		if len(res.Messages) == 0 {
			break
		}
		for _, m := range res.Messages {
			got = append(got, m.TransactionID)
		}
		_, err = b.AckBatch(ctx, ackItemsOf(res.Messages))
		require.NoError(t, err)
	}
	require.ElementsMatch(t, []string{"new1", "new2", "new3"}, got)
	gs, err := b.ListGroups(ctx, GroupFilter{Group: "n"})
	require.NoError(t, err)
	require.Equal(t, 51, gs[0].Partitions)
	require.Zero(t, gs[0].Lag)
}

// A write rolled back after preparePush added the arrival cursor of a
// group in mode "new" (a batch refused for its size, or for a
// transaction's push, is written again request by request) still stores
// that cursor: the write that replaces it holds the same records, so a
// restart finds the group where it started.
func TestCursor_RolledBackWriteStoresArrivalCursorsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	_, err = b.Push(ctx, []PushItem{{Queue: "q", Partition: "p", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err)
	res, err := b.Pop(ctx, PopRequest{Queue: "q", Group: "g", SubscriptionMode: SubscriptionModeNew})
	require.NoError(t, err)
	require.Empty(t, res.Messages) // g stands at offset 1 of p, with no cursor

	// The writer is idle: write a batch by hand that fails after the push
	// was applied, then the push alone, as commit does.
	pr := &pushReq{items: []PushItem{{Queue: "q", Partition: "p", TransactionID: "x", Payload: json.RawMessage(`2`)}}, results: make([]PushResult, 1)}
	b.mu.Lock()
	b.preparePush(pr, nil)
	b.mu.Unlock()
	bad := &writeReq{ops: []command{setKey{nil, []byte("x")}}} // Badger refuses an empty key
	_, err = b.w.write([]*writeReq{{push: pr}, bad})
	require.Error(t, err)
	pub, err := b.w.write([]*writeReq{{push: pr}})
	require.NoError(t, err)
	b.mu.Lock()
	b.publish(pub)
	b.mu.Unlock()

	offset := func(b *Broker) int64 {
		qs, err := b.QueueStats(ctx, "q")
		require.NoError(t, err)
		for _, c := range qs.Partitions[0].Cursors {
			if c.Group == "g" {
				return c.Offset
			}
		}
		t.Fatal("no position of g in p")
		return -1
	}
	require.EqualValues(t, 1, offset(b), "live: g starts after the message that was there when it joined")
	require.NoError(t, b.Close())
	b, err = Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	defer b.Close()
	require.EqualValues(t, 1, offset(b), "reopened: the same")
}

func TestAttempts_CountsEveryDelivery(t *testing.T) {
	t.Parallel()
	a := &attempts{}
	counts := func(from, to int64) []int32 {
		var out []int32
		for o := from; o < to; o++ {
			out = append(out, a.get(o))
		}
		return out
	}
	a.deliver(0, 3) // 0 1 2 once
	require.Equal(t, []int32{1, 1, 1, 0}, counts(0, 4))
	a.deliver(1, 2) // cursor at 1, smaller batch
	require.Equal(t, []int32{2, 1}, counts(1, 3))
	a.deliver(1, 5) // bigger batch reaching new offsets
	require.Equal(t, []int32{3, 2, 1, 1}, counts(1, 5))
	a.deliver(4, 6) // the cursor passed 1..3
	require.Equal(t, []int32{2, 1}, counts(4, 6))
	a.deliver(10, 11) // everything before was settled
	require.Equal(t, []int32{1}, counts(10, 11))
	require.Equal(t, int32(0), a.get(11))
	a.deliver(8, 12) // a seek back before the known runs
	require.Equal(t, []int32{1, 1, 2, 1}, counts(8, 12))
}
