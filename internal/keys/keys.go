// Package keys is the Badger key layout of the broker.
//
// Every key starts with a one-byte kind. Partition-scoped keys carry the
// partition's internal 8-byte id, and message keys add the 8-byte offset,
// both big-endian, so the messages of one partition are a single
// contiguous range ordered by offset.
//
//	Q name                      queue metadata
//	P pid                       partition metadata
//	M pid offset                message record
//	T pid transactionId         dedup index: offset of the message
//	C pid group                 cursor of a consumer group in a partition
//	O pid group                 metadata of a position set on that cursor
//	G queue 0x00 group          consumer-group metadata (start point, conflation)
//	D id                        dead letter
//	K id                        parked message
//	R pid txid 0x00 traceid     trace event
//	X id                        tombstone of a queue being deleted
//	F                           store format record
//	S name                      broker setting (maintenance mode)
package keys

import "encoding/binary"

// Kinds of key.
const (
	Queue      byte = 'Q'
	Partition  byte = 'P'
	Message    byte = 'M'
	TxID       byte = 'T'
	Cursor     byte = 'C'
	Position   byte = 'O'
	Group      byte = 'G'
	DeadLetter byte = 'D'
	Parked     byte = 'K'
	Trace      byte = 'R'
	Tombstone  byte = 'X'
	Format     byte = 'F'
	Setting    byte = 'S'
)

// FormatKey is the key of the store's format record.
func FormatKey() []byte { return []byte{Format} }

// SettingKey is the key of a broker setting.
func SettingKey(name string) []byte { return append([]byte{Setting}, name...) }

// QueueKey is the metadata key of a queue.
func QueueKey(name string) []byte { return append([]byte{Queue}, name...) }

// PartitionKey is the metadata key of a partition.
func PartitionKey(pid uint64) []byte {
	k := make([]byte, 9)
	k[0] = Partition
	binary.BigEndian.PutUint64(k[1:], pid)
	return k
}

// MessageKey is the key of the message at offset in partition pid.
func MessageKey(pid uint64, offset int64) []byte {
	return AppendMessageKey(make([]byte, 0, 17), pid, offset)
}

// AppendMessageKey appends MessageKey(pid, offset) to dst.
func AppendMessageKey(dst []byte, pid uint64, offset int64) []byte {
	dst = append(dst, Message)
	dst = binary.BigEndian.AppendUint64(dst, pid)
	return binary.BigEndian.AppendUint64(dst, uint64(offset))
}

// MessagePrefix is the prefix shared by every message of partition pid.
func MessagePrefix(pid uint64) []byte {
	k := make([]byte, 9)
	k[0] = Message
	binary.BigEndian.PutUint64(k[1:], pid)
	return k
}

// DecodeMessageKey returns the partition and offset of a message key.
func DecodeMessageKey(k []byte) (pid uint64, offset int64, ok bool) {
	if len(k) != 17 || k[0] != Message {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:9]), int64(binary.BigEndian.Uint64(k[9:])), true
}

// TxIDKey is the dedup-index key of transactionId txid in partition pid.
func TxIDKey(pid uint64, txid string) []byte {
	k := make([]byte, 9, 9+len(txid))
	k[0] = TxID
	binary.BigEndian.PutUint64(k[1:], pid)
	return append(k, txid...)
}

// CursorKey is the key of group's cursor in partition pid.
func CursorKey(pid uint64, group string) []byte {
	k := make([]byte, 9, 9+len(group))
	k[0] = Cursor
	binary.BigEndian.PutUint64(k[1:], pid)
	return append(k, group...)
}

// PositionKey is the key of the metadata set with group's position in
// partition pid.
func PositionKey(pid uint64, group string) []byte {
	k := CursorKey(pid, group)
	k[0] = Position
	return k
}

// DecodeCursorKey returns the partition and group of a cursor key.
func DecodeCursorKey(k []byte) (pid uint64, group string, ok bool) {
	if len(k) < 9 || k[0] != Cursor {
		return 0, "", false
	}
	return binary.BigEndian.Uint64(k[1:9]), string(k[9:]), true
}

// PartitionScoped is the prefix of every key of one kind in partition pid.
func PartitionScoped(kind byte, pid uint64) []byte {
	k := make([]byte, 9)
	k[0] = kind
	binary.BigEndian.PutUint64(k[1:], pid)
	return k
}

// GroupKey is the metadata key of group on queue. Names never contain NUL.
func GroupKey(queue, group string) []byte {
	k := make([]byte, 0, 2+len(queue)+len(group))
	k = append(k, Group)
	k = append(k, queue...)
	k = append(k, 0)
	return append(k, group...)
}

// GroupPrefix is the prefix of every group key of queue.
func GroupPrefix(queue string) []byte {
	k := append([]byte{Group}, queue...)
	return append(k, 0)
}

// IDKey is a dead-letter or parked-message key (kind DeadLetter or Parked).
func IDKey(kind byte, id [16]byte) []byte {
	return append([]byte{kind}, id[:]...)
}

// TraceKey is the key of one trace event of a message.
func TraceKey(pid uint64, txid string, id [16]byte) []byte {
	k := TracePrefix(pid, txid)
	return append(k, id[:]...)
}

// TracePrefix is the prefix of every trace event of a message.
func TracePrefix(pid uint64, txid string) []byte {
	k := make([]byte, 9, 10+len(txid)+16)
	k[0] = Trace
	binary.BigEndian.PutUint64(k[1:], pid)
	k = append(k, txid...)
	return append(k, 0)
}
