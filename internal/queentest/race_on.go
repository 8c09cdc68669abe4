//go:build race

package queentest

// RaceEnabled reports whether the race detector is on: tests that move
// hundreds of MiB on one goroutine, where it finds nothing and runs many
// times slower, run in the suites built without it.
const RaceEnabled = true
