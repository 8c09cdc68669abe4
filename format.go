package queen

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/queenlite/queen/internal/uuid"
)

// Store formats. A store records its format when it is created (key F, see
// internal/keys); [Open] reads it before anything else.
const (
	// FormatUnversioned is the format of stores written before the format
	// record existed (releases up to 0.2.0): they have no record. Partition
	// records may be JSON (before binary partition metadata) or binary.
	// Open upgrades such a store in place to [StoreFormat].
	FormatUnversioned = 0

	// StoreFormat is the format this release writes: a format record,
	// binary partition records only, and maintenance mode stored as a
	// setting. Stores of this format open with this release and any later
	// one that lists it as upgradable; an earlier release that does not
	// know the record opens them too (it ignores keys it does not know),
	// but does not keep maintenance mode across restarts.
	StoreFormat = 1

	// OldestStoreFormat is the oldest format Open upgrades in place.
	OldestStoreFormat = FormatUnversioned
)

// formatRecord is the stored value of the format record.
type formatRecord struct {
	Format int `json:"format"`
	// WrittenBy is the module version that created or upgraded the store:
	// for people reading an inspect report.
	WrittenBy string `json:"writtenBy"`
	// ID names the store, made at random when the record is first written
	// (and again by Restore: a restored store is a store of its own). A
	// backup carries it, so that Restore refuses an increment of another
	// store.
	ID string `json:"id"`
}

// readFormat returns the store's format from txn, and whether it has a
// format record.
func readFormat(txn *badger.Txn) (formatRecord, bool, error) {
	var fr formatRecord
	item, err := txn.Get(keys.FormatKey())
	if errors.Is(err, badger.ErrKeyNotFound) {
		return formatRecord{Format: FormatUnversioned}, false, nil
	}
	if err != nil {
		return fr, false, err
	}
	err = item.Value(func(v []byte) error { return json.Unmarshal(v, &fr) })
	if err != nil {
		return fr, false, fmt.Errorf("%w: unreadable format record: %v", ErrIncompatibleStore, err)
	}
	return fr, true, nil
}

// storedFormat is readFormat in a read transaction of its own.
func storedFormat(db *badger.DB) (fr formatRecord, has bool, err error) {
	err = db.View(func(txn *badger.Txn) error {
		fr, has, err = readFormat(txn)
		return err
	})
	return fr, has, err
}

// checkFormat refuses a format this release cannot read.
func checkFormat(dir string, found int) error {
	if found > StoreFormat {
		return &IncompatibleStoreError{Dir: dir, Found: found, Supported: StoreFormat, Oldest: OldestStoreFormat,
			Hint: "it was written by a newer release; open it with that release, or restore a backup taken by this one"}
	}
	if found < OldestStoreFormat {
		return &IncompatibleStoreError{Dir: dir, Found: found, Supported: StoreFormat, Oldest: OldestStoreFormat}
	}
	return nil
}

// prepareFormat runs at Open, before the state is loaded and before the
// writer starts (so it writes to Badger itself): it refuses a store of a
// format this release cannot read, and upgrades an older one in place to
// StoreFormat, writing the format record last, so a store whose upgrade
// was cut short is upgraded again at the next Open. A new store gets the
// record at once.
func prepareFormat(db *badger.DB, dir string) error {
	fr, has, err := storedFormat(db)
	if err != nil {
		return storageErr("read format", err)
	}
	if err := checkFormat(dir, fr.Format); err != nil {
		return err
	}
	if has && fr.Format == StoreFormat {
		return nil
	}
	if fr.Format < 1 {
		if err := upgradeJSONPartitions(db); err != nil {
			return storageErr("upgrade store format", err)
		}
	}
	return storageErr("write format", writeFormat(db))
}

// writeFormat writes the format record of a store of StoreFormat, under a
// new store id.
func writeFormat(db *badger.DB) error {
	v, _ := json.Marshal(formatRecord{Format: StoreFormat, WrittenBy: Version, ID: uuid.NewV4().String()})
	return db.Update(func(txn *badger.Txn) error { return txn.Set(keys.FormatKey(), v) })
}

// upgradeJSONPartitions rewrites the partition records stored as JSON
// (stores written before binary partition metadata) in binary, the only
// form format 1 has. Their content is unchanged.
func upgradeJSONPartitions(db *badger.DB) error {
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	err := db.View(func(txn *badger.Txn) error {
		return scan(txn, []byte{keys.Partition}, func(k, v []byte) error {
			if len(v) == 0 || v[0] != '{' {
				return nil
			}
			var m record.Partition
			qname, err := record.DecodePartitionRef(v, &m)
			if err != nil {
				return err
			}
			m.Queue = string(qname)
			return wb.Set(append([]byte(nil), k...), record.AppendPartition(nil, &m))
		})
	})
	if err != nil {
		return err
	}
	return wb.Flush()
}
