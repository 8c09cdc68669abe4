package queen

import "context"

// GroupFilter selects the consumer groups [Broker.FindGroups] describes.
// Zero fields select everything.
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
	// exactly. 0 means no bound, as in [Broker.ListGroups].
	MaxProbes int
}

// FindGroups describes the consumer groups f selects, by queue then
// group, as [Broker.ListGroups] does. With a Queue, it looks at that
// queue's partitions only; with MaxProbes, a page showing lag on a queue
// of a million partitions costs a walk of them in memory rather than a
// million storage reads.
func (b *Broker) FindGroups(ctx context.Context, f GroupFilter) ([]GroupStats, error) {
	if f.MaxProbes < 0 {
		return nil, argErr("MaxProbes", "must not be negative")
	}
	return b.groupStats(f)
}
