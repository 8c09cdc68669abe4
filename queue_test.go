package queen_test

import (
	"bytes"
	"testing"
	"time"

	"sync"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQueue_ConfigureReplacesWholeConfig(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit, cfg.Priority, cfg.Namespace = 7, 3, "ns"
	info, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	require.NotEmpty(t, info.DefaultPartitionID, "configure makes the Default partition")
	require.Equal(t, 7, info.Config.RetryLimit)

	info, err = b.ConfigureQueue(bg, "q", queen.QueueConfig{})
	require.NoError(t, err)
	require.Equal(t, 0, info.Config.RetryLimit, "omitted options go back to their defaults")
	require.Equal(t, "", info.Config.Namespace)
	require.Equal(t, 300*time.Second, info.Config.LeaseTime, "configure without a lease time gives 300 s")

	bad := queen.DefaultQueueConfig()
	bad.RetryLimit = -1
	_, err = b.ConfigureQueue(bg, "q", bad)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	bad = queen.DefaultQueueConfig()
	bad.EncryptionEnabled = true
	_, err = b.ConfigureQueue(bg, "q", bad)
	require.ErrorIs(t, err, queen.ErrInvalidArgument, "encryption needs a key")
	_, err = b.ConfigureQueue(bg, "", cfg)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

func TestQueue_DeleteRemovesEverything(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "gone", "a", 3)
		pr := pop(t, b, queen.PopRequest{Queue: "gone", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 3})
		items := ackItems(pr.Messages, queen.AckCompleted)
		items[2].Status = queen.AckDLQ
		ack(t, b, items...)
		pushN(t, b, "kept", "a", 1)
		deadLetter(t, b, "kept", "g", `1`)

		existed, err := b.DeleteQueue(bg, "gone")
		require.NoError(t, err)
		require.True(t, existed)
		existed, err = b.DeleteQueue(bg, "gone")
		require.NoError(t, err)
		require.False(t, existed)
		_, err = b.DescribeQueue(bg, "gone")
		require.ErrorIs(t, err, queen.ErrNotFound)
		page, err := b.DeadLetters(bg, queen.LetterFilter{})
		require.NoError(t, err)
		require.Equal(t, 1, page.Total, "only the other queue's dead letter is left")
		_, err = b.RenewLease(bg, pr.LeaseID, time.Second)
		require.ErrorIs(t, err, queen.ErrNotFound)

		// A queue of the same name starts from scratch.
		res := pushN(t, b, "gone", "a", 1)
		require.Equal(t, int64(0), res[0].Offset)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "gone", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 10}).Messages, 1)
	})
}

func TestQueue_EncryptionAtRest(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{7}, 32)
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, &queen.Options{EncryptionKey: key})
	cfg := queen.DefaultQueueConfig()
	cfg.EncryptionEnabled = true
	_, err := b.ConfigureQueue(bg, "secret", cfg)
	require.NoError(t, err)
	pushOne(t, b, "secret", "", "secret-tx-id", `{"card":"4111-1111"}`)
	require.NoError(t, b.Close())

	// The message is on disk (its transaction id is), its payload is not in clear.
	found, stored := false, false
	require.NoError(t, walkFiles(dir, func(data []byte) {
		found = found || bytes.Contains(data, []byte("4111-1111"))
		stored = stored || bytes.Contains(data, []byte("secret-tx-id"))
	}))
	require.True(t, stored)
	require.False(t, found, "plaintext found on disk")

	b = itest.OpenDir(t, dir, &queen.Options{EncryptionKey: key})
	res := pop(t, b, queen.PopRequest{Queue: "secret"})
	require.Equal(t, `{"card":"4111-1111"}`, string(res.Messages[0].Payload))
	ackAll(t, b, res.Messages, queen.AckDLQ)
	page, err := b.DeadLetters(bg, queen.LetterFilter{})
	require.NoError(t, err)
	require.Equal(t, `{"card":"4111-1111"}`, string(page.Letters[0].Payload))
	_, err = queen.Open("", &queen.Options{InMemory: true, EncryptionKey: []byte("short")})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

