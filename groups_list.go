package queen

import "context"

// GroupFilter selects the consumer groups [Broker.ListGroups] describes.
// The zero GroupFilter selects every group on every queue.
type GroupFilter struct {
	// Queue keeps the groups of that queue only.
	Queue string
	// Group keeps the groups of that name only (on every queue, unless
	// Queue is set). The queue-mode group is [QueueModeGroup].
	Group string
	// MaxProbes bounds the storage reads that find the groups'
	// OldestPendingAt, one per partition a group has messages to read in.
	// A group whose reads do not fit in what is left keeps a zero
	// OldestPendingAt (though its Lag is not zero); the others have it
	// exactly. 0 means no bound.
	MaxProbes int
}

// ListGroups describes the consumer groups f selects (queue mode
// included), by queue then group; the zero GroupFilter lists them all.
// With a Queue, it looks at that queue's partitions only; with MaxProbes,
// a page showing lag on a queue of a million partitions costs a walk of
// them in memory rather than a million storage reads.
func (b *Broker) ListGroups(ctx context.Context, f GroupFilter) ([]GroupStats, error) {
	if f.MaxProbes < 0 {
		return nil, argErr("MaxProbes", "must not be negative")
	}
	return b.groupStats(f)
}
