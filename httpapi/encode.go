package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/queenlite/queen/internal/verbatim"
)

// The replies of the hot routes (pop, ack) are written by hand into pooled
// buffers instead of through encoding/json's reflection: the bytes are
// exactly those verbatim.Marshal writes for popReply and []ackResult (same
// member order, escaping and number forms; TestEncode_* compare the two):
// json.Marshal's, but with a stored payload, valid JSON by construction,
// copied through as it is.

// bufPool holds reply buffers. Buffers that grew past maxPooledBuf (a pop
// of large payloads) are left to the garbage collector.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledBuf = 1 << 20

var jsonContentType = []string{"application/json"}

// writeRaw writes a JSON reply built into *buf, then returns the buffer to
// the pool.
func writeRaw(w http.ResponseWriter, status int, buf *[]byte) {
	h := w.Header()
	// Keys already canonical, set without Header.Set's canonicalisation and
	// allocation (a few % of the CPU of a one-message pop or ack); the
	// shared value has no room to grow, so an Add elsewhere copies it.
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(*buf))} // no chunked encoding
	w.WriteHeader(status)
	_, _ = w.Write(*buf)
	if cap(*buf) <= maxPooledBuf {
		*buf = (*buf)[:0]
		bufPool.Put(buf)
	}
}

// getBuf takes an empty buffer from the pool.
func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

// appendPopReply appends r as verbatim.Marshal writes it.
func appendPopReply(b []byte, r *popReply) []byte {
	b = appendPopHead(b, r)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPopMessage(b, &r.Messages[i])
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendPopHead appends r's members up to the value of "messages".
func appendPopHead(b []byte, r *popReply) []byte {
	b = append(b, `{"success":`...)
	b = strconv.AppendBool(b, r.Success)
	b = append(b, `,"queue":`...)
	b = appendJSONString(b, r.Queue)
	b = append(b, `,"partition":`...)
	b = appendJSONString(b, r.Partition)
	b = append(b, `,"partitionId":`...)
	b = appendJSONString(b, r.PartitionID)
	b = append(b, `,"leaseId":`...)
	b = appendJSONString(b, r.LeaseID)
	b = append(b, `,"consumerGroup":`...)
	b = appendJSONString(b, r.ConsumerGroup)
	b = append(b, `,"partitionsClaimed":`...)
	b = strconv.AppendInt(b, int64(r.PartitionsClaimed), 10)
	b = append(b, `,"conflating":`...)
	b = strconv.AppendBool(b, r.Conflating)
	// Queen 2.x's echoes, each only when true (their absence is what its
	// clients reason about).
	if r.Conflating {
		b = append(b, `,"conflation":true`...)
	}
	if r.ConflationConflict {
		b = append(b, `,"conflationConflict":true`...)
	}
	if a := r.Autopilot; a != nil {
		b = append(b, `,"autopilot":{"partitions":`...)
		b = strconv.AppendInt(b, int64(a.Partitions), 10)
		b = append(b, `,"batch":`...)
		b = strconv.AppendInt(b, int64(a.Batch), 10)
		if ms := a.Wait.Milliseconds(); ms > 0 {
			b = append(b, `,"waitMs":`...)
			b = strconv.AppendInt(b, ms, 10)
		}
		b = append(b, '}')
	}
	return append(b, `,"messages":`...)
}

func appendPopMessage(b []byte, m *popMessage) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, m.ID)
	b = append(b, `,"transactionId":`...)
	b = appendJSONString(b, m.TransactionID)
	b = append(b, `,"partitionId":`...)
	b = appendJSONString(b, m.PartitionID)
	b = append(b, `,"partition":`...)
	b = appendJSONString(b, m.Partition)
	b = append(b, `,"queue":`...)
	b = appendJSONString(b, m.Queue)
	b = append(b, `,"leaseId":`...)
	b = appendJSONString(b, m.LeaseID)
	b = append(b, `,"consumerGroup":`...)
	b = appendJSONString(b, m.ConsumerGroup)
	b = append(b, `,"data":`...)
	b = appendRawJSON(b, m.Data)
	b = append(b, `,"traceId":`...)
	b = appendNullString(b, m.TraceID)
	b = append(b, `,"producerSub":`...)
	b = appendNullString(b, m.ProducerSub)
	b = append(b, `,"createdAt":`...)
	b = appendUsTime(b, m.CreatedAt)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, m.Offset, 10)
	b = append(b, `,"deliveryAttempt":`...)
	b = strconv.AppendInt(b, int64(m.DeliveryAttempt), 10)
	return append(b, '}')
}

// appendAckResults appends rs as json.Marshal writes it.
func appendAckResults(b []byte, rs []ackResult) []byte {
	if rs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAckResult(b, &rs[i])
	}
	return append(b, ']')
}

