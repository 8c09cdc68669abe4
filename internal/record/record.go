// Package record encodes the values the broker stores in Badger: message
// records and cursors. The formats are versioned by their first byte.
package record

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrCorrupt reports a value that does not decode.
var ErrCorrupt = errors.New("record: corrupt value")

const messageVersion = 1

// Message flags.
const (
	FlagEncrypted = 1 << iota
)

// Message is one stored message.
type Message struct {
	Flags       byte
	CreatedAt   int64 // unix microseconds
	ID          [16]byte
	TxID        string
	TraceID     string
	ProducerSub string
	Payload     []byte // raw JSON (or ciphertext when FlagEncrypted)
}

// AppendMessage appends the encoding of m to dst.
func AppendMessage(dst []byte, m *Message) []byte {
	dst = append(dst, messageVersion, m.Flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.CreatedAt))
	dst = append(dst, m.ID[:]...)
	dst = appendString(dst, m.TxID)
	dst = appendString(dst, m.TraceID)
	dst = appendString(dst, m.ProducerSub)
	return append(dst, m.Payload...)
}

// MessageSize is the length of the encoding of m.
func MessageSize(m *Message) int {
	return 2 + 8 + 16 + 3*binary.MaxVarintLen16 + len(m.TxID) + len(m.TraceID) + len(m.ProducerSub) + len(m.Payload)
}

// DecodeMessage decodes b into m. Strings and the payload are copied, so b
// may be reused afterwards.
func DecodeMessage(b []byte, m *Message) error {
	if len(b) < 26 || b[0] != messageVersion {
		return ErrCorrupt
	}
	m.Flags = b[1]
	m.CreatedAt = int64(binary.BigEndian.Uint64(b[2:10]))
	copy(m.ID[:], b[10:26])
	b = b[26:]
	var ok bool
	if m.TxID, b, ok = readString(b); !ok {
		return ErrCorrupt
	}
	if m.TraceID, b, ok = readString(b); !ok {
		return ErrCorrupt
	}
	if m.ProducerSub, b, ok = readString(b); !ok {
		return ErrCorrupt
	}
	m.Payload = append([]byte(nil), b...)
	return nil
}

// MessageCreatedAt reads only the creation time of an encoded message.
func MessageCreatedAt(b []byte) (int64, bool) {
	if len(b) < 26 || b[0] != messageVersion {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b[2:10])), true
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func readString(b []byte) (string, []byte, bool) {
	s, rest, ok := readBytes(b)
	return string(s), rest, ok
}

// readBytes is readString without the copy: the bytes alias b.
func readBytes(b []byte) ([]byte, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, false
	}
	return b[k : k+int(n) : k+int(n)], b[k+int(n):], true
}

const cursorVersion = 1

// Cursor is the durable part of a consumer group's position in a partition.
type Cursor struct {
	Offset  int64 // next offset the group has not settled
	Retries int32 // failed acks spent since the last completed batch
	// Consumed counts messages the group settled here over its lifetime.
	Consumed int64
	// LastAckAt is the unix-microsecond time of the last settle, 0 if none.
	LastAckAt int64
}

// AppendCursor appends the encoding of c to dst.
func AppendCursor(dst []byte, c Cursor) []byte {
	dst = append(dst, cursorVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.Offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Retries))
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.Consumed))
	return binary.BigEndian.AppendUint64(dst, uint64(c.LastAckAt))
}

// DecodeCursor decodes a cursor.
func DecodeCursor(b []byte) (Cursor, error) {
	if len(b) != 29 || b[0] != cursorVersion {
		return Cursor{}, ErrCorrupt
	}
	return Cursor{
		Offset:    int64(binary.BigEndian.Uint64(b[1:9])),
		Retries:   int32(binary.BigEndian.Uint32(b[9:13])),
		Consumed:  int64(binary.BigEndian.Uint64(b[13:21])),
		LastAckAt: int64(binary.BigEndian.Uint64(b[21:29])),
	}, nil
}

// Offset encodes a dedup-index value.
func Offset(o int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(o)) }

// DecodeOffset decodes a dedup-index value.
func DecodeOffset(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, ErrCorrupt
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

const partitionVersion = 1

// Partition is the stored metadata of a partition. Values written before
// this binary form are JSON objects, with the field names given here;
// [DecodePartition] reads both.
type Partition struct {
	Queue     string `json:"q"`
	Name      string `json:"n"`
	CreatedAt int64  `json:"c"` // µs
	First     int64  `json:"f"`
	// Next, Holes and HoleRuns are set once messages were deleted: the
	// offset high-water mark, how many were deleted one by one, and where,
	// as [from, end) pairs.
	Next     int64   `json:"x,omitempty"`
	Holes    int64   `json:"h,omitempty"`
	HoleRuns []int64 `json:"hr,omitempty"`
	// LastPush is the time of the newest push, µs, as of this write: the
	// newest stored message gives it at Open, unless that message was
	// deleted, and every delete writes this record.
	LastPush int64 `json:"l,omitempty"`
}

// AppendPartition appends the encoding of p to dst.
func AppendPartition(dst []byte, p *Partition) []byte {
	dst = append(dst, partitionVersion)
	for _, v := range [...]int64{p.CreatedAt, p.First, p.Next, p.Holes, p.LastPush, int64(len(p.HoleRuns))} {
		dst = binary.AppendVarint(dst, v)
	}
	for _, v := range p.HoleRuns {
		dst = binary.AppendVarint(dst, v)
	}
	dst = appendString(dst, p.Queue)
	return appendString(dst, p.Name)
}

// DecodePartition decodes partition metadata in either stored form.
func DecodePartition(b []byte, p *Partition) error {
	queue, err := DecodePartitionRef(b, p)
	if err != nil {
		return err
	}
	p.Queue = string(queue)
	return nil
}

// DecodePartitionRef is [DecodePartition] without a copy of the queue's
// name, which a broker opening a million partitions of one queue would
// make a million times: it leaves p.Queue empty and returns the name's
// bytes, which alias b (or, for the JSON form, a copy).
func DecodePartitionRef(b []byte, p *Partition) (queue []byte, err error) {
	*p = Partition{}
	if len(b) > 0 && b[0] == '{' {
		if err := json.Unmarshal(b, p); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		queue, p.Queue = []byte(p.Queue), ""
		return queue, nil
	}
	if len(b) == 0 || b[0] != partitionVersion {
		return nil, ErrCorrupt
	}
	b = b[1:]
	varint := func() int64 {
		v, k := binary.Varint(b)
		if k <= 0 {
			b = nil
			return -1
		}
		b = b[k:]
		return v
	}
	p.CreatedAt, p.First, p.Next, p.Holes, p.LastPush = varint(), varint(), varint(), varint(), varint()
	n := varint()
	if b == nil || n < 0 || n > int64(len(b)) { // each run value takes a byte at least
		return nil, ErrCorrupt
	}
	if n > 0 {
		p.HoleRuns = make([]int64, n)
		for i := range p.HoleRuns {
			p.HoleRuns[i] = varint()
		}
	}
	var ok bool
	if queue, b, ok = readBytes(b); !ok {
		return nil, ErrCorrupt
	}
	if p.Name, b, ok = readString(b); !ok || len(b) != 0 {
		return nil, ErrCorrupt
	}
	return queue, nil
}
