package queen_test

import (
	"context"
	"fmt"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Defects found by the widened model test, each with a focused regression
// test.

// storedCounts maps every queue to its stored message count.
func storedCounts(t *testing.T, b *queen.Broker) map[string]int64 {
	t.Helper()
	qs, err := b.ListQueues(bg)
	require.NoError(t, err)
	m := make(map[string]int64, len(qs))
	for _, q := range qs {
		m[q.Name] = q.Messages
	}
	return m
}

// TestModelFound_PushRacingDeleteQueueSurvivesReopen: a push racing
// DeleteQueue may re-create the queue; once both returned, what the broker
// serves (the queue and its messages, or no queue) is what it serves after
// a restart. The deletion's write used to remove the re-created queue's
// metadata, so the queue and its acknowledged messages were lost at Open.
func TestModelFound_PushRacingDeleteQueueSurvivesReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	const rounds, pushers, pushes = 60, 3, 4
	for r := range rounds {
		name := fmt.Sprintf("q%d", r)
		pushOne(t, b, name, "", "seed", `1`)
		var wg sync.WaitGroup
		wg.Add(1 + pushers)
		go func() {
			defer wg.Done()
			_, err := b.DeleteQueue(bg, name)
			require.NoError(t, err)
		}()
		for g := range pushers {
			go func() {
				defer wg.Done()
				for i := range pushes {
					_, err := b.Push(bg, []queen.PushItem{{Queue: name, TransactionID: fmt.Sprintf("t%d-%d", g, i), Payload: []byte(`1`)}})
					require.NoError(t, err)
				}
			}()
		}
		wg.Wait()
	}
	before := storedCounts(t, b)
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, nil)
	require.Equal(t, before, storedCounts(t, b))
}

// TestModelFound_ConfigureRacesNoPop: ConfigureQueue replacing the
// configuration while waiting and batch pops deliver from a queue with
// DelayedProcessing (run with -race).
func TestModelFound_ConfigureRacesNoPop(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.DelayedProcessing = time.Second
	_, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	pushN(t, b, "q", "", 20)
	clock.Advance(2 * time.Second)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := range 20 {
			c := cfg
			c.DelayedProcessing = time.Duration(i%3) * time.Second
			_, err := b.ConfigureQueue(bg, "q", c)
			assert.NoError(t, err)
		}
	}()
	for range 2 {
		go func() {
			defer wg.Done()
			for range 10 {
				_, err := b.Pop(bg, queen.PopRequest{Queue: "q", Batch: 2, Wait: true, Timeout: time.Millisecond, CommitOnDelivery: true})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
}

// TestModelFound_ShorterHoldAppliesAtOnce: after ConfigureQueue shortens
// DelayedProcessing or WindowBuffer, a waiting pop is served once the new,
// shorter time has passed, not held until the old one.
func TestModelFound_ShorterHoldAppliesAtOnce(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"DelayedProcessing", "WindowBuffer"} {
		t.Run(kind, func(t *testing.T) {
			clock := itest.NewClock()
			b := queentest.NewBroker(t, &queen.Options{Clock: clock})
			set := func(d time.Duration) {
				cfg := queen.DefaultQueueConfig()
				if kind == "DelayedProcessing" {
					cfg.DelayedProcessing = d
				} else {
					cfg.WindowBuffer = d
				}
				_, err := b.ConfigureQueue(bg, "q", cfg)
				require.NoError(t, err)
			}
			set(time.Hour)
			pushOne(t, b, "q", "", "a", `1`)
			// A first pop finds the message held and leaves the hold scheduled.
			res := pop(t, b, queen.PopRequest{Queue: "q"})
			require.Empty(t, res.Messages)
			set(10 * time.Second)
			got := make(chan *queen.PopResult, 1)
			go func() {
				res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Wait: true, Timeout: queen.MaxPopTimeout})
				assert.NoError(t, err)
				got <- res
			}()
			itest.AwaitWaiting(t, b, 1)
			clock.Advance(11 * time.Second)
			select {
			case res := <-got:
				require.Equal(t, []string{"a"}, txids(res.Messages))
			case <-time.After(10 * time.Second):
				t.Fatal("the waiting pop was not served after the shortened hold")
			}
		})
	}
}

