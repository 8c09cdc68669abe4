package console

import (
	"context"

	"github.com/queenlite/queen"
)

// Methods of [*queen.Broker] beyond [queen.Client] that pages use when
// the client has them; over a remote client the page says what it cannot
// show.
type (
	factsSource interface{ Facts() queen.Facts }

	counterSource interface{ Counters() queen.Counters }

	maintainer interface {
		MaintenanceMode() bool
		SetMaintenanceMode(ctx context.Context, on bool) error
	}

	partitionLister interface {
		ListPartitions(ctx context.Context, queue string, f queen.PartitionFilter) (*queen.PartitionPage, error)
	}

	tracer interface {
		Traces(ctx context.Context, partitionID, transactionID string) ([]queen.TraceEvent, error)
		TracesByName(ctx context.Context, name string, limit, offset int) (*queen.TracePage, error)
		TraceNames(ctx context.Context, limit, offset int) (*queen.TraceNamePage, error)
	}
)

var (
	_ factsSource     = (*queen.Broker)(nil)
	_ counterSource   = (*queen.Broker)(nil)
	_ maintainer      = (*queen.Broker)(nil)
	_ partitionLister = (*queen.Broker)(nil)
	_ tracer          = (*queen.Broker)(nil)
)
