package remote_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// sameCounts requires got (read through remote) to carry want's counts.
func sameCounts(t *testing.T, want, got *queen.QueueStats, why string) {
	t.Helper()
	require.Equal(t, want.Name, got.Name, why)
	require.Equal(t, want.ID, got.ID, why)
	require.Equal(t, want.PartitionN, got.PartitionN, why+": PartitionN")
	require.Equal(t, want.Messages, got.Messages, why+": Messages")
	require.Equal(t, want.Pending, got.Pending, why+": Pending")
	require.Equal(t, want.InFlight, got.InFlight, why+": InFlight")
	require.Equal(t, want.DeadLetters, got.DeadLetters, why+": DeadLetters")
	require.Equal(t, want.Parked, got.Parked, why+": Parked")
	require.LessOrEqual(t, got.Pending, got.Messages, why+": Pending ≤ Messages")
}

// QueueStats and ListQueues over remote answer the broker's counts, field
// by field, whatever number of groups lease the same messages: the wire
// carries the broker's values, and neither side adds back what the other
// took off. Queue "one" has one partition, "two" two; 0, 1, 2 and 3 groups
// lease overlapping messages, then some are acked, then the leases run
// out. In queue "three" two groups settle the first message, then both
// lease the other two: Pending 2 of 3 Messages with 4 in flight, which
// Queen's counters alone (pending 0, processing 4) cannot tell from 3.
func TestQueueStats_SameAsBroker(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	c, b := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	ctx := context.Background()
	push := func(queue, partition string, n int) {
		t.Helper()
		items := make([]queen.PushItem, n)
		for i := range items {
			items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(`{}`)}
		}
		_, err := b.Push(ctx, items)
		require.NoError(t, err)
	}
	pop := func(queue, partition, group string, batch int) []*queen.Message {
		t.Helper()
		msgs, err := b.Queue(queue).Partition(partition).Group(group).SubscriptionMode(queen.SubscriptionModeAll).
			Batch(batch).Wait(false).Pop(ctx)
		require.NoError(t, err)
		require.Len(t, msgs, batch)
		return msgs
	}
	ack := func(m *queen.Message, st queen.AckStatus) {
		t.Helper()
		_, err := b.Ack(ctx, m, true, queen.AckOptions{Status: st})
		require.NoError(t, err)
	}
	same := func(step string) {
		t.Helper()
		for _, name := range []string{"one", "two", "three"} {
			want, err := b.QueueStats(ctx, name)
			require.NoError(t, err)
			got, err := c.QueueStats(ctx, name)
			require.NoError(t, err)
			why := step + ", QueueStats " + name
			sameCounts(t, want, got, why)
			require.Equal(t, want.Groups, got.Groups, why)
			require.Len(t, got.Partitions, len(want.Partitions), why)
			for i, wp := range want.Partitions {
				gp := got.Partitions[i]
				require.Equal(t, wp.Name, gp.Name, why)
				require.Equal(t, wp.ID, gp.ID, why)
				require.Equal(t, wp.Messages, gp.Messages, why+" "+wp.Name+": Messages")
				require.Equal(t, wp.Pending, gp.Pending, why+" "+wp.Name+": Pending")
				require.Equal(t, wp.InFlight, gp.InFlight, why+" "+wp.Name+": InFlight")
				require.LessOrEqual(t, gp.Pending, gp.Messages, why+" "+wp.Name+": Pending ≤ Messages")
				require.Equal(t, wp.FirstOffset, gp.FirstOffset, why)
				require.Equal(t, wp.NextOffset, gp.NextOffset, why)
			}
		}
		want, err := b.ListQueues(ctx)
		require.NoError(t, err)
		got, err := c.ListQueues(ctx)
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for i := range want {
			sameCounts(t, &want[i], &got[i], step+", ListQueues "+want[i].Name)
		}
	}

	// Created a second apart, newest last: the listing is by name all the
	// same.
	push("one", "", 2)
	clock.Advance(time.Second)
	push("two", "a", 3)
	push("two", "b", 2)
	clock.Advance(time.Second)
	push("three", "", 3)
	same("no group")

	one1 := pop("one", "", "g1", 2)
	two1 := pop("two", "a", "g1", 2)
	same("one group")

	pop("one", "", "g2", 2)
	pop("two", "a", "g2", 3)
	st, err := b.QueueStats(ctx, "one")
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Pending, "two groups leasing the same 2 messages")
	require.EqualValues(t, 4, st.InFlight, "counted for each group")
	same("two groups")

	pop("one", "", "g3", 1)
	two3 := pop("two", "b", "g3", 2)
	same("three groups")

	ack(one1[0], queen.AckCompleted)
	ack(one1[1], queen.AckDLQ)
	ack(two1[0], queen.AckCompleted)
	ack(two3[0], queen.AckPark)
	same("some acked")

	for _, g := range []string{"g1", "g2"} {
		ack(pop("three", "", g, 1)[0], queen.AckCompleted)
		pop("three", "", g, 2)
	}
	st, err = b.QueueStats(ctx, "three")
	require.NoError(t, err)
	require.Equal(t, [3]int64{3, 2, 4}, [3]int64{st.Messages, st.Pending, st.InFlight})
	same("two groups leasing the same messages after acking one")

	clock.Advance(2 * time.Minute) // past every lease
	same("leases expired")
}
