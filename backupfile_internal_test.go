package queen

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

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

// TestBackupReader_RefusesAnEntryLongerThanItsChunk: an entry whose key
// length runs past the end of its chunk, its checksum right, is refused
// with ErrCorruptBackup; the reader never slices past what it holds.
func TestBackupReader_RefusesAnEntryLongerThanItsChunk(t *testing.T) {
	t.Parallel()
	good := craft(t, [2]string{"Qa", "1"})
	at := bytes.Index(good, []byte{entrySet, 0, 2, 'Q', 'a'}) // op, shared 0, rest 2, key
	require.Positive(t, at)
	// The chunk holding it: the head whose length and checksum frame it.
	chunk := -1
	for q := at - 5; q >= 0; q-- {
		n := int(binary.BigEndian.Uint32(good[q+1 : q+5]))
		end := q + 5 + n
		if end+4 > len(good) || end <= at {
			continue
		}
		if crc32.Checksum(good[q:end], castagnoli) == binary.BigEndian.Uint32(good[end:end+4]) {
			chunk = q
			break
		}
	}
	require.GreaterOrEqual(t, chunk, 0, "the entries chunk is found")
	for _, rest := range []byte{0x40, 0x7f} { // beyond the chunk's bytes
		bad := bytes.Clone(good)
		bad[at+2] = rest
		n := int(binary.BigEndian.Uint32(bad[chunk+1 : chunk+5]))
		end := chunk + 5 + n
		binary.BigEndian.PutUint32(bad[end:end+4], crc32.Checksum(bad[chunk:end], castagnoli))
		_, _, _, err := readAll(bad)
		require.ErrorIs(t, err, ErrCorruptBackup, "key length %d", rest)
	}
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
