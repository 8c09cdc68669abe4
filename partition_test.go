package queen_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"time"

	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestPartition_PushAssignsOffsetsAndDefaults(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		res := pushN(t, b, "orders", "", 3)
		for i, r := range res {
			require.Equal(t, int64(i), r.Offset)
			require.Equal(t, queen.DefaultPartition, r.Partition)
			require.Len(t, r.TransactionID, 36, "a generated UUIDv7")
			require.Len(t, r.MessageID, 36)
			require.Equal(t, res[0].PartitionID, r.PartitionID)
		}
		other := pushN(t, b, "orders", "p2", 2)
		require.Equal(t, int64(0), other[0].Offset, "offsets are per partition")
		require.NotEqual(t, res[0].PartitionID, other[0].PartitionID)

		info, err := b.DescribeQueue(bg, "orders")
		require.NoError(t, err)
		require.Equal(t, 60*1e9, float64(info.Config.LeaseTime), "a push-created queue leases for 60 s")
	})
}

func TestPartition_PushDedupPerPartition(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		first := pushOne(t, b, "q", "a", "tx-1", `1`)
		require.Equal(t, queen.PushQueued, first.Status)
		dup := pushOne(t, b, "q", "a", "tx-1", `2`)
		require.Equal(t, queen.PushDuplicate, dup.Status)
		require.Equal(t, first.MessageID, dup.MessageID)
		require.Equal(t, first.Offset, dup.Offset)
		elsewhere := pushOne(t, b, "q", "b", "tx-1", `3`)
		require.Equal(t, queen.PushQueued, elsewhere.Status, "the same id in another partition is another message")

		// Inside one call the first occurrence wins.
		res, err := b.Push(bg, []queen.PushItem{
			{Queue: "q", Partition: "c", TransactionID: "x", Payload: json.RawMessage(`"first"`)},
			{Queue: "q", Partition: "c", TransactionID: "x", Payload: json.RawMessage(`"second"`)},
		})
		require.NoError(t, err)
		require.Equal(t, queen.PushQueued, res[0].Status)
		require.Equal(t, queen.PushDuplicate, res[1].Status)
		f, err := b.Fetch(bg, "q", "c", 0, 10)
		require.NoError(t, err)
		require.Len(t, f.Records, 1)
		require.Equal(t, `"first"`, string(f.Records[0].Payload))
	})
}

func TestPartition_PayloadIsByteExact(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		payloads := []string{`{"b":2,  "a":1}`, `[1, 2,3]`, `"text"`, `12.50`, `null`, `true`, `{}`, `{"deep":{"x":[{"y":"\u00e9"}]}}`}
		for _, p := range payloads {
			pushOne(t, b, "exact", "", "", p)
		}
		res := pop(t, b, queen.PopRequest{Queue: "exact", Batch: 100})
		require.Len(t, res.Messages, len(payloads))
		for i, m := range res.Messages {
			require.Equal(t, payloads[i], string(m.Payload))
		}
		// An empty payload is stored as null.
		r, err := b.Push(bg, []queen.PushItem{{Queue: "exact", Partition: "empty"}})
		require.NoError(t, err)
		f, err := b.Fetch(bg, "exact", "empty", 0, 1)
		require.NoError(t, err)
		require.Equal(t, "null", string(f.Records[0].Payload))
		require.Equal(t, r[0].TransactionID, f.Records[0].TransactionID)
	})
}

func TestPartition_PushValidation(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	long := strings.Repeat("x", queen.MaxNameLen+1)
	for name, items := range map[string][]queen.PushItem{
		"empty queue":        {{Queue: ""}},
		"long queue":         {{Queue: long}},
		"long partition":     {{Queue: "q", Partition: long}},
		"long transactionId": {{Queue: "q", TransactionID: long}},
		"invalid json":       {{Queue: "q", Payload: json.RawMessage(`{"a":`)}},
		"invalid utf8":       {{Queue: "q\xff"}},
		"nul in name":        {{Queue: "q\x00x"}},
		"second item bad":    {{Queue: "q"}, {Queue: "q", Payload: json.RawMessage(`nope`)}},
	} {
		_, err := b.Push(bg, items)
		require.ErrorIs(t, err, queen.ErrInvalidArgument, name)
		var ae *queen.ArgumentError
		require.True(t, errors.As(err, &ae), name)
		require.NotEmpty(t, ae.Field, name)
	}
	// Nothing of a refused call was written.
	_, err := b.DescribeQueue(bg, "q")
	require.ErrorIs(t, err, queen.ErrNotFound)
	// A name of exactly 255 bytes is fine.
	pushOne(t, b, strings.Repeat("q", queen.MaxNameLen), "", "", `1`)
}

