package queen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

// pushN pushes n messages {"i":k} to queue/partition and returns their results.
func pushN(t testing.TB, b *queen.Broker, queue, partition string, n int) []queen.PushResult {
	t.Helper()
	items := make([]queen.PushItem, n)
	for i := range items {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	res, err := b.Push(bg, items)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, queen.PushQueued, r.Status, "%v", r.Err)
	}
	return res
}

func pushOne(t testing.TB, b *queen.Broker, queue, partition, txid, payload string) queen.PushResult {
	t.Helper()
	res, err := b.Push(bg, []queen.PushItem{{Queue: queue, Partition: partition, TransactionID: txid, Payload: json.RawMessage(payload)}})
	require.NoError(t, err)
	return res[0]
}

// configureWith creates queue with the default configuration changed by set.
func configureWith(t testing.TB, b *queen.Broker, queue string, set func(*queen.QueueConfig)) {
	t.Helper()
	cfg := queen.DefaultQueueConfig()
	set(&cfg)
	_, err := b.ConfigureQueue(bg, queue, cfg)
	require.NoError(t, err)
}

func pop(t testing.TB, b *queen.Broker, req queen.PopRequest) *queen.PopResult {
	t.Helper()
	res, err := b.Pop(bg, req)
	require.NoError(t, err)
	return res
}

// ackItems builds ack items for msgs, all with status st.
func ackItems(msgs []*queen.Message, st queen.AckStatus) []queen.AckItem {
	items := make([]queen.AckItem, len(msgs))
	for i, m := range msgs {
		group := m.ConsumerGroup
		if group == queen.QueueModeGroup {
			group = ""
		}
		items[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: group, Status: st}
	}
	return items
}

func ack(t testing.TB, b *queen.Broker, items ...queen.AckItem) []queen.AckResult {
	t.Helper()
	res, err := b.AckBatch(bg, items)
	require.NoError(t, err)
	return res
}

func ackAll(t testing.TB, b *queen.Broker, msgs []*queen.Message, st queen.AckStatus) []queen.AckResult {
	t.Helper()
	res := ack(t, b, ackItems(msgs, st)...)
	for _, r := range res {
		require.True(t, r.Success, "ack refused: %v", r.Err)
	}
	return res
}

// offsets lists the offsets of msgs.
func offsets(msgs []*queen.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Offset
	}
	return out
}

func attemptsOf(msgs []*queen.Message) []int {
	out := make([]int, len(msgs))
	for i, m := range msgs {
		out[i] = m.DeliveryAttempt
	}
	return out
}

// skipUnderRace skips a test that moves hundreds of MiB on one goroutine
// when the race detector is on: it finds nothing there and makes the test
// take minutes on a loaded machine. The suites CI runs without -race (the
// shifted-epoch runs of CONTRIBUTING.md) run it.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if itest.RaceEnabled {
		t.Skip("one goroutine moving hundreds of MiB: run without -race")
	}
}
