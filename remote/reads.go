package remote

import (
	"context"
	"fmt"
	"time"

	"github.com/queenlite/queen"
)

// FetchPartitions is not served yet.
func (c *Client) FetchPartitions(ctx context.Context, req queen.FetchRequest) ([]queen.PartitionRead, error) {
	return nil, fmt.Errorf("%w: FetchPartitions", queen.ErrUnsupported)
}

// OffsetForTime is not served yet.
func (c *Client) OffsetForTime(ctx context.Context, queue, partition string, t time.Time) (queen.TimeOffset, error) {
	return queen.TimeOffset{}, fmt.Errorf("%w: OffsetForTime", queen.ErrUnsupported)
}

// GroupPositions is not served yet.
func (c *Client) GroupPositions(ctx context.Context, group string, parts []queen.PartitionRef) ([]queen.Position, error) {
	return nil, fmt.Errorf("%w: GroupPositions", queen.ErrUnsupported)
}

// SetPosition is not served yet.
func (c *Client) SetPosition(ctx context.Context, pos queen.Position) error {
	return fmt.Errorf("%w: SetPosition", queen.ErrUnsupported)
}
