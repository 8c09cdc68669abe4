package outbox

import "github.com/queenlite/queen/internal/uuid"

// newTxID returns a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then
// random bits, so that ids sort roughly by time. It is the form the
// broker generates for a push without one.
func newTxID() string { return uuid.NewV7().String() }
