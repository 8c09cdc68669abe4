package queen

import (
	"context"
	"strings"
	"time"
)

// Admin gathers a client's administrative calls under the names Queen's
// clients give them. Every method delegates to the [Client] method it
// names ([Broker] in process); get one with [Broker.Admin] or the Admin
// method of any [Client].
type Admin struct {
	c Client
}

// Admin returns the administrative calls of b.
func (b *Broker) Admin() *Admin { return &Admin{c: b} }

// SeekConsumerGroupOptions says where [Admin.SeekConsumerGroup] moves a
// group: to the first message pushed at or after Timestamp (RFC 3339), or
// past everything with ToEnd. Both empty means the end.
type SeekConsumerGroupOptions struct {
	Timestamp string
	ToEnd     bool
}

func (o SeekConsumerGroupOptions) seekOptions() (SeekOptions, error) {
	if o.ToEnd || strings.TrimSpace(o.Timestamp) == "" {
		return SeekOptions{ToEnd: true}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(o.Timestamp))
	if err != nil {
		return SeekOptions{}, argErr("SeekConsumerGroupOptions.Timestamp", "not an RFC 3339 time: %q", o.Timestamp)
	}
	return SeekOptions{Timestamp: t}, nil
}

// SeekConsumerGroup moves group's cursor in every partition of queue and
// releases its live leases there; see [Broker.SeekGroup].
func (a *Admin) SeekConsumerGroup(ctx context.Context, group, queue string, opts SeekConsumerGroupOptions) (*SeekResult, error) {
	so, err := opts.seekOptions()
	if err != nil {
		return nil, err
	}
	return a.c.SeekGroup(ctx, group, queue, so)
}

// SeekPartition is SeekConsumerGroup for one partition; see
// [Broker.SeekPartition].
func (a *Admin) SeekPartition(ctx context.Context, group, queue, partition string, opts SeekConsumerGroupOptions) (*SeekResult, error) {
	so, err := opts.seekOptions()
	if err != nil {
		return nil, err
	}
	return a.c.SeekPartition(ctx, group, queue, partition, so)
}

// DeleteConsumerGroup removes group's cursors on queue (every queue when
// queue is ""); see [Broker.DeleteGroup].
func (a *Admin) DeleteConsumerGroup(ctx context.Context, group, queue string, deleteMetadata bool) (int, error) {
	return a.c.DeleteGroup(ctx, group, queue, deleteMetadata)
}

// UpdateConsumerGroupSubscription moves group's start point to from; see
// [Broker.SetGroupSubscription].
func (a *Admin) UpdateConsumerGroupSubscription(ctx context.Context, group string, from time.Time) (int, error) {
	return a.c.SetGroupSubscription(ctx, group, from)
}

// ListConsumerGroups describes the consumer groups, or only group when it
// is not empty; see [Broker.ListGroups].
func (a *Admin) ListConsumerGroups(ctx context.Context, group string) ([]GroupStats, error) {
	return a.c.ListGroups(ctx, GroupFilter{Group: group})
}

// ConfigureQueue creates or reconfigures a queue; see
// [Broker.ConfigureQueue].
func (a *Admin) ConfigureQueue(ctx context.Context, name string, cfg QueueConfig) (*QueueInfo, error) {
	return a.c.ConfigureQueue(ctx, name, cfg)
}

// DeleteQueue deletes a queue and everything in it; see
// [Broker.DeleteQueue].
func (a *Admin) DeleteQueue(ctx context.Context, name string) (existed bool, err error) {
	return a.c.DeleteQueue(ctx, name)
}

// GetQueue describes a queue; see [Broker.DescribeQueue].
func (a *Admin) GetQueue(ctx context.Context, name string) (*QueueInfo, error) {
	return a.c.DescribeQueue(ctx, name)
}

// QueueStats describes a queue, its partitions and cursors; see
// [Broker.QueueStats].
func (a *Admin) QueueStats(ctx context.Context, name string) (*QueueStats, error) {
	return a.c.QueueStats(ctx, name)
}

// ListQueues describes every queue; see [Broker.ListQueues].
func (a *Admin) ListQueues(ctx context.Context) ([]QueueStats, error) {
	return a.c.ListQueues(ctx)
}
