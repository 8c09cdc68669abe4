package queen

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// A process killed between Badger's creating a memtable file (.mem) or a
// value-log file (.vlog) and its writing the file's first bytes leaves the
// file empty, and Badger's own open then fails on it with "Create a new
// file" (dgraph-io/badger#2207), having first grown the file to its full
// size, zero-filled. An empty file holds no entry and nothing points into
// it, so Open removes such files before Badger sees them.

// openAfterKill is openBadger, after removing the empty log files a
// killed process left. It removes them only under the directory's lock,
// the one Badger itself takes, so that no live database's new file is ever
// taken for a dead one's: a directory whose lock is held is left as it is
// (Badger then reports the lock), and so is every directory where that
// lock does not exist (dirLocksWork false).
func openAfterKill(bo badger.Options, wait func(attempt int), log *slog.Logger) (*badger.DB, error) {
	if !bo.ReadOnly && dirLocksWork {
		removed, err := removeEmptyLogFiles(bo.Dir, bo.ValueDir)
		for _, f := range removed {
			log.Warn("queen: open: removed an empty log file a killed process left", "file", f)
		}
		if err != nil {
			return nil, err
		}
	}
	return openBadger(bo, wait)
}

// removeEmptyLogFiles removes the empty .mem and .vlog files of the
// database directories dirs, each under its lock, and returns their paths.
// A directory that does not exist yet, or whose lock is held, is skipped.
func removeEmptyLogFiles(dirs ...string) ([]string, error) {
	var removed []string
	seen := map[string]bool{}
	for _, dir := range dirs {
		if dir == "" || seen[dir] {
			continue
		}
		seen[dir] = true
		lock, err := lockDir(dir)
		if errors.Is(err, errDirBusy) || errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return removed, fmt.Errorf("queen: open: %w", err)
		}
		entries, err := os.ReadDir(dir)
		for _, e := range entries {
			name := e.Name()
			if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".mem") || strings.HasSuffix(name, ".vlog")) {
				continue
			}
			if info, ierr := e.Info(); ierr != nil || info.Size() != 0 {
				continue
			}
			path := filepath.Join(dir, name)
			if rerr := os.Remove(path); rerr != nil {
				err = errors.Join(err, rerr)
				continue
			}
			removed = append(removed, path)
		}
		_ = lock.Close()
		if err != nil {
			return removed, fmt.Errorf("queen: open: remove empty log files: %w", err)
		}
	}
	return removed, nil
}
