package queen

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

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
