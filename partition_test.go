package queen_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"time"

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
	pushOne(t, b, "q", "p", "a", `1`)
	clock.Advance(5 * time.Second)
	last := clock.Now()
	r := pushOne(t, b, "q", "p", "b", `2`)
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
