// Package queentest helps test code that uses a [queen.Broker]: an
// in-memory broker closed when the test ends, a fake clock that moves
// leases, retry delays, delayed processing and window buffers without
// sleeping (and retention, at the next [queen.Broker.Maintain]), and a few
// assertions on what a queue holds.
//
// A test opens a broker on a fake clock, runs the code under test, moves
// the clock past a deadline and checks the result:
//
//	clock := queentest.NewClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
//	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
//	// ... a worker of the code under test takes a message under a 30 s
//	// lease and hangs; another worker waits for work ...
//	clock.Advance(30 * time.Second) // the lease runs out: the waiting worker gets the message at once
//	queentest.WaitDrained(t, b, "emails", "")
//
// The helpers take the test's [testing.TB] and fail the test (with
// Fatalf) when the broker refuses a call or a condition is not met; like
// any such helper they must be called from the test's goroutine.
package queentest

import (
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
)

// DrainTimeout is the [queen.Options.DrainTimeout] of a broker opened by
// [NewBroker] when its options set none: a consumer still running when the
// test ends holds up the test's cleanup this long at most, not the 20 s
// default.
const DrainTimeout = 2 * time.Second

// NewBroker opens an in-memory broker with opts (nil for the defaults;
// InMemory is set, and DrainTimeout defaults to [DrainTimeout]) and closes
// it in a cleanup of tb: after the test function's deferred calls and the
// cleanups registered later (which run first), such as one cancelling the
// context of a consumer. A failure to open fails the test; so does an
// error from Close, such as a [queen.DrainError] naming handlers still
// running when the test ended.
func NewBroker(tb testing.TB, opts *queen.Options) *queen.Broker {
	tb.Helper()
	o := queen.Options{}
	if opts != nil {
		o = *opts
	}
	o.InMemory = true
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DrainTimeout
	}
	b, err := queen.Open("", &o)
	if err != nil {
		tb.Fatalf("queentest: open: %v", err)
	}
	tb.Cleanup(func() {
		if err := b.Close(); err != nil {
			tb.Errorf("queentest: close: %v", err)
		}
	})
	return b
}

// Clock is a fake [queen.Clock] that moves only when told to, by
// [Clock.Advance] or [Clock.Set]. It is a [queen.SignalingClock]: a broker
// using it wakes its timers when it moves, so a pop waiting for a lease to
// end, a retry delay to pass or a delayed message to come due returns as
// soon as the clock passes that time. Retention and MaxWaitTime are
// applied by the broker's maintenance, which runs on real time
// ([queen.Options.MaintenanceInterval]): after moving the clock, a test
// calls [queen.Broker.Maintain] to apply them at once. A Clock is safe for
// concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	changed chan struct{}
}

var _ queen.SignalingClock = (*Clock)(nil)

// NewClock returns a fake clock set to start. Choose a fixed start so the
// test does not depend on the day it runs.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (back when d is negative) and wakes the
// brokers using it.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveLocked(c.now.Add(d))
}

// Set moves the clock to t, forward or back, and wakes the brokers using
// it.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveLocked(t)
}

func (c *Clock) moveLocked(t time.Time) {
	c.now = t
	close(c.changed)
	c.changed = make(chan struct{})
}

// Changed returns a channel closed the next time the clock moves: the
// signal of [queen.SignalingClock].
func (c *Clock) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}
