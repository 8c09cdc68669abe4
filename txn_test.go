package queen_test

import (
	"errors"
	"testing"

	"encoding/json"

	"fmt"
	"sync"

	"context"
	"strings"

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
func TestTxn_AbortGivesBackMaxSizeRoom(t *testing.T) {
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
func TestTxn_AckNeedsBothIDs(t *testing.T) {
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

// TestTxn_RefusedPushAbortsEverything: a transaction whose push the output
// queue refuses (MaxSize reached) aborts whole, rather than commit its ack
// and drop the push: nothing written, the ack not applied, the lease still
// valid, and Commit names the refused push. A
// duplicate push into the full queue is still reported duplicate.
func TestTxn_RefusedPushAbortsEverything(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		limitQueue(t, b, "out", 1)
		pushOne(t, b, "out", "", "o-0", `{}`) // out is full
		pushOne(t, b, "in", "", "in-1", `{}`)
		pr := pop(t, b, queen.PopRequest{Queue: "in"})
		require.Len(t, pr.Messages, 1)

		res, err := b.Transaction().
			Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{}).
			Push(queen.PushItem{Queue: "out", TransactionID: "o-1", Payload: json.RawMessage(`{"n":1}`)}).
			Commit(bg)
		require.ErrorIs(t, err, queen.ErrTransactionAborted)
		require.ErrorIs(t, err, queen.ErrQueueFull)
		var te *queen.TransactionError
		require.True(t, errors.As(err, &te))
		require.Equal(t, 1, te.Index)
		require.Equal(t, "push", te.Op)
		require.Contains(t, err.Error(), "operation 1 (push)")
		require.Len(t, res.Results, 2)

		// Nothing happened: out holds its one message, in is still leased.
		require.Equal(t, int64(1), queueStats(t, b, "out").Messages)
		in := queueStats(t, b, "in")
		require.Equal(t, int64(0), in.Partitions[0].Cursors[0].Offset)
		require.Equal(t, 1, in.Partitions[0].Cursors[0].InFlight)
		require.Equal(t, pr.LeaseID, in.Partitions[0].Cursors[0].LeaseID)
		f, err := b.Fetch(bg, "out", "", 0, 10)
		require.NoError(t, err)
		require.Len(t, f.Records, 1)
		require.Equal(t, "o-0", f.Records[0].TransactionID)

		// A duplicate push takes no room: the transaction goes through.
		res, err = b.Transaction().
			Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{}).
			Push(queen.PushItem{Queue: "out", TransactionID: "o-0"}).
			Commit(bg)
		require.NoError(t, err)
		require.True(t, res.Results[0].Ack.Success)
		require.Equal(t, queen.PushDuplicate, res.Results[1].Push.Status)
		require.Equal(t, int64(1), queueStats(t, b, "in").Partitions[0].Cursors[0].Offset)

		// Once out's message is consumed there is room again.
		got := pop(t, b, queen.PopRequest{Queue: "out"})
		ackAll(t, b, got.Messages, queen.AckCompleted)
		pushOne(t, b, "in", "", "in-2", `{}`)
		pr = pop(t, b, queen.PopRequest{Queue: "in"})
		res, err = b.Transaction().
			Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{}).
			Push(queen.PushItem{Queue: "out", TransactionID: "o-2"}).
			Commit(bg)
		require.NoError(t, err)
		require.Equal(t, queen.PushQueued, res.Results[1].Push.Status)
	})
}

// TestTxn_ConcurrentTransactionsNeverOverfillQueue: transactions and plain
// pushes racing for the last places of a queue never take it past MaxSize,
// and every transaction either applied its ack and push or neither.
func TestTxn_ConcurrentTransactionsNeverOverfillQueue(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	limitQueue(t, b, "out", 10)
	const n = 40
	pushN(t, b, "in", "", n)
	pr := pop(t, b, queen.PopRequest{Queue: "in", Batch: n})
	require.Len(t, pr.Messages, n)
	var wg sync.WaitGroup
	committed := make([]bool, n)
	for i := 0; i < n; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := b.Transaction().
				Ack(pr.Messages[i], queen.AckCompleted, queen.AckOptions{}).
				Push(queen.PushItem{Queue: "out", TransactionID: fmt.Sprintf("tx-%d", i)}).
				Commit(bg)
			if err != nil {
				require.ErrorIs(t, err, queen.ErrQueueFull)
				return
			}
			committed[i] = true
		}()
		go func() {
			defer wg.Done()
			_, err := b.Push(bg, []queen.PushItem{{Queue: "out", TransactionID: fmt.Sprintf("plain-%d", i)}})
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	st := queueStats(t, b, "out")
	require.Equal(t, int64(10), st.Messages, "MaxSize reached, not passed")
	f, err := b.Fetch(bg, "out", "", 0, 100)
	require.NoError(t, err)
	stored := map[string]bool{}
	for _, r := range f.Records {
		stored[r.TransactionID] = true
	}
	for i := 0; i < n; i++ {
		require.Equal(t, committed[i], stored[fmt.Sprintf("tx-%d", i)], "transaction %d", i)
	}
	// The acks of the committed transactions, and only those, were applied:
	// acking every message again succeeds exactly for the others, and is
	// refused as already settled for them.
	items := ackItems(pr.Messages, queen.AckCompleted)
	res, err := b.AckBatch(bg, items)
	require.NoError(t, err)
	for i := range res {
		if committed[i] {
			require.ErrorIs(t, res[i].Err, queen.ErrAlreadySettled, "message %d", i)
			require.False(t, res[i].Success, "message %d", i)
		} else {
			require.True(t, res[i].Success, "message %d: %v", i, res[i].Err)
		}
	}
}