func TestPartition_MaxSizeFailsItems(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	cfg := queen.DefaultQueueConfig()
	cfg.MaxSize = 2
	_, err := b.ConfigureQueue(bg, "small", cfg)
	require.NoError(t, err)
	res, err := b.Push(bg, []queen.PushItem{{Queue: "small"}, {Queue: "small"}, {Queue: "small"}})
	require.NoError(t, err)
	require.Equal(t, queen.PushQueued, res[0].Status)
	require.Equal(t, queen.PushQueued, res[1].Status)
	require.Equal(t, queen.PushFailed, res[2].Status)
	require.ErrorIs(t, res[2].Err, queen.ErrQueueFull)
}

// A duplicate takes no room under MaxSize: in a queue one message short of
// full, a push of a stored message's transactionId (twice) and a new one
// stores the new one; a second new one finds the queue full.
func TestPartition_MaxSizeDuplicatesTakeNoRoom(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	cfg := queen.DefaultQueueConfig()
	cfg.MaxSize = 2
	_, err := b.ConfigureQueue(bg, "small", cfg)
	require.NoError(t, err)
	pushOne(t, b, "small", "", "old", `1`)
	res, err := b.Push(bg, []queen.PushItem{
		{Queue: "small", TransactionID: "old"},
		{Queue: "small", TransactionID: "old"},
		{Queue: "small", TransactionID: "new"},
		{Queue: "small", TransactionID: "new"},
		{Queue: "small", TransactionID: "newer"},
	})
	require.NoError(t, err)
	status := make([]queen.PushStatus, len(res))
	for i, r := range res {
		status[i] = r.Status
	}
	require.Equal(t, []queen.PushStatus{queen.PushDuplicate, queen.PushDuplicate, queen.PushQueued, queen.PushDuplicate, queen.PushFailed}, status)
	require.ErrorIs(t, res[4].Err, queen.ErrQueueFull)
}

func TestPartition_LargePushIsSplitButComplete(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		big := `"` + strings.Repeat("z", 64<<10) + `"`
		items := make([]queen.PushItem, 200) // ~13 MiB: several storage transactions
		for i := range items {
			items[i] = queen.PushItem{Queue: "big", Payload: json.RawMessage(big)}
		}
		res, err := b.Push(bg, items)
		require.NoError(t, err)
		for i, r := range res {
			require.Equal(t, queen.PushQueued, r.Status)
			require.Equal(t, int64(i), r.Offset)
		}
		f, err := b.Fetch(bg, "big", "", 190, 100)
		require.NoError(t, err)
		require.Len(t, f.Records, 10)
		require.Equal(t, big, string(f.Records[9].Payload))
	})
}

func TestPartition_FetchByOffset(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "log", "k", 25)
		f, err := b.Fetch(bg, "log", "k", 0, 10)
		require.NoError(t, err)
		require.Len(t, f.Records, 10)
		require.Equal(t, int64(10), f.NextOffset)
		f, err = b.Fetch(bg, "log", "k", f.NextOffset, 100)
		require.NoError(t, err)
		require.Len(t, f.Records, 15)
		require.Equal(t, int64(10), f.Records[0].Offset)
		require.Equal(t, `{"i":24}`, string(f.Records[14].Payload))
		require.Equal(t, int64(25), f.NextOffset)
		f, err = b.Fetch(bg, "log", "k", 25, 0)
		require.NoError(t, err)
		require.Empty(t, f.Records)
		require.Equal(t, int64(25), f.NextOffset)

		_, err = b.Fetch(bg, "log", "nope", 0, 1)
		require.ErrorIs(t, err, queen.ErrNotFound)
		_, err = b.Fetch(bg, "nope", "k", 0, 1)
		require.ErrorIs(t, err, queen.ErrNotFound)
		_, err = b.Fetch(bg, "log", "k", -1, 1)
		require.ErrorIs(t, err, queen.ErrInvalidArgument)

		// Fetch takes no lease: a pop still gets everything.
		res := pop(t, b, queen.PopRequest{Queue: "log", Partition: "k", Batch: 100})
		require.Len(t, res.Messages, 25)
	})
}

