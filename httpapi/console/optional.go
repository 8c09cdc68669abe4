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

	diskUser interface{ DiskUsage() (int64, error) }

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
	_ diskUser        = (*queen.Broker)(nil)
	_ maintainer      = (*queen.Broker)(nil)
	_ partitionLister = (*queen.Broker)(nil)
	_ tracer          = (*queen.Broker)(nil)
)

// maxProbes bounds the storage reads a page spends finding the oldest
// pending message of groups (one per partition a group lags in): past
// it, a group's oldest pending age shows "—".
const maxProbes = 10_000

// groups describes the groups of queue ("" for all) named group ("" for
// all), the storage reads bounded by maxProbes.
func (h *handler) groups(ctx context.Context, queue, group string) ([]queen.GroupStats, error) {
	return h.c.ListGroups(ctx, queen.GroupFilter{Queue: queue, Group: group, MaxProbes: maxProbes})
}

// countsGroups reports whether the client is an in-process broker, whose
// groups carry Consumed and OldestPendingAt (a remote client's have
// neither) and whose ListGroups of one queue walks that queue only.
func (h *handler) countsGroups() bool {
	_, ok := h.c.(*queen.Broker)
	return ok
}
