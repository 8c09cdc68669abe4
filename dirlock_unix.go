//go:build unix

package queen

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir opens dir and takes an exclusive flock on it, without
// waiting: errDirBusy when another open file holds it (a restore running
// in this process or another, or Badger, which locks its directory the
// same way). The lock lasts until the file is closed, or its process dies:
// what a killed restore left is unlocked.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errDirBusy
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}

// dirLocksWork: on this system a directory's lock tells a running
// restore from a dead one.
const dirLocksWork = true
