package queen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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
//
// The temporary directory is locked (flock) while its restore runs. A
// restore killed outright (SIGKILL, a power loss) cannot remove its own,
// so each restore into dir, even one then refused, first removes those of
// earlier restores into dir that no running restore holds, and logs each
// one through opts.Logger. Where flock does not exist (not Unix) they are
// logged and left.
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
	clearDeadRestores(dir, o.Logger) // even if dir is refused: they are garbage either way
	if err := requireEmpty(dir); err != nil {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("queen: restore: %w", err)
	}
	work, lock, err := makeRestoreDir(dir)
	if err != nil {
		return fmt.Errorf("queen: restore: %w", err)
	}
	defer func() {
		_ = os.RemoveAll(work) // empty once the store went to dir
		_ = lock.Close()       // after the removal: no other restore takes it for a dead one's
	}()
	// The store is built in a directory inside the locked one: Badger
	// locks its own directory the same way.
	tmp := filepath.Join(work, "store")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return fmt.Errorf("queen: restore: %w", err)
	}
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
	_ = os.Remove(work) // now empty; made durable with the rename
	return syncDir(parent)
}

// restoreDirPrefix is the start of the names of dir's restore
// directories: .NAME.restore-, then os.MkdirTemp's decimal digits.
func restoreDirPrefix(dir string) string { return "." + filepath.Base(dir) + ".restore-" }

// errDirBusy is lockDir's answer for a directory whose
// restore is running.
var errDirBusy = errors.New("in use by a running process")

// makeRestoreDir makes the temporary directory of a restore into dir,
// beside it, and locks it. The lock is taken after the directory is
// made: should another restore's clearDeadRestores take the new directory
// for a dead one in between, the lock fails or the name no longer leads
// to the locked directory, and a new one is made.
func makeRestoreDir(dir string) (tmp string, lock *os.File, err error) {
	for attempt := 0; ; attempt++ {
		tmp, err = os.MkdirTemp(filepath.Dir(dir), restoreDirPrefix(dir))
		if err != nil {
			return "", nil, err
		}
		lock, err = lockDir(tmp)
		if err == nil && sameDir(tmp, lock) {
			return tmp, lock, nil
		}
		if lock != nil {
			_ = lock.Close()
		}
		if attempt == 3 {
			if err == nil {
				err = fmt.Errorf("%s was removed as it was made", tmp)
			}
			return "", nil, err
		}
	}
}

// sameDir reports whether the name path still leads to the directory f
// has open.
func sameDir(path string, f *os.File) bool {
	a, err := os.Lstat(path)
	if err != nil {
		return false
	}
	b, err := f.Stat()
	return err == nil && os.SameFile(a, b)
}

// clearDeadRestores removes the temporary directories of earlier restores
// into dir that a restore killed outright left beside it, and logs each
// one. A directory whose lock is held (its restore is running, in this
// process or another) is left, as is everything where locks do not work.
// Trouble here is logged, never returned: it is not this restore's.
func clearDeadRestores(dir string, log *slog.Logger) {
	parent, prefix := filepath.Dir(dir), restoreDirPrefix(dir)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return // MkdirAll or MkdirTemp reports what is wrong with parent
	}
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() || suffix == "" || strings.Trim(suffix, "0123456789") != "" {
			continue
		}
		path := filepath.Join(parent, e.Name())
		if !dirLocksWork {
			log.Warn("queen: restore: found the directory of an earlier restore; remove it once no restore runs", "dir", path)
			continue
		}
		lock, err := lockDir(path)
		switch {
		case errors.Is(err, errDirBusy):
			log.Info("queen: restore: left an earlier restore's directory: in use by a running restore", "dir", path)
			continue
		case errors.Is(err, fs.ErrNotExist):
			continue // it ended meanwhile
		case err != nil:
			log.Warn("queen: restore: cannot clear an earlier restore's directory", "dir", path, "err", err)
			continue
		}
		if sameDir(path, lock) {
			size := dirSize(path)
			if err := os.RemoveAll(path); err != nil {
				log.Warn("queen: restore: cannot remove what a killed restore left", "dir", path, "err", err)
			} else {
				log.Warn("queen: restore: removed what a killed restore left", "dir", path, "bytes", size)
			}
		}
		_ = lock.Close()
	}
}

// dirSize is the size of the files under dir, as far as it can be read.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
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
