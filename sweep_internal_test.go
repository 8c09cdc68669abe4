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
