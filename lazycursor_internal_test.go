package queen

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/stretchr/testify/require"
)

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
	require.Equal(t, 1, madeCursors(b, "nq", "n"), "the pop of c1 made one, at its end")

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

// A store written before partitions were stored in binary and groups
// carried a partition mark (JSON partition metadata; a group in mode
// "new" with a stored cursor wherever it started past the first message)
// opens and reads as it did.
func TestLoad_StoreOfEarlierVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	_, err = b.Push(ctx, []PushItem{{Queue: "old", Partition: "a"}, {Queue: "old", Partition: "a"}, {Queue: "old", Partition: "b"}})
	require.NoError(t, err)
	require.NoError(t, b.Close())

	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	require.NoError(t, err)
	require.NoError(t, db.Update(func(txn *badger.Txn) error {
		var metas []partitionMeta
		var pids []uint64
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{keys.Partition}, PrefetchValues: true})
		for it.Rewind(); it.Valid(); it.Next() {
			var m partitionMeta
			require.NoError(t, it.Item().Value(func(v []byte) error { return record.DecodePartition(v, &m) }))
			metas = append(metas, m)
			pids = append(pids, binary.BigEndian.Uint64(it.Item().Key()[1:]))
		}
		it.Close()
		require.Len(t, metas, 2)
		for i, m := range metas {
			v, _ := json.Marshal(m)
			require.NoError(t, txn.Set(keys.PartitionKey(pids[i]), v))
			// Where the old join put a group in mode "new": at the end.
			next := map[string]int64{"a": 2, "b": 1}[m.Name]
			require.NoError(t, txn.Set(keys.CursorKey(pids[i], "n"), record.AppendCursor(nil, record.Cursor{Offset: next})))
		}
		v, _ := json.Marshal(map[string]any{"m": SubscriptionModeNew, "j": 1})
		return txn.Set(keys.GroupKey("old", "n"), v)
	}))
	require.NoError(t, db.Close())

	b, err = Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Push(ctx, []PushItem{{Queue: "old", Partition: "a", TransactionID: "new-a"}, {Queue: "old", Partition: "c", TransactionID: "new-c"}})
	require.NoError(t, err)
	var got []string
	for _, group := range []string{"n", "all"} {
		res, err := b.Pop(ctx, PopRequest{Queue: "old", Group: group, SubscriptionMode: SubscriptionModeAll, Batch: 10, Partitions: 10})
		require.NoError(t, err)
		for _, m := range res.Messages {
			got = append(got, group+":"+m.Partition+"@"+strconv.FormatInt(m.Offset, 10))
		}
	}
	require.ElementsMatch(t, []string{"n:a@2", "n:c@0", "all:a@0", "all:a@1", "all:a@2", "all:b@0", "all:c@0"}, got)
}

// A write rolled back after arrivalCursors added the cursor of a group in
// mode "new" (a batch refused for its size, or for a transaction's push,
// is written again request by request) must not leave the cursor marked
// stored: the write that replaces it stores it, so a restart finds the
// group where it started. It used to skip it (found by the concurrent
// model test: a cursor further on after a restart than before).
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
	bad := &writeReq{ops: []command{setKey{nil, []byte("x")}}} // Badger refuses an empty key
	_, err = b.w.write([]*writeReq{{push: pr}, bad}, map[*partition]int64{})
	require.Error(t, err)
	touched := map[*partition]int64{}
	ts, err := b.w.write([]*writeReq{{push: pr}}, touched)
	require.NoError(t, err)
	b.w.publish(touched, ts, []*writeReq{{push: pr}})

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
