package queen_test

import (
	"testing"
	"time"

	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestBroker_ReopenKeepsState(t *testing.T) {
	t.Parallel()
	for _, d := range []queen.Durability{queen.SyncEveryCommit, queen.SyncNever} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := &queen.Options{Durability: d}
			b := itest.OpenDir(t, dir, opts)
			pushN(t, b, "q", "a", 5)
			pushOne(t, b, "q", "b", "dedup-me", `1`)
			// A "new" group joins after five messages; an "all" group reads three.
			require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "late", Partition: "a"}).Messages)
			pr := pop(t, b, queen.PopRequest{Queue: "q", Group: "early", SubscriptionMode: queen.SubscriptionModeAll, Partition: "a", Batch: 3})
			items := ackItems(pr.Messages, queen.AckCompleted)
			items[2].Status = queen.AckDLQ
			ack(t, b, items...)
			// A failed ack spends budget; a live lease is held at close.
			pr = pop(t, b, queen.PopRequest{Queue: "q", Group: "early", Partition: "a"})
			ackAll(t, b, pr.Messages, queen.AckFailed)
			held := pop(t, b, queen.PopRequest{Queue: "q", Partition: "b"})
			require.Len(t, held.Messages, 1)
			require.NoError(t, b.Close())

			b = itest.OpenDir(t, dir, opts)
			res := pushN(t, b, "q", "a", 1)
			require.Equal(t, int64(5), res[0].Offset, "offsets continue")
			require.Equal(t, queen.PushDuplicate, pushOne(t, b, "q", "b", "dedup-me", `2`).Status, "dedup survives")
			late := pop(t, b, queen.PopRequest{Queue: "q", Group: "late", Partition: "a", Batch: 10})
			require.Equal(t, []int64{5}, offsets(late.Messages), "the new group's start point survives")
			st, err := b.QueueStats(bg, "q")
			require.NoError(t, err)
			var early queen.CursorStats
			for _, p := range st.Partitions {
				for _, c := range p.Cursors {
					if p.Name == "a" && c.Group == "early" {
						early = c
					}
				}
			}
			require.Equal(t, int64(3), early.Offset, "the cursor survives")
			require.Equal(t, 1, early.Retries, "the retry counter survives")
			require.Equal(t, int64(1), st.DeadLetters)
			page, err := b.DeadLetters(bg, queen.LetterFilter{})
			require.NoError(t, err)
			require.Equal(t, `{"i":2}`, string(page.Letters[0].Payload))
			// Leases do not survive: the held message is delivered again at once.
			again := pop(t, b, queen.PopRequest{Queue: "q", Partition: "b"})
			require.Len(t, again.Messages, 1)
			require.Equal(t, held.Messages[0].TransactionID, again.Messages[0].TransactionID)
			_, err = b.RenewLease(bg, held.LeaseID, time.Minute)
			require.ErrorIs(t, err, queen.ErrNotFound)
		})
	}
}

func TestBroker_OpenValidation(t *testing.T) {
	t.Parallel()
	_, err := queen.Open("", nil)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = queen.Open("somewhere", &queen.Options{InMemory: true})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = queen.Open("", &queen.Options{InMemory: true, Durability: 9})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = queen.OpenDB(nil, nil)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	// The directory is released by Close and opens again at once.
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		b, err := queen.Open(dir, nil)
		require.NoError(t, err)
		require.NoError(t, b.Close())
	}
}

func TestBroker_Ping(t *testing.T) {
	t.Parallel()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	require.NoError(t, err)
	require.NoError(t, b.Ping(bg))
	require.NoError(t, b.Close())
	require.ErrorIs(t, b.Ping(bg), queen.ErrClosed)
}

