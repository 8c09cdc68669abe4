package queen_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/leakcheck"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// raceEnabled reports a -race build, whose detector allows at most 8128
// live goroutines.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

func TestLimits_NamesAt255And256Bytes(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		n255 := strings.Repeat("q", 255)
		u255 := strings.Repeat("é", 127) + "x" // 255 bytes, 128 characters
		n256 := strings.Repeat("q", 256)
		require.Len(t, u255, 255)

		res, err := b.Push(bg, []queen.PushItem{{Queue: n255, Partition: u255, TransactionID: n255, TraceID: n255, Payload: json.RawMessage(`1`)}})
		require.NoError(t, err)
		require.Equal(t, queen.PushQueued, res[0].Status)
		got := pop(t, b, queen.PopRequest{Queue: n255, Partition: u255, Group: u255, SubscriptionMode: queen.SubscriptionModeAll})
		require.Len(t, got.Messages, 1)
		require.Equal(t, n255, got.Messages[0].TransactionID)
		require.Equal(t, u255, got.Messages[0].Partition)
		require.Equal(t, u255, got.Messages[0].ConsumerGroup)
		ackAll(t, b, got.Messages, queen.AckCompleted)
		f, err := b.Fetch(bg, n255, u255, 0, 10)
		require.NoError(t, err)
		require.Len(t, f.Records, 1)

		for _, it := range []queen.PushItem{
			{Queue: n256, Payload: json.RawMessage(`1`)},
			{Queue: "q", Partition: n256, Payload: json.RawMessage(`1`)},
			{Queue: "q", TransactionID: n256, Payload: json.RawMessage(`1`)},
			{Queue: "q", TraceID: n256, Payload: json.RawMessage(`1`)},
			{Queue: "q", Partition: "bad\xff", Payload: json.RawMessage(`1`)},
			{Queue: "q\x00", Payload: json.RawMessage(`1`)},
		} {
			_, err := b.Push(bg, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}, it})
			var ae *queen.ArgumentError
			require.True(t, errors.As(err, &ae), "%+v: %v", it, err)
			require.Contains(t, ae.Field, "PushItem[1].")
		}
		_, err = b.Fetch(bg, "q", "", 0, 1)
		require.ErrorIs(t, err, queen.ErrNotFound, "a refused push wrote its valid items")
		for _, req := range []queen.PopRequest{{Queue: n256}, {Queue: "q", Group: n256}, {Queue: "q", Partition: n256}} {
			_, err := b.Pop(bg, req)
			require.ErrorIs(t, err, queen.ErrInvalidArgument, "%+v", req)
		}
		_, err = b.ConfigureQueue(bg, n256, queen.DefaultQueueConfig())
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
	})
}

// TestLimits_TenThousandItems pushes 10,000 items in one call (and one
// more in another), pops them in one batch and acks them in one call; one
// item more is refused.
func TestLimits_TenThousandItems(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		res := append(pushN(t, b, "many", "", queen.MaxPushItems), pushN(t, b, "many", "", 1)...)
		for i, r := range res {
			require.Equal(t, int64(i), r.Offset)
		}
		_, err := b.Pop(bg, queen.PopRequest{Queue: "many", Batch: 50000})
		require.ErrorIs(t, err, queen.ErrInvalidArgument, "Batch is at most 10000")
		got := pop(t, b, queen.PopRequest{Queue: "many", Batch: queen.MaxBatch})
		require.Len(t, got.Messages, 10000)
		for i, m := range got.Messages {
			require.Equal(t, int64(i), m.Offset)
		}
		items := ackItems(got.Messages, queen.AckCompleted)
		_, err = b.AckBatch(bg, append(items, items[0]))
		require.ErrorIs(t, err, queen.ErrInvalidArgument, "10,001 ack items")
		ackAll(t, b, got.Messages, queen.AckCompleted)
		rest := pop(t, b, queen.PopRequest{Queue: "many", Batch: 10000})
		require.Len(t, rest.Messages, 1)
		require.Equal(t, int64(10000), rest.Messages[0].Offset)
	})
}

