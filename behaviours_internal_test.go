package queen

import (
	"context"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/stretchr/testify/require"
)

// Behaviours of issue 19 that show only inside the broker: the records of
// deleted messages, the partition ids a resumed sweep holds, the hold a
// commit-on-delivery pop leaves on its cursor.

// storedPartition reads p's stored metadata.
func storedPartition(t *testing.T, b *Broker, pid uint64) record.Partition {
	t.Helper()
	var m record.Partition
	require.NoError(t, b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keys.PartitionKey(pid))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return record.DecodePartition(v, &m) })
	}))
	return m
}

// Retention that moves a partition's first offset past deleted messages
// forgets their holes, in memory and in the stored metadata: the records
// of deleted messages do not pile up below the start.
func TestBehaviour_RetentionTrimsHolesBelowFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &stepClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	b, err := Open("", &Options{InMemory: true, Clock: clock})
	require.NoError(t, err)
	defer b.Close()
	cfg := DefaultQueueConfig()
	cfg.Retention = time.Hour
	_, err = b.ConfigureQueue(ctx, "r", cfg)
	require.NoError(t, err)
	push := func(txids ...string) string {
		var pid string
		for _, tx := range txids {
			res, err := b.Push(ctx, []PushItem{{Queue: "r", TransactionID: tx, Payload: []byte(`1`)}})
			require.NoError(t, err)
			require.Equal(t, PushQueued, res[0].Status)
			pid = res[0].PartitionID
		}
		return pid
	}
	pid := push("t0", "t1", "t2", "t3") // old: offsets 0..3
	clock.Advance(2 * time.Hour)
	push("t4", "t5", "t6") // new: offsets 4..6
	for _, tx := range []string{"t1", "t2", "t5"} {
		require.NoError(t, b.DeleteMessage(ctx, pid, tx))
	}
	b.mu.Lock()
	p := b.queues["r"].parts[DefaultPartition]
	b.mu.Unlock()
	holes := func() (first int64, runs []holeRun, n int64) { // copied under b.mu, checked outside it
		b.mu.Lock()
		defer b.mu.Unlock()
		if hs := p.holeSet(); hs != nil {
			runs, n = append(runs, hs.runs...), hs.n
		}
		return p.first, runs, n
	}
	_, runs, _ := holes()
	require.Equal(t, []holeRun{{1, 3}, {5, 6}}, runs)

	require.NoError(t, b.Maintain(ctx)) // deletes 0 and 3, the old ones left

	first, runs, n := holes()
	require.Equal(t, int64(4), first)
	require.Equal(t, []holeRun{{5, 6}}, runs, "the holes below first are forgotten")
	require.Equal(t, int64(1), n)
	m := storedPartition(t, b, p.pid)
	require.Equal(t, int64(4), m.First)
	require.Equal(t, int64(1), m.Holes, "stored metadata counts only the holes at or after first")
	require.Equal(t, []int64{5, 6}, m.HoleRuns)
	st, err := b.QueueStats(ctx, "r")
	require.NoError(t, err)
	for _, ps := range st.Partitions {
		if ps.Name == DefaultPartition {
			require.Equal(t, int64(2), ps.Messages) // 4 and 6
		}
	}

	// Retention past every hole leaves none.
	clock.Advance(2 * time.Hour)
	require.NoError(t, b.Maintain(ctx))
	first, runs, n = holes()
	require.Equal(t, int64(7), first)
	require.Empty(t, runs)
	require.Zero(t, n)
	m = storedPartition(t, b, p.pid)
	require.Zero(t, m.Holes)
	require.Empty(t, m.HoleRuns)
}

