package queen

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// DiskUsage returns the space the store's files take on disk: the blocks
// the file system allocated to the files under the Badger directory and
// value directory, as du counts them. It is what an operator's "store on
// disk" means. It differs from [Facts].StoreBytes, Badger's own measure,
// which adds up the files' sizes: Badger preallocates its value log file
// (and sparse files take less than their size), so a store of a few
// hundred KiB has files of 128 MiB or more. On systems where Go cannot
// read allocated blocks (see diskuse_blocks.go's build constraint), it
// falls back to the files' sizes. A broker in memory takes 0 bytes. The
// files are read each call (one stat each, a few dozen files for most
// stores); a file removed meanwhile (a compaction) is skipped. After
// Close it returns [ErrClosed].
func (b *Broker) DiskUsage() (int64, error) {
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.leave()
	if b.opts.InMemory {
		return 0, nil
	}
	o := b.db.Opts()
	n, err := dirUsage(o.Dir)
	if err != nil {
		return 0, err
	}
	if o.ValueDir != "" && filepath.Clean(o.ValueDir) != filepath.Clean(o.Dir) {
		v, err := dirUsage(o.ValueDir)
		if err != nil {
			return 0, err
		}
		n += v
	}
	return n, nil
}

// dirUsage adds up the allocated space of the files under dir.
func dirUsage(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n += allocated(fi)
		return nil
	})
	if err != nil {
		return 0, storageErr("disk usage", err)
	}
	return n, nil
}
