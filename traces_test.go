package queen_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestBroker_RecordTrace(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		ctx := context.Background()
		m := msgPush(t, b, "traced", "p", "t1")
		ev, err := b.RecordTrace(ctx, queen.TraceEvent{PartitionID: m.PartitionID, TransactionID: "t1", Data: json.RawMessage(`{"step":1}`), Names: []string{"order-7"}})
		require.NoError(t, err)
		require.NotEmpty(t, ev.ID)
		require.Equal(t, queen.QueueModeGroup, ev.ConsumerGroup)
		require.Equal(t, "info", ev.EventType)
		require.Equal(t, "traced", ev.Queue)
		require.Equal(t, "p", ev.Partition)
		_, err = b.RecordTrace(ctx, queen.TraceEvent{PartitionID: m.PartitionID, TransactionID: "t1", ConsumerGroup: "g", EventType: "error", Data: json.RawMessage(`"x"`)})
		require.NoError(t, err)

		got, err := b.Traces(ctx, m.PartitionID, "t1")
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, ev.ID, got[0].ID)
		require.JSONEq(t, `{"step":1}`, string(got[0].Data))
		require.Equal(t, []string{"order-7"}, got[0].Names)
		require.Equal(t, "g", got[1].ConsumerGroup)
		require.Equal(t, "error", got[1].EventType)
		require.Equal(t, "traced", got[1].Queue)

		none, err := b.Traces(ctx, m.PartitionID, "other")
		require.NoError(t, err)
		require.Empty(t, none)
		none, err = b.Traces(ctx, "junk", "t1")
		require.NoError(t, err)
		require.Empty(t, none)
	})
}

func TestBroker_RecordTraceRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	m := msgPush(t, b, "q", "", "t1")
	_, err := b.RecordTrace(ctx, queen.TraceEvent{PartitionID: m.PartitionID, TransactionID: "missing"})
	require.ErrorIs(t, err, queen.ErrNotFound)
	_, err = b.RecordTrace(ctx, queen.TraceEvent{TransactionID: "t1"})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = b.RecordTrace(ctx, queen.TraceEvent{PartitionID: m.PartitionID, TransactionID: "t1", Data: json.RawMessage(`{`)})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = b.RecordTrace(ctx, queen.TraceEvent{PartitionID: m.PartitionID, TransactionID: "t1", Names: []string{""}})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

func TestBroker_TracesByName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	a := msgPush(t, b, "a", "", "ta")
	c := msgPush(t, b, "c", "", "tc")
	rec := func(m queen.PushResult, txid string, names ...string) {
		t.Helper()
		_, err := b.RecordTrace(ctx, queen.TraceEvent{PartitionID: m.PartitionID, TransactionID: txid, Names: names, Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		clock.Advance(time.Millisecond)
	}
	rec(a, "ta", "flow-1")
	rec(c, "tc", "flow-1", "flow-2")
	rec(a, "ta", "flow-1")
	rec(a, "ta")

	page, err := b.TracesByName(ctx, "flow-1", 0, 0)
	require.NoError(t, err)
	require.Equal(t, 3, page.Total)
	require.Len(t, page.Traces, 3)
	require.Equal(t, "ta", page.Traces[0].TransactionID)
	require.Equal(t, "tc", page.Traces[1].TransactionID)
	require.Equal(t, "c", page.Traces[1].Queue)
	require.JSONEq(t, `{"tx":"tc"}`, string(page.Traces[1].MessagePayload))

	page, err = b.TracesByName(ctx, "flow-1", 1, 1)
	require.NoError(t, err)
	require.Equal(t, 3, page.Total)
	require.Len(t, page.Traces, 1)
	require.Equal(t, "tc", page.Traces[0].TransactionID)

	names, err := b.TraceNames(ctx, 0, 0)
	require.NoError(t, err)
	require.Equal(t, 2, names.Total)
	require.Equal(t, "flow-1", names.Names[0].Name)
	require.Equal(t, 3, names.Names[0].Events)
	require.Equal(t, 2, names.Names[0].Messages)
	require.Equal(t, "flow-2", names.Names[1].Name)
	require.Equal(t, 1, names.Names[1].Events)

	// Deleting a queue deletes its traces.
	_, err = b.DeleteQueue(ctx, "c")
	require.NoError(t, err)
	names, err = b.TraceNames(ctx, 0, 0)
	require.NoError(t, err)
	require.Equal(t, 1, names.Total)
	require.Equal(t, 2, names.Names[0].Events)

	_, err = b.TracesByName(ctx, "x", -1, 0)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = b.TraceNames(ctx, 0, -1)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

// TestTraces_RetentionDeletesThem: the messages retention deletes
// lose their traces, so a later message with the same transactionId
// starts with none: it does not inherit the old one's.
func TestTraces_RetentionDeletesThem(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.Retention = time.Hour
		_, err := b.ConfigureQueue(bg, "q", cfg)
		require.NoError(t, err)
		r := pushOne(t, b, "q", "", "a", `1`)
		pushOne(t, b, "q", "", "b", `2`)
		for _, tx := range []string{"a", "b"} {
			_, err = b.RecordTrace(bg, queen.TraceEvent{PartitionID: r.PartitionID, TransactionID: tx, Names: []string{"flow"}})
			require.NoError(t, err)
		}
		clock.Advance(2 * time.Hour)
		require.NoError(t, b.Maintain(bg))
		st, err := b.QueueStats(bg, "q")
		require.NoError(t, err)
		require.Zero(t, st.Messages)
		names, err := b.TraceNames(bg, 10, 0)
		require.NoError(t, err)
		require.Empty(t, names.Names)

		again := pushOne(t, b, "q", "", "a", `3`)
		require.Equal(t, queen.PushQueued, again.Status)
		trs, err := b.Traces(bg, r.PartitionID, "a")
		require.NoError(t, err)
		require.Empty(t, trs)
	})
}

// TestTraces_NotRecordedOnARemovedMessage: a trace cannot be recorded
// against a message retention or DeleteMessage removed.
func TestTraces_NotRecordedOnARemovedMessage(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	cfg := queen.DefaultQueueConfig()
	cfg.Retention = time.Hour
	_, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	r := pushOne(t, b, "q", "", "a", `1`)
	pushOne(t, b, "q", "", "b", `1`)
	require.NoError(t, b.DeleteMessage(bg, r.PartitionID, "b"))
	_, err = b.RecordTrace(bg, queen.TraceEvent{PartitionID: r.PartitionID, TransactionID: "b"})
	require.ErrorIs(t, err, queen.ErrNotFound)
	clock.Advance(2 * time.Hour)
	require.NoError(t, b.Maintain(bg))
	_, err = b.RecordTrace(bg, queen.TraceEvent{PartitionID: r.PartitionID, TransactionID: "a"})
	require.ErrorIs(t, err, queen.ErrNotFound)
}
