package queentest

import "time"

// SetWaitTimeout shortens the wait helpers' bound for a test and returns
// a function restoring it.
func SetWaitTimeout(d time.Duration) (restore func()) {
	old := waitTimeout
	waitTimeout = d
	return func() { waitTimeout = old }
}
