package queen

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/uuid"
	"github.com/stretchr/testify/require"
)

// craft writes a backup file holding entries, in the order given.
func craft(t *testing.T, entries ...[2]string) []byte {
	t.Helper()
	var w bytes.Buffer
	bw, err := newBackupWriter(&w, backupHeader{Format: StoreFormat, Next: 7})
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, bw.add(entrySet, []byte(e[0]), []byte(e[1])))
	}
	require.NoError(t, bw.close())
	return w.Bytes()
}

// TestRestore_RefusesWhatDoesNotLoad: a backup whose framing is sound but
// whose records Open could not load (a queue record that is not JSON) is
// refused, and leaves nothing behind.
func TestRestore_RefusesWhatDoesNotLoad(t *testing.T) {
	t.Parallel()
	bad := craft(t, [2]string{string(keys.QueueKey("q")), "{not json"})
	dir := filepath.Join(t.TempDir(), "store")
	err := Restore(context.Background(), dir, nil, bytes.NewReader(bad))
	require.ErrorIs(t, err, ErrCorruptBackup)
	left, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Empty(t, left)

	good := craft(t, [2]string{string(keys.QueueKey("q")), `{"id":"","createdAt":1,"config":{}}`})
	require.NoError(t, Restore(context.Background(), dir, nil, bytes.NewReader(good)))
}

// FuzzBackupReader feeds the reader arbitrary bytes: it never panics, and
// whatever it accepts to the end had an end record whose count matched.
func FuzzBackupReader(f *testing.F) {
	var w bytes.Buffer
	bw, _ := newBackupWriter(&w, backupHeader{Format: StoreFormat, Since: 3, Next: 9})
	_ = bw.add(entrySet, []byte("Qa"), []byte("1"))
	_ = bw.add(entryKeep, []byte("Qab"), nil)
	_ = bw.add(entrySet, []byte("Qb"), []byte{})
	_ = bw.close()
	f.Add(w.Bytes())
	f.Add(w.Bytes()[:40])
	f.Add([]byte(backupMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		br, err := readBackupHeader(bytes.NewReader(data))
		if err != nil {
			return
		}
		for n := 0; ; n++ {
			_, _, _, err := br.next()
			if err == io.EOF {
				require.True(t, br.done)
				return
			}
			if err != nil {
				return
			}
			require.Less(t, n, len(data), "more entries than bytes")
		}
	})
}

// applied applies backups in order to a new in-memory database and
// returns what it then holds, or the first error.
func applied(t *testing.T, backups ...[]byte) (map[string]string, error) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	require.NoError(t, err)
	defer db.Close()
	for i, data := range backups {
		br, err := readBackupHeader(bytes.NewReader(data))
		require.NoError(t, err)
		if err := applyBackup(context.Background(), db, br, i > 0); err != nil {
			return nil, err
		}
	}
	out := map[string]string{}
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[string(it.Item().KeyCopy(nil))] = string(v)
		}
		return nil
	}))
	return out, nil
}

// TestRestore_IncrementDeletesWhatItNoLongerNames: applied over its base,
// an increment deletes the keys it does not name (before its first key,
// between two, and after its last: the end of the keyspace), keeps those
// it names without a value, sets the others; a key it keeps that its base
// lacks is ErrBackupChain; a full backup that names a key without its
// value is ErrCorruptBackup.
func TestRestore_IncrementDeletesWhatItNoLongerNames(t *testing.T) {
	t.Parallel()
	id := uuid.NewV4()
	full := backupOf(t, backupHeader{Format: StoreFormat, Next: 5, Store: id},
		[3]string{"set", "a", "1"}, [3]string{"set", "b", "2"}, [3]string{"set", "b2", "x"},
		[3]string{"set", "c", "3"}, [3]string{"set", "d", "4"}, [3]string{"set", "e", "5"}, [3]string{"set", "zz", "6"})
	inc := backupOf(t, backupHeader{Format: StoreFormat, Since: 5, Next: 9, Store: id},
		[3]string{"keep", "b", ""}, [3]string{"set", "c", "3'"}, [3]string{"keep", "d", ""}, [3]string{"set", "d2", "new"})
	got, err := applied(t, full, inc)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"b": "2", "c": "3'", "d": "4", "d2": "new"}, got)

	// An increment naming nothing deletes everything.
	got, err = applied(t, full, backupOf(t, backupHeader{Format: StoreFormat, Since: 5, Next: 9, Store: id}))
	require.NoError(t, err)
	require.Empty(t, got)

	for name, bad := range map[string][3]string{
		"before every key": {"keep", "0", ""},
		"between two":      {"keep", "bb", ""},
		"after every key":  {"keep", "zzz", ""},
	} {
		entries := [][3]string{{"keep", "b", ""}, {"keep", "c", ""}}
		switch name {
		case "before every key":
			entries = append([][3]string{bad}, entries...)
		case "between two":
			entries = [][3]string{entries[0], bad, entries[1]}
		default:
			entries = append(entries, bad)
		}
		_, err := applied(t, full, backupOf(t, backupHeader{Format: StoreFormat, Since: 5, Next: 9, Store: id}, entries...))
		require.ErrorIs(t, err, ErrBackupChain, name)
	}
	_, err = applied(t, backupOf(t, backupHeader{Format: StoreFormat, Next: 5, Store: id}, [3]string{"set", "a", "1"}, [3]string{"keep", "b", ""}))
	require.ErrorIs(t, err, ErrCorruptBackup, "a full backup with a key by name only")
}
