package queen_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// limitQueue configures queue with MaxSize n.
func limitQueue(t *testing.T, b *queen.Broker, queue string, n int) {
	t.Helper()
	cfg := queen.DefaultQueueConfig()
	cfg.MaxSize = n
	_, err := b.ConfigureQueue(bg, queue, cfg)
	require.NoError(t, err)
}

func queueStats(t *testing.T, b *queen.Broker, queue string) *queen.QueueStats {
	t.Helper()
	st, err := b.QueueStats(bg, queue)
	require.NoError(t, err)
	return st
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

// TestLimits_PayloadOverDiskLimit: on disk, a 70 MiB push is ErrTooLarge
// with a short message, not Badger's text followed by a hex dump of the
// payload; and a payload of exactly MaxPayload is
// stored, delivered and dead-lettered (with a long error text).
func TestLimits_PayloadOverDiskLimit(t *testing.T) {
	t.Parallel()
	b := itest.OpenDir(t, t.TempDir(), &queen.Options{Durability: queen.SyncNever})
	huge := make([]byte, 70<<20)
	huge[0], huge[len(huge)-1] = '"', '"'
	for i := 1; i < len(huge)-1; i++ {
		huge[i] = 'x'
	}
	_, err := b.Push(bg, []queen.PushItem{{Queue: "big", Payload: huge}})
	require.ErrorIs(t, err, queen.ErrTooLarge)
	require.Less(t, len(err.Error()), 300, "%.300s", err)
	_, err = b.Transaction().Push(queen.PushItem{Queue: "big", Payload: huge}).Commit(bg)
	require.ErrorIs(t, err, queen.ErrTooLarge)

	atLimit := huge[:queen.MaxPayload]
	atLimit[len(atLimit)-1] = '"'
	_, err = b.Push(bg, []queen.PushItem{{Queue: "big", Payload: append(atLimit[:len(atLimit):len(atLimit)], ' ')}})
	require.ErrorIs(t, err, queen.ErrTooLarge, "one byte over")
	res, err := b.Push(bg, []queen.PushItem{{Queue: "big", Payload: atLimit}})
	require.NoError(t, err)
	require.Equal(t, queen.PushQueued, res[0].Status)
	got := pop(t, b, queen.PopRequest{Queue: "big"})
	require.Len(t, got.Messages, 1)
	require.Len(t, got.Messages[0].Payload, queen.MaxPayload)
	items := ackItems(got.Messages, queen.AckDLQ)
	items[0].Error = strings.Repeat("\x01", 64<<10) // escaped six times over in the letter
	ack(t, b, items...)
	page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "big"})
	require.NoError(t, err)
	require.Len(t, page.Letters, 1)
	require.Len(t, page.Letters[0].Payload, queen.MaxPayload)
	require.NoError(t, b.Ping(bg))
}

// TestOpen_LockReleasedWhileRetrying: a directory lock that is let go
// while Open waits between its tries (as a lock a forked child holds until
// its exec is) does not fail Open. Not parallel: it sets the package's
// wait hook.
func TestOpen_LockReleasedWhileRetrying(t *testing.T) {
	dir := t.TempDir()
	holder := itest.OpenDir(t, dir, nil)
	var waits []int
	defer queen.SetLockWaitForTest(func(attempt int) {
		waits = append(waits, attempt)
		if attempt == 1 {
			require.NoError(t, holder.Close())
		}
	})()
	b, err := queen.Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.Equal(t, []int{0, 1}, waits, "two waits: the lock was let go during the second")
}

// TestOpen_LockHeldAfterRetries: a lock held throughout is ErrLocked once
// Open has waited eight times (255 ms), with nothing opened.
func TestOpen_LockHeldAfterRetries(t *testing.T) {
	dir := t.TempDir()
	holder := itest.OpenDir(t, dir, nil)
	waits := 0
	defer queen.SetLockWaitForTest(func(int) { waits++ })()
	_, err := queen.Open(dir, nil)
	require.ErrorIs(t, err, queen.ErrLocked)
	require.Equal(t, 8, waits)
	_, err = queen.Inspect(bg, dir, nil)
	require.ErrorIs(t, err, queen.ErrLocked)
	require.NoError(t, holder.Close())
}

// TestOpen_DirectoryInUse: opening a directory a broker already has open
// is ErrLocked (it was Badger's text), from this process and from another.
func TestOpen_DirectoryInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	_, err := queen.Open(dir, nil)
	require.ErrorIs(t, err, queen.ErrLocked)
	require.Less(t, len(err.Error()), 300)
	require.NoError(t, b.Close())

	// Another process holds it.
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpen_LockHolder$")
	cmd.Env = append(os.Environ(), "QUEEN_LOCK_HOLDER_DIR="+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "holding\n", line)
	_, err = queen.Open(dir, nil)
	require.ErrorIs(t, err, queen.ErrLocked)
	require.NoError(t, stdin.Close()) // the holder closes its broker and exits
	require.NoError(t, cmd.Wait())
	b = itest.OpenDir(t, dir, nil)
	require.NoError(t, b.Close())
}

