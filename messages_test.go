package queen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"runtime/metrics"
	"strings"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// msgPush pushes one message and returns its result.
func msgPush(t *testing.T, b *queen.Broker, queue, partition, txid string) queen.PushResult {
	t.Helper()
	res, err := b.Push(context.Background(), []queen.PushItem{{Queue: queue, Partition: partition, TransactionID: txid, Payload: json.RawMessage(fmt.Sprintf(`{"tx":%q}`, txid))}})
	require.NoError(t, err)
	require.Equal(t, queen.PushQueued, res[0].Status)
	return res[0]
}

func msgTxIDs(p *queen.MessagePage) []string {
	out := []string{}
	for _, m := range p.Messages {
		out = append(out, m.TransactionID)
	}
	return out
}

func TestBroker_ListMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("filters and orders newest first", func(t *testing.T) {
		t.Parallel()
		clock := itest.NewClock()
		b := queentest.NewBroker(t, &queen.Options{Clock: clock})
		_, err := b.ConfigureQueue(ctx, "orders", queen.QueueConfig{Namespace: "shop", Task: "bill"})
		require.NoError(t, err)
		for i, spec := range [][2]string{{"orders", "a"}, {"orders", "b"}, {"orders", "a"}, {"other.x", "Default"}} {
			msgPush(t, b, spec[0], spec[1], fmt.Sprintf("t%d", i))
			clock.Advance(time.Second)
		}
		all, err := b.ListMessages(ctx, queen.MessageFilter{})
		require.NoError(t, err)
		require.Equal(t, []string{"t3", "t2", "t1", "t0"}, msgTxIDs(all))
		require.Equal(t, "other", all.Messages[0].Namespace)
		require.Equal(t, "x", all.Messages[0].Task)
		require.Equal(t, queen.MessagePending, all.Messages[0].Status)
		require.Nil(t, all.Messages[0].Payload)

		byQueue, err := b.ListMessages(ctx, queen.MessageFilter{Queue: "orders", Partition: "a"})
		require.NoError(t, err)
		require.Equal(t, []string{"t2", "t0"}, msgTxIDs(byQueue))
		require.Equal(t, int64(1), byQueue.Messages[0].Offset)

		byNS, err := b.ListMessages(ctx, queen.MessageFilter{Namespace: "shop", Task: "bill"})
		require.NoError(t, err)
		require.Equal(t, []string{"t2", "t1", "t0"}, msgTxIDs(byNS))

		paged, err := b.ListMessages(ctx, queen.MessageFilter{Limit: 2, Offset: 1})
		require.NoError(t, err)
		require.Equal(t, []string{"t2", "t1"}, msgTxIDs(paged))

		start := itest.NewClock().Now()
		window, err := b.ListMessages(ctx, queen.MessageFilter{From: start.Add(time.Second), To: start.Add(2 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, []string{"t2", "t1"}, msgTxIDs(window))

		_, err = b.ListMessages(ctx, queen.MessageFilter{Status: "bogus"})
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
		_, err = b.ListMessages(ctx, queen.MessageFilter{Limit: -1})
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
	})

	t.Run("status follows queue mode cursor, lease and dead letters", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, nil)
		for i := range 4 {
			msgPush(t, b, "q", "", fmt.Sprintf("m%d", i))
		}
		pop := func() *queen.Message {
			res, err := b.Pop(ctx, queen.PopRequest{Queue: "q"})
			require.NoError(t, err)
			require.Len(t, res.Messages, 1)
			return res.Messages[0]
		}
		m0 := pop()
		_, err := b.AckBatch(ctx, []queen.AckItem{{TransactionID: m0.TransactionID, PartitionID: m0.PartitionID, LeaseID: m0.LeaseID}})
		require.NoError(t, err)
		m1 := pop()
		_, err = b.AckBatch(ctx, []queen.AckItem{{TransactionID: m1.TransactionID, PartitionID: m1.PartitionID, LeaseID: m1.LeaseID, Status: queen.AckDLQ, Error: "bad"}})
		require.NoError(t, err)
		pop() // m2 stays leased

		status := func(f queen.MessageFilter) map[string]queen.MessageStatus {
			page, err := b.ListMessages(ctx, f)
			require.NoError(t, err)
			out := map[string]queen.MessageStatus{}
			for _, m := range page.Messages {
				out[m.TransactionID] = m.Status
			}
			return out
		}
		require.Equal(t, map[string]queen.MessageStatus{
			"m0": queen.MessageCompleted, "m1": queen.MessageDeadLetter, "m2": queen.MessageProcessing, "m3": queen.MessagePending,
		}, status(queen.MessageFilter{}))
		require.Equal(t, map[string]queen.MessageStatus{"m2": queen.MessageProcessing}, status(queen.MessageFilter{Status: queen.MessageProcessing}))

		page, err := b.ListMessages(ctx, queen.MessageFilter{Status: queen.MessageProcessing})
		require.NoError(t, err)
		require.True(t, page.QueueMode)
		require.Zero(t, page.BusGroups)
		require.False(t, page.Messages[0].LeaseExpiresAt.IsZero())
	})

	t.Run("bus mode completes when every group has passed", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, &queen.Options{DefaultSubscriptionMode: queen.SubscriptionModeAll})
		msgPush(t, b, "bus", "", "only")
		for _, g := range []string{"g1", "g2"} {
			res, err := b.Pop(ctx, queen.PopRequest{Queue: "bus", Group: g, CommitOnDelivery: g == "g1"})
			require.NoError(t, err)
			require.Len(t, res.Messages, 1)
		}
		page, err := b.ListMessages(ctx, queen.MessageFilter{})
		require.NoError(t, err)
		require.Equal(t, queen.MessageProcessing, page.Messages[0].Status)
		require.Equal(t, 2, page.BusGroups)
		require.False(t, page.QueueMode)
		require.Equal(t, []queen.MessageGroupState{{Group: "g1", Consumed: true}, {Group: "g2", LeaseExpiresAt: page.Messages[0].LeaseExpiresAt}}, page.Messages[0].Groups)

		res, err := b.Pop(ctx, queen.PopRequest{Queue: "bus", Group: "g3", SubscriptionMode: queen.SubscriptionModeAll, CommitOnDelivery: true})
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		_, err = b.DeleteGroup(ctx, "g2", "bus", true)
		require.NoError(t, err)
		page, err = b.ListMessages(ctx, queen.MessageFilter{})
		require.NoError(t, err)
		require.Equal(t, queen.MessageCompleted, page.Messages[0].Status)
	})
}

