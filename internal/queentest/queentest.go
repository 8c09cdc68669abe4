// Package queentest holds the test helpers only this module's own tests
// use, next to the public [github.com/queenlite/queen/queentest] (brokers
// in memory, the fake clock, assertions): running a test on memory and on
// disk, opening a broker on a directory, the fake clock's start moved by
// QUEENTEST_EPOCH, a log sink, and the hooks that see waiting pops. Tests
// import it as itest.
package queentest

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/testhook"
	"github.com/queenlite/queen/queentest"
)

// OpenDir opens a broker on dir with opts (nil for defaults; DrainTimeout
// defaults to [queentest.DrainTimeout], as in [queentest.NewBroker]) and
// closes it when the test ends, unless the test closed it first.
func OpenDir(tb testing.TB, dir string, opts *queen.Options) *queen.Broker {
	tb.Helper()
	o := queen.Options{}
	if opts != nil {
		o = *opts
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = queentest.DrainTimeout
	}
	b, err := queen.Open(dir, &o)
	if err != nil {
		tb.Fatalf("queentest: open %s: %v", dir, err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// Run runs fn twice, as subtests: on an in-memory broker and on a broker in
// a temporary directory. opts may be nil; InMemory is set per subtest. The
// two run in parallel, unless opts carries a clock (the test's fake clock
// would then move under the other run).
func Run(t *testing.T, opts *queen.Options, fn func(t *testing.T, b *queen.Broker)) {
	t.Helper()
	for _, disk := range []bool{false, true} {
		name := "memory"
		if disk {
			name = "disk"
		}
		t.Run(name, func(t *testing.T) {
			if opts == nil || opts.Clock == nil {
				t.Parallel() // a fake clock shared by both runs must not move under the other
			}
			fn(t, Open(t, disk, opts))
		})
	}
}

// Open opens a broker with opts (nil for defaults) that is closed when the
// test ends: in memory, or with disk in a temporary directory, at
// SyncNever to keep the suite fast (durability has its own tests).
func Open(tb testing.TB, disk bool, opts *queen.Options) *queen.Broker {
	tb.Helper()
	if !disk {
		return queentest.NewBroker(tb, opts)
	}
	o := queen.Options{}
	if opts != nil {
		o = *opts
	}
	o.InMemory = false
	o.Durability = queen.SyncNever
	return OpenDir(tb, tb.TempDir(), &o)
}

// DefaultEpoch is where [NewClock] starts unless the environment variable
// QUEENTEST_EPOCH (RFC 3339) says otherwise. Tests that compare times
// write them relative to DefaultEpoch and pass them through [Stamp], so
// the whole suite can be run with the fake clock years ahead or behind:
//
//	QUEENTEST_EPOCH=2041-03-01T08:00:00Z go test ./...
var DefaultEpoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Epoch returns the instant fake clocks start at: QUEENTEST_EPOCH when it
// is set, DefaultEpoch otherwise. An unparsable QUEENTEST_EPOCH panics,
// so that a mistyped run does not pass silently on the default.
func Epoch() time.Time {
	v := os.Getenv("QUEENTEST_EPOCH")
	if v == "" {
		return DefaultEpoch
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		panic(fmt.Sprintf("queentest: QUEENTEST_EPOCH=%q: %v", v, err))
	}
	return t.UTC()
}

// Shift moves t, an instant written relative to DefaultEpoch, by as much
// as [Epoch] differs from DefaultEpoch.
func Shift(t time.Time) time.Time { return t.Add(Epoch().Sub(DefaultEpoch)) }

// Stamp moves a timestamp written relative to DefaultEpoch (RFC 3339, with
// or without fractional seconds, as a test expects it on the wire) by as
// much as [Epoch] differs from DefaultEpoch, and formats it the same way:
// with the same number of fractional digits and the same zone suffix. It
// panics on a malformed literal: the literals are the test's own.
func Stamp(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(fmt.Sprintf("queentest: Stamp(%q): %v", s, err))
	}
	layout := "2006-01-02T15:04:05"
	if i := strings.IndexByte(s, '.'); i >= 0 {
		n := 0
		for _, c := range s[i+1:] {
			if c < '0' || c > '9' {
				break
			}
			n++
		}
		layout += "." + strings.Repeat("0", n)
	}
	if strings.HasSuffix(s, "Z") {
		layout += "Z"
	} else {
		layout += "Z07:00"
	}
	return Shift(t).UTC().Format(layout)
}

// NewClock returns a fake clock set to [Epoch]: the clock of the
// project's own tests, which must pass with QUEENTEST_EPOCH set.
func NewClock() *queentest.Clock { return queentest.NewClock(Epoch()) }

// LogBuffer is a bytes.Buffer safe for concurrent writers: a log sink for
// a broker's or a handler's *slog.Logger in tests.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Waiting returns the number of pops waiting in b now.
func Waiting(b *queen.Broker) int { return testhook.Waiting(b) }

// AwaitWaiting waits until at least n pops are parked in b, so a test can
// act on a waiting pop without sleeping "to let it park". It fails the
// test after 10 seconds.
func AwaitWaiting(tb testing.TB, b *queen.Broker, n int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for testhook.Waiting(b) < n {
		if time.Now().After(deadline) {
			tb.Fatalf("queentest: %d pop(s) parked after 10s, want %d", testhook.Waiting(b), n)
		}
		time.Sleep(time.Millisecond)
	}
}