func TestBroker_OffsetsNeverReusedAfterDeletes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	res := pushN(t, b, "q", "", 5)
	require.NoError(t, b.DeleteMessage(bg, res[4].PartitionID, res[4].TransactionID)) // the newest
	require.NoError(t, b.DeleteMessage(bg, res[1].PartitionID, res[1].TransactionID)) // one in the middle
	require.NoError(t, b.Close())

	b = itest.OpenDir(t, dir, nil)
	st, err := b.QueueStats(bg, "q")
	require.NoError(t, err)
	require.Equal(t, int64(3), st.Messages, "deleted messages are not counted after a restart")
	require.Equal(t, int64(5), pushN(t, b, "q", "", 1)[0].Offset, "the deleted newest offset is not handed out again")
}

// TestOptions_MemoryBudgetValidation: a budget below the documented
// minimum, negative, or above the maximum is refused by Open (and
// BadgerOptions) with an ArgumentError naming the field; the bounds
// themselves open.
func TestOptions_MemoryBudgetValidation(t *testing.T) {
	t.Parallel()
	for _, mb := range []int64{-1, 1, queen.MinMemoryBudget - 1, queen.MaxMemoryBudget + 1} {
		_, err := queen.Open("", &queen.Options{InMemory: true, MemoryBudget: mb})
		var ae *queen.ArgumentError
		require.True(t, errors.As(err, &ae), "budget %d: %v", mb, err)
		require.Equal(t, "Options.MemoryBudget", ae.Field)
		require.Contains(t, ae.Reason, "8 MiB", "budget %d: the reason names the bounds", mb)
		_, err = queen.BadgerOptions(t.TempDir(), &queen.Options{MemoryBudget: mb})
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
	}
	b, err := queen.Open("", &queen.Options{InMemory: true, MemoryBudget: queen.MinMemoryBudget})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	_, err = queen.BadgerOptions(t.TempDir(), &queen.Options{MemoryBudget: queen.MaxMemoryBudget})
	require.NoError(t, err)
}

// TestBadgerOptions_SizedFromBudget: the memtables Badger may hold at once
// (NumMemtables+2 arenas of 1.3 × MemTableSize each) stay within half the
// budget, grow with it, and the defaults are the documented ones; on disk
// values of 128 B or more go to the value log at every budget.
func TestBadgerOptions_SizedFromBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var lastMT int64
	for _, mb := range []int64{8, 16, 32, 64, 100, 128, 256, 512, 1024, 4096} {
		budget := mb << 20
		o, err := queen.BadgerOptions(dir, &queen.Options{MemoryBudget: budget})
		require.NoError(t, err)
		arenas := int64(o.NumMemtables+2) * (o.MemTableSize + 2*(15*o.MemTableSize/100))
		require.LessOrEqual(t, arenas, budget/2, "budget %d MiB: memtables %d × %d", mb, o.NumMemtables, o.MemTableSize)
		require.GreaterOrEqual(t, o.MemTableSize, lastMT, "budget %d MiB", mb)
		require.LessOrEqual(t, o.ValueThreshold, 15*o.MemTableSize/100/2, "budget %d MiB: an inline value fits in half a batch", mb)
		require.Equal(t, 1, o.TableSizeMultiplier, "budget %d MiB: tables of one size at every level", mb)
		require.Equal(t, min(max(o.MemTableSize/8, 256<<10), 2<<20), o.BaseTableSize, "budget %d MiB", mb)
		lastMT = o.MemTableSize
	}
	def, err := queen.BadgerOptions(dir, nil)
	require.NoError(t, err)
	at, err := queen.BadgerOptions(dir, &queen.Options{MemoryBudget: queen.DefaultMemoryBudget})
	require.NoError(t, err)
	require.Equal(t, at.MemTableSize, def.MemTableSize)
	require.Equal(t, int64(8<<20), def.MemTableSize)
	require.Equal(t, int64(1<<20), def.BaseTableSize, "tables of 1 MiB at the default budget")
	require.Equal(t, int64(128), def.ValueThreshold, "on disk a message record of 128 B or more goes to the value log")
	mem, err := queen.BadgerOptions("", &queen.Options{InMemory: true})
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), mem.MemTableSize, "in memory the default budget is DefaultInMemoryBudget")
	big, err := queen.BadgerOptions(dir, &queen.Options{MemoryBudget: 1 << 30})
	require.NoError(t, err)
	require.Equal(t, int64(64<<20), big.MemTableSize, "1 GiB: Badger's default memtables")
	require.Equal(t, 4, big.NumMemtables)
	require.Equal(t, int64(128), big.ValueThreshold, "on disk whatever the budget")
}

