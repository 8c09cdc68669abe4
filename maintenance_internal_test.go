package queen

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitingPops counts the pops of group on queue waiting on any partition.
func waitingPops(b *Broker, queue, group string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil || q.groups[group] == nil {
		return 0
	}
	g := q.groups[group]
	n := g.waiters.n
	for _, wl := range g.partWaiters {
		n += wl.n
	}
	return n
}

// In maintenance mode pushes are stored and pops take nothing, waiting
// ones included; turning it off delivers what came meanwhile, once.
func TestMaintenanceMode_PopsTakeNothingUntilOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	require.False(t, b.MaintenanceMode())

	// Two groups read the queue; one pop of "g" is parked on it.
	_, err = b.ConfigureQueue(ctx, "m", DefaultQueueConfig())
	require.NoError(t, err)
	for _, g := range []string{"g", "h"} {
		res, err := b.Pop(ctx, PopRequest{Queue: "m", Group: g, SubscriptionMode: SubscriptionModeAll})
		require.NoError(t, err)
		require.Empty(t, res.Messages)
	}
	_, err = b.Push(ctx, []PushItem{{Queue: "m", Payload: []byte(`0`)}})
	require.NoError(t, err)
	got := make(chan *PopResult, 1)
	go func() {
		res, err := b.Pop(ctx, PopRequest{Queue: "m", Group: "g", Partition: "p1", Wait: true, Timeout: 50 * time.Second})
		if err == nil {
			got <- res
		}
		close(got)
	}()
	require.Eventually(t, func() bool { return waitingPops(b, "m", "g") == 1 }, 10*time.Second, time.Millisecond)

	require.NoError(t, b.SetMaintenanceMode(ctx, true))
	require.True(t, b.MaintenanceMode())
	var items []PushItem
	for i := range 6 {
		items = append(items, PushItem{Queue: "m", Partition: fmt.Sprint("p", i%3), Payload: []byte(fmt.Sprint(i + 1))})
	}
	_, err = b.Push(ctx, items) // wakes the waiting pop, which must wait again empty-handed
	require.NoError(t, err)
	for _, g := range []string{"g", "h", "late"} {
		res, err := b.Pop(ctx, PopRequest{Queue: "m", Group: g, SubscriptionMode: SubscriptionModeAll, Batch: 100, Partitions: 10})
		require.NoError(t, err)
		require.Empty(t, res.Messages, "group %s", g)
		require.Empty(t, res.LeaseID)
	}
	res, err := b.Pop(ctx, PopRequest{Queue: "m", Group: "g", Partition: "p1"})
	require.NoError(t, err)
	require.Empty(t, res.Messages, "a named partition too")
	require.Eventually(t, func() bool { return waitingPops(b, "m", "g") == 1 }, 10*time.Second, time.Millisecond)
	select {
	case res := <-got:
		t.Fatalf("a waiting pop took %d messages in maintenance mode", len(res.Messages))
	default:
	}
	st, err := b.QueueStats(ctx, "m")
	require.NoError(t, err)
	require.Equal(t, int64(7), st.Messages, "pushes are stored")
	require.Zero(t, st.InFlight)

	// Off: the waiting pop wakes and takes its partition; everything else
	// is delivered once to each group.
	require.NoError(t, b.SetMaintenanceMode(ctx, false))
	require.False(t, b.MaintenanceMode())
	seen := map[string]map[string]int{"g": {}, "h": {}, "late": {}}
	select {
	case res := <-got:
		require.NotNil(t, res)
		require.Len(t, res.Messages, 1)
		require.Equal(t, "p1", res.Messages[0].Partition)
		seen["g"][string(res.Messages[0].Payload)]++
		_, err := b.AckBatch(ctx, []AckItem{{TransactionID: res.Messages[0].TransactionID, PartitionID: res.Messages[0].PartitionID, Group: "g", LeaseID: res.LeaseID, Status: AckCompleted}})
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("turning maintenance off did not wake the waiting pop")
	}
	for g, payloads := range seen {
		for {
			res, err := b.Pop(ctx, PopRequest{Queue: "m", Group: g, Batch: 100, Partitions: 10})
			require.NoError(t, err)
			if len(res.Messages) == 0 {
				break
			}
			var acks []AckItem
			for _, m := range res.Messages {
				payloads[string(m.Payload)]++
				acks = append(acks, AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, Group: g, LeaseID: m.LeaseID, Status: AckCompleted})
			}
			_, err = b.AckBatch(ctx, acks)
			require.NoError(t, err)
		}
	}
	// "late" joined in maintenance mode, after the first message: it reads
	// from the oldest like the others (it asked for all).
	want := map[string]int{"0": 1, "1": 1, "2": 1, "3": 1, "4": 1, "5": 1, "6": 1}
	require.Equal(t, map[string]map[string]int{"g": want, "h": want, "late": want}, seen)

	require.NoError(t, b.Close())
	require.ErrorIs(t, b.SetMaintenanceMode(ctx, true), ErrClosed)
}
