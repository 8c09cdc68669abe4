package outbox

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// newTxID returns a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then
// random bits, so that ids sort roughly by time.
func newTxID() string {
	var u [16]byte
	binary.BigEndian.PutUint64(u[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(u[6:])
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
