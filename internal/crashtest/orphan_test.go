package crashtest_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/keys"
	"github.com/stretchr/testify/require"
)

// TestDefect_InterruptedQueueDeleteLeaksIntoNewQueue: DeleteQueue removes
// the queue's metadata key in its first commit and its partitions,
// messages, dedup entries and cursors in later ones. If the process dies
// between them (or the caller's context ends: DeleteQueue returns and
// never submits the rest), the next open skips the orphaned partitions
// but does not delete them, and a partition created later reuses an
// orphan's internal id: a push to a brand-new queue is then reported a
// duplicate of a message of the deleted queue, and is not stored. The
// state after the first commit is made here by deleting the metadata key
// directly.
func TestDefect_InterruptedQueueDeleteLeaksIntoNewQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	require.NoError(t, err)
	defer db.Close()
	b, err := queen.OpenDB(db, nil)
	require.NoError(t, err)
	push := func(queue, txid, payload string) queen.PushResult {
		res, err := b.Push(ctx, []queen.PushItem{{Queue: queue, TransactionID: txid, Payload: json.RawMessage(payload)}})
		require.NoError(t, err)
		return res[0]
	}
	push("keep", "k", `1`)
	for _, tx := range []string{"x", "y", "z"} {
		push("gone", tx, `"old"`)
	}
	require.NoError(t, b.Close())
	require.NoError(t, db.Update(func(txn *badger.Txn) error { return txn.Delete(keys.QueueKey("gone")) }))

	b, err = queen.OpenDB(db, nil)
	require.NoError(t, err)
	defer b.Close()
	r := push("new", "x", `"new"`)
	require.Equal(t, queen.PushQueued, r.Status, "a new queue sees the deleted queue's transactionIds")
	f, err := b.Fetch(ctx, "new", "", 0, 10)
	require.NoError(t, err)
	require.Len(t, f.Records, 1)
	require.Equal(t, `"new"`, string(f.Records[0].Payload))
}
