package queen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen/internal/keys"
	"github.com/stretchr/testify/require"
)

// TestWriter_RefusedValueFailsOnlyItsCaller: when Badger refuses a batch
// because one caller's value is over its limit (validation should have
// stopped it; this is the defence behind it), the writer used to fail
// every request of the batch with Badger's text and a hex dump, and to stop
// the broker if any carried writes already applied in memory. Now it
// writes the requests one by one: only that caller fails, with a short
// ErrTooLarge, and the broker keeps serving.
func TestWriter_RefusedValueFailsOnlyItsCaller(t *testing.T) {
	t.Parallel()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	info, err := b.ConfigureQueue(context.Background(), "other", DefaultQueueConfig())
	require.NoError(t, err)
	_ = info

	big := &pushReq{items: []PushItem{{Queue: "w", Payload: json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`)}}, done: make(chan error, 1)}
	small := &pushReq{items: []PushItem{{Queue: "w", Payload: json.RawMessage(`1`)}}, done: make(chan error, 1)}
	for _, r := range []*pushReq{big, small} {
		require.NoError(t, r.items[0].normalize(0))
		r.results = make([]PushResult, len(r.items))
	}
	b.mu.Lock()
	b.preparePush(big, nil)
	b.preparePush(small, nil)
	meta := b.queues["other"].meta()
	b.mu.Unlock()
	write := &writeReq{ops: []command{setKey{keys.QueueKey("other"), meta}}, done: make(chan error, 1)}

	// All three in one batch: queued together, then the writer woken.
	b.w.mu.Lock()
	b.w.queue = append(b.w.queue, &writeReq{push: big, done: big.done}, write, &writeReq{push: small, done: small.done})
	b.w.mu.Unlock()
	b.w.signal <- struct{}{}

	err = <-big.done
	require.ErrorIs(t, err, ErrTooLarge)
	require.Less(t, len(err.Error()), 200, "%.300s", err)
	require.Contains(t, err.Error(), "storage limit")
	require.NoError(t, <-write.done)
	require.NoError(t, <-small.done)
	require.Equal(t, PushQueued, small.results[0].Status)
	require.NoError(t, b.Ping(context.Background()))
	res, err := b.Push(context.Background(), []PushItem{{Queue: "w", Payload: json.RawMessage(`2`)}})
	require.NoError(t, err)
	require.Equal(t, int64(1), res[0].Offset)
}

// stepClock is a fake clock moved by the test's one goroutine.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// checkPending compares every queue's incremental pending count with the
// one QueueStats computes by walking the cursors.
func checkPending(t *testing.T, b *Broker, step string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for name, q := range b.queues {
		walked := b.queueStats(q, false, now)
		want := walked.Pending
		require.Equal(t, want, q.pending, "%s: queue %s pending", step, name)
		// ListQueues and ListPartitions count from what is kept, not walked.
		kept := b.queueTotals(q, now)
		require.Equal(t, walked, kept, "%s: queue %s totals", step, name)
		require.GreaterOrEqual(t, q.reserved, int64(0))
	}
}

// TestPending_FollowsEveryCursorMove drives a broker with random pushes,
// pops (leased, auto-acked, conflating), acks of every status, lease
// expiries, seeks, group deletes and additions, subscription moves,
// message deletes and retention, and checks after each step that the
// pending count MaxSize relies on equals QueueStats.Pending.
func TestPending_FollowsEveryCursorMove(t *testing.T) {
	t.Parallel()
	clock := &stepClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	b, err := Open("", &Options{InMemory: true, Clock: clock})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	cfg := DefaultQueueConfig()
	cfg.Retention = 50 * time.Minute
	cfg.MaxWaitTime = 20 * time.Minute
	cfg.MaxSize = 1000
	cfg.RetryLimit = 1
	cfg.RetryDelay = 0
	_, err = b.ConfigureQueue(ctx, "pq", cfg)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(7, 11))
	parts := []string{"a", "b", "c"}
	groups := []string{"", "g1", "g2", "cf"}
	var held []*Message
	statuses := []AckStatus{AckCompleted, AckCompleted, AckFailed, AckRetry, AckDLQ, AckPark}
	for step := 0; step < 600; step++ {
		var what string
		switch k := rng.IntN(20); {
		case k < 6:
			what = "push"
			n := 1 + rng.IntN(3)
			items := make([]PushItem, n)
			for i := range items {
				items[i] = PushItem{Queue: "pq", Partition: parts[rng.IntN(len(parts))], Payload: json.RawMessage(`1`)}
			}
			_, err := b.Push(ctx, items)
			require.NoError(t, err)
		case k < 10:
			g := groups[rng.IntN(len(groups))]
			req := PopRequest{Queue: "pq", Group: g, Batch: 1 + rng.IntN(4), Partitions: 1 + rng.IntN(2), SubscriptionMode: SubscriptionModeAll}
			if g == "cf" {
				req.Conflation = true
			} else if rng.IntN(4) == 0 {
				req.CommitOnDelivery = true
			}
			what = fmt.Sprintf("pop %+v", req)
			res, err := b.Pop(ctx, req)
			require.NoError(t, err)
			if !req.CommitOnDelivery {
				held = append(held, res.Messages...)
			}
		case k < 14 && len(held) > 0:
			n := 1 + rng.IntN(len(held))
			var items []AckItem
			for _, m := range held[:n] {
				g := m.ConsumerGroup
				if g == QueueModeGroup {
					g = ""
				}
				items = append(items, AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: g, Status: statuses[rng.IntN(len(statuses))]})
			}
			held = held[n:]
			what = "ack"
			_, err := b.AckBatch(ctx, items)
			require.NoError(t, err)
		case k == 14:
			what = "clock"
			clock.Advance(time.Duration(rng.IntN(120)) * time.Second)
		case k == 15:
			g := groups[rng.IntN(3)]
			what = "seek " + g
			opts := SeekOptions{ToEnd: rng.IntN(2) == 0}
			if !opts.ToEnd {
				opts.Timestamp = clock.Now().Add(-time.Duration(rng.IntN(600)) * time.Second)
			}
			_, err := b.SeekGroup(ctx, g, "pq", opts)
			if !errors.Is(err, ErrGroupNotFound) { // deleted, or not joined yet
				require.NoError(t, err)
			}
		case k == 16:
			g := groups[rng.IntN(len(groups))]
			what = "delete group " + g
			_, err := b.DeleteGroup(ctx, g, "pq", rng.IntN(2) == 0)
			if !errors.Is(err, ErrGroupNotFound) {
				require.NoError(t, err)
			}
		case k == 17:
			what = "subscription"
			_, err := b.SetGroupSubscription(ctx, groups[1+rng.IntN(2)], clock.Now().Add(-time.Duration(rng.IntN(600))*time.Second))
			if !errors.Is(err, ErrGroupNotFound) {
				require.NoError(t, err)
			}
		case k == 18:
			what = "retention"
			clock.Advance(10 * time.Minute)
			require.NoError(t, b.Maintain(ctx))
		default:
			what = "delete message"
			f, err := b.Fetch(ctx, "pq", parts[rng.IntN(len(parts))], 0, 50)
			require.NoError(t, err)
			if len(f.Records) > 0 {
				b.mu.Lock()
				pid := b.queues["pq"].parts[f.Partition].uuid()
				b.mu.Unlock()
				err := b.DeleteMessage(ctx, pid, f.Records[rng.IntN(len(f.Records))].TransactionID)
				require.NoError(t, err)
			}
		}
		checkPending(t, b, fmt.Sprintf("step %d (%s)", step, what))
	}
}

// TestPending_RebuiltOnOpen: the pending count is rebuilt from the stored
// cursors when a broker opens, so MaxSize holds across restarts.
func TestPending_RebuiltOnOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	b, err := Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	cfg := DefaultQueueConfig()
	cfg.MaxSize = 5
	_, err = b.ConfigureQueue(ctx, "rq", cfg)
	require.NoError(t, err)
	_, err = b.Pop(ctx, PopRequest{Queue: "rq", Group: "slow"})
	require.NoError(t, err)
	for _, part := range []string{"a", "b"} {
		_, err = b.Push(ctx, []PushItem{{Queue: "rq", Partition: part}, {Queue: "rq", Partition: part}})
		require.NoError(t, err)
	}
	res, err := b.Pop(ctx, PopRequest{Queue: "rq", Group: "slow", Partition: "a", Batch: 2})
	require.NoError(t, err)
	for _, m := range res.Messages {
		_, err := b.Ack(ctx, m, true, AckOptions{})
		require.NoError(t, err)
	}
	checkPending(t, b, "before close")
	require.NoError(t, b.Close())

	b, err = Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	defer b.Close()
	checkPending(t, b, "after open")
	b.mu.Lock()
	require.Equal(t, int64(2), b.queues["rq"].pending, "b's two messages")
	b.mu.Unlock()
	out, err := b.Push(ctx, []PushItem{{Queue: "rq"}, {Queue: "rq"}, {Queue: "rq"}, {Queue: "rq"}})
	require.NoError(t, err)
	require.Equal(t, []PushStatus{PushQueued, PushQueued, PushQueued, PushFailed}, []PushStatus{out[0].Status, out[1].Status, out[2].Status, out[3].Status})
}