// TestModelFound_CountersCountDiscoveryPops: Counters.Popped counts the
// messages of a discovery pop (by Namespace/Task, without a queue), and
// the Observer sees it as a pop of the queue it served.
func TestModelFound_CountersCountDiscoveryPops(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	cfg := queen.DefaultQueueConfig()
	cfg.Namespace, cfg.Task = "ns", "task"
	_, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	pushN(t, b, "q", "", 3)
	res := pop(t, b, queen.PopRequest{Namespace: "ns", Batch: 2})
	require.Len(t, res.Messages, 2)
	ackAll(t, b, res.Messages, queen.AckCompleted)
	res = pop(t, b, queen.PopRequest{Task: "task", Batch: 5, CommitOnDelivery: true})
	require.Len(t, res.Messages, 1)
	res = pop(t, b, queen.PopRequest{Namespace: "ns", Task: "task"})
	require.Empty(t, res.Messages)
	require.Equal(t, int64(3), b.Counters().Popped)
}

// TestModelFound_RetentionDeletesTraces: the messages retention deletes
// lose their traces, so a later message with the same transactionId
// starts with none (it used to inherit the old one's).
func TestModelFound_RetentionDeletesTraces(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.Retention = time.Hour
		_, err := b.ConfigureQueue(bg, "q", cfg)
		require.NoError(t, err)
		r := pushOne(t, b, "q", "", "a", `1`)
		pushOne(t, b, "q", "", "b", `2`)
		for _, tx := range []string{"a", "b"} {
			_, err = b.RecordTrace(bg, queen.TraceEvent{PartitionID: r.PartitionID, TransactionID: tx, Names: []string{"flow"}})
			require.NoError(t, err)
		}
		clock.Advance(2 * time.Hour)
		require.NoError(t, b.Maintain(bg))
		st, err := b.QueueStats(bg, "q")
		require.NoError(t, err)
		require.Zero(t, st.Messages)
		names, err := b.TraceNames(bg, 10, 0)
		require.NoError(t, err)
		require.Empty(t, names.Names)

		again := pushOne(t, b, "q", "", "a", `3`)
		require.Equal(t, queen.PushQueued, again.Status)
		trs, err := b.Traces(bg, r.PartitionID, "a")
		require.NoError(t, err)
		require.Empty(t, trs)
	})
}

// TestModelFound_NoTraceOnRemovedMessage: a trace cannot be recorded
// against a message retention or DeleteMessage removed.
func TestModelFound_NoTraceOnRemovedMessage(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.Retention = time.Hour
	_, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	r := pushOne(t, b, "q", "", "a", `1`)
	pushOne(t, b, "q", "", "b", `1`)
	require.NoError(t, b.DeleteMessage(bg, r.PartitionID, "b"))
	_, err = b.RecordTrace(bg, queen.TraceEvent{PartitionID: r.PartitionID, TransactionID: "b"})
	require.ErrorIs(t, err, queen.ErrNotFound)
	clock.Advance(2 * time.Hour)
	require.NoError(t, b.Maintain(bg))
	_, err = b.RecordTrace(bg, queen.TraceEvent{PartitionID: r.PartitionID, TransactionID: "a"})
	require.ErrorIs(t, err, queen.ErrNotFound)
}

// TestModelFound_SetGroupSubscriptionDropsTheOldHold: a group that started
// at the end of a queue with DelayedProcessing waits on the hold of the
// next (not yet visible) message. Moved back in time by
// SetGroupSubscription, its cursor stands on old, visible messages: they
// are served at once, not when the hold of the old position ends. The hold
// used to stay, so the group saw nothing until then (seed
// 1796116071480139139 of TestModel_SequentialOps).
func TestModelFound_SetGroupSubscriptionDropsTheOldHold(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	start := clock.Now()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	pushOne(t, b, "q", "p", "old", `1`)
	clock.Advance(time.Minute)
	res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeNew})
	require.NoError(t, err)
	require.Empty(t, res.Messages, "a new group starts at the end")
	configureWith(t, b, "q", func(c *queen.QueueConfig) { c.DelayedProcessing = 30 * time.Second }) // the old message is a minute old
	pushOne(t, b, "q", "p", "new", `2`)
	res, err = b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g"})
	require.NoError(t, err)
	require.Empty(t, res.Messages, "the new message is held for 30 s")

	n, err := b.SetGroupSubscription(bg, "g", start)
	require.NoError(t, err)
	require.Equal(t, 2, n, "p and the Default partition configureWith made: g stands in both")
	res, err = b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1, "the old message is visible now")
	require.Equal(t, "old", res.Messages[0].TransactionID)
}