// TestConfigureQueue_RacesNoPopOfADelayedQueue: ConfigureQueue replacing the
// configuration while waiting and batch pops deliver from a queue with
// DelayedProcessing (run with -race).
func TestConfigureQueue_RacesNoPopOfADelayedQueue(t *testing.T) {
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

// TestConfigureQueue_ShorterHoldAppliesAtOnce: after ConfigureQueue shortens
// DelayedProcessing or WindowBuffer, a waiting pop is served once the new,
// shorter time has passed, not held until the old one.
func TestConfigureQueue_ShorterHoldAppliesAtOnce(t *testing.T) {
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

// TestQueue_MaxSizeCountsPendingOnly: MaxSize bounds the messages the
// slowest group has not settled, not every retained message: with
// MaxSize=1, push, pop, ack, push is accepted (Pending is 0) though the
// acked message is still stored; a commit-on-delivery pop and a dead
// letter settle too.
func TestQueue_MaxSizeCountsPendingOnly(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		limitQueue(t, b, "m", 1)
		pushOne(t, b, "m", "", "a", `{}`)
		require.Equal(t, queen.PushFailed, pushOne(t, b, "m", "", "x", `{}`).Status, "a is pending")
		got := pop(t, b, queen.PopRequest{Queue: "m"})
		require.Equal(t, queen.PushFailed, pushOne(t, b, "m", "", "x", `{}`).Status, "a is leased, not settled")
		ackAll(t, b, got.Messages, queen.AckCompleted)
		require.Equal(t, int64(0), queueStats(t, b, "m").Pending)
		r := pushOne(t, b, "m", "", "b", `{}`)
		require.Equal(t, queen.PushQueued, r.Status, "%v", r.Err)
		r = pushOne(t, b, "m", "", "c", `{}`)
		require.ErrorIs(t, r.Err, queen.ErrQueueFull)
		st := queueStats(t, b, "m")
		require.Equal(t, int64(1), st.Pending)
		require.Equal(t, int64(2), st.Messages)

		// Auto-ack pops and dead letters settle too.
		pop(t, b, queen.PopRequest{Queue: "m", CommitOnDelivery: true})
		require.Equal(t, queen.PushQueued, pushOne(t, b, "m", "", "d", `{}`).Status)
		got = pop(t, b, queen.PopRequest{Queue: "m"})
		ackAll(t, b, got.Messages, queen.AckDLQ)
		require.Equal(t, queen.PushQueued, pushOne(t, b, "m", "", "e", `{}`).Status)
	})
}

// TestQueue_MaxSizeFollowsSlowestGroup: with several groups, a message
// counts until every group has settled it; a new group starting from the
// beginning can leave the queue over MaxSize, and deleting the slow group
// makes room.
func TestQueue_MaxSizeFollowsSlowestGroup(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	limitQueue(t, b, "s", 2)
	// Both groups join before any message.
	pop(t, b, queen.PopRequest{Queue: "s", Group: "fast"})
	pop(t, b, queen.PopRequest{Queue: "s"})
	pushOne(t, b, "s", "p1", "a", `{}`)
	pushOne(t, b, "s", "p2", "b", `{}`)
	fast := pop(t, b, queen.PopRequest{Queue: "s", Group: "fast", Partitions: 2, Batch: 10})
	require.Len(t, fast.Messages, 2)
	ackAll(t, b, fast.Messages, queen.AckCompleted)
	require.ErrorIs(t, pushOne(t, b, "s", "p1", "c", `{}`).Err, queen.ErrQueueFull, "queue mode has settled nothing")
	qm := pop(t, b, queen.PopRequest{Queue: "s", Partition: "p2"})
	ackAll(t, b, qm.Messages, queen.AckCompleted)
	require.Equal(t, int64(1), queueStats(t, b, "s").Pending)
	require.Equal(t, queen.PushQueued, pushOne(t, b, "s", "p2", "c", `{}`).Status)
	require.ErrorIs(t, pushOne(t, b, "s", "p2", "d", `{}`).Err, queen.ErrQueueFull)

	// A group reading everything from the start: pending is now 3.
	pop(t, b, queen.PopRequest{Queue: "s", Group: "late", SubscriptionMode: queen.SubscriptionModeAll, Batch: 0, Partition: "none-yet"})
	require.Equal(t, int64(3), queueStats(t, b, "s").Pending)
	require.ErrorIs(t, pushOne(t, b, "s", "p2", "d", `{}`).Err, queen.ErrQueueFull)
	for _, g := range []string{"late", ""} {
		_, err := b.DeleteGroup(bg, g, "s", true)
		require.NoError(t, err)
	}
	require.Equal(t, int64(1), queueStats(t, b, "s").Pending, "fast has only c left")
	require.Equal(t, queen.PushQueued, pushOne(t, b, "s", "p2", "d", `{}`).Status)
}