// TestLimits_PushAndTransactionCaps: a push of more than MaxPushItems
// items and a transaction of more than MaxTxOps operations are refused
// whole with ErrTooLarge naming the cap, before anything is validated or
// written; a push at the cap goes through.
func TestLimits_PushAndTransactionCaps(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	items := make([]queen.PushItem, queen.MaxPushItems+1)
	for i := range items {
		items[i] = queen.PushItem{Queue: "capped", Payload: json.RawMessage(`1`)}
	}
	_, err := b.Push(bg, items)
	require.ErrorIs(t, err, queen.ErrTooLarge)
	require.Contains(t, err.Error(), "at most 10000 items (queen.MaxPushItems), not 10001")
	_, err = b.QueueStats(bg, "capped")
	require.ErrorIs(t, err, queen.ErrNotFound, "a refused push creates nothing")
	items[0].Queue = "" // invalid, but the count is refused first
	_, err = b.Push(bg, items)
	require.ErrorIs(t, err, queen.ErrTooLarge)

	ops := make([]queen.TxOp, queen.MaxTxOps+1)
	for i := range ops {
		ops[i] = queen.TxOp{Push: &queen.PushItem{Queue: "capped", Payload: json.RawMessage(`1`)}}
	}
	_, err = b.ExecTransaction(bg, ops)
	require.ErrorIs(t, err, queen.ErrTooLarge)
	require.Contains(t, err.Error(), "at most 10000 operations (queen.MaxTxOps), not 10001")
	ops[0] = queen.TxOp{} // invalid, but the count is refused first
	_, err = b.ExecTransaction(bg, ops)
	require.ErrorIs(t, err, queen.ErrTooLarge)
	_, err = b.QueueStats(bg, "capped")
	require.ErrorIs(t, err, queen.ErrNotFound, "a refused transaction creates nothing")

	res, err := b.Push(bg, items[1:])
	require.NoError(t, err, "a push of MaxPushItems items")
	require.Len(t, res, queen.MaxPushItems)
	for _, r := range res {
		require.Equal(t, queen.PushQueued, r.Status)
	}
}

// TestLimits_HugeBatchAcrossPartitions pushes MaxPushItems items over 30
// partitions in one call (many storage transactions) and reads every one
// back once.
func TestLimits_HugeBatchAcrossPartitions(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	items := make([]queen.PushItem, queen.MaxPushItems)
	pad := strings.Repeat("p", 150)
	for i := range items {
		items[i] = queen.PushItem{Queue: "huge", Partition: fmt.Sprint("p", i%30), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))}
	}
	res, err := b.Push(bg, items)
	require.NoError(t, err)
	for i, r := range res {
		require.Equal(t, queen.PushQueued, r.Status)
		require.Equal(t, int64(i/30), r.Offset, "offsets follow the request order within a partition")
	}
	seen := 0
	for {
		got := pop(t, b, queen.PopRequest{Queue: "huge", Batch: 10000, Partitions: 64})
		if len(got.Messages) == 0 {
			break
		}
		seen += len(got.Messages)
		ackAll(t, b, got.Messages, queen.AckCompleted)
	}
	require.Equal(t, len(items), seen)
}