// TestTxn_OversizedPayloadRefusedBrokerServes: on an in-memory broker a
// transaction pushing a 1 MiB payload is refused as Push refuses it
// (ErrTooLarge, short, nothing applied) before it reaches Badger, whose
// refusal of the commit would stop the broker serving (Ping: ErrClosed)
// and fail the pushes batched with it.
func TestTxn_OversizedPayloadRefusedBrokerServes(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushOne(t, b, "in", "", "in-1", `{}`)
	pr := pop(t, b, queen.PopRequest{Queue: "in"})

	ctx, stop := context.WithCancel(bg)
	var wg sync.WaitGroup
	var others []error
	var mu sync.Mutex
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 200; i++ {
				_, err := b.Push(bg, []queen.PushItem{{Queue: "other", Payload: json.RawMessage(`{"x":1}`)}})
				if err != nil {
					mu.Lock()
					others = append(others, err)
					mu.Unlock()
				}
			}
		}()
	}
	big := json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)
	_, err := b.Transaction().
		Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{}).
		Push(queen.PushItem{Queue: "out", Payload: big}).
		Commit(bg)
	stop()
	wg.Wait()
	require.ErrorIs(t, err, queen.ErrTooLarge)
	require.Less(t, len(err.Error()), 300, "a short message, no dump: %.300s", err)
	require.Empty(t, others, "unrelated pushes failed")
	require.NoError(t, b.Ping(bg))
	_, err = b.DescribeQueue(bg, "out")
	require.ErrorIs(t, err, queen.ErrNotFound, "nothing of the transaction was written")
	require.Equal(t, 1, queueStats(t, b, "in").Partitions[0].Cursors[0].InFlight)
	ackAll(t, b, pr.Messages, queen.AckCompleted) // the lease still holds
}

// TestTxn_EncryptedQueueWithoutKey: a queue configured with encryption,
// on a broker reopened without the key. A push to it fails alone, not the
// whole storage batch (other items and callers with it), and a transaction
// pushing to it is aborted with nothing applied, the broker still serving.
func TestTxn_EncryptedQueueWithoutKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := []byte(strings.Repeat("k", 32))
	b := itest.OpenDir(t, dir, &queen.Options{EncryptionKey: key, Durability: queen.SyncNever})
	cfg := queen.DefaultQueueConfig()
	cfg.EncryptionEnabled = true
	_, err := b.ConfigureQueue(bg, "secret", cfg)
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b = itest.OpenDir(t, dir, &queen.Options{Durability: queen.SyncNever})
	res, err := b.Push(bg, []queen.PushItem{{Queue: "plain", Payload: json.RawMessage(`1`)}, {Queue: "secret", Payload: json.RawMessage(`2`)}})
	require.NoError(t, err)
	require.Equal(t, queen.PushQueued, res[0].Status)
	require.Equal(t, queen.PushFailed, res[1].Status)
	require.ErrorIs(t, res[1].Err, queen.ErrInvalidArgument)

	pr := pop(t, b, queen.PopRequest{Queue: "plain"})
	_, err = b.Transaction().
		Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{}).
		Push(queen.PushItem{Queue: "secret", Payload: json.RawMessage(`3`)}).
		Commit(bg)
	require.ErrorIs(t, err, queen.ErrTransactionAborted)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	require.NoError(t, b.Ping(bg))
	require.Equal(t, 1, queueStats(t, b, "plain").Partitions[0].Cursors[0].InFlight)
	require.Equal(t, int64(0), queueStats(t, b, "secret").Messages)
	ackAll(t, b, pr.Messages, queen.AckCompleted)
}
