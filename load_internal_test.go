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

// TestLoad_PartitionsOfInterleavedQueues: partitions of two queues created
// alternately (their records interleave in pid order) are each loaded into
// their own queue, with their offsets, and the slices cut to size after
// the load still take new partitions.
func TestLoad_PartitionsOfInterleavedQueues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	b, err := Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	names := []string{"p0", "p1", "p2", "p3", "p4"}
	for i, name := range names {
		for _, qn := range []string{"qa", "qb"} {
			for range i + 1 {
				_, err := b.Push(ctx, []PushItem{{Queue: qn, Partition: name, Payload: []byte(`1`)}})
				require.NoError(t, err)
			}
		}
	}
	require.NoError(t, b.Close())

	b, err = Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	defer b.Close()
	func() {
		b.mu.Lock()
		defer b.mu.Unlock() // a failed check must not leave it held for Close
		for _, qn := range []string{"qa", "qb"} {
			q := b.queues[qn]
			require.Len(t, q.order, len(names), qn)
			require.Len(t, q.parts, len(names), qn)
			require.Equal(t, int64(15), q.count, qn)
			for i, name := range names {
				p := q.parts[name]
				require.NotNil(t, p, "%s/%s", qn, name)
				require.Same(t, q, p.q, "%s/%s", qn, name)
				require.Same(t, p, q.order[i], "%s/%s: pid order", qn, name)
				require.Same(t, p, b.parts[p.pid])
				require.Equal(t, int64(i+1), p.next, "%s/%s", qn, name)
			}
		}
	}()
	checkPending(t, b, "after Open")
	for _, qn := range []string{"qa", "qb"} {
		res, err := b.Push(ctx, []PushItem{{Queue: qn, Partition: "new", Payload: []byte(`2`)}, {Queue: qn, Partition: "p4", Payload: []byte(`2`)}})
		require.NoError(t, err)
		require.Equal(t, int64(0), res[0].Offset)
		require.Equal(t, int64(5), res[1].Offset)
	}
	checkPending(t, b, "after pushes")
	b.mu.Lock()
	n, last, added := len(b.queues["qa"].order), b.queues["qa"].order[len(b.queues["qa"].order)-1], b.queues["qa"].parts["new"]
	b.mu.Unlock()
	require.Equal(t, len(names)+1, n)
	require.Same(t, added, last)
}

// A partition listed by a tombstone is not loaded at Open, even when a
// queue of the same name was created before the crash: the new queue
// holds only its own partitions, and the old one's messages stay gone.
func TestLoad_SkipsPartitionsOfATombstone(t *testing.T) {
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