// TestModelFound_ConflatedClaimOfAHeldMessageFreesRoom: a conflating group
// whose newest message is still held by DelayedProcessing claims nothing,
// but its cursor steps past the older messages it will never be given.
// MaxSize counts from there: those messages are settled for the group. The
// pending count MaxSize uses stayed at the old cursor, so a push was
// refused as queue full while QueueStats.Pending showed room.
func TestModelFound_ConflatedClaimOfAHeldMessageFreesRoom(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	configureWith(t, b, "q", func(c *queen.QueueConfig) { c.MaxSize = 3; c.DelayedProcessing = 20 * time.Second })
	pushN(t, b, "q", "p", 2) // all held for 20 s
	pushN(t, b, "q", "o", 1)
	res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", Conflation: true, SubscriptionMode: queen.SubscriptionModeAll, Partitions: 2})
	require.NoError(t, err)
	require.Empty(t, res.Messages, "the newest message is held")

	qs, err := b.QueueStats(bg, "q")
	require.NoError(t, err)
	require.EqualValues(t, 2, qs.Pending, "the older message of p is superseded for the conflating group")
	r := pushOne(t, b, "q", "p", "fourth", `4`)
	require.Equal(t, queen.PushQueued, r.Status, "two messages pending, MaxSize 3: there is room (%v)", r.Err)
}

// TestModelFound_PartitionWaiterWokenWhenWindowReopens: a pop waiting on
// one partition of a queue with a WindowBuffer wakes when the window opens.
// The partition's cursor was on the group's ready list (its window had
// opened once, then a push closed it again), the named pop left it there,
// and the check at the window's new end returned early for a cursor
// already marked ready: the waiter stayed parked.
func TestModelFound_PartitionWaiterWokenWhenWindowReopens(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	configureWith(t, b, "q", func(c *queen.QueueConfig) { c.WindowBuffer = 3 * time.Second })
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "g"}).Messages) // g joins
	pushOne(t, b, "q", "p", "m1", `1`)
	clock.Advance(5 * time.Second)                                        // the window opens: p is ready for g
	require.Empty(t, pop(t, b, queen.PopRequest{Queue: "tick"}).Messages) // (a pop fires due timers now)
	pushOne(t, b, "q", "p", "m2", `2`)                                    // and closes again for 3 s
	got := make(chan *queen.PopResult, 1)
	go func() {
		res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", Partition: "p", Batch: 10, Wait: true, Timeout: queen.MaxPopTimeout})
		assert.NoError(t, err)
		got <- res
	}()
	itest.AwaitWaiting(t, b, 1)
	clock.Advance(3 * time.Second)
	select {
	case res := <-got:
		require.Len(t, res.Messages, 2)
	case <-time.After(10 * time.Second):
		t.Fatal("the pop waiting on p was not woken when p's window opened")
	}
}

// TestModelFound_LastPushSurvivesDeletingTheNewestMessage: a partition's
// LastPushAt (which its WindowBuffer counts from) is the time of its newest
// push, also after that message is deleted, and a restart does not change
// it. It used to be rebuilt at Open from the newest stored message.
func TestModelFound_LastPushSurvivesDeletingTheNewestMessage(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	dir := t.TempDir()
	opts := &queen.Options{Clock: clock}
	b := itest.OpenDir(t, dir, opts)
	pushOne(t, b, "q", "p", "a", `1`)
	clock.Advance(5 * time.Second)
	last := clock.Now()
	r := pushOne(t, b, "q", "p", "b", `2`)
	clock.Advance(5 * time.Second)
	require.NoError(t, b.DeleteMessage(bg, r.PartitionID, "b"))
	lastPush := func() time.Time {
		qs, err := b.QueueStats(bg, "q")
		require.NoError(t, err)
		return qs.Partitions[0].LastPushAt
	}
	require.True(t, lastPush().Equal(last), "live: %v, pushed at %v", lastPush(), last)
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, opts)
	require.True(t, lastPush().Equal(last), "reopened: %v, pushed at %v", lastPush(), last)
}