// TestOpen_LockHolder is the child of TestOpen_DirectoryInUse: it holds a
// broker open on QUEEN_LOCK_HOLDER_DIR until its stdin closes.
func TestOpen_LockHolder(t *testing.T) {
	dir := os.Getenv("QUEEN_LOCK_HOLDER_DIR")
	if dir == "" {
		t.Skip("run by TestOpen_DirectoryInUse")
	}
	b, err := queen.Open(dir, nil)
	require.NoError(t, err)
	fmt.Println("holding")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	require.NoError(t, b.Close())
}

// TestLease_RenewAfterBrokerExpiredIt: once the broker had expired a lease
// (and dropped it), RenewLease said ErrNotFound; its godoc promises
// ErrLeaseExpired. A lease released by acking its messages is unknown.
func TestLease_RenewAfterBrokerExpiredIt(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "r", "a", 2)
		pr := pop(t, b, queen.PopRequest{Queue: "r", Partition: "a", Lease: 10 * time.Second})
		clock.Advance(11 * time.Second)
		// This pop finds the lease expired, drops it and leases anew.
		again := pop(t, b, queen.PopRequest{Queue: "r", Partition: "a", Lease: 10 * time.Second})
		require.Len(t, again.Messages, 1)
		require.NotEqual(t, pr.LeaseID, again.LeaseID)
		_, err := b.RenewLease(bg, pr.LeaseID, time.Minute)
		require.ErrorIs(t, err, queen.ErrLeaseExpired)

		ackAll(t, b, again.Messages, queen.AckCompleted)
		_, err = b.RenewLease(bg, again.LeaseID, time.Minute)
		require.ErrorIs(t, err, queen.ErrNotFound, "released, not expired")
		_, err = b.RenewLease(bg, "0190aaaa-bbbb-7ccc-8ddd-eeeeffff0000", time.Minute)
		require.ErrorIs(t, err, queen.ErrNotFound)
	})
}

// TestDLQ_ConcurrentDeletesSucceedOnce: two concurrent DeleteDeadLetter of
// one id both returned nil and the queue's DeadLetters count went to -1.
// Now one succeeds, the others are ErrNotFound, and counts stay exact; the
// same for DeleteParked.
func TestDLQ_ConcurrentDeletesSucceedOnce(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		const letters = 100
		for i := 0; i < letters; i++ {
			pushOne(t, b, "d", "p", "", `{}`)
		}
		pr := pop(t, b, queen.PopRequest{Queue: "d", Partition: "p", Batch: letters})
		items := ackItems(pr.Messages, queen.AckDLQ)
		for i := letters / 2; i < letters; i++ {
			items[i].Status = queen.AckPark
		}
		ack(t, b, items...)
		st := queueStats(t, b, "d")
		require.Equal(t, int64(letters/2), st.DeadLetters)
		require.Equal(t, int64(letters/2), st.Parked)

		dead, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "d"})
		require.NoError(t, err)
		parked, err := b.ParkedMessages(bg, queen.LetterFilter{Queue: "d"})
		require.NoError(t, err)
		for _, c := range []struct {
			page *queen.LetterPage
			del  func(context.Context, string) error
		}{{dead, b.DeleteDeadLetter}, {parked, b.DeleteParked}} {
			for _, l := range c.page.Letters {
				var wg sync.WaitGroup
				start := make(chan struct{})
				errs := make([]error, 8)
				for k := range errs {
					wg.Add(1)
					go func() { defer wg.Done(); <-start; errs[k] = c.del(bg, l.ID) }()
				}
				close(start)
				wg.Wait()
				ok := 0
				for _, err := range errs {
					if err == nil {
						ok++
					} else {
						require.ErrorIs(t, err, queen.ErrNotFound)
					}
				}
				require.Equal(t, 1, ok, "deletes of %s that succeeded", l.ID)
			}
		}
		st = queueStats(t, b, "d")
		require.Equal(t, int64(0), st.DeadLetters)
		require.Equal(t, int64(0), st.Parked)
	})
}

