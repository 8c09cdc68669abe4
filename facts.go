package queen

import "time"

// Facts describe a broker beside its queues: what an operator console
// shows next to the counts.
type Facts struct {
	Version    string     // this module's [Version]
	Durability Durability // [Options.Durability]
	InMemory   bool       // [Options.InMemory]: nothing is on disk
	// OpenedAt is when [Open] or [OpenDB] returned the broker, on its
	// clock ([Options.Clock]).
	OpenedAt time.Time
	// StoreBytes is the size on disk of the database's LSM tree and value
	// log, as Badger last measured it (it refreshes the sizes about once a
	// minute); 0 in memory.
	StoreBytes int64
}

// Facts returns the broker's [Facts]. It reads memory only and never
// blocks on the broker's lock.
func (b *Broker) Facts() Facts {
	f := Facts{Version: Version, Durability: b.opts.Durability, InMemory: b.opts.InMemory, OpenedAt: b.opened}
	if !f.InMemory {
		lsm, vlog := b.db.Size()
		f.StoreBytes = lsm + vlog
	}
	return f
}
