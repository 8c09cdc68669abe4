package queen

import (
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/uuid"
)

// Facts describe a broker beside its queues: what an operator console
// shows next to the counts.
type Facts struct {
	Version    string     // this module's [Version]
	Durability Durability // [Options.Durability]
	InMemory   bool       // [Options.InMemory]: nothing is on disk
	// OpenedAt is when [Open] or [OpenDB] returned the broker, on its
	// clock ([Options.Clock]).
	OpenedAt time.Time
	// StoreBytes is the size of the files of the database's LSM tree and
	// value log, as Badger last measured it (it refreshes the sizes about
	// once a minute, so it is 0 until then); 0 in memory. It is not the
	// space the store takes on disk: Badger preallocates its value log
	// file, so a small store's files add up to 128 MiB and more. For disk
	// use, see [Broker.DiskUsage].
	StoreBytes int64
	// StoreID names the store: the id its format record was given when the
	// store was created (a restored store gets one of its own, see
	// [Restore]), the same across reopens and for every server in front
	// of the store. Package httpapi answers it on GET /health, so that a
	// client of several servers can tell that they serve one store. A
	// store in memory is a new store, with a new id, each time it is
	// opened; so is, for its id only, a store whose format record was
	// written before the record had an id.
	StoreID string
}

// Facts returns the broker's [Facts]. It reads memory only and never
// blocks on the broker's lock.
func (b *Broker) Facts() Facts {
	f := Facts{Version: Version, Durability: b.opts.Durability, InMemory: b.opts.InMemory, OpenedAt: b.opened,
		StoreID: b.storeID}
	if !f.InMemory {
		lsm, vlog := b.db.Size()
		f.StoreBytes = lsm + vlog
	}
	return f
}

// storeIDOf returns the id of db's format record (read once, at Open,
// after prepareFormat wrote it), or a random one when it has none.
func storeIDOf(db *badger.DB) string {
	if fr, _, err := storedFormat(db); err == nil && fr.ID != "" {
		return fr.ID
	}
	return uuid.NewV4().String()
}
