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

// TestCrash_InterruptedQueueDeleteDoesNotLeak: DeleteQueue removes the
// queue's metadata in its first commit and its partitions, messages, dedup
// entries and cursors in later ones. A process that dies between them (or
// a caller whose context ends) leaves the rest on disk. Found as a defect:
// the next open skipped the orphans without deleting them, and a partition
// created later reused an orphan's internal id, so a push to a brand-new
// queue was reported a duplicate of a deleted message and not stored. The
// state after the first commit is made here by deleting the metadata key
// directly, as an old broker would have left it.
func TestCrash_InterruptedQueueDeleteDoesNotLeak(t *testing.T) {
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