// Open keeps the ids of the partitions of a queue still being swept from
// being handed out again until the sweep ends, even once the sweep has
// dropped their metadata (a crash after that step, before the tombstone
// went): a new partition given such an id would be deleted by the sweep.
func TestBehaviour_OpenReservesIDsOfPartitionsBeingSwept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, nil)
	require.NoError(t, err)
	for _, part := range []string{"a", "b"} {
		_, err := b.Push(ctx, []PushItem{{Queue: "gone", Partition: part, Payload: []byte(`"old"`)}})
		require.NoError(t, err)
	}
	tk, ts, err := b.unlinkQueue(ctx, "gone") // the sweep never runs
	require.NoError(t, err)
	require.NotNil(t, tk)
	require.Len(t, ts.PIDs, 2)
	// The sweep's steps up to the tombstone's removal: data, then metadata.
	var prefixes [][]byte
	for _, pid := range ts.PIDs {
		for _, kind := range []byte{keys.Message, keys.TxID, keys.Cursor, keys.Trace, keys.Partition} {
			prefixes = append(prefixes, keys.PartitionScoped(kind, pid))
		}
	}
	require.NoError(t, b.dropPrefixes(prefixes))
	require.NoError(t, b.Close())

	b, err = Open(dir, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	for _, part := range []string{"x", "y", "z"} {
		_, err := b.Push(ctx, []PushItem{{Queue: "fresh", Partition: part, TransactionID: part, Payload: []byte(`"new"`)}})
		require.NoError(t, err)
	}
	got := map[string]uint64{}
	b.mu.Lock()
	for _, p := range b.queues["fresh"].parts {
		got[p.name] = p.pid
	}
	b.mu.Unlock()
	for name, pid := range got {
		require.NotContains(t, ts.PIDs, pid, "partition %s got the id of a partition being swept", name)
	}

	// Once the sweep has ended, the new partitions are whole.
	require.Eventually(t, func() bool {
		gone := true
		_ = b.db.View(func(txn *badger.Txn) error {
			_, err := txn.Get(tk)
			gone = err == badger.ErrKeyNotFound
			return nil
		})
		return gone
	}, 10*time.Second, time.Millisecond)
	for _, part := range []string{"x", "y", "z"} {
		f, err := b.Fetch(ctx, "fresh", part, 0, 10)
		require.NoError(t, err)
		require.Len(t, f.Records, 1, "partition %s", part)
	}
}

// A commit-on-delivery pop that reads up to a message still on hold
// (DelayedProcessing) leaves its cursor on that message with the hold:
// off the ready list until the message is visible, so the next pop does
// not read it again (a spin) nor deliver it early.
func TestBehaviour_CommitOnDeliveryLeavesHoldOnCursor(t *testing.T) {
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

// Mutation survivors (issue 19): behaviours the tests above and the rest
// of the suite did not pin.

// storedBetween counts the stored messages of [from, end) only, also
// where a run of deleted offsets crosses end or from.
func TestBehaviour_HoleCountsClipToTheRange(t *testing.T) {
	t.Parallel()
	p := &partition{q: &queue{}, first: 0, next: 20}
	for off := int64(10); off < 13; off++ {
		require.True(t, p.addHole(off))
	}
	require.Equal(t, int64(4), p.storedBetween(6, 12), "6..9: the run 10..12 is cut at 12")
	require.Equal(t, int64(2), p.storedBetween(11, 15), "13, 14: the run is cut at 11")
	require.Equal(t, int64(0), p.storedBetween(10, 13))
	require.Equal(t, int64(7), p.storedBetween(6, 16))
}

// A transaction whose writes do not fit in one storage transaction is
// ErrTooLarge and writes nothing: too many operations even if their bytes
// would fit, or too many bytes even if the operations would.
func TestBehaviour_TransactionTooLargeForOneStorageTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	tiny := func(i int) TxOp {
		return TxOp{Push: &PushItem{Queue: "many", TransactionID: "t" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), Payload: []byte(`1`)}}
	}
	estimate := func(ops []TxOp) (size, count int) {
		return (&writeReq{push: &pushReq{items: pushItemsOf(ops)}}).estimate(b.lim.valueThreshold)
	}
	n := (b.lim.maxOps-4)/2 + 1 // one push more than the operations allow
	var ops []TxOp
	for i := range n {
		ops = append(ops, tiny(i))
	}
	size, count := estimate(ops)
	require.Greater(t, count, b.lim.maxOps)
	require.LessOrEqual(t, size, b.lim.maxBytes, "only the operations are too many")
	_, err = b.ExecTransaction(ctx, ops)
	require.ErrorIs(t, err, ErrTooLarge)

	big := make([]byte, b.maxPayload)
	big[0], big[len(big)-1] = '"', '"'
	for i := 1; i < len(big)-1; i++ {
		big[i] = 'x'
	}
	ops, size = nil, 0
	for size <= b.lim.maxBytes {
		ops = append(ops, TxOp{Push: &PushItem{Queue: "fat", Payload: big}})
		size, count = estimate(ops)
	}
	require.LessOrEqual(t, count, b.lim.maxOps, "only the bytes are too many")
	require.Greater(t, size, b.lim.maxBytes)
	_, err = b.ExecTransaction(ctx, ops)
	require.ErrorIs(t, err, ErrTooLarge)

	for _, q := range []string{"many", "fat"} {
		_, err := b.DescribeQueue(ctx, q)
		require.ErrorIs(t, err, ErrNotFound, "%s: nothing written", q)
	}
}

