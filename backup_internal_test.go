package queen

import (
	"testing"

	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/stretchr/testify/require"
)

// newerThan lists the keys of b's store whose latest version is above v.
func newerThan(t *testing.T, b *Broker, v uint64) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	require.NoError(t, b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if it.Item().Version() > v {
				out[string(it.Item().KeyCopy(nil))] = true
			}
		}
		return nil
	}))
	return out
}

// TestBackup_IncrementCarriesOnlyWhatCameAfterItsBase: an increment
// carries the value of exactly the keys written after its base's next,
// none of those its base's own last commit wrote, and names every other
// key without its value.
func TestBackup_IncrementCarriesOnlyWhatCameAfterItsBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open("", &Options{InMemory: true, MaintenanceInterval: time.Hour})
	require.NoError(t, err)
	defer b.Close()
	push := func(txid string) {
		t.Helper()
		res, err := b.Push(ctx, []PushItem{{Queue: "q", TransactionID: txid, Payload: json.RawMessage(`{"t":"` + txid + `"}`)}})
		require.NoError(t, err)
		require.Equal(t, PushQueued, res[0].Status)
	}
	push("a")
	push("b") // the base's last commit
	var full bytes.Buffer
	next, err := b.Backup(ctx, &full, 0)
	require.NoError(t, err)
	_, fullSets, fullKeeps, err := readAll(full.Bytes())
	require.NoError(t, err)
	require.Empty(t, fullKeeps, "a full backup carries every value")
	require.NotEmpty(t, newerThan(t, b, next-1), "the base's last commit wrote keys at version next")

	// Nothing written since but the format record, which each backup
	// writes again after its snapshot (keepVersionsAhead): every other key
	// by name, no value.
	var inc bytes.Buffer
	_, err = b.Backup(ctx, &inc, next)
	require.NoError(t, err)
	h, sets, keeps, err := readAll(inc.Bytes())
	require.NoError(t, err)
	require.Equal(t, next, h.Since)
	require.Equal(t, []string{string(keys.FormatKey())}, slices.Collect(maps.Keys(sets)), "an increment with nothing new carries values")
	require.Len(t, keeps, len(fullSets)-1)

	// One push since: exactly the keys it wrote carry values.
	push("c")
	inc.Reset()
	next3, err := b.Backup(ctx, &inc, next)
	require.NoError(t, err)
	require.Greater(t, next3, next)
	_, sets, keeps, err = readAll(inc.Bytes())
	require.NoError(t, err)
	want := newerThan(t, b, next)
	require.NotEmpty(t, want)
	got := map[string]bool{}
	for k := range sets {
		got[k] = true
	}
	require.Equal(t, want, got)
	require.Equal(t, len(newerThan(t, b, 0)), len(sets)+len(keeps), "every key named once")
}
