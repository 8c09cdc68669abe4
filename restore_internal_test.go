package queen

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/queenlite/queen/internal/keys"
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

// TestBackupReader_RefusesKeysOutOfOrder: entries must be in strictly
// ascending key order, each key once (a restore merges on that order).
func TestBackupReader_RefusesKeysOutOfOrder(t *testing.T) {
	t.Parallel()
	for _, entries := range [][][2]string{
		{{"Qb", "1"}, {"Qa", "2"}},
		{{"Qa", "1"}, {"Qa", "2"}},
	} {
		br, err := readBackupHeader(bytes.NewReader(craft(t, entries...)))
		require.NoError(t, err)
		_, _, _, err = br.next()
		require.NoError(t, err)
		_, _, _, err = br.next()
		require.ErrorIs(t, err, ErrCorruptBackup, "%v", entries)
	}
	br, err := readBackupHeader(bytes.NewReader(craft(t, [2]string{"Qa", "1"}, [2]string{"Qab", "2"}, [2]string{"Qb", ""})))
	require.NoError(t, err)
	var got []string
	for {
		_, k, v, err := br.next()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		got = append(got, string(k)+"="+string(v))
	}
	require.Equal(t, []string{"Qa=1", "Qab=2", "Qb="}, got)
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