// pushTwoApart pushes "a" and, 5 s later on clock, "b" to partition p of
// queue q, and returns b's push time and result.
func pushTwoApart(t *testing.T, b *queen.Broker, clock *queentest.Clock) (time.Time, queen.PushResult) {
	t.Helper()
	pushOne(t, b, "q", "p", "a", `1`)
	clock.Advance(5 * time.Second)
	return clock.Now(), pushOne(t, b, "q", "p", "b", `2`)
}

// TestPartition_LastPushAtSurvivesDeletingTheNewestMessage: a partition's
// LastPushAt (which its WindowBuffer counts from) is the time of its newest
// push, also after that message is deleted, and a restart does not change
// it: Open does not rebuild it from the newest stored message.
func TestPartition_LastPushAtSurvivesDeletingTheNewestMessage(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	dir := t.TempDir()
	opts := &queen.Options{Clock: clock}
	b := itest.OpenDir(t, dir, opts)
	last, r := pushTwoApart(t, b, clock)
	clock.Advance(5 * time.Second)
	require.NoError(t, b.DeleteMessage(bg, r.PartitionID, "b"))
	lastPush := func() time.Time {
		qs, err := b.QueueStats(bg, "q")
		require.NoError(t, err)
		return qs.Partitions[0].LastPushAt
	}
	require.True(t, lastPush().Equal(last), "live: %v, pushed at %v", lastPush(), last)
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, opts)
	require.True(t, lastPush().Equal(last), "reopened: %v, pushed at %v", lastPush(), last)
}

// TestPartition_LastPushAtSurvivesRestartThenDeletingTheNewestMessage: a
// partition's LastPushAt stays the time of its newest push when that
// message is deleted after a restart, before anything asked for the time
// (Open does not read it), and across the restart after that; a page of
// ListPartitions says the same.
func TestPartition_LastPushAtSurvivesRestartThenDeletingTheNewestMessage(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	dir := t.TempDir()
	opts := &queen.Options{Clock: clock}
	b := itest.OpenDir(t, dir, opts)
	last, r := pushTwoApart(t, b, clock)
	require.NoError(t, b.Close())
	clock.Advance(5 * time.Second)
	b = itest.OpenDir(t, dir, opts)
	require.NoError(t, b.DeleteMessage(bg, r.PartitionID, "b"))
	require.NoError(t, b.Close())
	b = itest.OpenDir(t, dir, opts)
	qs, err := b.QueueStats(bg, "q")
	require.NoError(t, err)
	require.True(t, qs.Partitions[0].LastPushAt.Equal(last), "QueueStats: %v, pushed at %v", qs.Partitions[0].LastPushAt, last)
	page, err := b.ListPartitions(bg, "q", queen.PartitionFilter{})
	require.NoError(t, err)
	require.True(t, page.Partitions[0].LastPushAt.Equal(last), "ListPartitions: %v, pushed at %v", page.Partitions[0].LastPushAt, last)
}

