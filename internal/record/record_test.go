package record_test

import (
	"testing"

	"github.com/queenlite/queen/internal/leakcheck"
	"github.com/queenlite/queen/internal/record"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { leakcheck.Main(m, nil) }

// FuzzDecodeMessage feeds arbitrary bytes to the decoders: they must never
// panic, and whatever decodes must survive encode + decode unchanged (the
// varint lengths accept non-minimal forms, so the bytes may differ).
func FuzzDecodeMessage(f *testing.F) {
	good := record.AppendMessage(nil, &record.Message{Flags: 1, CreatedAt: 1700000000000000, TxID: "tx", TraceID: "tr", ProducerSub: "p", Payload: []byte(`{"a":1}`)})
	f.Add(good)
	f.Add(good[:26])
	f.Add(good[:27])
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add(append(append([]byte{}, good[:26]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01))
	f.Add(record.AppendCursor(nil, record.Cursor{Offset: 5, Retries: 2, Consumed: 9, LastAckAt: 3}))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		var m record.Message
		if err := record.DecodeMessage(b, &m); err == nil {
			var again record.Message
			require.NoError(t, record.DecodeMessage(record.AppendMessage(nil, &m), &again))
			require.Equal(t, m, again)
			ts, ok := record.MessageCreatedAt(b)
			require.True(t, ok)
			require.Equal(t, m.CreatedAt, ts)
			// The payload is a copy: changing the input leaves it alone.
			if len(m.Payload) > 0 {
				b[len(b)-1]++
				require.Equal(t, in[len(in)-1], m.Payload[len(m.Payload)-1])
			}
		} else {
			require.ErrorIs(t, err, record.ErrCorrupt)
		}
		if c, err := record.DecodeCursor(in); err == nil {
			require.Equal(t, in, record.AppendCursor(nil, c))
		}
		if o, err := record.DecodeOffset(in); err == nil {
			require.Equal(t, in, record.Offset(o))
		}
	})
}

// FuzzMessageRoundTrip encodes messages with arbitrary fields and decodes
// them back.
func FuzzMessageRoundTrip(f *testing.F) {
	f.Add(byte(0), int64(0), []byte("0123456789abcdef"), "", "", "", []byte("null"))
	f.Add(byte(1), int64(-1), []byte{}, "tx\x00", "\xff", "sub", []byte{0, 1, 2})
	f.Add(byte(255), int64(1<<62), []byte("x"), string(make([]byte, 300)), "t", "", []byte{})
	f.Fuzz(func(t *testing.T, flags byte, createdAt int64, id []byte, txid, trace, sub string, payload []byte) {
		m := record.Message{Flags: flags, CreatedAt: createdAt, TxID: txid, TraceID: trace, ProducerSub: sub, Payload: payload}
		copy(m.ID[:], id)
		enc := record.AppendMessage(nil, &m)
		if len(txid) < 1<<21 && len(trace) < 1<<21 && len(sub) < 1<<21 {
			require.LessOrEqual(t, len(enc), record.MessageSize(&m))
		}
		var got record.Message
		require.NoError(t, record.DecodeMessage(enc, &got))
		if got.Payload == nil {
			got.Payload = []byte{}
		}
		if m.Payload == nil {
			m.Payload = []byte{}
		}
		require.Equal(t, m, got)
	})
}

func TestCursor_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []record.Cursor{{}, {Offset: 1 << 40, Retries: -1, Consumed: 7, LastAckAt: 1 << 50}} {
		got, err := record.DecodeCursor(record.AppendCursor(nil, c))
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	_, err := record.DecodeCursor(append(record.AppendCursor(nil, record.Cursor{}), 0))
	require.ErrorIs(t, err, record.ErrCorrupt)
}

// FuzzPartitionRoundTrip encodes partition metadata with arbitrary fields
// and decodes it back; any prefix of an encoding is refused, not misread.
func FuzzPartitionRoundTrip(f *testing.F) {
	f.Add("q", "Default", int64(1796040000000000), int64(0), int64(0), int64(0), int64(0), []byte{})
	f.Add("", "\xff", int64(-1), int64(1<<40), int64(1<<41), int64(3), int64(1796040000000001), []byte{1, 3, 4, 5})
	f.Fuzz(func(t *testing.T, queue, name string, created, first, next, holes, last int64, runs []byte) {
		m := record.Partition{Queue: queue, Name: name, CreatedAt: created, First: first, Next: next, Holes: holes, LastPush: last}
		for _, r := range runs {
			m.HoleRuns = append(m.HoleRuns, int64(r)<<33-int64(r))
		}
		enc := record.AppendPartition(nil, &m)
		var got record.Partition
		require.NoError(t, record.DecodePartition(enc, &got))
		require.Equal(t, m, got)
		// DecodePartitionRef gives the same, the queue's name apart.
		var ref record.Partition
		qn, err := record.DecodePartitionRef(enc, &ref)
		require.NoError(t, err)
		require.Equal(t, queue, string(qn))
		require.Empty(t, ref.Queue)
		ref.Queue = string(qn)
		require.Equal(t, m, ref)
		for i := range enc {
			require.ErrorIs(t, record.DecodePartition(enc[:i], &got), record.ErrCorrupt, "prefix of %d bytes", i)
		}
	})
}

// TestPartition_DecodesJSON reads the JSON form stores before the binary
// one hold.
func TestPartition_DecodesJSON(t *testing.T) {
	t.Parallel()
	var got record.Partition
	require.NoError(t, record.DecodePartition([]byte(`{"q":"orders","n":"c42","c":1796040000000000,"f":3,"x":9,"h":2,"hr":[4,5,7,8],"l":1796040000000007}`), &got))
	require.Equal(t, record.Partition{Queue: "orders", Name: "c42", CreatedAt: 1796040000000000, First: 3, Next: 9, Holes: 2, HoleRuns: []int64{4, 5, 7, 8}, LastPush: 1796040000000007}, got)
	require.NoError(t, record.DecodePartition([]byte(`{"q":"orders","n":"Default","c":1796040000000000,"f":0}`), &got))
	require.Equal(t, record.Partition{Queue: "orders", Name: "Default", CreatedAt: 1796040000000000}, got)
	require.ErrorIs(t, record.DecodePartition([]byte(`{"q":`), &got), record.ErrCorrupt)
	qn, err := record.DecodePartitionRef([]byte(`{"q":"orders","n":"c42","c":1796040000000000,"f":3}`), &got)
	require.NoError(t, err)
	require.Equal(t, "orders", string(qn))
	require.Equal(t, record.Partition{Name: "c42", CreatedAt: 1796040000000000, First: 3}, got)
}
