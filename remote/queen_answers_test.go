package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// Queen's server answers an unknown or deleted queue's status with 200
// {"error":"Queue not found"}: that is ErrNotFound, never an empty queue.
func TestQueenServer_UnknownQueue(t *testing.T) {
	t.Parallel()
	c, _, _ := dialQueen(t, nil)
	ctx := context.Background()
	_, err := c.DescribeQueue(ctx, "nope")
	require.ErrorIs(t, err, queen.ErrNotFound)
	_, err = c.QueueStats(ctx, "nope")
	require.ErrorIs(t, err, queen.ErrNotFound)

	_, err = c.Push(ctx, []queen.PushItem{{Queue: "gone", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err)
	info, err := c.DescribeQueue(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, "gone", info.Name)
	existed, err := c.DeleteQueue(ctx, "gone")
	require.NoError(t, err)
	require.True(t, existed)
	_, err = c.DescribeQueue(ctx, "gone")
	require.ErrorIs(t, err, queen.ErrNotFound, "deleted")
	_, err = c.QueueStats(ctx, "gone")
	require.ErrorIs(t, err, queen.ErrNotFound, "deleted")
}

// A partition seek: an unknown partition (200 {"success":false,...}) is
// ErrNotFound; a seek to the end whose cursorMovedTo is a time succeeds.
func TestQueenServer_SeekPartition(t *testing.T) {
	t.Parallel()
	c, _, _ := dialQueen(t, nil)
	ctx := context.Background()
	_, err := c.Push(ctx, []queen.PushItem{{Queue: "s", Partition: "p", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err)
	msgs, err := c.Queue("s").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)

	_, err = c.SeekPartition(ctx, "g", "s", "nope", queen.SeekOptions{ToEnd: true})
	require.ErrorIs(t, err, queen.ErrNotFound)
	res, err := c.SeekPartition(ctx, "g", "s", "p", queen.SeekOptions{ToEnd: true})
	require.NoError(t, err, "a time in cursorMovedTo is a success")
	require.Equal(t, 1, res.PartitionsUpdated)
	require.Zero(t, res.CursorMovedTo, "a time, not an offset")
	empty, err := c.Queue("s").Group("g").Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Empty(t, empty, "the cursor is at the end")
}

// leaseQueue makes queue "l", leasing for 30 s, with one message.
func leaseQueue(t *testing.T, c queen.Client) {
	ctx := context.Background()
	cfg := queen.DefaultQueueConfig()
	cfg.LeaseTime = 30 * time.Second
	_, err := c.ConfigureQueue(ctx, "l", cfg)
	require.NoError(t, err)
	_, err = c.Push(ctx, []queen.PushItem{{Queue: "l", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err)
}

// Queen's server leases a pop for the queue's LeaseTime whatever the
// pop's Lease: a longer Lease is reached by extending the lease after the
// pop, a shorter one is ErrUnsupported with nothing popped.
func TestQueenServer_PopLease(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	c, _, b := dialQueen(t, &queen.Options{Clock: clock})
	ctx := context.Background()
	leaseQueue(t, c)

	_, err := c.Queue("l").Lease(10 * time.Second).Wait(false).Pop(ctx)
	require.ErrorIs(t, err, queen.ErrUnsupported, "the server would hold it 30 s")
	st, err := b.QueueStats(ctx, "l")
	require.NoError(t, err)
	require.Zero(t, st.InFlight, "nothing was popped")
	_, err = c.Pop(ctx, queen.PopRequest{Namespace: "l", Lease: time.Minute})
	require.ErrorIs(t, err, queen.ErrUnsupported, "a discovery pop names no queue whose lease could be read")

	msgs, err := c.Queue("l").Lease(2 * time.Minute).Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	clock.Advance(90 * time.Second) // past the queue's 30 s, within the pop's 2 min
	again, err := b.Queue("l").Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Empty(t, again, "still leased: the lease was extended to the pop's")
	_, err = c.Ack(ctx, msgs[0], true, queen.AckOptions{})
	require.NoError(t, err)

	// A Lease equal to the queue's needs nothing more.
	_, err = c.Push(ctx, []queen.PushItem{{Queue: "l", Payload: json.RawMessage(`2`)}})
	require.NoError(t, err)
	msgs, err = c.Queue("l").Lease(30 * time.Second).Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
}

// ackScript pops the same three messages of one partition from c and
// settles them in two mixed batches; it returns what each step showed.
func ackScript(t *testing.T, c, b queen.Client) []string {
	ctx := context.Background()
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit = 1
	cfg.RetryDelay = 0
	_, err := b.ConfigureQueue(ctx, "mix", cfg)
	require.NoError(t, err)
	_, err = b.Push(ctx, []queen.PushItem{{Queue: "mix", Payload: json.RawMessage(`{"n":1}`)},
		{Queue: "mix", Payload: json.RawMessage(`{"n":2}`)}, {Queue: "mix", Payload: json.RawMessage(`{"n":3}`)}})
	require.NoError(t, err)
	var seen []string
	note := func(msgs []*queen.Message) {
		s := "delivered"
		for _, m := range msgs {
			s += " " + string(m.Payload)
		}
		seen = append(seen, s)
	}
	acks := func(msgs []*queen.Message, sts ...queen.AckStatus) {
		items := make([]queen.AckItem, len(msgs))
		for i, m := range msgs {
			items[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: "g", Status: sts[i]}
		}
		res, err := c.AckBatch(ctx, items)
		require.NoError(t, err)
		for i, r := range res {
			seen = append(seen, string(msgs[i].Payload)+" "+string(sts[i])+" ok="+boolStr(r.Success)+" dlq="+boolStr(r.DeadLettered))
		}
	}
	pop := func() []*queen.Message {
		// Waiting (briefly): Queen's own server may not see a new
		// partition for a moment after the push.
		msgs, err := c.Pop(ctx, queen.PopRequest{Queue: "mix", Group: "g", Batch: 10, SubscriptionMode: queen.SubscriptionModeAll,
			Wait: true, Timeout: 300 * time.Millisecond})
		require.NoError(t, err)
		note(msgs.Messages)
		return msgs.Messages
	}
	msgs := pop()
	require.Len(t, msgs, 3)
	acks(msgs, queen.AckCompleted, queen.AckFailed, queen.AckCompleted) // m2 spends the one retry: m2, m3 come back
	msgs = pop()
	require.NotEmpty(t, msgs)
	sts := []queen.AckStatus{queen.AckFailed, queen.AckCompleted} // no budget left: m2 is dead-lettered, m3 completes
	acks(msgs, sts[:len(msgs)]...)
	pop()
	page, err := b.DeadLetters(ctx, queen.LetterFilter{Queue: "mix"})
	require.NoError(t, err)
	for _, l := range page.Letters {
		seen = append(seen, "dead "+string(l.Payload))
	}
	return seen
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// A mixed ack batch reaches Queen's server in parts it handles, so the
// retry budget and the dead-letter store behave as in process: the same
// script gives the same story on a broker and through the fake, and no
// batch the fake received has a completed item behind a failed or retry
// one of the same partition (which that server would drop).
func TestQueenServer_MixedAckBatch(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	want := ackScript(t, b, b)
	require.Equal(t, []string{
		`delivered {"n":1} {"n":2} {"n":3}`,
		`{"n":1} completed ok=true dlq=false`, `{"n":2} failed ok=true dlq=false`, `{"n":3} completed ok=true dlq=false`,
		`delivered {"n":2} {"n":3}`,
		`{"n":2} failed ok=true dlq=true`, `{"n":3} completed ok=true dlq=false`,
		`delivered`,
		`dead {"n":2}`,
	}, want, "the broker's story")

	c, qs, fb := dialQueen(t, nil)
	require.Equal(t, want, ackScript(t, c, fb))
	qs.mu.Lock()
	defer qs.mu.Unlock()
	for _, batch := range qs.batches {
		failed := false
		for _, it := range batch {
			st := it["status"]
			failed = failed || st == "failed" || st == "retry"
			require.False(t, failed && (st == "completed" || st == nil), "a completed item behind a failed one: %v", batch)
		}
	}
	// First call: [m1], then [m2] alone; m3 is not sent (it comes back
	// with m2). Second call: [m2] alone, dead-lettered, then [m3].
	require.Len(t, qs.singles, 4)
	require.Empty(t, qs.batches)
}

// Through the fake, whose counts are those of the last stats refresh, the
// counts are always those of the call: the client refreshes first, and
// waits out a refresh another server is running.
func TestQueenServer_StatsRefreshed(t *testing.T) {
	t.Parallel()
	c, qs, _ := dialQueen(t, nil)
	ctx := context.Background()
	for n := 1; n <= 3; n++ {
		_, err := c.Push(ctx, []queen.PushItem{{Queue: "st", Payload: json.RawMessage(`1`)}})
		require.NoError(t, err)
		st, err := c.QueueStats(ctx, "st")
		require.NoError(t, err)
		require.EqualValues(t, n, st.Messages)
		all, err := c.ListQueues(ctx)
		require.NoError(t, err)
		require.EqualValues(t, n, all[0].Messages)
	}
	before := qs.refresh.Load()
	qs.busy.Store(2)
	_, err := c.Push(ctx, []queen.PushItem{{Queue: "st", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err)
	st, err := c.QueueStats(ctx, "st")
	require.NoError(t, err)
	require.EqualValues(t, 4, st.Messages)
	require.EqualValues(t, 3, qs.refresh.Load()-before, "two skipped, then one that ran")

	qs.busy.Store(100)
	_, err = c.QueueStats(ctx, "st")
	require.ErrorIs(t, err, queen.ErrUnavailable, "never counts that may be old")
	qs.busy.Store(0)
}

// rawQueen is a server that says it is Queen's and answers every other
// request with answer, counting them.
func rawQueen(t *testing.T, answer string) (*remote.Client, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			writeRaw(w, http.StatusOK, `{"status":"healthy","server":"C++ Queen Server (libqueen)"}`)
			return
		}
		calls.Add(1)
		writeRaw(w, http.StatusOK, answer)
	}))
	t.Cleanup(srv.Close)
	c, err := remote.Dial(srv.URL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, &calls
}

// A transaction above MaxTxOps fails on the client, before sending; one
// that Queen's database stopped at its statement timeout says so and
// matches ErrTransactionAborted.
func TestQueenServer_TransactionLimits(t *testing.T) {
	t.Parallel()
	c, calls := rawQueen(t, `{"error":"ERROR:  canceling statement due to statement timeout\nCONTEXT:  PL/pgSQL function queen.execute_transaction_v2(jsonb) line 233 at assignment\n","success":false}`)
	ctx := context.Background()
	ops := make([]queen.TxOp, queen.MaxTxOps+1)
	for i := range ops {
		ops[i].Push = &queen.PushItem{Queue: "t", Payload: json.RawMessage(`1`)}
	}
	_, err := c.ExecTransaction(ctx, ops)
	require.ErrorIs(t, err, queen.ErrTooLarge)
	require.Contains(t, err.Error(), "at most 10000 operations (queen.MaxTxOps), not 10001")
	items := make([]queen.PushItem, queen.MaxPushItems+1)
	for i := range items {
		items[i] = queen.PushItem{Queue: "t", Payload: json.RawMessage(`1`)}
	}
	_, err = c.Push(ctx, items)
	require.ErrorIs(t, err, queen.ErrTooLarge)
	require.Zero(t, calls.Load(), "refused before sending")

	_, err = c.ExecTransaction(ctx, ops[:2])
	require.ErrorIs(t, err, queen.ErrTransactionAborted)
	var se *remote.ServerError
	require.True(t, errors.As(err, &se))
	require.Contains(t, se.Message, "statement timeout")
	require.Contains(t, se.Message, "nothing of it was applied")
	var te *queen.TransactionError
	require.False(t, errors.As(err, &te), "no one operation was refused")
}

// Two partitions in one ack call: the acks before each partition's first
// failed one go in one batch, the failed one alone, and each partition
// ends as in process.
func TestQueenServer_MixedAckBatchTwoPartitions(t *testing.T) {
	t.Parallel()
	script := func(c queen.Client, b *queen.Broker) []string {
		ctx := context.Background()
		cfg := queen.DefaultQueueConfig()
		cfg.RetryDelay = 0
		_, err := b.ConfigureQueue(ctx, "two", cfg)
		require.NoError(t, err)
		for _, p := range []string{"a", "b"} {
			_, err := b.Push(ctx, []queen.PushItem{{Queue: "two", Partition: p, Payload: json.RawMessage(`"` + p + `1"`)},
				{Queue: "two", Partition: p, Payload: json.RawMessage(`"` + p + `2"`)}})
			require.NoError(t, err)
		}
		var items []queen.AckItem
		for _, p := range []string{"a", "b"} {
			res, err := c.Pop(ctx, queen.PopRequest{Queue: "two", Partition: p, Group: "g", Batch: 2, SubscriptionMode: queen.SubscriptionModeAll})
			require.NoError(t, err)
			require.Len(t, res.Messages, 2)
			for i, m := range res.Messages {
				st := queen.AckCompleted
				if p == "a" && i == 1 {
					st = queen.AckFailed
				}
				items = append(items, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: "g", Status: st})
			}
		}
		res, err := c.AckBatch(ctx, items)
		require.NoError(t, err)
		var story []string
		for _, r := range res {
			story = append(story, r.Partition+" ok="+boolStr(r.Success)+" dlq="+boolStr(r.DeadLettered))
		}
		for _, p := range []string{"a", "b"} {
			again, err := c.Pop(ctx, queen.PopRequest{Queue: "two", Partition: p, Group: "g", Batch: 2})
			require.NoError(t, err)
			s := p + " again:"
			for _, m := range again.Messages {
				s += " " + string(m.Payload)
			}
			story = append(story, s)
		}
		return story
	}
	b := queentest.NewBroker(t, nil)
	want := script(b, b)
	require.Equal(t, []string{"a ok=true dlq=false", "a ok=true dlq=false", "b ok=true dlq=false", "b ok=true dlq=false",
		`a again: "a2"`, "b again:"}, want)
	c, qs, fb := dialQueen(t, nil)
	require.Equal(t, want, script(c, fb))
	qs.mu.Lock()
	defer qs.mu.Unlock()
	require.Len(t, qs.batches, 1, "a1, b1 and b2 together")
	require.Len(t, qs.batches[0], 3)
	require.Len(t, qs.singles, 1, "a2 alone")
	require.Equal(t, "failed", qs.singles[0]["status"])
}

// One ack call for two groups: Queen's server reads a batch's group once
// for all its items, so each group's items go in their own batch.
func TestQueenServer_AckBatchTwoGroups(t *testing.T) {
	t.Parallel()
	c, qs, b := dialQueen(t, nil)
	ctx := context.Background()
	_, err := b.Push(ctx, []queen.PushItem{{Queue: "gg", Payload: json.RawMessage(`1`)}, {Queue: "gg", Payload: json.RawMessage(`2`)}})
	require.NoError(t, err)
	var items []queen.AckItem
	for _, g := range []string{"g1", "g2"} {
		res, err := c.Pop(ctx, queen.PopRequest{Queue: "gg", Group: g, Batch: 2, SubscriptionMode: queen.SubscriptionModeAll})
		require.NoError(t, err)
		require.Len(t, res.Messages, 2)
		for _, m := range res.Messages {
			items = append(items, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: g})
		}
	}
	res, err := c.AckBatch(ctx, items)
	require.NoError(t, err)
	for i, r := range res {
		require.True(t, r.Success, "item %d: %v", i, r.Err)
	}
	st, err := b.QueueStats(ctx, "gg")
	require.NoError(t, err)
	require.Zero(t, st.Pending, "both groups settled both")
	qs.mu.Lock()
	defer qs.mu.Unlock()
	require.Len(t, qs.batches, 2, "one batch per group")
}

// A transaction with a failed or retry ack is ErrUnsupported on Queen's
// server before sending (it would dead-letter the failed message at once,
// or abort); one of completed and dlq acks runs.
func TestQueenServer_TransactionFailedAck(t *testing.T) {
	t.Parallel()
	c, _, b := dialQueen(t, nil)
	ctx := context.Background()
	_, err := c.Push(ctx, []queen.PushItem{{Queue: "txf", Payload: json.RawMessage(`1`)}, {Queue: "txf", Payload: json.RawMessage(`2`)}})
	require.NoError(t, err)
	msgs, err := c.Queue("txf").Batch(2).Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	for _, st := range []queen.AckStatus{queen.AckFailed, queen.AckRetry} {
		_, err = c.Transaction().Ack(msgs[0], queen.AckCompleted, queen.AckOptions{}).Ack(msgs[1], st, queen.AckOptions{}).Commit(ctx)
		require.ErrorIs(t, err, queen.ErrUnsupported, st)
	}
	st, err := b.QueueStats(ctx, "txf")
	require.NoError(t, err)
	require.EqualValues(t, 2, st.InFlight, "nothing was sent")
	tx, err := c.Transaction().Ack(msgs[0], queen.AckCompleted, queen.AckOptions{}).Ack(msgs[1], queen.AckDLQ, queen.AckOptions{}).Commit(ctx)
	require.NoError(t, err)
	require.True(t, tx.Results[1].Ack.DeadLettered)
}

// An aborted transaction changed nothing: an ack the server marked dlq
// before the abort is not reported dead-lettered.
func TestQueenServer_AbortedTransactionDeadLettersNothing(t *testing.T) {
	t.Parallel()
	c, _ := rawQueen(t, `{"success":false,"error":"ACK operation failed: Invalid or expired lease","results":[`+
		`{"type":"ack","success":true,"transactionId":"a","dlq":true},{"type":"ack","success":false,"transactionId":"b","error":"Invalid or expired lease"}]}`)
	_, err := c.ExecTransaction(context.Background(), []queen.TxOp{
		{Ack: &queen.AckItem{TransactionID: "a", PartitionID: "p", Status: queen.AckDLQ}},
		{Ack: &queen.AckItem{TransactionID: "b", PartitionID: "p"}},
	})
	var te *queen.TransactionError
	require.True(t, errors.As(err, &te), "%v", err)
	require.ErrorIs(t, err, queen.ErrLeaseExpired)
	require.Equal(t, 1, te.Index)
	res, _ := c.ExecTransaction(context.Background(), []queen.TxOp{
		{Ack: &queen.AckItem{TransactionID: "a", PartitionID: "p", Status: queen.AckDLQ}},
		{Ack: &queen.AckItem{TransactionID: "b", PartitionID: "p"}},
	})
	require.NotNil(t, res)
	require.NotNil(t, res.Results[0].Ack)
	require.False(t, res.Results[0].Ack.DeadLettered, "rolled back")
	require.False(t, res.Results[0].Ack.Success, "rolled back")
}
