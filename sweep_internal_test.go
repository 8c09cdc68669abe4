package queen

import (
	"context"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/stretchr/testify/require"
)

// A deletion cut short after its first write (a crash before the sweep)
// is finished by the next Open, and neither the old partitions' ids nor
// their data leak into a queue created under the same name.
func TestSweep_UnfinishedDeleteResumesAtOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, nil)
	require.NoError(t, err)
	for _, tx := range []string{"x", "y"} {
		_, err := b.Push(ctx, []PushItem{{Queue: "gone", Partition: "p", TransactionID: tx, Payload: []byte(`"old"`)}})
		require.NoError(t, err)
	}
	res, err := b.Pop(ctx, PopRequest{Queue: "gone", Group: "g", SubscriptionMode: SubscriptionModeAll, Batch: 2})
	require.NoError(t, err)
	_, err = b.AckBatch(ctx, []AckItem{{TransactionID: "x", PartitionID: res.Messages[0].PartitionID, Group: "g", LeaseID: res.LeaseID, Status: AckDLQ}})
	require.NoError(t, err)
	tk, _, err := b.unlinkQueue(ctx, "gone") // the sweep never runs
	require.NoError(t, err)
	require.NotNil(t, tk)
	require.NoError(t, b.Close())

	b, err = Open(dir, nil)
	require.NoError(t, err)
	defer b.Close()
	r, err := b.Push(ctx, []PushItem{{Queue: "gone", Partition: "p", TransactionID: "x", Payload: []byte(`"new"`)}})
	require.NoError(t, err)
	require.Equal(t, PushQueued, r[0].Status, "the old queue's ids do not leak into the new one")
	require.Equal(t, int64(0), r[0].Offset)
	res, err = b.Pop(ctx, PopRequest{Queue: "gone", Group: "g", SubscriptionMode: SubscriptionModeAll, Batch: 10})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	require.Equal(t, `"new"`, string(res.Messages[0].Payload))

	// The sweep removes every key of the old partition, its dead letter and the tombstone.
	require.Eventually(t, func() bool {
		left := 0
		_ = b.db.View(func(txn *badger.Txn) error {
			for _, prefix := range [][]byte{{keys.Tombstone}, {keys.DeadLetter}} {
				it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
				for it.Rewind(); it.Valid(); it.Next() {
					left++
				}
				it.Close()
			}
			return nil
		})
		return left == 0
	}, 10*time.Second, 10*time.Millisecond)
	page, err := b.DeadLetters(ctx, LetterFilter{})
	require.NoError(t, err)
	require.Zero(t, page.Total)
}

// Open keeps the ids of the partitions of a queue still being swept from
// being handed out again until the sweep ends, even once the sweep has
// dropped their metadata (a crash after that step, before the tombstone
// went): a new partition given such an id would be deleted by the sweep.
func TestSweep_OpenReservesIDsOfPartitionsBeingSwept(t *testing.T) {
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

// While a deleted queue's sweep has not run, its partitions are gone to
// every call that names them by id: an ack or a renewal with what its pop
// returned is ErrNotFound, as after the sweep.
func TestSweep_DeletedQueuesPartitionsAreNotFoundBeforeIt(t *testing.T) {
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