// TestLimits_16MiBPayload stores, reads, dead-letters, replays and reopens
// a 16 MiB payload byte for byte, on disk (in memory, Badger refuses values
// over 1 MiB: see TestLimits_InMemoryPayloadOverOneMiBIsTooLarge).
func TestLimits_16MiBPayload(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("moves a few hundred MiB")
	}
	skipUnderRace(t)
	dir := t.TempDir()
	func() {
		b := itest.OpenDir(t, dir, &queen.Options{Durability: queen.SyncNever})
		defer b.Close()
		big := json.RawMessage(`"` + strings.Repeat("x", 16<<20-2) + `"`)
		res, err := b.Push(bg, []queen.PushItem{{Queue: "big", Payload: big}, {Queue: "big", Payload: big}})
		require.NoError(t, err)
		require.Equal(t, queen.PushQueued, res[1].Status)
		f, err := b.Fetch(bg, "big", "", 0, 10)
		require.NoError(t, err)
		require.Len(t, f.Records, 2)
		require.Equal(t, string(big), string(f.Records[1].Payload))

		got := pop(t, b, queen.PopRequest{Queue: "big", Batch: 2})
		require.Len(t, got.Messages, 2)
		require.Equal(t, string(big), string(got.Messages[0].Payload))
		acks := ackAll(t, b, got.Messages, queen.AckDLQ)
		require.True(t, acks[0].DeadLettered)
		dl, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "big"})
		require.NoError(t, err)
		require.Len(t, dl.Letters, 2)
		require.Equal(t, string(big), string(dl.Letters[0].Payload))
		rp, err := b.ReplayDeadLetter(bg, dl.Letters[0].ID)
		require.NoError(t, err)
		again := pop(t, b, queen.PopRequest{Queue: "big"})
		require.Len(t, again.Messages, 1)
		require.Equal(t, rp.Offset, again.Messages[0].Offset)
		require.Equal(t, string(big), string(again.Messages[0].Payload))
	}()
	b := itest.OpenDir(t, dir, nil)
	f, err := b.Fetch(bg, "big", "", 0, 10)
	require.NoError(t, err)
	require.Len(t, f.Records, 3)
	for _, r := range f.Records {
		require.Equal(t, 16<<20, len(r.Payload), "offset %d after reopen", r.Offset)
	}
}

// TestLimits_InMemoryPayloadOverOneMiBIsTooLarge: Badger's in-memory mode
// refuses values over 1 MiB, so the broker refuses payloads over its limit
// (queen.MaxInMemoryPayload with a memory budget of 64 MiB, less at the
// default budget) with ErrTooLarge, not with the raw storage error and its
// hex dump of the value; and a dead letter of a payload at the limit, a
// larger record, still fits, so dead-lettering it does not fail the commit.
func TestLimits_InMemoryPayloadOverOneMiBIsTooLarge(t *testing.T) {
	t.Parallel()
	t.Run("default budget", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, nil)
		require.Less(t, b.PayloadLimit(), queen.MaxInMemoryPayload)
		checkInMemoryPayloadLimit(t, b, b.PayloadLimit())
	})
	t.Run("64 MiB budget", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, &queen.Options{MemoryBudget: 64 << 20})
		require.Equal(t, queen.MaxInMemoryPayload, b.PayloadLimit())
		checkInMemoryPayloadLimit(t, b, queen.MaxInMemoryPayload)
	})
}