func TestBroker_GetMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := make([]byte, 32)
	b := queentest.NewBroker(t, &queen.Options{EncryptionKey: key})
	cfg := queen.DefaultQueueConfig()
	cfg.EncryptionEnabled = true
	cfg.RetryLimit = 0
	_, err := b.ConfigureQueue(ctx, "secret", cfg)
	require.NoError(t, err)
	pushed := msgPush(t, b, "secret", "", "s1")

	m, err := b.GetMessage(ctx, pushed.PartitionID, "s1")
	require.NoError(t, err)
	require.JSONEq(t, `{"tx":"s1"}`, string(m.Payload))
	require.True(t, m.Encrypted)
	require.Equal(t, pushed.MessageID, m.ID)
	require.Equal(t, queen.MessagePending, m.Status)
	require.Empty(t, m.Groups)

	res, err := b.Pop(ctx, queen.PopRequest{Queue: "secret"})
	require.NoError(t, err)
	msg := res.Messages[0]
	_, err = b.AckBatch(ctx, []queen.AckItem{{TransactionID: "s1", PartitionID: msg.PartitionID, LeaseID: msg.LeaseID, Status: queen.AckFailed, Error: "boom"}})
	require.NoError(t, err)
	m, err = b.GetMessage(ctx, pushed.PartitionID, "s1")
	require.NoError(t, err)
	require.Equal(t, queen.MessageDeadLetter, m.Status)
	require.Equal(t, "boom", m.Error)
	require.Equal(t, []queen.MessageGroupState{{Group: queen.QueueModeGroup, Consumed: true}}, m.Groups)

	_, err = b.GetMessage(ctx, pushed.PartitionID, "nope")
	require.ErrorIs(t, err, queen.ErrNotFound)
	_, err = b.GetMessage(ctx, "not-a-uuid", "s1")
	require.ErrorIs(t, err, queen.ErrNotFound)
}

func TestBroker_DeleteMessage(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		ctx := context.Background()
		cfg := queen.DefaultQueueConfig()
		cfg.RetryLimit = 0
		_, err := b.ConfigureQueue(ctx, "d", cfg)
		require.NoError(t, err)
		first := msgPush(t, b, "d", "", "x1")
		msgPush(t, b, "d", "", "x2")
		res, err := b.Pop(ctx, queen.PopRequest{Queue: "d"})
		require.NoError(t, err)
		_, err = b.AckBatch(ctx, []queen.AckItem{{TransactionID: "x1", PartitionID: first.PartitionID, LeaseID: res.Messages[0].LeaseID, Status: queen.AckDLQ}})
		require.NoError(t, err)
		_, err = b.RecordTrace(ctx, queen.TraceEvent{PartitionID: first.PartitionID, TransactionID: "x1", Names: []string{"flow"}})
		require.NoError(t, err)

		st, err := b.QueueStats(ctx, "d")
		require.NoError(t, err)
		require.Equal(t, int64(2), st.Messages)
		require.Equal(t, int64(1), st.DeadLetters)

		require.NoError(t, b.DeleteMessage(ctx, first.PartitionID, "x1"))
		require.ErrorIs(t, b.DeleteMessage(ctx, first.PartitionID, "x1"), queen.ErrNotFound)
		require.ErrorIs(t, b.DeleteMessage(ctx, first.PartitionID, "never"), queen.ErrNotFound)

		st, err = b.QueueStats(ctx, "d")
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Messages)
		require.Zero(t, st.DeadLetters)
		dl, err := b.DeadLetters(ctx, queen.LetterFilter{Queue: "d"})
		require.NoError(t, err)
		require.Zero(t, dl.Total)
		tr, err := b.Traces(ctx, first.PartitionID, "x1")
		require.NoError(t, err)
		require.Empty(t, tr)
		_, err = b.GetMessage(ctx, first.PartitionID, "x1")
		require.ErrorIs(t, err, queen.ErrNotFound)
		page, err := b.Fetch(ctx, "d", "", 0, 10)
		require.NoError(t, err)
		require.Len(t, page.Records, 1)
		require.Equal(t, "x2", page.Records[0].TransactionID)

		// The transactionId is free again.
		again, err := b.Push(ctx, []queen.PushItem{{Queue: "d", TransactionID: "x1"}})
		require.NoError(t, err)
		require.Equal(t, queen.PushQueued, again[0].Status)
		require.Equal(t, int64(2), again[0].Offset)
	})
}

// TestListMessages_LeavesNoReadBehind: ListMessages reads a
// partition backwards, and Badger's reverse iterator, reading values ahead
// in goroutines, starts one for each older version of a key it passes
// (below the partition's messages: deleted dead letters here) and forgets
// it, so closing the iterator does not wait for it; one still pending when
// the broker closes would wait for the closed value log forever. The
// listing reads its values itself: it starts no goroutine.
func TestListMessages_LeavesNoReadBehind(t *testing.T) {
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
