package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/queenlite/queen/internal/verbatim"
	"github.com/stretchr/testify/require"
)

// awkwardStrings are strings json.Marshal escapes or rewrites.
var awkwardStrings = []string{
	"", "plain", "with space", `quote"`, `back\slash`, "<tag>&amp;", "ctl\x00\x01\n\t\r", "é ünïcode", "line\u2028sep\u2029",
	"bad\xffutf8", "\x7f", "emoji 😀", "a<b", "a>b", "a&b",
}

// awkwardPayloads are valid JSON values as a Go caller may have pushed them.
var awkwardPayloads = []string{
	`null`, `1`, `-1.5e3`, `"s"`, `true`, `{"a":1,"b":[1,2,{"c":null}]}`, `{ "a" : 1 }`, "[1,\n2,\t3]\r\n",
	`"a < b && c > d"`, `{"k":"\u003c"}`, `{"k":"\\\"\n"}`, "\"line\u2028sep\"", `"with space inside"`,
	`"a<b"`, `">"`, `{"s":"x\\"}`, `{"s":"\"quoted\" words"}`, "\"bad\xffutf8\"", `[]`, `{}`,
	`"a\" b"`, `{"s":"x\\\" y","t":"\\"}`,
}

func TestEncode_PopReplyMatchesVerbatimMarshal(t *testing.T) {
	at := time.Date(2031, 2, 3, 4, 5, 6, 789123456, time.FixedZone("x", 3600))
	for i, s := range awkwardStrings {
		for j, p := range awkwardPayloads {
			m := popMessage{
				ID: s, TransactionID: s + "t", PartitionID: "pid", Partition: s, Queue: "q" + s, LeaseID: s, ConsumerGroup: s,
				Data: payload(json.RawMessage(p)), TraceID: nullString(s), ProducerSub: nullString(s), CreatedAt: usTime(at),
				Offset: int64(i*1000 + j - 7), DeliveryAttempt: j,
			}
			r := popReply{Success: i%2 == 0, Queue: s, Partition: s, PartitionID: s, LeaseID: s, ConsumerGroup: s, PartitionsClaimed: i,
				Messages: []popMessage{m, {CreatedAt: usTime(time.Time{}), Data: payload(nil)}}}
			want, err := verbatim.Marshal(r)
			require.NoError(t, err)
			require.Equal(t, string(want), string(appendPopReply(nil, &r)), "string %q payload %q", s, p)
		}
	}
	for _, r := range []popReply{{}, {Messages: []popMessage{}}} {
		want, err := verbatim.Marshal(r)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendPopReply(nil, &r)))
	}
}

func TestEncode_AckResultsMatchEncodingJSON(t *testing.T) {
	for _, rs := range [][]ackResult{nil, {}} {
		want, err := json.Marshal(rs)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendAckResults(nil, rs)))
	}
	var rs []ackResult
	for i, s := range awkwardStrings {
		rs = append(rs, ackResult{Index: i, TransactionID: s, Success: i%2 == 1, Error: nullString(s), QueueName: nullString(s + "q"),
			PartitionName: nullString(s), LeaseReleased: i%3 == 0, DLQ: i%4 == 0})
		want, err := json.Marshal(rs)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendAckResults([]byte{}, rs)))
	}
}

// TestEncode_PayloadByteForByte: a payload is copied into a pop's reply
// as it is, whitespace, <, >, &, U+2028 and invalid UTF-8 included
// (json.Marshal would compact it and escape <, >, &, U+2028 and U+2029).
func TestEncode_PayloadByteForByte(t *testing.T) {
	for _, p := range awkwardPayloads {
		r := popReply{Messages: []popMessage{{Data: payload(json.RawMessage(p))}}}
		require.Contains(t, string(appendPopReply(nil, &r)), `"data":`+p+`,"traceId"`, "payload %q", p)
	}
}

// FuzzEncode_PopMessage compares the hand-written pop encoding with
// verbatim.Marshal (encoding/json, payload as it is) for any strings and
// any valid payload.
func FuzzEncode_PopMessage(f *testing.F) {
	for i, s := range awkwardStrings {
		f.Add(s, awkwardPayloads[i%len(awkwardPayloads)], int64(i))
	}
	f.Fuzz(func(t *testing.T, s, p string, n int64) {
		if !json.Valid([]byte(p)) {
			return
		}
		m := popMessage{ID: s, TransactionID: s, Partition: s, Data: payload(json.RawMessage(p)), TraceID: nullString(s),
			CreatedAt: usTime(time.UnixMicro(n % (1 << 50))), Offset: n, DeliveryAttempt: int(n % 1000)}
		r := popReply{Queue: s, Messages: []popMessage{m}}
		want, err := verbatim.Marshal(r)
		if err != nil {
			t.Skip(err)
		}
		if got := appendPopReply(nil, &r); string(got) != string(want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}

func TestEncode_PushResultMatchesEncodingJSON(t *testing.T) {
	for i, s := range awkwardStrings {
		off := int64(i*7 - 3)
		for _, r := range []pushResult{
			{Index: i, TransactionID: s, TxID: s + "t", Status: s, MessageID: nullString(s), PartitionID: nullString(s + "p"),
				TraceID: nullString(s), QueueName: "q" + s, Partition: s, Offset: &off, Error: s},
			{Index: -i, Status: "queued"},
		} {
			want, err := json.Marshal(r)
			require.NoError(t, err)
			require.Equal(t, string(want), string(appendPushResult(nil, &r)), "string %q", s)
		}
	}
}

func TestEncode_UsTimeMatchesMarshalJSON(t *testing.T) {
	times := []time.Time{{}, time.Unix(0, 0), time.Date(2031, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2031, 2, 3, 4, 5, 6, 789123456, time.FixedZone("x", -7*3600)), time.Date(0, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 3, 4, 5, 6, 7, 8, time.UTC),
		time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC)}
	for ns := int64(1); ns < 1<<62; ns = ns*7 + 12345 {
		times = append(times, time.Unix(0, ns), time.Unix(0, -ns))
	}
	for _, at := range times {
		want, err := usTime(at).MarshalJSON()
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendUsTime(nil, usTime(at))), "%v", at)
	}
}
