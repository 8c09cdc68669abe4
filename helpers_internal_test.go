package queen

import (
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/stretchr/testify/require"
)

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
