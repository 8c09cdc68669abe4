package queen

// expiredLeases remembers the ids of leases that expired, so a renewal
// that comes too late is told [ErrLeaseExpired] rather than
// [ErrNotFound]. Entries are kept for expiredKeep of broker time, at most
// expiredMax of them. Guarded by Broker.mu.
type expiredLeases struct {
	at map[string]int64 // lease id → when it expired, µs
}

const (
	expiredKeep = 3600 * 1e6 // µs
	expiredMax  = 1 << 16
)

// note records that lease id expired at now.
func (e *expiredLeases) note(id string, now int64) {
	if e.at == nil {
		e.at = make(map[string]int64)
	}
	if len(e.at) >= expiredMax {
		for k, t := range e.at {
			if t < now-expiredKeep {
				delete(e.at, k)
			}
		}
		for k := range e.at { // still full: forget arbitrary ones
			if len(e.at) < expiredMax/2 {
				break
			}
			delete(e.at, k)
		}
	}
	e.at[id] = now
}

// has reports whether lease id expired within expiredKeep before now.
func (e *expiredLeases) has(id string, now int64) bool {
	t, ok := e.at[id]
	return ok && t >= now-expiredKeep
}