// TestModelFound_WaiterOnAPartitionJoinsItWhenCreated: a pop waiting on a
// partition that does not exist yet looks again when the partition is
// created empty (ConfigureQueue makes Default): its group then has a
// cursor there, as if the pop had started after the partition existed
// (seed 12102 of TestModel_SequentialOps).
func TestModelFound_WaiterOnAPartitionJoinsItWhenCreated(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = b.Pop(ctx, queen.PopRequest{Queue: "q", Group: "g", Partition: queen.DefaultPartition, Wait: true, Timeout: queen.MaxPopTimeout})
	}()
	itest.AwaitWaiting(t, b, 1)
	pushOne(t, b, "q", "other", "m", `1`) // creates q; the pop joins it and waits on
	itest.AwaitWaiting(t, b, 1)
	_, err := b.ConfigureQueue(bg, "q", queen.DefaultQueueConfig())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		qs, err := b.QueueStats(bg, "q")
		require.NoError(t, err)
		for _, p := range qs.Partitions {
			if p.Name == queen.DefaultPartition {
				return len(p.Cursors) == 1 && p.Cursors[0].Group == "g"
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the waiting pop's group has a cursor in the new partition")
	cancel()
	<-done
}

// TestModelFound_RetriedBatchDoesNotWaitForTheHeldMessageBehindIt: a batch
// cut short by a message DelayedProcessing still holds comes back at once
// when retried (no retry delay); it used to wait until the held message
// behind it became visible, because the claim put that message's hold on
// the cursor while the batch was still out (seed 1796121203382330752).
func TestModelFound_RetriedBatchDoesNotWaitForTheHeldMessageBehindIt(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	configureWith(t, b, "q", func(c *queen.QueueConfig) { c.DelayedProcessing = 20 * time.Second; c.RetryDelay = 0 })
	pushOne(t, b, "q", "p", "a", `1`)
	pushOne(t, b, "q", "p", "b", `2`)
	clock.Advance(30 * time.Second)
	pushOne(t, b, "q", "p", "c", `3`) // held for 20 s
	res := pop(t, b, queen.PopRequest{Queue: "q", Batch: 10})
	require.Equal(t, []string{"a", "b"}, txids(res.Messages), "the batch stops before the held message")
	_, err := b.AckBatch(bg, []queen.AckItem{
		{TransactionID: "a", PartitionID: res.Messages[0].PartitionID, LeaseID: res.LeaseID, Status: queen.AckRetry},
		{TransactionID: "b", PartitionID: res.Messages[1].PartitionID, LeaseID: res.LeaseID, Status: queen.AckCompleted},
	})
	require.NoError(t, err)
	again := pop(t, b, queen.PopRequest{Queue: "q", Batch: 10})
	// (b, after a on the cursor, comes back with it: see AckBatch.)
	require.Equal(t, []string{"a", "b"}, txids(again.Messages), "the batch comes back at once; c is still held")
}

// inWriterOrder runs steps, each in a goroutine of its own, queued for the
// writer one after the other behind a held commit (a push to queue
// "other"), then lets the writer go and waits for them: whatever a step
// decides in memory before it waits for the writer is decided in this
// order, before any of their writes is applied.
func inWriterOrder(t *testing.T, b *queen.Broker, steps ...func()) {
	t.Helper()
	held, queued, release := queen.HoldCommitsForTest(b)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); pushOne(t, b, "other", "", "blocker", `0`) }()
	<-held // the writer waits in front of the blocker's commit
	for i, step := range steps {
		wg.Add(1)
		go func() { defer wg.Done(); step() }()
		require.Eventually(t, func() bool { return queued() == i+1 }, 10*time.Second, time.Millisecond)
	}
	release()
	wg.Wait()
}

// TestModelFound_QueueRecreatedByAQueuedPushSurvivesReopen: a push waiting
// for the writer is applied after a ConfigureQueue and a DeleteQueue that
// came later, so it re-creates the queue the delete removed. The
// configuration's write, made for the deleted queue, used to overwrite the
// new queue's metadata, and the delete's then removed it: the new queue's
// partitions and messages were lost at the next Open (found by the
// concurrent model test).
func TestModelFound_QueueRecreatedByAQueuedPushSurvivesReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	pushOne(t, b, "q", "p", "first", `1`)
	inWriterOrder(t, b,
		func() { pushOne(t, b, "q", "p", "second", `2`) },
		func() {
			_, err := b.ConfigureQueue(bg, "q", queen.DefaultQueueConfig())
			assert.NoError(t, err)
		},
		func() {
			existed, err := b.DeleteQueue(bg, "q")
			assert.NoError(t, err)
			assert.True(t, existed)
		})

	before := storedCounts(t, b)
	require.Equal(t, int64(1), before["q"], "the queued push re-created q with its message")
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, nil)
	require.Equal(t, before, storedCounts(t, b))
}