// pushItemsOf lists the pushes of ops.
func pushItemsOf(ops []TxOp) []PushItem {
	var out []PushItem
	for _, o := range ops {
		if o.Push != nil {
			out = append(out, *o.Push)
		}
	}
	return out
}

// While a deleted queue's sweep has not run, its partitions are gone to
// every call that names them by id: an ack or a renewal with what its pop
// returned is ErrNotFound, as after the sweep.
func TestBehaviour_DeletedQueuesPartitionsAreNotFoundBeforeTheSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Push(ctx, []PushItem{{Queue: "gone", TransactionID: "x", Payload: []byte(`1`)}})
	require.NoError(t, err)
	res, err := b.Pop(ctx, PopRequest{Queue: "gone", Group: "g", SubscriptionMode: SubscriptionModeAll})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	m := res.Messages[0]
	tk, _, err := b.unlinkQueue(ctx, "gone") // the sweep never runs
	require.NoError(t, err)
	require.NotNil(t, tk)

	_, err = b.Ack(ctx, m, true, AckOptions{})
	require.ErrorIs(t, err, ErrNotFound)
	_, err = b.Ack(ctx, m, true, AckOptions{LeaseID: ""})
	require.ErrorIs(t, err, ErrNotFound)
	_, err = b.GetMessage(ctx, m.PartitionID, "x")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = b.RenewLease(ctx, res.LeaseID, time.Minute)
	require.ErrorIs(t, err, ErrNotFound)
}

// A partition listed by a tombstone is not loaded at Open, even when a
// queue of the same name was created before the crash: the new queue
// holds only its own partitions, and the old one's messages stay gone.
func TestBehaviour_OpenSkipsPartitionsOfATombstone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = b.Push(ctx, []PushItem{{Queue: "q", Partition: "old", TransactionID: "x", Payload: []byte(`"old"`)}})
	require.NoError(t, err)
	tk, _, err := b.unlinkQueue(ctx, "q") // the sweep never runs
	require.NoError(t, err)
	require.NotNil(t, tk)
	_, err = b.Push(ctx, []PushItem{{Queue: "q", Partition: "new", TransactionID: "x", Payload: []byte(`"new"`)}})
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b, err = Open(dir, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	st, err := b.QueueStats(ctx, "q")
	require.NoError(t, err)
	var names []string
	for _, p := range st.Partitions {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"new"}, names, "the deleted queue's partition is not the new queue's")
	require.Equal(t, int64(1), st.Messages)
	f, err := b.Fetch(ctx, "q", "old", 0, 10)
	if err == nil {
		require.Empty(t, f.Records)
	}
}

// A message delete whose caller stopped waiting (its write still on the
// way) and a second delete of the same message record one hole: the
// second is ErrNotFound, and the counts stay right.
func TestBehaviour_RepeatedDeleteOfAMessageCountsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	var pid string
	for _, tx := range []string{"a", "b", "c"} {
		res, err := b.Push(ctx, []PushItem{{Queue: "q", TransactionID: tx, Payload: []byte(`1`)}})
		require.NoError(t, err)
		pid = res[0].PartitionID
	}
	held, _, release := HoldCommitsForTest(b)
	defer release() // before Close, should the test fail while the writer waits
	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, b.DeleteMessage(gone, pid, "b"), context.Canceled, "its write is queued behind the hold")
	<-held
	// The second finds the hole: ErrNotFound before it would write (or wait).
	require.ErrorIs(t, b.DeleteMessage(gone, pid, "b"), ErrNotFound, "already deleted")
	release()
	require.ErrorIs(t, b.DeleteMessage(ctx, pid, "b"), ErrNotFound)

	st, err := b.QueueStats(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Messages)
	b.mu.Lock()
	p := b.queues["q"].parts[DefaultPartition]
	var runs []holeRun
	if hs := p.holeSet(); hs != nil {
		runs = append(runs, hs.runs...)
	}
	n := p.holes()
	b.mu.Unlock()
	require.Equal(t, []holeRun{{1, 2}}, runs)
	require.Equal(t, int64(1), n)
}
