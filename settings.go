package queen

import (
	"errors"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
)

// Broker settings stored under keys.Setting, so that a restart and a
// restored backup keep them.
const settingMaintenance = "maintenance"

// loadSettings reads the stored settings (none stored: the defaults).
func (b *Broker) loadSettings(txn *badger.Txn) error {
	item, err := txn.Get(keys.SettingKey(settingMaintenance))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return item.Value(func(v []byte) error {
		b.maint.Store(len(v) == 1 && v[0] == 1)
		return nil
	})
}

// settingOp is the write that stores a boolean setting.
func settingOp(name string, on bool) setKey {
	v := byte(0)
	if on {
		v = 1
	}
	return setKey{keys.SettingKey(name), []byte{v}}
}
