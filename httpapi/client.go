package httpapi

import (
	"context"
	"time"

	"github.com/queenlite/queen"
)

// clientBroker serves a [queen.Client] that lacks the inspection methods
// of [Broker]: those answer [queen.ErrUnsupported] (404 "not supported"),
// the clock is the client's own Now when it has one and the system's
// otherwise, and the counters are zero.
type clientBroker struct{ queen.Client }

// systemClock is the clock of a client that has none: with no broker in
// this process there is no injected clock to follow.
var systemClock = time.Now

func (c clientBroker) Now() time.Time {
	if cl, ok := c.Client.(interface{ Now() time.Time }); ok {
		return cl.Now()
	}
	return systemClock()
}

func (clientBroker) Counters() queen.Counters { return queen.Counters{} }
func (clientBroker) MaintenanceMode() bool    { return false }

func (clientBroker) SetMaintenanceMode(context.Context, bool) error { return queen.ErrUnsupported }

func (clientBroker) ListMessages(context.Context, queen.MessageFilter) (*queen.MessagePage, error) {
	return nil, queen.ErrUnsupported
}

func (clientBroker) GetMessage(context.Context, string, string) (*queen.MessageInfo, error) {
	return nil, queen.ErrUnsupported
}

func (clientBroker) DeleteMessage(context.Context, string, string) error {
	return queen.ErrUnsupported
}

func (clientBroker) RecordTrace(context.Context, queen.TraceEvent) (*queen.TraceEvent, error) {
	return nil, queen.ErrUnsupported
}

func (clientBroker) Traces(context.Context, string, string) ([]queen.TraceEvent, error) {
	return nil, queen.ErrUnsupported
}

func (clientBroker) TracesByName(context.Context, string, int, int) (*queen.TracePage, error) {
	return nil, queen.ErrUnsupported
}

func (clientBroker) TraceNames(context.Context, int, int) (*queen.TraceNamePage, error) {
	return nil, queen.ErrUnsupported
}
