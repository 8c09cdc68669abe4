package queen_test

import (
	"testing"

	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestConflate_OnlyNewestPerPartition(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		for _, price := range []string{"10", "11", "12"} {
			pushOne(t, b, "prices", "A-1", "", `{"sku":"A-1","price":`+price+`}`)
		}
		pushOne(t, b, "prices", "B-2", "", `{"sku":"B-2","price":5}`)
		res := pop(t, b, queen.PopRequest{Queue: "prices", Group: "repricer", SubscriptionMode: queen.SubscriptionModeAll, Conflation: true, Partitions: 2, Batch: 10})
		require.True(t, res.Conflating)
		require.Len(t, res.Messages, 2)
		byPart := map[string]*queen.Message{}
		for _, m := range res.Messages {
			byPart[m.Partition] = m
		}
		require.Equal(t, `{"sku":"A-1","price":12}`, string(byPart["A-1"].Payload))
		require.Equal(t, int64(2), byPart["A-1"].Offset)
		ackAll(t, b, res.Messages, queen.AckCompleted)
		empty := pop(t, b, queen.PopRequest{Queue: "prices", Group: "repricer", Partitions: 2, Batch: 10})
		require.Empty(t, empty.Messages, "10 and 11 are never delivered")
		require.True(t, empty.Conflating)

		// A group without conflation still gets all three.
		all := pop(t, b, queen.PopRequest{Queue: "prices", Group: "audit", SubscriptionMode: queen.SubscriptionModeAll, Partition: "A-1", Batch: 10})
		require.Len(t, all.Messages, 3)

		// Fixed by the first pop: a conflating group refuses autoAck later.
		_, err := b.Pop(bg, queen.PopRequest{Queue: "prices", Group: "repricer", CommitOnDelivery: true})
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
	})
}

func TestConflate_FailedComesBackAsNewest(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	cfg := queen.DefaultQueueConfig()
	cfg.RetryDelay = 0
	_, err := b.ConfigureQueue(bg, "cmds", cfg)
	require.NoError(t, err)
	pushOne(t, b, "cmds", "", "", `1`)
	pushOne(t, b, "cmds", "", "", `2`)
	res := pop(t, b, queen.PopRequest{Queue: "cmds", Group: "c", SubscriptionMode: queen.SubscriptionModeAll, Conflation: true})
	ackAll(t, b, res.Messages, queen.AckFailed)
	pushOne(t, b, "cmds", "", "", `3`)
	res = pop(t, b, queen.PopRequest{Queue: "cmds", Group: "c"})
	require.Equal(t, `3`, string(res.Messages[0].Payload), "a newer message supersedes the failed one")
}

// TestConflation_ClaimOfAHeldMessageFreesRoom: a conflating group
// whose newest message is still held by DelayedProcessing claims nothing,
// but its cursor steps past the older messages it will never be given.
// MaxSize counts from there: those messages are settled for the group. The
// pending count MaxSize uses stayed at the old cursor, so a push was
// refused as queue full while QueueStats.Pending showed room.
func TestConflation_ClaimOfAHeldMessageFreesRoom(t *testing.T) {
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