// appendAckResult appends r as json.Marshal writes it.
func appendAckResult(b []byte, r *ackResult) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(r.Index), 10)
	b = append(b, `,"transactionId":`...)
	b = appendJSONString(b, r.TransactionID)
	b = append(b, `,"success":`...)
	b = strconv.AppendBool(b, r.Success)
	b = append(b, `,"error":`...)
	b = appendNullString(b, r.Error)
	b = append(b, `,"queueName":`...)
	b = appendNullString(b, r.QueueName)
	b = append(b, `,"partitionName":`...)
	b = appendNullString(b, r.PartitionName)
	b = append(b, `,"leaseReleased":`...)
	b = strconv.AppendBool(b, r.LeaseReleased)
	b = append(b, `,"dlq":`...)
	b = strconv.AppendBool(b, r.DLQ)
	b = append(b, `,"parked":`...)
	b = strconv.AppendBool(b, r.Parked)
	return append(b, '}')
}

// appendPushResult appends r as json.Marshal writes it.
func appendPushResult(b []byte, r *pushResult) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(r.Index), 10)
	b = append(b, `,"transaction_id":`...)
	b = appendJSONString(b, r.TransactionID)
	b = append(b, `,"transactionId":`...)
	b = appendJSONString(b, r.TxID)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, r.Status)
	b = append(b, `,"message_id":`...)
	b = appendNullString(b, r.MessageID)
	b = append(b, `,"partition_id":`...)
	b = appendNullString(b, r.PartitionID)
	b = append(b, `,"trace_id":`...)
	b = appendNullString(b, r.TraceID)
	b = append(b, `,"queueName":`...)
	b = appendJSONString(b, r.QueueName)
	b = append(b, `,"partition":`...)
	b = appendJSONString(b, r.Partition)
	if r.Offset != nil {
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, *r.Offset, 10)
	}
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, r.Error)
	}
	return append(b, '}')
}

// streamFlush is how much of a streamed reply is gathered before it is
// written.
const streamFlush = 32 << 10

// replyStream writes a long JSON reply piece by piece through one pooled
// buffer, so that the reply is never whole in memory: a push of
// queen.MaxPushItems items answers about 3 MB.
type replyStream struct {
	w   http.ResponseWriter
	buf *[]byte
}

func newReplyStream(w http.ResponseWriter, status int) *replyStream {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	return &replyStream{w: w, buf: getBuf()}
}

// flush writes what was gathered once it passes streamFlush (always, if
// all).
func (s *replyStream) flush(all bool) {
	if len(*s.buf) >= streamFlush || all && len(*s.buf) > 0 {
		_, _ = s.w.Write(*s.buf)
		*s.buf = (*s.buf)[:0]
	}
}

// close writes the rest and returns the buffer to the pool.
func (s *replyStream) close() {
	s.flush(true)
	if cap(*s.buf) <= maxPooledBuf {
		bufPool.Put(s.buf)
	}
}

func appendNullString(b []byte, s nullString) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, string(s))
}

// appendUsTime appends t as usTime.MarshalJSON writes it.
func appendUsTime(b []byte, t usTime) []byte {
	tt := time.Time(t)
	if tt.IsZero() {
		return append(b, "null"...)
	}
	tt = tt.UTC()
	year, month, day := tt.Date()
	if year < 0 || year > 9999 { // a sign or a fifth digit: as Format writes them
		b = append(b, '"')
		b = tt.AppendFormat(b, "2006-01-02T15:04:05.000000Z")
		return append(b, '"')
	}
	hour, min, sec := tt.Clock()
	b = append(b, '"')
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, min, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, tt.Nanosecond()/1000, 6)
	return append(b, `Z"`...)
}

// appendDigits appends v (0 ≤ v < 10^width) in width decimal digits,
// zero-padded.
func appendDigits(b []byte, v, width int) []byte {
	b = append(b, "000000"[:width]...)
	for i := len(b) - 1; v > 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

// appendJSONString appends s quoted as json.Marshal quotes it: the common
// case (printable ASCII with nothing to escape) is copied, anything else
// goes through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainInString[s[i]] {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainInString marks the bytes json.Marshal copies into a string as they
// are: printable ASCII but for ", \, <, > and &.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range []byte{'"', '\\', '<', '>', '&'} {
		t[c] = false
	}
	return t
}()

// appendRawJSON appends a stored payload (payload() has turned an empty
// one into null) as it is, as verbatim.Marshal writes it: a payload is
// stored and returned byte for byte, and it is valid JSON (checked at
// push), so its whitespace and its <, >, & are legal in the reply as they
// are (encoding/json would compact it and escape those for HTML; see
// package internal/verbatim).
func appendRawJSON(b []byte, p verbatim.JSON) []byte {
	return append(b, p...)
}
