package queen

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/uuid"
	"github.com/stretchr/testify/require"
)

// FuzzLetterHead: what a listing reads of a letter's header in place
// (scanLetterHead) is what encoding/json reads of it, for every header
// encodeLetter writes, names and error texts with escapes included; and
// headers in encodeLetter's plain form are read in place, not through
// encoding/json.
func FuzzLetterHead(f *testing.F) {
	f.Add("orders", "p", "billing", "gave up", uint64(3), int64(1700000000000000))
	f.Add(`q"<>&`, "p\n\\x", "g\u2028", `"quoted", {nested}: [1]`, uint64(0), int64(-1))
	f.Add("", "", "", "", uint64(1<<63), int64(-1<<63))
	f.Add("\xff", "é", "日本", "\x00\x1f", uint64(18446744073709551615), int64(9223372036854775807))
	f.Fuzz(func(t *testing.T, q, p, g, e string, pid uint64, failedAt int64) {
		lr := letterRecord{Queue: q, Partition: p, PID: pid, Group: g, Error: e, TraceID: e, FailedAt: failedAt, CreatedAt: failedAt, Payload: []byte(e)}
		v := encodeLetter(&lr)
		var h letterHead
		require.NoError(t, decodeLetterHead(v, &h))
		var want letterRecord
		require.NoError(t, decodeLetter(v, &want))
		require.Equal(t, want.Queue, string(h.queue))
		require.Equal(t, want.Partition, string(h.partition))
		require.Equal(t, want.Group, string(h.group))
		require.Equal(t, want.PID, h.pid)
		require.Equal(t, want.FailedAt, h.failedAt)

		head, _ := json.Marshal(&lr)
		plain := func(s string) bool {
			b, _ := json.Marshal(s)
			return string(b) == `"`+s+`"`
		}
		var in letterHead
		require.Equal(t, plain(q) && plain(p) && plain(g), scanLetterHead(head, &in),
			"read in place exactly when the kept names need no unescaping: %s", head)
	})
}

// A corrupt header is refused, as decodeLetter refuses it, not read as a
// letter of no queue.
func TestLetterHead_CorruptIsRefused(t *testing.T) {
	for _, head := range []string{`{"q":"a","p":`, `{"q":"a",}`, `{"q":"a""p":"b"}`, `{"q":1.5e3}`, `["q"]`, `{"pid":-1}`, `{"f":99999999999999999999}`, `{"q":{}}`, `{"q":tru}`} {
		v := append(append([]byte{byte(len(head))}, head...), "payload"...)
		var h letterHead
		require.Error(t, decodeLetterHead(v, &h), "%s", head)
	}
	var h letterHead
	require.ErrorIs(t, decodeLetterHead([]byte{0x80}, &h), errCorruptLetter)
	require.ErrorIs(t, decodeLetterHead([]byte{10, '{', '}'}, &h), errCorruptLetter)
}

// A letter whose partition is gone (its queue deleted, its letters not yet
// swept) is neither listed nor counted, even when its queue's name is in
// use again.
func TestLetters_OfAGonePartitionAreNotListed(t *testing.T) {
	ctx := context.Background()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Push(ctx, []PushItem{{Queue: "q", Partition: "p", Payload: []byte(`1`)}})
	require.NoError(t, err)
	pr, err := b.Pop(ctx, PopRequest{Queue: "q"})
	require.NoError(t, err)
	require.Len(t, pr.Messages, 1)
	m := pr.Messages[0]
	res, err := b.AckBatch(ctx, []AckItem{{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: AckDLQ}})
	require.NoError(t, err)
	require.True(t, res[0].Success)
	page, err := b.DeadLetters(ctx, LetterFilter{Queue: "q"})
	require.NoError(t, err)
	require.Equal(t, 1, page.Total)
	live := page.Letters[0].ID

	// The same letter, of a partition that no longer exists, newer.
	lr, err := b.getLetter(keys.DeadLetter, live)
	require.NoError(t, err)
	lr.PID, lr.FailedAt = 1<<40, lr.FailedAt+1
	require.NoError(t, b.db.Update(func(txn *badger.Txn) error {
		return txn.Set(keys.IDKey(keys.DeadLetter, uuid.NewV4()), encodeLetter(&lr))
	}))
	for _, f := range []LetterFilter{{Queue: "q"}, {}, {Partition: "p"}, {Limit: 1}} {
		page, err = b.DeadLetters(ctx, f)
		require.NoError(t, err)
		require.Equal(t, 1, page.Total, "%+v", f)
		require.Len(t, page.Letters, 1)
		require.Equal(t, live, page.Letters[0].ID)
	}
}
