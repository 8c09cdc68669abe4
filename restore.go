package queen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dgraph-io/badger/v4"
)

// Restore rebuilds a store in dir from backups written by [Broker.Backup]:
// a full backup first, then the increments that follow it, in order (each
// one's since the next of the one before). The result opens with
// Open(dir, opts); opts sizes the database as Open would (its
// MemoryBudget) and must not be InMemory.
//
// dir must be absent or an empty directory: a non-empty one is
// [ErrDirNotEmpty]. The store is built in a temporary directory beside
// dir, checked (every chunk's checksum, every end record, the chain, the
// stored state loading as Open loads it) and only then renamed to dir, so
// a restore that fails, with [ErrCorruptBackup], [ErrBackupChain],
// [ErrIncompatibleStore], a storage error or ctx's error, leaves dir as it
// was and no partial store anywhere.
func Restore(ctx context.Context, dir string, opts *Options, backups ...io.Reader) (err error) {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	switch {
	case o.InMemory:
		return argErr("Options.InMemory", "a restore writes a directory")
	case dir == "":
		return argErr("dir", "must not be empty")
	case len(backups) == 0:
		return argErr("backups", "need a full backup")
	}
	dir = filepath.Clean(dir)
	if err := requireEmpty(dir); err != nil {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("queen: restore: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".restore-")
	if err != nil {
		return fmt.Errorf("queen: restore: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := restoreInto(ctx, tmp, o, backups); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("%w: %s (written to during the restore)", ErrDirNotEmpty, dir)
		}
		return fmt.Errorf("queen: restore: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("queen: restore: %w", err)
	}
	return syncDir(parent)
}

// requireEmpty refuses a dir that exists and is not an empty directory.
func requireEmpty(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("queen: restore: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && err != io.EOF {
		return fmt.Errorf("queen: restore: %s: %w", dir, err) // a file, not a directory
	}
	if len(names) > 0 {
		return fmt.Errorf("%w: %s holds %s", ErrDirNotEmpty, dir, names[0])
	}
	return nil
}

// restoreInto builds the store in tmp, an empty directory.
func restoreInto(ctx context.Context, tmp string, o Options, backups []io.Reader) error {
	bo, err := badgerOptions(tmp, o)
	if err != nil {
		return err
	}
	db, err := badger.Open(bo.WithSyncWrites(false))
	if err != nil {
		return fmt.Errorf("queen: restore: open %s: %w", tmp, err)
	}
	err = func() error {
		var prev backupHeader
		for i, r := range backups {
			br, err := readBackupHeader(r)
			if err != nil {
				return fmt.Errorf("backup %d: %w", i+1, err)
			}
			h := br.h
			if err := checkFormat("", h.Format); err != nil {
				return fmt.Errorf("backup %d: %w", i+1, err)
			}
			switch {
			case i == 0 && h.Since != 0:
				return fmt.Errorf("%w: backup 1 is an increment (since %d), not a full backup", ErrBackupChain, h.Since)
			case i > 0 && h.Since == 0:
				return fmt.Errorf("%w: backup %d is a full backup, not an increment of backup %d", ErrBackupChain, i+1, i)
			case i > 0 && h.Store != prev.Store:
				return fmt.Errorf("%w: backup %d is of store %s, backup 1 of store %s", ErrBackupChain, i+1, h.Store, prev.Store)
			case i > 0 && h.Since != prev.Next:
				return fmt.Errorf("%w: backup %d starts at version %d, backup %d ends at %d (out of order, or one missing)", ErrBackupChain, i+1, h.Since, i, prev.Next)
			}
			if err := applyBackup(ctx, db, br, i > 0); err != nil {
				return fmt.Errorf("backup %d: %w", i+1, err)
			}
			prev = h
		}
		// What Open would load, loaded: a store that restores but does not
		// open is a failed restore.
		if err := inspectDB(db, Options{}).loadState(); err != nil {
			return fmt.Errorf("%w: the restored store does not load: %v", ErrCorruptBackup, err)
		}
		if err := writeFormat(db); err != nil { // a store of its own, from here on
			return storageErr("restore", err)
		}
		return db.Sync()
	}()
	if cerr := db.Close(); err == nil && cerr != nil {
		err = storageErr("restore", cerr)
	}
	if err == nil {
		err = syncDir(tmp)
	}
	return err
}

// applyBackup writes one backup's entries into db. An increment (see
// backupfile.go) is applied over what db holds: the keys it names without
// a value must be there, and the keys db holds that it does not name were
// deleted after its base.
func applyBackup(ctx context.Context, db *badger.DB, br *backupReader, increment bool) error {
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	var base *badger.Iterator
	if increment {
		txn := db.NewTransaction(false)
		defer txn.Discard()
		base = txn.NewIterator(badger.IteratorOptions{PrefetchValues: false})
		defer base.Close()
		base.Rewind()
	}
	del := func(k []byte) error { return wb.Delete(bytes.Clone(k)) }
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		op, key, val, err := br.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if !increment {
			if op != entrySet {
				return corrupt("a full backup names key %q without its value", key)
			}
			if err := wb.Set(bytes.Clone(key), bytes.Clone(val)); err != nil {
				return storageErr("restore", err)
			}
			continue
		}
		for base.Valid() && bytes.Compare(base.Item().Key(), key) < 0 {
			if err := del(base.Item().Key()); err != nil {
				return storageErr("restore", err)
			}
			base.Next()
		}
		held := base.Valid() && bytes.Equal(base.Item().Key(), key)
		if held {
			base.Next()
		}
		if op == entryKeep {
			if !held {
				return fmt.Errorf("%w: the increment keeps key %q, which the backups before it do not hold", ErrBackupChain, key)
			}
			continue
		}
		if err := wb.Set(bytes.Clone(key), bytes.Clone(val)); err != nil {
			return storageErr("restore", err)
		}
	}
	for ; increment && base.Valid(); base.Next() {
		if err := del(base.Item().Key()); err != nil {
			return storageErr("restore", err)
		}
	}
	return storageErr("restore", wb.Flush())
}

// syncDir fsyncs a directory, so the names created in it are durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("queen: restore: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("queen: restore: sync %s: %w", dir, err)
	}
	return nil
}
