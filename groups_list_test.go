package queen_test

import (
	"context"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestListGroups_Filter(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := queentest.NewClock(at)
	b := queentest.NewBroker(t, &queen.Options{Clock: clock, DefaultSubscriptionMode: queen.SubscriptionModeAll})
	for _, p := range []string{"a", "b", "c"} {
		pushN(t, b, "orders", p, 1)
		clock.Advance(time.Minute)
	}
	pushN(t, b, "audit", "", 1)
	pop(t, b, queen.PopRequest{Queue: "orders", Group: "billing", Batch: 0, Partition: "nowhere"})
	for _, g := range []string{"billing", "shipping", ""} {
		_, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Group: g, Batch: 1, Partition: "zz"})
		require.NoError(t, err)
	}
	_, err := b.Pop(ctx, queen.PopRequest{Queue: "audit", Group: "billing", Batch: 1, Partition: "zz"})
	require.NoError(t, err)

	all, err := b.ListGroups(ctx, queen.GroupFilter{})
	require.NoError(t, err)
	found, err := b.ListGroups(ctx, queen.GroupFilter{MaxProbes: 1 << 20})
	require.NoError(t, err)
	require.Equal(t, all, found, "a bound never reached changes nothing")
	require.Len(t, found, 4)

	orders, err := b.ListGroups(ctx, queen.GroupFilter{Queue: "orders"})
	require.NoError(t, err)
	require.Len(t, orders, 3)
	for _, g := range orders {
		require.Equal(t, "orders", g.Queue)
		require.EqualValues(t, 3, g.Lag)
		require.True(t, g.OldestPendingAt.Equal(at), "%s: %v", g.Group, g.OldestPendingAt)
	}
	billing, err := b.ListGroups(ctx, queen.GroupFilter{Group: "billing"})
	require.NoError(t, err)
	require.Len(t, billing, 2)
	qm, err := b.ListGroups(ctx, queen.GroupFilter{Queue: "orders", Group: queen.QueueModeGroup})
	require.NoError(t, err)
	require.Len(t, qm, 1)
	require.Equal(t, queen.QueueModeGroup, qm[0].Group)

	// A bound of 7 reads: the first two groups (3 lagging partitions each)
	// are probed, the third is not, though its lag is counted.
	bounded, err := b.ListGroups(ctx, queen.GroupFilter{Queue: "orders", MaxProbes: 7})
	require.NoError(t, err)
	probed := 0
	for i, g := range bounded {
		require.EqualValues(t, 3, g.Lag)
		if !g.OldestPendingAt.IsZero() {
			probed++
			require.Equal(t, orders[i], g)
		}
	}
	require.Equal(t, 2, probed)
	bounded, err = b.ListGroups(ctx, queen.GroupFilter{Queue: "orders", MaxProbes: 9})
	require.NoError(t, err)
	require.Equal(t, orders, bounded, "a bound that fits changes nothing")
	bounded, err = b.ListGroups(ctx, queen.GroupFilter{Queue: "orders", MaxProbes: 2})
	require.NoError(t, err)
	for _, g := range bounded {
		require.True(t, g.OldestPendingAt.IsZero(), g.Group)
	}

	none, err := b.ListGroups(ctx, queen.GroupFilter{Queue: "nowhere"})
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = b.ListGroups(ctx, queen.GroupFilter{MaxProbes: -1})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}
