package queen

import (
	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
)

// This file holds the writes the writer applies (see store.go). Each kind
// of write is a type with its own apply and its own cost. Callers decide
// a write in memory and submit it in the same hold of b.mu (pushes too,
// see Broker.preparePush), so the writer applies writes in the order
// memory saw their effects, and a write can be decided whole by its
// caller; one that must see what the writer applied before it (because
// its caller could not know it) is a type named for what it guarantees.

// command is one write the writer applies in a storage transaction.
type command interface {
	// apply adds the write to txn. It runs on the writer goroutine.
	apply(txn *badger.Txn) error
	// cost estimates what the write adds to a storage transaction: bytes
	// (a value of valueThreshold bytes or more counts as the pointer that
	// Badger puts in its place) and Badger writes.
	cost(valueThreshold int) (bytes, ops int)
}

// keyCost is the estimated cost of one Badger write of key and val.
func keyCost(key, val []byte, valueThreshold int) int {
	v := len(val)
	if v >= valueThreshold { // Badger keeps large values in the value log
		v = 16
	}
	return len(key) + v + 20
}

// setKey stores val at key.
type setKey struct{ key, val []byte }

func (c setKey) apply(txn *badger.Txn) error { return txn.Set(c.key, c.val) }

func (c setKey) cost(th int) (int, int) { return keyCost(c.key, c.val, th), 1 }

// deleteKey deletes key.
type deleteKey struct{ key []byte }

func (c deleteKey) apply(txn *badger.Txn) error { return txn.Delete(c.key) }

func (c deleteKey) cost(th int) (int, int) { return keyCost(c.key, nil, th), 1 }

// deleteKeys deletes a run of keys (see appendDeletes).
type deleteKeys [][]byte

func (c deleteKeys) apply(txn *badger.Txn) error {
	for _, k := range c {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (c deleteKeys) cost(th int) (bytes, ops int) {
	for _, k := range c {
		bytes += keyCost(k, nil, th)
	}
	return bytes, len(c)
}

// deleteRun is how many keys one deleteKeys holds: a request larger than
// a storage transaction is split between its commands (see commitSplit).
const deleteRun = 128

// appendDeletes appends the deletes of ks to cmds, in runs of deleteRun.
func appendDeletes(cmds []command, ks [][]byte) []command {
	for len(ks) > 0 {
		n := min(len(ks), deleteRun)
		cmds = append(cmds, deleteKeys(ks[:n:n]))
		ks = ks[n:]
	}
	return cmds
}

// putCursor stores a cursor record: the write of a consumer position (see
// cursor.save and cursorsOnly).
type putCursor struct{ key, val []byte }

func (c putCursor) apply(txn *badger.Txn) error { return txn.Set(c.key, c.val) }

func (c putCursor) cost(th int) (int, int) { return keyCost(c.key, c.val, th), 1 }

// cursorWrite is the write of c's durable state, as it is now.
func cursorWrite(c *cursor) putCursor {
	const size = 29 // of a cursor record
	return putCursor{key: keys.CursorKey(c.p.pid, c.g.name), val: record.AppendCursor(make([]byte, 0, size), c.durable())}
}

// cursorsOnly reports whether cmds only store cursor records.
func cursorsOnly(cmds []command) bool {
	for _, c := range cmds {
		if _, ok := c.(putCursor); !ok {
			return false
		}
	}
	return true
}

// dropTraces deletes the stored traces of the partition's messages with
// these transactionIds, as they are when the writer applies it: a trace
// written by an earlier request is seen, so none is left behind by a
// delete racing RecordTrace (which refuses a message once gone from
// memory, and submits its write before that).
type dropTraces struct {
	pid   uint64
	txids map[string]bool
}

func (c dropTraces) apply(txn *badger.Txn) error {
	prefix := keys.PartitionScoped(keys.Trace, c.pid)
	if len(c.txids) == 1 {
		for tx := range c.txids {
			prefix = keys.TracePrefix(c.pid, tx)
		}
	}
	var dels [][]byte
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()
		if _, txid, _, ok := decodeTraceKey(k); ok && c.txids[txid] {
			dels = append(dels, it.Item().KeyCopy(nil))
		}
	}
	it.Close()
	for _, k := range dels {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// cost counts one write: the traces are few, and found only as it applies.
func (c dropTraces) cost(th int) (int, int) { return keyCost(nil, nil, th), 1 }
