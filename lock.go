package queen

import (
	"errors"
	"strings"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// lockRetries is how many more times openBadger tries a directory whose
// lock is held, waiting 1, 2, 4, ... 128 ms in between (255 ms in all).
//
// Why at all: Badger locks the directory with flock and releases it by
// closing the file, without LOCK_UN. A flock belongs to the open file,
// which a process being forked at that moment (os/exec, between its fork
// and its exec) holds too, so a broker closed and reopened in a program
// that starts subprocesses can find its own released lock still held:
// for 8 and 16 ms in a test that reopened a directory 300 times beside a
// loop running /bin/true, where 284 of the 300 opens failed without the
// retries and none with them. A lock a live broker holds is still
// ErrLocked, a quarter of a second later.
const lockRetries = 8

// lockWait waits before retry attempt (0-based).
func lockWait(attempt int) { time.Sleep(time.Millisecond << attempt) }

// openBadger opens bo, retrying while its directory lock is held, and
// reports a lock still held as errLockHeld. wait, when not nil, replaces
// lockWait.
func openBadger(bo badger.Options, wait func(attempt int)) (*badger.DB, error) {
	if wait == nil {
		wait = lockWait
	}
	db, err := badger.Open(bo)
	for attempt := 0; attempt < lockRetries && isLockHeld(err); attempt++ {
		wait(attempt)
		db, err = badger.Open(bo)
	}
	if isLockHeld(err) {
		return nil, errLockHeld
	}
	return db, err
}

// errLockHeld stands for Badger's "directory in use" error, which its
// wrapping reports in text only.
var errLockHeld = errors.New("lock held")

// isLockHeld reports whether err is Badger's refusal of a directory whose
// flock another open database holds, in this process or another (Badger
// drops the errno, hence the match on its message).
func isLockHeld(err error) bool {
	return err != nil && (errors.Is(err, syscall.EWOULDBLOCK) || strings.Contains(err.Error(), "Another process is using this Badger database"))
}