func checkInMemoryPayloadLimit(t *testing.T, b *queen.Broker, limit int) {
	res, err := b.Push(bg, []queen.PushItem{{Queue: "mem", Payload: json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`)}})
	if err != nil {
		require.ErrorIs(t, err, queen.ErrTooLarge)
		require.Less(t, len(err.Error()), 1024, "error text of a refused payload")
	} else {
		require.Equal(t, queen.PushQueued, res[0].Status)
	}
	// At the documented limit a message is stored and can be dead-lettered
	// (with a long error text); one byte more is refused.
	atLimit := `"` + strings.Repeat("x", limit-2) + `"`
	pushOne(t, b, "mem2", "", "near", atLimit)
	_, err = b.Push(bg, []queen.PushItem{{Queue: "mem2", Payload: json.RawMessage(atLimit + " ")}})
	require.ErrorIs(t, err, queen.ErrTooLarge)
	got := pop(t, b, queen.PopRequest{Queue: "mem2"})
	require.Len(t, got.Messages, 1)
	items := ackItems(got.Messages, queen.AckDLQ)
	items[0].Error = strings.Repeat("e", 64<<10)
	_, err = b.AckBatch(bg, items)
	require.NoError(t, err)
	page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "mem2"})
	require.NoError(t, err)
	require.Equal(t, atLimit, string(page.Letters[0].Payload))
	_, err = b.Push(bg, []queen.PushItem{{Queue: "mem2", Payload: json.RawMessage(`1`)}})
	require.NoError(t, err, "one dead letter stopped the broker")
}

// TestLimits_TenThousandWaitingLongPolls parks 10,000 waiting pops (7,000
// under -race, whose detector caps live goroutines), measures what they
// cost, wakes 100 of them with pushes and ends the rest with Close. It does
// not run in parallel, so the counts are its own.
func TestLimits_TenThousandWaitingLongPolls(t *testing.T) {
	n := 10000
	if raceEnabled() {
		n = 7000
	}
	if testing.Short() {
		n = 1000
	}
	before := leakcheck.Snapshot()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	pushN(t, b, "lp", "p0", 1)
	_ = pop(t, b, queen.PopRequest{Queue: "lp", Partition: "p0", CommitOnDelivery: true}) // the queue and its group exist

	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	g0 := runtime.NumGoroutine()

	type result struct {
		msgs int
		err  error
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for i := range n {
		req := queen.PopRequest{Queue: "lp", Wait: true, Timeout: time.Minute}
		// Pops waiting on one named partition are left out until Close
		// wakes them: see TestWait_CloseEndsPartitionWaiters.
		if i%2 == 1 {
			req.Queue = fmt.Sprint("unknown", i%10) // waits for the queue to exist
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Pop(context.Background(), req)
			r := result{err: err}
			if res != nil {
				r.msgs = len(res.Messages)
			}
			results <- r
		}()
	}
	itest.AwaitWaiting(t, b, n)
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	t.Logf("%d waiting pops: %d goroutines, heap +%d KiB (%.1f KiB each), stacks +%d KiB",
		n, runtime.NumGoroutine()-g0, (int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))>>10,
		float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/1024/float64(n), (int64(ms1.StackInuse)-int64(ms0.StackInuse))>>10)

	// A message in each of 100 new partitions wakes 100 pops, one message
	// each (a partition goes to one pop at a time).
	wake := make([]queen.PushItem, 100)
	for i := range wake {
		wake[i] = queen.PushItem{Queue: "lp", Partition: fmt.Sprint("w", i), Payload: json.RawMessage(`1`)}
	}
	_, err = b.Push(bg, wake)
	require.NoError(t, err)
	delivered := 0
	for delivered < 100 {
		r := <-results
		require.NoError(t, r.err)
		require.LessOrEqual(t, r.msgs, 1)
		delivered += r.msgs
	}
	require.NoError(t, b.Close())
	wg.Wait()
	close(results)
	for r := range results {
		require.Zero(t, r.msgs, "a message delivered twice")
		require.ErrorIs(t, r.err, queen.ErrClosed)
	}
	leakcheck.Check(t, before, nil)
}

// TestLimits_ConsumerThatNeverAcks: a message whose lease always runs out
// comes back forever, one attempt higher each time, never spends the
// retry budget and is never dead-lettered; the partition's later messages
// wait behind it (order), while other partitions keep flowing.
func TestLimits_ConsumerThatNeverAcks(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.LeaseTime, cfg.RetryLimit = 10*time.Second, 2
		_, err := b.ConfigureQueue(bg, "stuck", cfg)
		require.NoError(t, err)
		pushN(t, b, "stuck", "bad", 2)
		for i := 1; i <= 200; i++ {
			got := pop(t, b, queen.PopRequest{Queue: "stuck", Partition: "bad"})
			require.Len(t, got.Messages, 1)
			require.Equal(t, int64(0), got.Messages[0].Offset)
			require.Equal(t, i, got.Messages[0].DeliveryAttempt)
			if i%50 == 0 { // meanwhile another partition is served normally
				pushN(t, b, "stuck", fmt.Sprint("good", i), 1)
				other := pop(t, b, queen.PopRequest{Queue: "stuck", Partition: fmt.Sprint("good", i)})
				require.Len(t, other.Messages, 1)
				ackAll(t, b, other.Messages, queen.AckCompleted)
			}
			clock.Advance(11 * time.Second)
		}
		dl, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "stuck"})
		require.NoError(t, err)
		require.Zero(t, dl.Total)
		// The budget is whole: two failed acks come back, the third dead-letters.
		for i := range 3 {
			got := pop(t, b, queen.PopRequest{Queue: "stuck", Partition: "bad"})
			require.Len(t, got.Messages, 1)
			r := ackAll(t, b, got.Messages, queen.AckFailed)
			require.Equal(t, i == 2, r[0].DeadLettered, "failed ack %d", i+1)
			clock.Advance(2 * time.Second)
		}
	})
}

// TestLimits_LeaseRenewedForever: a lease renewed before it runs out holds
// its partition through any amount of time; nobody else gets it, nothing
// is redelivered, and the holder's ack still counts.
func TestLimits_LeaseRenewedForever(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	pushN(t, b, "hold", "", 3)
	got := pop(t, b, queen.PopRequest{Queue: "hold", Batch: 3, Lease: 30 * time.Second})
	require.Len(t, got.Messages, 3)
	start := clock.Now()
	for i := range 2000 {
		clock.Advance(25 * time.Second)
		until, err := b.RenewLease(bg, got.LeaseID, 30*time.Second)
		require.NoError(t, err, "renewal %d", i)
		require.Equal(t, clock.Now().Add(30*time.Second).UnixMicro(), until.ExpiresAt.UnixMicro())
		if i%200 == 0 {
			require.Empty(t, pop(t, b, queen.PopRequest{Queue: "hold"}).Messages, "leased partition served to another worker")
		}
	}
	t.Logf("lease held for %v of fake time", clock.Now().Sub(start))
	res := ackAll(t, b, got.Messages, queen.AckCompleted)
	require.True(t, res[2].LeaseReleased)
	pushN(t, b, "hold", "", 1)
	next := pop(t, b, queen.PopRequest{Queue: "hold"})
	require.Len(t, next.Messages, 1)
	require.Equal(t, int64(3), next.Messages[0].Offset)
	require.Equal(t, 1, next.Messages[0].DeliveryAttempt)
}

// TestLimits_MessageThatKillsItsHandler documents the fate of a poison
// message whose handler never returns (it kills the process): it comes
// back forever. Within one broker the delivery attempt grows with every
// lease expiry; across restarts attempts are not stored, so each new
// process sees attempt 1 again, and no retry budget is spent. Only an
// explicit decision (ack dlq or park, e.g. by a consumer's policy after a
// handler error) takes it out of the partition.
func TestLimits_MessageThatKillsItsHandler(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	dir := t.TempDir()
	opts := &queen.Options{Clock: clock, Durability: queen.SyncNever, MaintenanceInterval: time.Hour}
	b, err := queen.Open(dir, opts)
	require.NoError(t, err)
	cfg := queen.DefaultQueueConfig()
	cfg.LeaseTime, cfg.RetryLimit = 5*time.Second, 1
	_, err = b.ConfigureQueue(bg, "poison", cfg)
	require.NoError(t, err)
	pushN(t, b, "poison", "", 2)
	for restart := range 5 {
		for attempt := 1; attempt <= 3; attempt++ {
			got := pop(t, b, queen.PopRequest{Queue: "poison"})
			require.Len(t, got.Messages, 1)
			require.Equal(t, int64(0), got.Messages[0].Offset, "restart %d", restart)
			require.Equal(t, attempt, got.Messages[0].DeliveryAttempt, "restart %d: attempts count only within one process", restart)
			clock.Advance(6 * time.Second) // the handler died; the lease runs out
		}
		got := pop(t, b, queen.PopRequest{Queue: "poison"}) // the process dies holding it
		require.Len(t, got.Messages, 1)
		require.NoError(t, b.Close())
		b, err = queen.Open(dir, opts)
		require.NoError(t, err)
	}
	defer b.Close()
	dl, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "poison"})
	require.NoError(t, err)
	require.Zero(t, dl.Total, "nothing dead-letters a message nobody acks")
	got := pop(t, b, queen.PopRequest{Queue: "poison"})
	require.Len(t, got.Messages, 1)
	require.Equal(t, 1, got.Messages[0].DeliveryAttempt)
	r := ackAll(t, b, got.Messages, queen.AckPark)
	require.True(t, r[0].Parked)
	next := pop(t, b, queen.PopRequest{Queue: "poison"})
	require.Len(t, next.Messages, 1)
	require.Equal(t, int64(1), next.Messages[0].Offset, "parking it lets the partition move on")
}

var diskMB = flag.Int("limits.diskmb", 96, "MiB that TestLimits_DiskSpaceGivenBack writes and expires (the long form: 1024)")

// diskUsage is the space dir takes on disk: allocated blocks, not the
// apparent sizes of Badger's preallocated files.
func diskUsage(t *testing.T, dir string) int64 {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return err
	})
	require.NoError(t, err)
	return n
}

// deletedBound is the space left once DeleteQueue returned, the broker
// running: the value log's head file and a little more.
const deletedBound = 64<<20 + 8<<20

// reopenedBound is the space left after a restart, of written bytes.
func reopenedBound(written int64) int64 { return written/8 + 16<<20 }

// shrinkTo waits, polling, until dir takes less than bound on disk (the
// broker's value-log GC runs every 100 ms) and returns what it takes; past
// 30 s it returns what it takes then, for the caller's assertion to report.
func shrinkTo(t *testing.T, dir string, bound int64) int64 {
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := diskUsage(t, dir)
		if n < bound || time.Now().After(deadline) {
			return n
		}
		time.Sleep(100 * time.Millisecond) // poll interval: the condition is the disk usage
	}
}

type diskNumbers struct{ written, retained, peak, end, deleted, closed, reopened int64 }

// writeAndExpire writes mib MiB of incompressible payloads (small ones,
// kept in Badger's LSM tree, and 2 MiB ones, kept in its value log) while
// retention expires them on the fake clock, deletes the queue, closes and
// reopens, measuring the directory at each step.
func writeAndExpire(t *testing.T, mib int) diskNumbers {
	clock := itest.NewClock()
	dir := t.TempDir()
	opts := &queen.Options{Clock: clock, Durability: queen.SyncNever, GCInterval: 100 * time.Millisecond, MaintenanceInterval: time.Hour}
	b, err := queen.Open(dir, opts)
	require.NoError(t, err)
	cfg := queen.DefaultQueueConfig()
	cfg.Retention = 3 * time.Minute
	_, err = b.ConfigureQueue(bg, "disk", cfg)
	require.NoError(t, err)

	rnd := rand.NewChaCha8([32]byte{1})
	payload := func(n int) json.RawMessage {
		raw := make([]byte, n*3/4)
		_, _ = rnd.Read(raw)
		return json.RawMessage(`"` + base64.StdEncoding.EncodeToString(raw) + `"`)
	}
	const chunk = 8 << 20 // per fake minute: one 2 MiB payload and 96 of 64 KiB
	n := diskNumbers{retained: 3 * chunk}
	for n.written < int64(mib)<<20 {
		items := []queen.PushItem{{Queue: "disk", Partition: "big", Payload: payload(2 << 20)}}
		for i := 0; i < 96; i++ {
			items = append(items, queen.PushItem{Queue: "disk", Partition: fmt.Sprint("s", i%4), Payload: payload(64 << 10)})
		}
		_, err := b.Push(bg, items)
		require.NoError(t, err)
		n.written += chunk
		clock.Advance(time.Minute)
		require.NoError(t, b.Maintain(bg))
		n.peak = max(n.peak, diskUsage(t, dir))
	}
	n.end = diskUsage(t, dir)
	existed, err := b.DeleteQueue(bg, "disk")
	require.NoError(t, err)
	require.True(t, existed)
	n.deleted = shrinkTo(t, dir, deletedBound)
	require.NoError(t, b.Close())
	n.closed = diskUsage(t, dir)
	b, err = queen.Open(dir, opts)
	require.NoError(t, err)
	_, err = b.Fetch(bg, "disk", "big", 0, 1)
	require.ErrorIs(t, err, queen.ErrNotFound)
	shrinkTo(t, dir, reopenedBound(n.written)) // value-log GC rounds of the reopened broker
	require.NoError(t, b.Close())
	n.reopened = diskUsage(t, dir)
	t.Logf("wrote %d MiB, ~%d MiB retained at a time: peak %d MiB, at the end %d MiB, after queue delete %d MiB, after close %d MiB, after reopen %d MiB",
		n.written>>20, n.retained>>20, n.peak>>20, n.end>>20, n.deleted>>20, n.closed>>20, n.reopened>>20)
	return n
}

// TestLimits_DiskSpaceGivenBack writes and expires -limits.diskmb MiB (96
// by default; 1024 for the long form) and checks what is given back today:
// a queue delete gives its space back at once (its keys are dropped with
// Badger's DropPrefix, and value-log GC rewrites the full value-log files)
// except the value log's head file, which Badger collects only once it is
// full (up to 64 MiB, the file size Open sets: 32 MiB of the default 96),
// and after a restart almost everything is gone.
// What retention deletes while the broker runs comes back only as Badger
// compacts (under sustained writes) or at the next restart: this test
// measures that (n.end) but does not hold it to a bound.
func TestLimits_DiskSpaceGivenBack(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes tens of MiB")
	}
	if raceEnabled() {
		// Badger v4.9.6's value-log GC reads the memtable's maxVersion
		// (DB.MaxVersion, value.go:189) while writes update it without a
		// lock (memTable.Put): a race inside Badger that this test's GC
		// rounds over a value log of small payloads reach.
		t.Skip("value-log GC races inside Badger v4.9.6 (DB.MaxVersion vs memTable.Put)")
	}
	n := writeAndExpire(t, *diskMB)
	require.Less(t, n.deleted, int64(deletedBound), "space left once DeleteQueue returned, broker running: the value log's head file and a little more")
	require.Less(t, n.closed, n.written/4+16<<20, "space left after the queue was deleted and the broker closed")
	require.Less(t, n.reopened, reopenedBound(n.written), "space left after a restart")
}

// TestLimits_MaxPayload pins the payload limits docs/limits.md
// ("Payload size") states: Broker.PayloadLimit per memory budget in memory
// and on disk, and, in memory, that a payload of exactly that many bytes
// is stored and one byte more is ErrTooLarge. If a figure changes, change
// the table in docs/limits.md with it.
func TestLimits_MaxPayload(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget int64
		want   int
	}{
		{"default budget", 0, 91_750},
		{"16 MiB", 16 << 20, 249_036},
		{"32 MiB", 32 << 20, 563_609},
		{"64 MiB", 64 << 20, queen.MaxInMemoryPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := queentest.NewBroker(t, &queen.Options{MemoryBudget: tc.budget})
			require.Equal(t, tc.want, b.PayloadLimit())
			atLimit := json.RawMessage(`"` + strings.Repeat("x", tc.want-2) + `"`)
			_, err := b.Push(bg, []queen.PushItem{{Queue: "q", Payload: atLimit}})
			require.NoError(t, err)
			_, err = b.Push(bg, []queen.PushItem{{Queue: "q", Payload: append(atLimit, ' ')}})
			require.ErrorIs(t, err, queen.ErrTooLarge)
		})
	}
	require.Equal(t, 983_040, queen.MaxInMemoryPayload)
	require.Equal(t, 67_043_328, queen.MaxPayload)
	t.Run("on disk", func(t *testing.T) {
		t.Parallel()
		b := itest.OpenDir(t, t.TempDir(), nil)
		require.Equal(t, queen.MaxPayload, b.PayloadLimit())
	})
}

// TestLimits_PayloadOverDiskLimit: on disk, a 70 MiB push is ErrTooLarge
// with a short message, not Badger's text followed by a hex dump of the
// payload; and a payload of exactly MaxPayload is
// stored, delivered and dead-lettered (with a long error text).
func TestLimits_PayloadOverDiskLimit(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	b := itest.OpenDir(t, t.TempDir(), &queen.Options{Durability: queen.SyncNever})
	huge := bytes.Repeat([]byte("x"), 70<<20)
	huge[0], huge[len(huge)-1] = '"', '"'
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
