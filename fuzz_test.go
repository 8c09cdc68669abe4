package queen_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// FuzzPayloadRoundTrip pushes arbitrary bytes as a payload. The broker
// must either refuse them as invalid JSON (an argument error, nothing
// stored) or store them so that Fetch, a leased pop and an autoAck pop all
// return them byte for byte; it must never panic.
func FuzzPayloadRoundTrip(f *testing.F) {
	for _, s := range []string{
		``, `null`, `0`, `-1.5e300`, `"x"`, `true`, `[]`, `{}`, ` {"a" : [1, 2]} `, "\t\"tab\"\n",
		`{"a":"\u0000"}`, `"\ud800"`, "\"\xff\xfe\"", "\"\xc3\x28\"", `{"a":1,"a":2}`, `[1,]`, `{"a"}`, `nul`,
		"\xef\xbb\xbf{}", `"` + strings.Repeat("é", 1000) + `"`,
		strings.Repeat("[", 9999) + strings.Repeat("]", 9999),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 3000) + "1" + strings.Repeat("}", 3000),
		`[` + strings.Repeat(`1,`, 100000) + `1]`,
	} {
		f.Add([]byte(s))
	}
	// 64 MiB: in memory, payloads up to queen.MaxInMemoryPayload.
	b := queentest.NewBroker(f, &queen.Options{MemoryBudget: 64 << 20})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, payload []byte) {
		part := fmt.Sprint("p", n.Add(1))
		in := append([]byte(nil), payload...)
		res, err := b.Push(bg, []queen.PushItem{{Queue: "fuzz", Partition: part, Payload: payload}})
		if !json.Valid(in) && len(in) > 0 {
			require.ErrorIs(t, err, queen.ErrInvalidArgument, "invalid JSON %q accepted", in)
			var ae *queen.ArgumentError
			require.True(t, errors.As(err, &ae))
			_, ferr := b.Fetch(bg, "fuzz", part, 0, 1)
			require.ErrorIs(t, ferr, queen.ErrNotFound, "a refused push created its partition")
			return
		}
		require.NoError(t, err)
		require.Equal(t, queen.PushQueued, res[0].Status)
		require.True(t, bytes.Equal(in, payload), "Push changed the caller's bytes")
		want := in
		if len(want) == 0 {
			want = []byte("null")
		}

		page, err := b.Fetch(bg, "fuzz", part, 0, 10)
		require.NoError(t, err)
		require.Len(t, page.Records, 1)
		require.Equal(t, want, []byte(page.Records[0].Payload))

		leased := pop(t, b, queen.PopRequest{Queue: "fuzz", Partition: part, Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
		require.Len(t, leased.Messages, 1)
		require.Equal(t, want, []byte(leased.Messages[0].Payload))
		ackAll(t, b, leased.Messages, queen.AckCompleted)

		auto := pop(t, b, queen.PopRequest{Queue: "fuzz", Partition: part, CommitOnDelivery: true})
		require.Len(t, auto.Messages, 1)
		require.Equal(t, want, []byte(auto.Messages[0].Payload))
	})
}

// TestPayload_NestingLimit pins the outcome of deep nesting: JSON nested
// deeper than encoding/json accepts (10000 levels) is refused, not stored.
func TestPayload_NestingLimit(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	ok := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	r := pushOne(t, b, "deep", "", "ok", ok)
	require.Equal(t, queen.PushQueued, r.Status)
	_, err := b.Push(bg, []queen.PushItem{{Queue: "deep", Payload: json.RawMessage("[" + ok + "]")}})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}
