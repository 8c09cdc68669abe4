package queen_test

import (
	"context"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// TestQueueCounters counts each queue apart: pushes, pops, empty pops,
// acks by status, dead letters, and the lag of what a pop delivered by
// the broker's clock; deleting a queue drops its counters.
func TestQueueCounters(t *testing.T) {
	t.Parallel()
	b, clock := clocked(t, nil)
	configure(t, b, "a", 0)
	pushTo(t, b, "a", "p1", numbered(3)...)
	pushTo(t, b, "b", "p1", numbered(2)...)
	clock.Advance(1500 * time.Millisecond)
	pushTo(t, b, "a", "p2", `{"late":1}`)
	clock.Advance(500 * time.Millisecond)

	res := pop(t, b, queen.PopRequest{Queue: "a", Partition: "p1", Batch: 10})
	require.Len(t, res.Messages, 3)
	ackAll(t, b, res.Messages[:2], queen.AckCompleted)
	ackAll(t, b, res.Messages[2:], queen.AckDLQ)
	res = pop(t, b, queen.PopRequest{Queue: "a", Partition: "p2", Batch: 10})
	require.Len(t, res.Messages, 1)
	ackAll(t, b, res.Messages, queen.AckFailed)
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "a", Partition: "p1"}).Messages)
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "never"}).Messages)

	all := b.QueueCounters()
	require.NotContains(t, all, "never", "a name only popped is not counted")
	a := all["a"]
	require.EqualValues(t, 4, a.Pushed)
	require.EqualValues(t, 4, a.Popped)
	require.EqualValues(t, 1, a.EmptyPops)
	require.EqualValues(t, 2, a.Acked[queen.AckCompleted])
	require.EqualValues(t, 1, a.Acked[queen.AckDLQ])
	require.EqualValues(t, 1, a.Acked[queen.AckFailed])
	require.EqualValues(t, 2, a.PushBatches, "two push calls")
	require.EqualValues(t, 2, a.PopBatches, "two pops delivered, one did not")
	require.EqualValues(t, 3, a.AckBatches)
	require.EqualValues(t, 2, a.DeadLettered, "the dlq ack, and the failed one with no retries left")
	require.EqualValues(t, 4, a.Lag.Count)
	require.Equal(t, 3*2000*time.Millisecond+500*time.Millisecond, a.Lag.Total)
	require.Equal(t, 2*time.Second, a.Lag.Max)
	require.EqualValues(t, 1, a.Lag.Buckets[9], "500 ms is in [256, 512) ms")
	require.EqualValues(t, 3, a.Lag.Buckets[11], "2000 ms is in [1024, 2048) ms")

	bq := all["b"]
	require.EqualValues(t, 2, bq.Pushed)
	require.Zero(t, bq.Popped)
	require.Zero(t, bq.Lag.Count)

	_, err := b.DeleteQueue(bg, "a")
	require.NoError(t, err)
	require.NotContains(t, b.QueueCounters(), "a")
}

// TestLagCounts_MaxSince bounds the longest lag between two readings by
// the highest bucket that grew, clipped to the running maximum.
func TestLagCounts_MaxSince(t *testing.T) {
	t.Parallel()
	var prev, cur queen.LagCounts
	require.Zero(t, cur.MaxSince(prev), "nothing popped")
	cur.Buckets[3], cur.Max = 1, 5*time.Millisecond // a 5 ms lag: [4, 8) ms
	require.Equal(t, 5*time.Millisecond, cur.MaxSince(prev), "clipped to Max")
	prev = cur
	cur.Buckets[2]++ // a 3 ms lag, after
	require.Equal(t, 4*time.Millisecond, cur.MaxSince(prev), "the upper bound of [2, 4) ms")
	cur.Buckets[queen.LagBuckets-1], cur.Max = 1, 1000*time.Hour
	require.Equal(t, 1000*time.Hour, cur.MaxSince(prev), "the last bucket is open: Max")
}

// TestQueueCounters_Retention counts what Retention, CompletedRetention
// and MaxWaitTime removed.
func TestQueueCounters_Retention(t *testing.T) {
	t.Parallel()
	b, clock := clocked(t, nil)
	configureWith(t, b, "old", func(c *queen.QueueConfig) { c.Retention = time.Minute })
	configureWith(t, b, "done", func(c *queen.QueueConfig) { c.CompletedRetention = time.Minute })
	configureWith(t, b, "wait", func(c *queen.QueueConfig) { c.MaxWaitTime = time.Minute })
	pushTo(t, b, "old", "p", numbered(3)...)
	pushTo(t, b, "done", "p", numbered(2)...)
	pushTo(t, b, "wait", "p", numbered(2)...)
	res := pop(t, b, queen.PopRequest{Queue: "done", Batch: 10})
	ackAll(t, b, res.Messages, queen.AckCompleted)
	clock.Advance(2 * time.Minute)
	require.NoError(t, b.Maintain(bg))

	all := b.QueueCounters()
	require.EqualValues(t, 3, all["old"].Retained)
	require.EqualValues(t, 2, all["done"].CompletedRetained)
	require.EqualValues(t, 2, all["wait"].Evicted, "deleted: no group reads them")
	require.Zero(t, all["old"].CompletedRetained+all["old"].Evicted)
}

// TestBroker_WaitingPops counts the long-polls waiting now, by queue, a
// queue that does not exist yet included.
func TestBroker_WaitingPops(t *testing.T) {
	t.Parallel()
	b, _ := clocked(t, nil)
	pushTo(t, b, "a", "p", `{}`)
	pop(t, b, queen.PopRequest{Queue: "a"}) // leased: the next pops wait
	require.Empty(t, b.WaitingPops())

	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{}, 3)
	for _, req := range []queen.PopRequest{
		{Queue: "a", Wait: true, Timeout: time.Minute},
		{Queue: "a", Partition: "p", Wait: true, Timeout: time.Minute},
		{Queue: "later", Wait: true, Timeout: time.Minute},
	} {
		go func() {
			_, _ = b.Pop(ctx, req)
			done <- struct{}{}
		}()
	}
	itest.AwaitWaiting(t, b, 3)
	require.Equal(t, map[string]int{"a": 2, "later": 1}, b.WaitingPops())
	cancel()
	for range 3 {
		<-done
	}
	require.Empty(t, b.WaitingPops())
}
