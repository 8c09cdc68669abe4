package queen

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/stretchr/testify/require"
)

func TestHoleSet_RunsMergeTrimAndCount(t *testing.T) {
	t.Parallel()
	q := &queue{}
	p := &partition{q: q, first: 0, next: 20}
	for _, off := range []int64{5, 3, 4, 10, 12, 11, 15} {
		require.True(t, p.addHole(off))
	}
	require.False(t, p.addHole(4), "a hole is recorded once")
	require.Equal(t, []holeRun{{3, 6}, {10, 13}, {15, 16}}, p.holeSet().runs)
	require.Equal(t, int64(7), p.holes())
	require.Equal(t, []int64{3, 6, 10, 13, 15, 16}, p.holeRunsMeta())

	require.Equal(t, int64(2), p.skipHoles(2))
	require.Equal(t, int64(6), p.skipHoles(3))
	require.Equal(t, int64(6), p.skipHoles(5))
	require.Equal(t, int64(16), p.skipHoles(15))

	require.Equal(t, int64(13), p.storedFrom(0))
	require.Equal(t, int64(10), p.storedFrom(4)) // 6..9, 13, 14, 16..19
	require.Equal(t, int64(4), p.storedFrom(16))
	require.Equal(t, int64(4), p.storedBetween(6, 13))

	end, n := p.span(0, 4)
	require.Equal(t, []int64{7, 4}, []int64{end, n}, "0,1,2 then 6: over the run 3..5")
	end, n = p.span(6, 4)
	require.Equal(t, []int64{10, 4}, []int64{end, n})
	end, n = p.span(6, 5)
	require.Equal(t, []int64{14, 5}, []int64{end, n})
	end, n = p.span(16, 10)
	require.Equal(t, []int64{20, 4}, []int64{end, n}, "capped at next")

	require.Equal(t, int64(19), p.lastStoredBefore(20))
	require.Equal(t, int64(14), p.lastStoredBefore(16))
	require.Equal(t, int64(9), p.lastStoredBefore(13))

	p.trimHoles(4)
	require.Equal(t, []holeRun{{4, 6}, {10, 13}, {15, 16}}, p.holeSet().runs)
	require.Equal(t, int64(6), p.holes())
	p.trimHoles(14)
	require.Equal(t, []holeRun{{15, 16}}, p.holeSet().runs)
	require.Equal(t, int64(1), p.holes())
	p.trimHoles(16)
	require.Nil(t, p.holeSet())
	require.Nil(t, q.holes[p], "a partition without holes has no entry")
}

// A message missing from storage that no hole records (as when a delete
// lands between a claim and its read) is stepped over too: a waiting pop
// delivers the next message instead of looking again forever.
func TestHoles_UnrecordedMissingMessageIsSteppedOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	for _, tx := range []string{"a", "b", "c"} {
		_, err := b.Push(ctx, []PushItem{{Queue: "q", TransactionID: tx}})
		require.NoError(t, err)
	}
	b.mu.Lock()
	pid := b.queues["q"].parts[DefaultPartition].pid
	b.mu.Unlock()
	require.NoError(t, b.db.Update(func(txn *badger.Txn) error {
		if err := txn.Delete(keys.MessageKey(pid, 0)); err != nil {
			return err
		}
		return txn.Delete(keys.MessageKey(pid, 1))
	}))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := b.Pop(wctx, PopRequest{Queue: "q", Wait: true, Timeout: 5 * time.Second})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	require.Equal(t, "c", res.Messages[0].TransactionID)
	st, err := b.QueueStats(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Partitions[0].Cursors[0].Offset, "the cursor stepped over 0 and 1")
}

// Partition metadata written before hole runs were stored (a count only)
// is repaired from the message keys when the broker opens.
func TestHoles_CountOnlyMetadataIsRepairedAtOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	var pid string
	for i := 0; i < 6; i++ {
		r, err := b.Push(ctx, []PushItem{{Queue: "q", TransactionID: fmt.Sprint("t", i)}})
		require.NoError(t, err)
		pid = r[0].PartitionID
	}
	for _, tx := range []string{"t1", "t2", "t4"} {
		require.NoError(t, b.DeleteMessage(ctx, pid, tx))
	}
	b.mu.Lock()
	p := b.queues["q"].parts[DefaultPartition]
	key := keys.PartitionKey(p.pid)
	b.mu.Unlock()
	require.NoError(t, b.Close())

	// Drop the runs from the stored metadata, keeping the count, in the
	// JSON form older versions wrote.
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	require.NoError(t, err)
	require.NoError(t, db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		var m partitionMeta
		if err := item.Value(func(v []byte) error { return record.DecodePartition(v, &m) }); err != nil {
			return err
		}
		require.NotEmpty(t, m.HoleRuns)
		m.HoleRuns = nil
		v, _ := json.Marshal(m) // as stores before 0.2.0 hold it
		return txn.Set(key, v)
	}))
	require.NoError(t, db.Close())

	b, err = Open(dir, &Options{Durability: SyncNever})
	require.NoError(t, err)
	defer b.Close()
	b.mu.Lock()
	runs := append([]holeRun(nil), b.queues["q"].parts[DefaultPartition].holeSet().runs...)
	b.mu.Unlock()
	require.Equal(t, []holeRun{{1, 3}, {4, 5}}, runs)
	res, err := b.Pop(ctx, PopRequest{Queue: "q", Batch: 2})
	require.NoError(t, err)
	require.Equal(t, int64(0), res.Messages[0].Offset)
	require.Equal(t, int64(3), res.Messages[1].Offset)
}

