// Package clientrt lets package remote build the builders, consume loops
// and transactions of its client with package queen's code, without
// exporting that code to applications. Package queen sets New when it is
// initialised.
package clientrt

import (
	"log/slog"
	"time"
)

// Options configures a runtime. Zero fields mean the defaults.
type Options struct {
	// DrainTimeout bounds how long the runtime's Close waits for running
	// consume loops, in total, and is the drain timeout of loops that set
	// none. Defaults to 20 seconds.
	DrainTimeout time.Duration
	// Logger receives the loops' warnings (a failed ack). Defaults to
	// discarding them.
	Logger *slog.Logger
	// Clock is the time retry policies measure message ages against (a
	// queen.Clock). Defaults to the system clock.
	Clock interface{ Now() time.Time }
	// Observer is a queen.Observer of the consume loops' events
	// (outcomes, handlers in flight), or nil for none.
	Observer any
}

// New returns the runtime of c, a queen.Client other than *queen.Broker:
// what the builders, consume loops and transactions started on c share.
// Its methods are
//
//	Queue(name string) *queen.QueueBuilder
//	Transaction() *queen.Transaction
//	Admin() *queen.Admin
//	Settled(items []queen.AckItem, results []queen.AckResult)
//	Close() error
//	Now() time.Time
//
// The client returns Queue, Transaction and Admin from its own, reports
// every ack it sends with Settled (so a loop does not hand its handler a
// message the handler already settled), and calls Close from its Close
// (which drains the loops, within Options.DrainTimeout).
var New func(c any, o Options) any