// TestPartition_OrderUnderConcurrentChaos runs 8 workers of one group
// over 100 partitions while producers push, with random completed, failed,
// retry and abandoned batches (left to expire on the fake clock), and checks
// every delivery against a model of the cursor rule: each batch of a
// partition starts exactly at the lowest unsettled offset, is contiguous,
// nothing settled comes back, and attempts count every delivery.
func TestPartition_OrderUnderConcurrentChaos(t *testing.T) {
	t.Parallel()
	const (
		partitions = 100
		perPart    = 20
		workers    = 8
	)
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.RetryLimit, cfg.RetryDelay, cfg.LeaseTime = 1<<30, 0, 30*time.Second
		_, err := b.ConfigureQueue(bg, "chaos", cfg)
		require.NoError(t, err)

		var model struct {
			sync.Mutex
			cursor     map[string]int64         // partition → lowest unsettled offset
			deliveries map[string]map[int64]int // partition → offset → times delivered
			errs       []string
		}
		model.cursor = map[string]int64{}
		model.deliveries = map[string]map[int64]int{}
		for p := 0; p < partitions; p++ {
			model.deliveries[fmt.Sprint("p", p)] = map[int64]int{}
		}
		fail := func(format string, args ...any) {
			if len(model.errs) < 20 {
				model.errs = append(model.errs, fmt.Sprintf(format, args...))
			}
		}

		var pushers sync.WaitGroup
		for w := 0; w < 4; w++ {
			pushers.Add(1)
			go func() {
				defer pushers.Done()
				for i := 0; i < perPart; i++ {
					for p := w; p < partitions; p += 4 {
						_, err := b.Push(bg, []queen.PushItem{{Queue: "chaos", Partition: fmt.Sprint("p", p), Payload: []byte(fmt.Sprint(i))}})
						if err != nil {
							panic(err)
						}
					}
				}
			}()
		}

		var settled atomic.Int64
		done := make(chan struct{})
		var workersWG sync.WaitGroup
		for w := 0; w < workers; w++ {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			workersWG.Add(1)
			go func() {
				defer workersWG.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					res, err := b.Pop(bg, queen.PopRequest{Queue: "chaos", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 1 + rng.IntN(5), Partitions: 1 + rng.IntN(2)})
					if err != nil {
						panic(err)
					}
					if len(res.Messages) == 0 {
						time.Sleep(time.Millisecond)
						continue
					}
					byPart := map[string][]*queen.Message{}
					var order []string
					for _, m := range res.Messages {
						if byPart[m.Partition] == nil {
							order = append(order, m.Partition)
						}
						byPart[m.Partition] = append(byPart[m.Partition], m)
					}
					for _, part := range order {
						msgs := byPart[part]
						model.Lock()
						if msgs[0].Offset != model.cursor[part] {
							fail("%s: batch starts at %d, cursor is %d", part, msgs[0].Offset, model.cursor[part])
						}
						for i, m := range msgs {
							if m.Offset != msgs[0].Offset+int64(i) {
								fail("%s: batch not contiguous: %v", part, offsets(msgs))
							}
							model.deliveries[part][m.Offset]++
							if m.DeliveryAttempt != model.deliveries[part][m.Offset] {
								fail("%s@%d: attempt %d, delivered %d times", part, m.Offset, m.DeliveryAttempt, model.deliveries[part][m.Offset])
							}
						}
						if rng.IntN(20) == 0 { // abandon: the lease will expire
							model.Unlock()
							continue
						}
						items := ackItems(msgs, queen.AckCompleted)
						firstBack := len(items)
						for i := range items {
							switch r := rng.IntN(100); {
							case r < 8:
								items[i].Status = queen.AckFailed
							case r < 15:
								items[i].Status = queen.AckRetry
							}
							if items[i].Status != queen.AckCompleted && i < firstBack {
								firstBack = i
							}
						}
						results, err := b.AckBatch(bg, items)
						if err != nil {
							panic(err)
						}
						if results[0].Success {
							model.cursor[part] = msgs[0].Offset + int64(firstBack)
							settled.Add(int64(firstBack))
						} else if results[0].Err != queen.ErrLeaseExpired {
							fail("%s: unexpected refusal %v", part, results[0].Err)
						}
						model.Unlock()
					}
				}
			}()
		}
		// The clock moves now and then, expiring abandoned (and some slow) leases.
		deadline := time.Now().Add(60 * time.Second)
		for settled.Load() < partitions*perPart && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
			clock.Advance(3 * time.Second)
		}
		close(done)
		workersWG.Wait()
		pushers.Wait()
		model.Lock()
		defer model.Unlock()
		require.Empty(t, model.errs)
		require.Equal(t, int64(partitions*perPart), settled.Load(), "every message settled")
		for p := 0; p < partitions; p++ {
			require.Equal(t, int64(perPart), model.cursor[fmt.Sprint("p", p)])
		}
		require.Empty(t, pop(t, b, queen.PopRequest{Queue: "chaos", Group: "g", Partitions: 64, Batch: 1000}).Messages)
	})
}
