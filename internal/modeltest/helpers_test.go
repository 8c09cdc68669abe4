package modeltest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

// pushN pushes n messages {"i":k} to queue/partition.
func pushN(t testing.TB, b *queen.Broker, queue, partition string, n int) {
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
}

func pop(t testing.TB, b *queen.Broker, req queen.PopRequest) *queen.PopResult {
	t.Helper()
	res, err := b.Pop(bg, req)
	require.NoError(t, err)
	return res
}

func ack(t testing.TB, b *queen.Broker, items ...queen.AckItem) []queen.AckResult {
	t.Helper()
	res, err := b.AckBatch(bg, items)
	require.NoError(t, err)
	return res
}

func attemptsOf(msgs []*queen.Message) []int {
	out := make([]int, len(msgs))
	for i, m := range msgs {
		out[i] = m.DeliveryAttempt
	}
	return out
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

// offsets lists the offsets of msgs.
func offsets(msgs []*queen.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Offset
	}
	return out
}
