package queen

import (
	"sync"
	"sync/atomic"
	"time"
)

// ShutCallsForTest makes b refuse every gated call, as Close does once it
// has drained consumers, without closing anything; reopen undoes it.
func ShutCallsForTest(b *Broker) (reopen func()) {
	b.calls.Add(callsShut)
	return func() { b.calls.Add(-callsShut) }
}

// BuilderDurations returns the duration options q carries: the pop
// timeout, the lease, the renewal interval and the idle stop.
func BuilderDurations(q *QueueBuilder) (timeout, lease, renew, idle time.Duration) {
	return q.timeout, q.lease, q.renew, q.idle
}

// CommitsForTest returns the number of storage transactions b's writer
// has written.
func CommitsForTest(b *Broker) int64 { return b.w.commits.Load() }

// HoldCommitsForTest makes b's writer wait before its next commits until
// release is called. held receives once the writer waits; queued reports
// how many write requests wait behind it.
func HoldCommitsForTest(b *Broker) (held <-chan struct{}, queued func() int, release func()) {
	held, release = holdAt(&b.w.beforeCommit)
	queued = func() int {
		b.w.mu.Lock()
		defer b.w.mu.Unlock()
		return len(b.w.queue)
	}
	return held, queued, release
}

// SyncsForTest returns the number of explicit fsyncs of b's logs (by its
// writer, its background sync of SyncPushes, or Close).
func SyncsForTest(b *Broker) int64 { return b.w.syncs.Load() }

// HoldSyncsForTest makes every fsync of b's logs wait until release is
// called. held receives (once, buffered) when an fsync waits.
func HoldSyncsForTest(b *Broker) (held <-chan struct{}, release func()) {
	return holdAt(&b.w.beforeSync)
}

// holdAt installs at hook a gate that waits until release is called.
func holdAt(hook *atomic.Pointer[func()]) (held <-chan struct{}, release func()) {
	gate := make(chan struct{})
	at := make(chan struct{}, 1)
	var once sync.Once
	hold := func() {
		select {
		case at <- struct{}{}:
		default:
		}
		<-gate
	}
	hook.Store(&hold)
	release = func() { once.Do(func() { close(gate) }) }
	return at, release
}

// WithLockWaitForTest makes f what Open and Inspect, given opts, do between
// their tries of a directory whose lock is held, and returns opts. The hook
// is the call's own: tests that set it may run in parallel.
func WithLockWaitForTest(opts *Options, f func(attempt int)) *Options {
	opts.lockWait = f
	return opts
}