// TestMemoryBudget_SmallestBudgetStoresLargeWrites: at the smallest
// budget a storage transaction holds about 60 KiB, so a push of 2 MiB in
// one call, a transaction near its limit and payloads over the value
// threshold (in Badger's value log on disk) are split or placed as the
// derived limits say, and all come back.
func TestMemoryBudget_SmallestBudgetStoresLargeWrites(t *testing.T) {
	t.Parallel()
	for _, disk := range []bool{false, true} {
		t.Run(fmt.Sprintf("disk=%v", disk), func(t *testing.T) {
			t.Parallel()
			opts := &queen.Options{MemoryBudget: queen.MinMemoryBudget, Durability: queen.SyncNever}
			var b *queen.Broker
			if disk {
				b = itest.OpenDir(t, t.TempDir(), opts)
			} else {
				b = queentest.NewBroker(t, opts)
			}
			payload := json.RawMessage(`"` + strings.Repeat("p", 1022) + `"`)
			items := make([]queen.PushItem, 2048)
			for i := range items {
				items[i] = queen.PushItem{Queue: "big", Partition: fmt.Sprintf("p%d", i%4), Payload: payload}
			}
			res, err := b.Push(bg, items)
			require.NoError(t, err)
			for i := range res {
				require.Equal(t, queen.PushQueued, res[i].Status, "item %d: %v", i, res[i].Err)
			}
			// Over the value threshold on disk (into the value log), and
			// the largest payload in memory.
			large := min(b.PayloadLimit(), 100<<10)
			big := json.RawMessage(`"` + strings.Repeat("L", large-2) + `"`)
			_, err = b.Transaction().Push(queen.PushItem{Queue: "large", Payload: big}).Commit(bg)
			require.NoError(t, err)

			got := 0
			for got < len(items) {
				pr := pop(t, b, queen.PopRequest{Queue: "big", Batch: 500})
				require.NotEmpty(t, pr.Messages)
				for _, m := range pr.Messages {
					require.JSONEq(t, string(payload), string(m.Payload))
				}
				ack(t, b, ackItems(pr.Messages, queen.AckCompleted)...)
				got += len(pr.Messages)
			}
			pr := pop(t, b, queen.PopRequest{Queue: "large"})
			require.Len(t, pr.Messages, 1)
			require.Equal(t, string(big), string(pr.Messages[0].Payload))
		})
	}
}

// BenchmarkBroker_InMemoryOpen opens 100 in-memory brokers with the
// default options side by side and reports the Go heap they hold
// (heap-MiB/100brokers, after a collection): what a test suite that opens
// a broker per test pays. The bound is 300 MiB.
//
//	go test -run '^$' -bench InMemoryOpen -benchtime 3x .
func BenchmarkBroker_InMemoryOpen(b *testing.B) {
	const n = 100
	var perRun float64
	for range b.N {
		before := liveHeap()
		brokers := make([]*queen.Broker, 0, n)
		for range n {
			br, err := queen.Open("", &queen.Options{InMemory: true})
			if err != nil {
				b.Fatal(err)
			}
			brokers = append(brokers, br)
		}
		perRun = float64(liveHeap()-before) / (1 << 20)
		for _, br := range brokers {
			if err := br.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(perRun, "heap-MiB/100brokers")
}

// liveHeap is the live Go heap after two full collections, bytes.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
