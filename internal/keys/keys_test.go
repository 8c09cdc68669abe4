package keys_test

import (
	"bytes"
	"cmp"
	"math"
	"strings"
	"testing"

	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/leakcheck"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { leakcheck.Main(m, nil) }

// FuzzKeyRoundTrip checks that message and cursor keys decode to what
// encoded them, that message keys of a partition sort by offset and stay
// inside their partition's prefix, that partitions never interleave, and
// that decoding arbitrary bytes never panics.
func FuzzKeyRoundTrip(f *testing.F) {
	f.Add(uint64(1), int64(0), uint64(2), int64(1), "g", []byte("M"))
	f.Add(uint64(0), int64(255), uint64(0), int64(256), "", []byte{})
	f.Add(uint64(math.MaxUint64), int64(math.MaxInt64), uint64(math.MaxUint64-1), int64(0), "__QUEUE_MODE__", []byte("C\x00\x00\x00\x00\x00\x00\x00\x01g"))
	f.Add(uint64(1<<56), int64(1<<8), uint64(1<<8), int64(1<<56), "ü\xff", []byte("M\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02"))
	f.Fuzz(func(t *testing.T, pid1 uint64, off1 int64, pid2 uint64, off2 int64, group string, garbage []byte) {
		if off1 < 0 {
			off1 = -(off1 + 1) // offsets are never negative
		}
		if off2 < 0 {
			off2 = -(off2 + 1)
		}
		k1, k2 := keys.MessageKey(pid1, off1), keys.MessageKey(pid2, off2)

		p, o, ok := keys.DecodeMessageKey(k1)
		require.True(t, ok)
		require.Equal(t, pid1, p)
		require.Equal(t, off1, o)
		require.Equal(t, k1, keys.AppendMessageKey(nil, pid1, off1))
		require.True(t, bytes.HasPrefix(k1, keys.MessagePrefix(pid1)))
		require.Equal(t, keys.MessagePrefix(pid1), keys.PartitionScoped(keys.Message, pid1))

		// Order: by partition, then by offset.
		want := cmp.Compare(pid1, pid2)
		if want == 0 {
			want = cmp.Compare(off1, off2)
		}
		require.Equal(t, want, bytes.Compare(k1, k2), "MessageKey(%d,%d) vs MessageKey(%d,%d)", pid1, off1, pid2, off2)
		require.Equal(t, pid1 == pid2, bytes.HasPrefix(k2, keys.MessagePrefix(pid1)))

		c := keys.CursorKey(pid1, group)
		cp, cg, ok := keys.DecodeCursorKey(c)
		require.True(t, ok)
		require.Equal(t, pid1, cp)
		require.Equal(t, group, cg)
		require.True(t, bytes.HasPrefix(c, keys.PartitionScoped(keys.Cursor, pid1)))

		tx := keys.TxIDKey(pid1, group)
		require.True(t, bytes.HasPrefix(tx, keys.PartitionScoped(keys.TxID, pid1)))
		require.Equal(t, pid1 == pid2, bytes.HasPrefix(keys.TxIDKey(pid2, group), keys.PartitionScoped(keys.TxID, pid1)))

		// Decoding never panics, and what decodes re-encodes to the input.
		if p, o, ok := keys.DecodeMessageKey(garbage); ok {
			require.Equal(t, garbage, keys.MessageKey(p, o))
		}
		if p, g, ok := keys.DecodeCursorKey(garbage); ok {
			require.Equal(t, garbage, keys.CursorKey(p, g))
		}
	})
}

// FuzzGroupKeyPrefix checks that a queue's group prefix matches the group
// keys of that queue only (names never hold NUL, which the broker refuses),
// so deleting a queue never deletes another queue's groups.
func FuzzGroupKeyPrefix(f *testing.F) {
	f.Add("orders", "billing", "orders.eu", "x")
	f.Add("a", "b", "a", "")
	f.Add("", "", "q", "g")
	f.Fuzz(func(t *testing.T, q1, g1, q2, g2 string) {
		if strings.Contains(q1+g1+q2+g2, "\x00") {
			t.Skip("names never contain NUL")
		}
		require.Equal(t, q1 == q2, bytes.HasPrefix(keys.GroupKey(q1, g1), keys.GroupPrefix(q2)))
		require.True(t, bytes.HasPrefix(keys.GroupKey(q1, g1), keys.GroupPrefix(q1)))
		require.Equal(t, q1 == q2 && g1 == g2, bytes.Equal(keys.GroupKey(q1, g1), keys.GroupKey(q2, g2)))
		require.Equal(t, q1 == q2, bytes.Equal(keys.QueueKey(q1), keys.QueueKey(q2)))
	})
}

func TestMessageKey_OrderAcrossByteBoundaries(t *testing.T) {
	t.Parallel()
	// Offsets whose little-endian or decimal forms would sort wrongly.
	offs := []int64{0, 1, 9, 10, 255, 256, 65535, 65536, 1 << 31, 1 << 32, math.MaxInt64}
	for i := 1; i < len(offs); i++ {
		require.Negative(t, bytes.Compare(keys.MessageKey(7, offs[i-1]), keys.MessageKey(7, offs[i])), "%d < %d", offs[i-1], offs[i])
	}
	// The last message of a partition sorts before the first of the next.
	require.Negative(t, bytes.Compare(keys.MessageKey(7, math.MaxInt64), keys.MessageKey(8, 0)))
	// Kinds never share a prefix: a message prefix does not cover a cursor.
	require.False(t, bytes.HasPrefix(keys.CursorKey(7, ""), keys.MessagePrefix(7)))
}

func TestTracePrefix_SeparatesTransactionIDs(t *testing.T) {
	t.Parallel()
	var id [16]byte
	// "ab" must not be found under the prefix of "a".
	require.False(t, bytes.HasPrefix(keys.TraceKey(1, "ab", id), keys.TracePrefix(1, "a")))
	require.True(t, bytes.HasPrefix(keys.TraceKey(1, "a", id), keys.TracePrefix(1, "a")))
}