// Retention that moves a partition's first offset past deleted messages
// forgets their holes, in memory and in the stored metadata: the records
// of deleted messages do not pile up below the start.
func TestHoles_RetentionTrimsThoseBelowFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &stepClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	b, err := Open("", &Options{InMemory: true, Clock: clock})
	require.NoError(t, err)
	defer b.Close()
	cfg := DefaultQueueConfig()
	cfg.Retention = time.Hour
	_, err = b.ConfigureQueue(ctx, "r", cfg)
	require.NoError(t, err)
	push := func(txids ...string) string {
		var pid string
		for _, tx := range txids {
			res, err := b.Push(ctx, []PushItem{{Queue: "r", TransactionID: tx, Payload: []byte(`1`)}})
			require.NoError(t, err)
			require.Equal(t, PushQueued, res[0].Status)
			pid = res[0].PartitionID
		}
		return pid
	}
	pid := push("t0", "t1", "t2", "t3") // old: offsets 0..3
	clock.Advance(2 * time.Hour)
	push("t4", "t5", "t6") // new: offsets 4..6
	for _, tx := range []string{"t1", "t2", "t5"} {
		require.NoError(t, b.DeleteMessage(ctx, pid, tx))
	}
	b.mu.Lock()
	p := b.queues["r"].parts[DefaultPartition]
	b.mu.Unlock()
	holes := func() (first int64, runs []holeRun, n int64) { // copied under b.mu, checked outside it
		b.mu.Lock()
		defer b.mu.Unlock()
		if hs := p.holeSet(); hs != nil {
			runs, n = append(runs, hs.runs...), hs.n
		}
		return p.first, runs, n
	}
	_, runs, _ := holes()
	require.Equal(t, []holeRun{{1, 3}, {5, 6}}, runs)

	require.NoError(t, b.Maintain(ctx)) // deletes 0 and 3, the old ones left

	first, runs, n := holes()
	require.Equal(t, int64(4), first)
	require.Equal(t, []holeRun{{5, 6}}, runs, "the holes below first are forgotten")
	require.Equal(t, int64(1), n)
	m := storedPartition(t, b, p.pid)
	require.Equal(t, int64(4), m.First)
	require.Equal(t, int64(1), m.Holes, "stored metadata counts only the holes at or after first")
	require.Equal(t, []int64{5, 6}, m.HoleRuns)
	st, err := b.QueueStats(ctx, "r")
	require.NoError(t, err)
	for _, ps := range st.Partitions {
		if ps.Name == DefaultPartition {
			require.Equal(t, int64(2), ps.Messages) // 4 and 6
		}
	}

	// Retention past every hole leaves none.
	clock.Advance(2 * time.Hour)
	require.NoError(t, b.Maintain(ctx))
	first, runs, n = holes()
	require.Equal(t, int64(7), first)
	require.Empty(t, runs)
	require.Zero(t, n)
	m = storedPartition(t, b, p.pid)
	require.Zero(t, m.Holes)
	require.Empty(t, m.HoleRuns)
}

// storedBetween counts the stored messages of [from, end) only, also
// where a run of deleted offsets crosses end or from.
func TestHoles_StoredBetweenClipsToTheRange(t *testing.T) {
	t.Parallel()
	p := &partition{q: &queue{}, first: 0, next: 20}
	for off := int64(10); off < 13; off++ {
		require.True(t, p.addHole(off))
	}
	require.Equal(t, int64(4), p.storedBetween(6, 12), "6..9: the run 10..12 is cut at 12")
	require.Equal(t, int64(2), p.storedBetween(11, 15), "13, 14: the run is cut at 11")
	require.Equal(t, int64(0), p.storedBetween(10, 13))
	require.Equal(t, int64(7), p.storedBetween(6, 16))
}
