package queen_test

import (
	"errors"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestTxn_AckAndPushCommitTogether(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushOne(t, b, "in", "", "in-1", `{"step":1}`)
		pr := pop(t, b, queen.PopRequest{Queue: "in"})
		res, err := b.Transaction().
			Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{}).
			Push(queen.PushItem{Queue: "out", TransactionID: "out-1", Payload: []byte(`{"step":2}`)}).
			Commit(bg)
		require.NoError(t, err)
		require.Len(t, res.Results, 2)
		require.True(t, res.Results[0].Ack.Success)
		require.Equal(t, queen.PushQueued, res.Results[1].Push.Status)
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "in"}).Messages)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "out"}).Messages, 1)

		// A duplicate push inside a transaction is reported, not fatal.
		pushOne(t, b, "in", "", "in-2", `{}`)
		pr = pop(t, b, queen.PopRequest{Queue: "in"})
		res, err = b.Transaction().
			Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{}).
			Push(queen.PushItem{Queue: "out", TransactionID: "out-1"}).
			Commit(bg)
		require.NoError(t, err)
		require.Equal(t, queen.PushDuplicate, res.Results[1].Push.Status)
	})
}

func TestTxn_RefusedAckAbortsEverything(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "in", "", 2)
	pr := pop(t, b, queen.PopRequest{Queue: "in", Batch: 2})
	bogus := *pr.Messages[1]
	bogus.TransactionID = "missing"
	res, err := b.Transaction().
		Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{}).
		Push(queen.PushItem{Queue: "out"}).
		Ack(&bogus, queen.AckCompleted, queen.AckOptions{}).
		Commit(bg)
	require.ErrorIs(t, err, queen.ErrTransactionAborted)
	require.ErrorIs(t, err, queen.ErrNotFound)
	var te *queen.TransactionError
	require.True(t, errors.As(err, &te))
	require.Equal(t, 2, te.Index)
	require.Len(t, res.Results, 3)
	// Nothing happened: the first message is still leased and unacked, out is empty.
	_, err = b.DescribeQueue(bg, "out")
	require.ErrorIs(t, err, queen.ErrNotFound)
	st, err := b.QueueStats(bg, "in")
	require.NoError(t, err)
	require.Equal(t, int64(0), st.Partitions[0].Cursors[0].Offset)
	require.Equal(t, 2, st.Partitions[0].Cursors[0].InFlight)

	// Expired-lease and bad-status acks abort too.
	_, err = b.Transaction().Ack(pr.Messages[0], "nonsense", queen.AckOptions{}).Commit(bg)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = b.Transaction().Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{LeaseID: "0190aaaa-bbbb-7ccc-8ddd-eeeeffff0000"}).Commit(bg)
	require.ErrorIs(t, err, queen.ErrLeaseExpired)
	_, err = b.ExecTransaction(bg, nil)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = b.ExecTransaction(bg, []queen.TxOp{{}})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

func TestTxn_FailedAndDLQInsideTransaction(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "in", "", 1)
	pr := pop(t, b, queen.PopRequest{Queue: "in", Group: "mailer", SubscriptionMode: queen.SubscriptionModeAll})
	_, err := b.Transaction().Ack(pr.Messages[0], queen.AckDLQ, queen.AckOptions{ConsumerGroup: "mailer"}).Commit(bg)
	require.NoError(t, err)
	page, err := b.DeadLetters(bg, queen.LetterFilter{ConsumerGroup: "mailer"})
	require.NoError(t, err)
	require.Equal(t, 1, page.Total)
}

// Two pushes of one new transactionId in a transaction store one message
// and take room for one under MaxSize: the second is a duplicate of the
// first, as in a plain push.
func TestTxn_RepeatedTransactionIDTakesRoomOnce(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	cfg := queen.DefaultQueueConfig()
	cfg.MaxSize = 1
	_, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	it := queen.PushItem{Queue: "q", TransactionID: "x", Payload: []byte(`1`)}
	res, err := b.Transaction().Push(it, it).Commit(bg)
	require.NoError(t, err, "one message fits MaxSize 1")
	require.Equal(t, queen.PushQueued, res.Results[0].Push.Status)
	require.Equal(t, queen.PushDuplicate, res.Results[1].Push.Status)
	qs, err := b.QueueStats(bg, "q")
	require.NoError(t, err)
	require.EqualValues(t, 1, qs.Messages)
}

// A transaction aborted by a refused ack gives back the MaxSize room its
// pushes had reserved: afterwards a push of MaxSize messages fits.
func TestTransaction_AbortGivesBackMaxSizeRoom(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.MaxSize = 3
		_, err := b.ConfigureQueue(bg, "capped", cfg)
		require.NoError(t, err)
		pushN(t, b, "in", "", 1)
		pr := pop(t, b, queen.PopRequest{Queue: "in"})
		bogus := *pr.Messages[0]
		bogus.TransactionID = "no-such-message"
		for range 3 { // without the room given back, the second abort is already full
			_, err = b.Transaction().
				Push(queen.PushItem{Queue: "capped", Payload: []byte(`1`)}, queen.PushItem{Queue: "capped", Payload: []byte(`2`)}).
				Ack(&bogus, queen.AckCompleted, queen.AckOptions{}).
				Commit(bg)
			require.ErrorIs(t, err, queen.ErrTransactionAborted)
			require.ErrorIs(t, err, queen.ErrNotFound, "refused by the ack, not by the room")
		}
		st, err := b.QueueStats(bg, "capped")
		require.NoError(t, err)
		require.Zero(t, st.Messages, "the aborted pushes stored nothing")
		require.Zero(t, st.Pending)
		pushN(t, b, "capped", "", 3) // MaxSize messages: every one queued
		res, err := b.Push(bg, []queen.PushItem{{Queue: "capped", Payload: []byte(`4`)}})
		require.NoError(t, err)
		require.ErrorIs(t, res[0].Err, queen.ErrQueueFull, "and the cap still holds")
	})
}

// A transaction's ack needs both its TransactionID and its PartitionID:
// one without either is an *ArgumentError and nothing runs.
func TestTransaction_AckNeedsBothIDs(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "in", "", 1)
	pr := pop(t, b, queen.PopRequest{Queue: "in"})
	m := pr.Messages[0]
	for _, it := range []queen.AckItem{
		{TransactionID: m.TransactionID, LeaseID: m.LeaseID},
		{PartitionID: m.PartitionID, LeaseID: m.LeaseID},
	} {
		_, err := b.ExecTransaction(bg, []queen.TxOp{{Push: &queen.PushItem{Queue: "out", Payload: []byte(`1`)}}, {Ack: &it}})
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
		require.NotErrorIs(t, err, queen.ErrTransactionAborted, "refused before anything runs")
		var ae *queen.ArgumentError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, "ops[1].Ack", ae.Field)
	}
	_, err := b.DescribeQueue(bg, "out")
	require.ErrorIs(t, err, queen.ErrNotFound)
}
