package queen_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func names(ps []queen.PartitionStats) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func TestListPartitions(t *testing.T) {
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	// Created in an order that is not the names' order.
	for _, p := range []string{"c", "a", "b", "ab", "ba"} {
		pushN(t, b, "orders", p, 2)
	}
	page, err := b.ListPartitions(ctx, "orders", queen.PartitionFilter{})
	require.NoError(t, err)
	require.Equal(t, []string{"c", "a", "b", "ab", "ba"}, names(page.Partitions), "creation order")
	require.Zero(t, page.Next)
	require.Equal(t, 5, page.Scanned)

	page, err = b.ListPartitions(ctx, "orders", queen.PartitionFilter{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"c", "a"}, names(page.Partitions))
	require.Equal(t, 2, page.Next)
	page, err = b.ListPartitions(ctx, "orders", queen.PartitionFilter{From: page.Next, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"b", "ab"}, names(page.Partitions))
	require.Equal(t, 4, page.Next)
	page, err = b.ListPartitions(ctx, "orders", queen.PartitionFilter{From: 4, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"ba"}, names(page.Partitions))
	require.Zero(t, page.Next)
	page, err = b.ListPartitions(ctx, "orders", queen.PartitionFilter{From: 99})
	require.NoError(t, err)
	require.Empty(t, page.Partitions)

	// Search scans until the page is full, and says where it stopped.
	page, err = b.ListPartitions(ctx, "orders", queen.PartitionFilter{Search: "a", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "ab"}, names(page.Partitions))
	require.Equal(t, 4, page.Next)
	require.Equal(t, 4, page.Scanned)
	page, err = b.ListPartitions(ctx, "orders", queen.PartitionFilter{Search: "a", From: 4, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"ba"}, names(page.Partitions))

	// By name.
	page, err = b.ListPartitions(ctx, "orders", queen.PartitionFilter{Name: "ab", Search: "zzz", From: 3})
	require.NoError(t, err)
	require.Equal(t, []string{"ab"}, names(page.Partitions))
	page, err = b.ListPartitions(ctx, "orders", queen.PartitionFilter{Name: "zz"})
	require.NoError(t, err)
	require.Empty(t, page.Partitions)

	// Bad filters and queues.
	for _, f := range []queen.PartitionFilter{{From: -1}, {Limit: -1}, {Limit: queen.MaxPartitionPage + 1}} {
		_, err = b.ListPartitions(ctx, "orders", f)
		require.ErrorIs(t, err, queen.ErrInvalidArgument, "%+v", f)
	}
	_, err = b.ListPartitions(ctx, "nowhere", queen.PartitionFilter{})
	require.ErrorIs(t, err, queen.ErrNotFound)
	page, err = b.ListPartitions(ctx, "orders", queen.PartitionFilter{Limit: queen.MaxPartitionPage})
	require.NoError(t, err)
	require.Len(t, page.Partitions, 5)
}

// TestListPartitions_AgreesWithQueueStats: the page's partitions and the
// queue's totals, counted from what the broker keeps, are those of
// QueueStats, with groups, a live lease, settled and dead-lettered
// messages.
func TestListPartitions_AgreesWithQueueStats(t *testing.T) {
	ctx := context.Background()
	clock := queentest.NewClock(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC))
	b := queentest.NewBroker(t, &queen.Options{Clock: clock, DefaultSubscriptionMode: queen.SubscriptionModeAll})
	for i := 0; i < 6; i++ {
		pushN(t, b, "orders", fmt.Sprintf("p%d", i), i+1)
	}
	done := pop(t, b, queen.PopRequest{Queue: "orders", Group: "billing", Batch: 3})
	_, err := b.AckBatch(ctx, ackItems(done.Messages, queen.AckCompleted))
	require.NoError(t, err)
	dead := pop(t, b, queen.PopRequest{Queue: "orders", Group: "shipping", Batch: 1})
	_, err = b.AckBatch(ctx, ackItems(dead.Messages, queen.AckDLQ))
	require.NoError(t, err)
	leased := pop(t, b, queen.PopRequest{Queue: "orders", Group: "billing", Batch: 2, Partitions: 2})
	require.NotEmpty(t, leased.Messages)
	// A batch acked out of order: its settled message is no longer in
	// flight, though the batch still is.
	part := pop(t, b, queen.PopRequest{Queue: "orders", Partition: "p5", Group: "audit", Batch: 3})
	require.Len(t, part.Messages, 3)
	_, err = b.AckBatch(ctx, ackItems(part.Messages[1:2], queen.AckCompleted))
	require.NoError(t, err)

	check := func() {
		t.Helper()
		want, err := b.QueueStats(ctx, "orders")
		require.NoError(t, err)
		page, err := b.ListPartitions(ctx, "orders", queen.PartitionFilter{})
		require.NoError(t, err)
		got := page.Queue
		require.Nil(t, got.Partitions)
		wantTotals := *want
		wantTotals.Partitions = nil
		require.Equal(t, wantTotals, got)
		require.NotZero(t, got.InFlight)
		byName := map[string]queen.PartitionStats{}
		for _, p := range want.Partitions {
			byName[p.Name] = p
		}
		require.Len(t, page.Partitions, len(want.Partitions))
		for _, p := range page.Partitions {
			require.Equal(t, byName[p.Name], p, p.Name)
		}
	}
	check()
	// Once the lease runs out, nothing is in flight in either.
	clock.Advance(time.Hour)
	want, err := b.QueueStats(ctx, "orders")
	require.NoError(t, err)
	page, err := b.ListPartitions(ctx, "orders", queen.PartitionFilter{})
	require.NoError(t, err)
	require.Zero(t, want.InFlight)
	require.Zero(t, page.Queue.InFlight)
	require.Equal(t, want.Pending, page.Queue.Pending)
}

func TestFacts(t *testing.T) {
	at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	b := queentest.NewBroker(t, &queen.Options{Clock: queentest.NewClock(at), Durability: queen.SyncPushes})
	f := b.Facts()
	require.NotEmpty(t, f.StoreID)
	require.Equal(t, queen.Facts{Version: queen.Version, Durability: queen.SyncPushes, InMemory: true, OpenedAt: at, StoreID: f.StoreID}, f)

	dir := t.TempDir()
	d, err := queen.Open(dir, &queen.Options{Durability: queen.SyncNever})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	pushN(t, d, "orders", "", 10)
	require.NoError(t, d.Close())
	// Badger measures its files at open (and about once a minute after).
	d, err = queen.Open(dir, &queen.Options{Durability: queen.SyncNever})
	require.NoError(t, err)
	f = d.Facts()
	require.False(t, f.InMemory)
	require.Equal(t, queen.SyncNever, f.Durability)
	require.Positive(t, f.StoreBytes)
}
