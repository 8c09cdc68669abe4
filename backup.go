package queen

import (
	"context"
	"fmt"
	"io"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/uuid"
)

// Backup writes a consistent point-in-time copy of the store to w while
// the broker goes on serving: every message of every partition, cursors
// (with their retry counters), group start points, dead letters, parked
// messages, the dedup index of transactionIds, traces, queue configurations,
// maintenance mode and the store's format record. It is what the store
// holds at one instant, as a crash at that instant would leave it: writes
// committed before the instant are in it, later ones are not. Leases,
// counters and other state kept in memory only are not (a restored broker
// starts as a restarted one does: messages leased then are delivered
// again).
//
// since 0 writes a full backup. since = the next of an earlier backup of
// this store writes an increment: the records written after that backup
// in full, and every other key by name only, so that [Restore] can apply
// it over its base, deletions included. Backup returns next, the store
// version the backup reaches, to pass as since for the following
// increment. An increment is smaller than a full backup by the values
// that did not change (payloads, mostly), not by the keys.
//
// The backup is framed in checksummed chunks (CRC-32C) and ends with an
// end record, so [Restore] refuses a corrupt or truncated file with
// [ErrCorruptBackup]. Backup holds one read snapshot of Badger for its
// whole duration (Badger then keeps the versions it reads); it blocks
// no writer. Once written, it rewrites the store's format record
// unchanged and syncs it, so that the store's versions stay ahead of next
// across a close or a crash. A since ahead of the store is [ErrInvalidArgument]. ctx
// cancels it between chunks; what was written to w is then not a valid
// backup (it has no end record). A running Backup is a call like any
// other for [Broker.Close], which waits for it up to 10 seconds: cancel
// ctx to end it first.
func (b *Broker) Backup(ctx context.Context, w io.Writer, since uint64) (next uint64, err error) {
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.leave()
	if err := b.closedErr(); err != nil {
		return 0, err
	}
	if w == nil {
		return 0, argErr("w", "must not be nil")
	}
	txn := b.db.NewTransaction(false)
	defer txn.Discard()
	next = txn.ReadTs()
	if since > next {
		return 0, argErr("since", "%d is ahead of this store, whose latest version is %d", since, next)
	}
	if err := writeSnapshot(ctx, txn, w, since); err != nil {
		return 0, err
	}
	if err := b.keepVersionsAhead(ctx); err != nil {
		return 0, err
	}
	return next, nil
}

// keepVersionsAhead writes the format record again, unchanged, and syncs
// it: a write after the snapshot, of a version above next, that outlives
// a close and a crash. Without it, a store whose last commits before the
// snapshot only deleted (or were not synced yet) reopens with its latest
// version below next, Badger keeping no entry of theirs, and gives its
// next commits versions a later increment since next takes for its base's
// (TestBackup_IncrementAfterAReopenThatFollowedADeleteOnlyCommit). The
// write goes through the writer, in order with the prefix drops of a
// queue deletion (which block Badger's other writes while they run), and
// a broker closing meanwhile answers ErrClosed.
func (b *Broker) keepVersionsAhead(ctx context.Context) error {
	var v []byte
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keys.FormatKey())
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	if err != nil {
		return storageErr("backup", err)
	}
	if err := b.submitWait(context.WithoutCancel(ctx), []command{setKey{keys.FormatKey(), v}}); err != nil {
		return storageErr("backup", err)
	}
	if err := b.db.Sync(); err != nil {
		if cerr := b.closedErr(); cerr != nil {
			return cerr
		}
		return storageErr("backup", err)
	}
	return nil
}

// writeSnapshot writes what txn sees as a backup file (see backupfile.go).
func writeSnapshot(ctx context.Context, txn *badger.Txn, w io.Writer, since uint64) error {
	fr, _, err := readFormat(txn)
	if err != nil {
		return storageErr("backup", err)
	}
	id, _ := uuid.Parse(fr.ID)
	bw, err := newBackupWriter(w, backupHeader{Format: fr.Format, Since: since, Next: txn.ReadTs(), Store: id})
	if err != nil {
		return fmt.Errorf("queen: write backup: %w", err)
	}
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false})
	defer it.Close()
	var val []byte
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		op := entryKeep
		if since == 0 || item.Version() > since {
			op = entrySet
			if val, err = item.ValueCopy(val[:0]); err != nil {
				return storageErr("backup", err)
			}
		}
		chunks := len(bw.buf)
		if err := bw.add(op, item.Key(), val); err != nil {
			return fmt.Errorf("queen: write backup: %w", err)
		}
		if len(bw.buf) < chunks { // a chunk went out
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if err := bw.close(); err != nil {
		return fmt.Errorf("queen: write backup: %w", err)
	}
	return nil
}
