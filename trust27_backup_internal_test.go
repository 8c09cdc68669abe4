package queen

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/uuid"
	"github.com/stretchr/testify/require"
)

// readAll reads a backup file to its end: its header and its entries by
// op, or the first error.
func readAll(data []byte) (h backupHeader, sets, keeps map[string]string, err error) {
	br, err := readBackupHeader(bytes.NewReader(data))
	if err != nil {
		return h, nil, nil, err
	}
	sets, keeps = map[string]string{}, map[string]string{}
	for {
		op, k, v, err := br.next()
		if err == io.EOF {
			return br.h, sets, keeps, nil
		}
		if err != nil {
			return br.h, sets, keeps, err
		}
		if op == entrySet {
			sets[string(k)] = string(v)
		} else {
			keeps[string(k)] = ""
		}
	}
}

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

// forgeEnd rewrites the end chunk of a backup file (its last 5+16+4 bytes)
// with payload, its checksum made right.
func forgeEnd(t *testing.T, data, payload []byte) []byte {
	t.Helper()
	body := bytes.Clone(data[:len(data)-25])
	require.Equal(t, chunkEnd, data[len(data)-25], "the last chunk is the end")
	var out bytes.Buffer
	out.Write(body)
	require.NoError(t, writeChunk(&out, chunkEnd, payload))
	return out.Bytes()
}

// TestBackupReader_RefusesForgedEnds: the end record must say exactly how
// many entries the file holds and the header's next version, in a chunk
// of exactly 16 bytes; a forged one, its checksum right, is refused.
func TestBackupReader_RefusesForgedEnds(t *testing.T) {
	t.Parallel()
	good := craft(t, [2]string{"Qa", "1"}, [2]string{"Qb", "2"}, [2]string{"Qc", "3"})
	_, sets, _, err := readAll(good)
	require.NoError(t, err)
	require.Len(t, sets, 3)
	end := func(entries, next uint64) []byte {
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, entries), next)
	}
	require.Equal(t, good, forgeEnd(t, good, end(3, 7)), "forgeEnd rewrites the end as the writer does")
	for name, payload := range map[string][]byte{
		"one entry too many":      end(4, 7),
		"one entry too few":       end(2, 7),
		"no entries":              end(0, 7),
		"another next":            end(3, 8),
		"next zero":               end(3, 0),
		"8 bytes more":            append(end(3, 7), end(0, 0)[:8]...),
		"one byte more":           append(end(3, 7), 0),
		"8 bytes":                 end(3, 7)[:8],
		"empty":                   nil,
		"the entries count alone": binary.BigEndian.AppendUint64(nil, 3),
	} {
		_, _, _, err := readAll(forgeEnd(t, good, payload))
		require.ErrorIs(t, err, ErrCorruptBackup, name)
	}
}

// backupOf writes a backup file of entries (op, key, value) with the given
// header.
func backupOf(t *testing.T, h backupHeader, entries ...[3]string) []byte {
	t.Helper()
	var w bytes.Buffer
	bw, err := newBackupWriter(&w, h)
	require.NoError(t, err)
	for _, e := range entries {
		op := entrySet
		if e[0] == "keep" {
			op = entryKeep
		}
		require.NoError(t, bw.add(op, []byte(e[1]), []byte(e[2])))
	}
	require.NoError(t, bw.close())
	return w.Bytes()
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

// TestBackupReader_ChunkChecksumCoversItsHead: a chunk whose type or
// length byte was changed, its payload's checksum alone made right, is
// refused.
func TestBackupReader_ChunkChecksumCoversItsHead(t *testing.T) {
	t.Parallel()
	good := craft(t, [2]string{"Qa", "1"})
	bad := bytes.Clone(good)
	at := backupHeaderSize // the entries chunk
	n := binary.BigEndian.Uint32(bad[at+1:])
	payload := bad[at+5 : at+5+int(n)]
	binary.BigEndian.PutUint32(bad[at+5+int(n):], crc32.Checksum(payload, castagnoli))
	_, _, _, err := readAll(bad)
	require.ErrorIs(t, err, ErrCorruptBackup)
}
