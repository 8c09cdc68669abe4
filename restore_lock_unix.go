//go:build unix

package queen

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockRestoreDir opens dir and takes an exclusive flock on it, without
// waiting: errRestoreDirBusy when another open file (a restore running in
// this process or another) holds it. The lock lasts until the file is
// closed, or its process dies: what a killed restore left is unlocked.
func lockRestoreDir(dir string) (*os.File, error) {
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
			return nil, errRestoreDirBusy
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}

// restoreLocksWork: on this system a restore's lock tells a running
// restore from a dead one.
const restoreLocksWork = true