// TestModelFound_RejoinedGroupKeepsItsStartAcrossRestart: a group deleted
// and joined again (mode new) while a push waits for the writer: the push,
// applied after both, stores where the new group starts, and the
// deletion's write, queued before it, must not remove that. It did, so
// after a restart the group started at the partition's end and never got
// the push's message (found by the concurrent model test).
func TestModelFound_RejoinedGroupKeepsItsStartAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	joinNew := func() {
		res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeNew})
		assert.NoError(t, err)
		assert.Empty(t, res.Messages)
	}
	pushOne(t, b, "q", "p", "a", `1`)
	joinNew()
	pushOne(t, b, "q", "p", "a2", `2`) // stores g's cursor in p

	inWriterOrder(t, b,
		func() { pushOne(t, b, "q", "p", "b", `3`) },
		func() {
			_, err := b.DeleteGroup(bg, "g", "q", true)
			assert.NoError(t, err)
		},
		joinNew) // g again, at the end as it stands now: before b

	require.EqualValues(t, 2, cursorOf(t, b, "q", "p", "g").Offset, "live: g gets b")
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, nil)
	require.EqualValues(t, 2, cursorOf(t, b, "q", "p", "g").Offset, "reopened: the same")
}

// TestModelFound_RejoinedGroupKeepsItsStartOverAnOldWrite: as in
// TestModelFound_RejoinedGroupKeepsItsStartAcrossRestart, a group is
// deleted and joined again (mode new) while a push waits for the writer,
// and a write of the old group's cursor (here a seek) was queued between
// the push and the delete. The push, applied first, stores where the new
// group starts; the old group's write then overwrote it, and the delete
// that would have removed that was skipped for the new group's sake: after
// a restart the group stood where the old one had been moved to and read
// again what the new one never had (found by the concurrent model test).
func TestModelFound_RejoinedGroupKeepsItsStartOverAnOldWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	pushOne(t, b, "q", "p", "a", `1`)
	pushOne(t, b, "q", "p", "b", `2`)
	res := pop(t, b, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
	require.Equal(t, []string{"a"}, txids(res.Messages))
	ackAll(t, b, res.Messages, queen.AckCompleted) // g's cursor is stored at 1

	inWriterOrder(t, b,
		func() { pushOne(t, b, "q", "p", "c", `3`) },
		func() {
			_, err := b.SeekPartition(bg, "g", "q", "p", queen.SeekOptions{Timestamp: time.Unix(0, 0)})
			assert.NoError(t, err)
		},
		func() {
			_, err := b.DeleteGroup(bg, "g", "q", true)
			assert.NoError(t, err)
		},
		func() { // g again, at the end as it stands now: before c
			res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeNew})
			assert.NoError(t, err)
			assert.Empty(t, res.Messages)
		})

	require.EqualValues(t, 2, cursorOf(t, b, "q", "p", "g").Offset, "live: g gets c")
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, nil)
	require.EqualValues(t, 2, cursorOf(t, b, "q", "p", "g").Offset, "reopened: the same")
}

// TestModelFound_ListMessagesLeavesNoReadBehind: ListMessages reads a
// partition backwards, and Badger's reverse iterator, reading values ahead
// in goroutines, starts one for each older version of a key it passes
// (below the partition's messages: deleted dead letters here) and forgets
// it, so closing the iterator does not wait for it. One still pending when
// the broker closed waited for the closed value log forever (the
// concurrent model test's leak check found them). The listing reads its
// values itself: it starts no goroutine.
func TestModelFound_ListMessagesLeavesNoReadBehind(t *testing.T) {
	// Not parallel: it counts the goroutines the process starts.
	b := itest.OpenDir(t, t.TempDir(), nil)
	payload := `"` + strings.Repeat("x", 300) + `"` // kept in the value log
	for i := range 20 {
		pushOne(t, b, "q", "p", fmt.Sprintf("m%d", i), payload)
	}
	res := pop(t, b, queen.PopRequest{Queue: "q", Batch: 20})
	require.Len(t, res.Messages, 20)
	ackAll(t, b, res.Messages, queen.AckDLQ)
	for _, dl := range queentest.DeadLetters(t, b, "q") {
		require.NoError(t, b.DeleteDeadLetter(bg, dl.ID))
	}

	// The count is process-wide: a timer of the broker or of Badger firing
	// meanwhile starts one too, so the fewest of three listings counts.
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	fewest := uint64(1 << 63)
	for range 3 {
		metrics.Read(created)
		before := created[0].Value.Uint64()
		page, err := b.ListMessages(bg, queen.MessageFilter{Queue: "q", Limit: 100})
		metrics.Read(created)
		require.NoError(t, err)
		require.Len(t, page.Messages, 20)
		fewest = min(fewest, created[0].Value.Uint64()-before)
	}
	require.Zero(t, fewest, "goroutines started by ListMessages")
}
