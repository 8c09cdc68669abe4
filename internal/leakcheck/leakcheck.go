// Package leakcheck finds goroutines a test package left running. It is a
// small stand-in for goleak: TestMain calls [Main], which runs the tests
// and then fails the binary if any goroutine other than the runtime's and
// the testing package's own is still alive once a grace period is over.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// allowed are stack fragments of goroutines that belong to the runtime or
// the testing package and may outlive the tests.
var allowed = []string{
	"testing.(*M).",
	"testing.RunTests",
	"testing.runTests",
	"testing.(*F).Fuzz",
	"testing.runFuzzing",
	"testing.runFuzzTests",
	"testing/internal/",
	"internal/fuzz.",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime.ReadTrace",
	"runtime/trace.",
	"created by runtime.gc",
	"runtime.forcegchelper",
	"runtime.bgsweep",
	"runtime.bgscavenge",
	"runtime.runfinq",
	"runtime.runCleanups",
	"runtime.unique_runtime_registerUniqueMapCleanup",
	"unique.registerCleanup",
}

// Options tune [Find].
type Options struct {
	// Grace is how long goroutines get to finish before they count as
	// leaked. Defaults to 5 seconds.
	Grace time.Duration
	// Ignore lists more stack fragments to allow.
	Ignore []string
}

// Goroutine is one goroutine's stack dump.
type Goroutine struct {
	ID    string
	Stack string
}

// Snapshot returns the goroutines now running, except the caller's own
// and the allowed ones.
func Snapshot(ignore ...string) []Goroutine {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	blocks := strings.Split(strings.TrimSpace(string(buf)), "\n\n")
	var out []Goroutine
	for i, blk := range blocks {
		if i == 0 { // runtime.Stack lists the calling goroutine first
			continue
		}
		if isAllowed(blk, ignore) {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(blk, "goroutine "), " ")
		out = append(out, Goroutine{ID: id, Stack: blk})
	}
	return out
}

func isAllowed(stack string, ignore []string) bool {
	for _, frag := range allowed {
		if strings.Contains(stack, frag) {
			return true
		}
	}
	for _, frag := range ignore {
		if strings.Contains(stack, frag) {
			return true
		}
	}
	return false
}

// Find waits up to opts.Grace for every goroutine not on the allow-list
// (nor in before, a [Snapshot] taken earlier) to end, and returns an error
// describing those still running then, or nil.
func Find(opts *Options, before []Goroutine) error {
	o := Options{Grace: 5 * time.Second}
	if opts != nil {
		if opts.Grace > 0 {
			o.Grace = opts.Grace
		}
		o.Ignore = opts.Ignore
	}
	old := make(map[string]bool, len(before))
	for _, g := range before {
		old[g.ID] = true
	}
	deadline := time.Now().Add(o.Grace)
	wait := time.Millisecond
	for {
		var leaked []Goroutine
		for _, g := range Snapshot(o.Ignore...) {
			if !old[g.ID] {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var sb strings.Builder
			fmt.Fprintf(&sb, "leakcheck: %d goroutine(s) still running after %v:\n", len(leaked), o.Grace)
			for i, g := range leaked {
				if i == 10 {
					fmt.Fprintf(&sb, "... and %d more\n", len(leaked)-10)
					break
				}
				sb.WriteString(g.Stack)
				sb.WriteString("\n\n")
			}
			return fmt.Errorf("%s", sb.String())
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Main runs the tests of m and then checks for leaked goroutines; a leak
// fails the run. Use it as the whole body of TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m, nil) }
func Main(m *testing.M, opts *Options) {
	code := m.Run()
	if code == 0 {
		if err := Find(opts, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Check fails tb if goroutines started after before are still running
// once the grace period is over. Use it in a test that must leave nothing
// behind: before := leakcheck.Snapshot(); ...; leakcheck.Check(t, before, nil).
// Goroutines of tests running in parallel count too, so only a test that
// does not call t.Parallel may use it.
func Check(tb testing.TB, before []Goroutine, opts *Options) {
	tb.Helper()
	if err := Find(opts, before); err != nil {
		tb.Fatal(err)
	}
}
