package queen

import (
	"encoding/json"
	"errors"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
)

// This file holds the writes the writer applies (see store.go). Each kind
// of write is a type with its own apply and its own cost; a write that
// must see what the writer applied before it (because its caller could
// not know it when it submitted the write) is a type named for what it
// guarantees.

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

// setQueueIfStill stores a queue's metadata only if the stored metadata is
// that queue's (the queue of this id) or there is none. A push creates a
// queue in memory as the writer applies it, so a queue of the same name
// re-created by a push racing DeleteQueue can have its metadata written
// before this write (made by ConfigureQueue before the writer applied it),
// which must then leave it alone.
type setQueueIfStill struct {
	key, val []byte
	id       string
}

func (c setQueueIfStill) apply(txn *badger.Txn) error {
	same, absent, err := storedQueueIs(txn, c.key, c.id)
	if err != nil || !(same || absent) {
		return err
	}
	return txn.Set(c.key, c.val)
}

func (c setQueueIfStill) cost(th int) (int, int) { return keyCost(c.key, c.val, th), 1 }

// deleteQueueIfStill deletes a queue's metadata only if it is still that
// queue's (the queue of this id): see setQueueIfStill.
type deleteQueueIfStill struct {
	key []byte
	id  string
}

func (c deleteQueueIfStill) apply(txn *badger.Txn) error {
	same, _, err := storedQueueIs(txn, c.key, c.id)
	if err != nil || !same {
		return err
	}
	return txn.Delete(c.key)
}

func (c deleteQueueIfStill) cost(th int) (int, int) { return keyCost(c.key, nil, th), 1 }

// storedQueueIs reports whether the queue metadata at key is the queue of
// the given id (or unreadable, so that a delete still removes it), and
// whether there is none.
func storedQueueIs(txn *badger.Txn, key []byte, id string) (same, absent bool, err error) {
	item, err := txn.Get(key)
	if err == badger.ErrKeyNotFound {
		return false, true, nil
	}
	if err != nil {
		return false, false, err
	}
	var m queueMeta
	if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &m) }); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		if errors.As(err, &se) || errors.As(err, &te) {
			return true, false, nil
		}
		return false, false, err
	}
	return m.ID == id, false, nil
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

// Deleted groups' cursors ------------------------------------------------

// cursorHold is the cursor record of a deleted group, which a
// dropGroupCursor deletes. A group joined again under the name while the
// delete waits for the writer may have its cursor stored, before the
// delete applies, by a push queued earlier (see arrivalCursors): the
// writer notes that write here (see storeArrivalCursor), and the delete
// stores that cursor instead. Writes of the old group's cursor queued
// between the push and the delete overwrote it; the new group's later
// changes have their own writes, queued after the delete.
type cursorHold struct {
	w    *writer
	key  []byte
	gone *group // the deleted group
	// kept is the record a push's arrival stored for a later group of
	// the name (nil: none). Read and written on the writer goroutine only.
	kept []byte
}

// holdUndo is kept's value before a write that did not commit set it.
type holdUndo struct {
	h    *cursorHold
	kept []byte
}

// dropGroupCursor deletes the cursor of a deleted group in a partition,
// or, where a group joined again under the name has had its cursor there
// stored by a push applied before it, stores that cursor (see
// cursorHold). Made by writer.dropGroupCursor.
type dropGroupCursor struct{ *cursorHold }

// dropGroupCursor returns the write that deletes g's cursor record at key
// (g being deleted), and has the writer note, until it is applied, the
// cursors that pushes' arrivals store at key for other groups. Under b.mu,
// and submitted in the same hold of it.
func (w *writer) dropGroupCursor(key []byte, g *group) dropGroupCursor {
	h := &cursorHold{w: w, key: key, gone: g}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holds == nil {
		w.holds = make(map[string][]*cursorHold)
	}
	w.holds[string(key)] = append(w.holds[string(key)], h)
	return dropGroupCursor{h}
}

func (c dropGroupCursor) apply(txn *badger.Txn) error {
	c.w.applied = append(c.w.applied, c.cursorHold)
	if c.kept != nil {
		return txn.Set(c.key, c.kept)
	}
	return txn.Delete(c.key)
}

func (c dropGroupCursor) cost(th int) (int, int) { return keyCost(c.key, nil, th), 1 }

// storeArrivalCursor stores the cursor of group g that a push's arrival
// made (see arrivalCursors), and notes it for the deletes of a group of
// that name queued before it (see cursorHold).
type storeArrivalCursor struct {
	putCursor
	g *group
	w *writer
}

func (c storeArrivalCursor) apply(txn *badger.Txn) error {
	if err := c.putCursor.apply(txn); err != nil {
		return err
	}
	c.w.noteArrival(c.key, c.val, c.g)
	return nil
}

// noteArrival notes, in the holds of key not made for g, the cursor record
// val a push's arrival stored for g. On the writer goroutine.
func (w *writer) noteArrival(key, val []byte, g *group) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.holds[string(key)] {
		if h.gone != g {
			w.undo = append(w.undo, holdUndo{h, h.kept})
			h.kept = val
		}
	}
}

// settleHolds ends the write in progress for the holds: those its
// dropGroupCursors applied are done once it committed; if it did not, the
// arrivals it noted are taken back. On the writer goroutine.
func (w *writer) settleHolds(committed bool) {
	if !committed {
		for i := len(w.undo) - 1; i >= 0; i-- {
			w.undo[i].h.kept = w.undo[i].kept
		}
	} else if len(w.applied) > 0 {
		w.mu.Lock()
		for _, h := range w.applied {
			hs := w.holds[string(h.key)]
			for i, o := range hs {
				if o == h {
					hs = append(hs[:i:i], hs[i+1:]...)
					break
				}
			}
			if len(hs) == 0 {
				delete(w.holds, string(h.key))
			} else {
				w.holds[string(h.key)] = hs
			}
		}
		w.mu.Unlock()
	}
	clear(w.undo)
	clear(w.applied)
	w.undo, w.applied = w.undo[:0], w.applied[:0]
}