// TestDLQ_LetterOfDeletedQueue: a dead letter of a deleted queue whose
// removal had not run yet could be deleted (decrementing the count of a
// new queue of the same name) and replayed into that new queue. Now such
// an entry is not found.
func TestDLQ_LetterOfDeletedQueue(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	deadLetter(t, b, "q", "g", `{"old":true}`)
	page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "q"})
	require.NoError(t, err)
	oldID := page.Letters[0].ID
	// A cancelled context ends DeleteQueue once the queue is unlinked,
	// before its dead letters are swept.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, _ = b.DeleteQueue(ctx, "q")
	require.Eventually(t, func() bool { _, err := b.DescribeQueue(bg, "q"); return errors.Is(err, queen.ErrNotFound) }, 5*time.Second, time.Millisecond)

	deadLetter(t, b, "q", "g", `{"new":true}`)
	require.Equal(t, int64(1), queueStats(t, b, "q").DeadLetters)
	require.ErrorIs(t, b.DeleteDeadLetter(bg, oldID), queen.ErrNotFound)
	_, err = b.ReplayDeadLetter(bg, oldID)
	require.ErrorIs(t, err, queen.ErrNotFound)
	require.Equal(t, int64(1), queueStats(t, b, "q").DeadLetters)
	f, err := b.Fetch(bg, "q", "p", 0, 10)
	require.NoError(t, err)
	require.Len(t, f.Records, 1, "no replayed copy of the old letter")
}

// TestDLQ_ReplayAfterCopyRetained: the copy a replay pushed is removed by
// retention; a later replay of the same entry pushes a new copy (the
// dedup on "dlq:<id>" holds while a copy is retained).
func TestDLQ_ReplayAfterCopyRetained(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.Retention = time.Hour
		_, err := b.ConfigureQueue(bg, "rr", cfg)
		require.NoError(t, err)
		deadLetter(t, b, "rr", "g", `{"v":1}`)
		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "rr"})
		require.NoError(t, err)
		id := page.Letters[0].ID
		first, err := b.ReplayDeadLetter(bg, id)
		require.NoError(t, err)
		require.False(t, first.Duplicate)
		dup, err := b.ReplayDeadLetter(bg, id)
		require.NoError(t, err)
		require.True(t, dup.Duplicate)

		clock.Advance(2 * time.Hour)
		require.NoError(t, b.Maintain(bg))
		f, err := b.Fetch(bg, "rr", "p", 0, 10)
		require.NoError(t, err)
		require.Empty(t, f.Records, "retention removed the message and its copy")

		second, err := b.ReplayDeadLetter(bg, id)
		require.NoError(t, err)
		require.False(t, second.Duplicate, "the copy is gone: a new one is pushed")
		require.Greater(t, second.Offset, first.Offset)
		require.NotEqual(t, first.MessageID, second.MessageID)
		got := pop(t, b, queen.PopRequest{Queue: "rr", Group: "g", Partition: "p", Batch: 10})
		require.Len(t, got.Messages, 1)
		require.Equal(t, "dlq:"+id, got.Messages[0].TransactionID)
		require.Equal(t, `{"v":1}`, string(got.Messages[0].Payload))
	})
}

// TestAck_ConflictingItemsForOneMessage: completed then dlq for the same
// message in one AckBatch both reported success, and the dlq did nothing.
// Now the first item decides; a later one with another status is refused,
// a repeat of the same status succeeds; in a transaction the conflict
// aborts everything.
func TestAck_ConflictingItemsForOneMessage(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "c", "", 2)
		pr := pop(t, b, queen.PopRequest{Queue: "c", Batch: 1})
		m := pr.Messages
		items := append(ackItems(m, queen.AckCompleted), ackItems(m, queen.AckDLQ)...)
		items = append(items, ackItems(m, queen.AckCompleted)...)
		res := ack(t, b, items...)
		require.True(t, res[0].Success)
		require.False(t, res[1].Success, "dlq after completed in one call")
		require.ErrorIs(t, res[1].Err, queen.ErrInvalidArgument)
		require.Contains(t, res[1].Err.Error(), "item 0")
		require.False(t, res[1].DeadLettered)
		require.True(t, res[2].Success, "the same status again is a no-op")
		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "c"})
		require.NoError(t, err)
		require.Zero(t, page.Total)
		require.Equal(t, int64(1), queueStats(t, b, "c").Partitions[0].Cursors[0].Offset)

		pr = pop(t, b, queen.PopRequest{Queue: "c", Batch: 1})
		_, err = b.Transaction().
			Ack(pr.Messages[0], queen.AckCompleted, queen.AckOptions{}).
			Push(queen.PushItem{Queue: "c2"}).
			Ack(pr.Messages[0], queen.AckDLQ, queen.AckOptions{}).
			Commit(bg)
		require.ErrorIs(t, err, queen.ErrTransactionAborted)
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
		var te *queen.TransactionError
		require.True(t, errors.As(err, &te))
		require.Equal(t, 2, te.Index)
		require.Equal(t, 1, queueStats(t, b, "c").Partitions[0].Cursors[0].InFlight)
		_, err = b.DescribeQueue(bg, "c2")
		require.ErrorIs(t, err, queen.ErrNotFound)
	})
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
