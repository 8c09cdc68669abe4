package queentest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// The calls below are the few that nearly every test of the root package
// and of the model suites makes, each failing the test on an error.

// PushN pushes n messages {"i":k} to queue/partition and returns their
// results, all of which must be queued.
func PushN(tb testing.TB, b *queen.Broker, queue, partition string, n int) []queen.PushResult {
	tb.Helper()
	items := make([]queen.PushItem, n)
	for i := range items {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	res, err := b.Push(context.Background(), items)
	require.NoError(tb, err)
	for _, r := range res {
		require.Equal(tb, queen.PushQueued, r.Status, "%v", r.Err)
	}
	return res
}

// Pop pops req.
func Pop(tb testing.TB, b *queen.Broker, req queen.PopRequest) *queen.PopResult {
	tb.Helper()
	res, err := b.Pop(context.Background(), req)
	require.NoError(tb, err)
	return res
}

// AckItems builds ack items for msgs, all with status st.
func AckItems(msgs []*queen.Message, st queen.AckStatus) []queen.AckItem {
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

// Ack acks items in one AckBatch and returns its results.
func Ack(tb testing.TB, b *queen.Broker, items ...queen.AckItem) []queen.AckResult {
	tb.Helper()
	res, err := b.AckBatch(context.Background(), items)
	require.NoError(tb, err)
	return res
}

// Offsets lists the offsets of msgs.
func Offsets(msgs []*queen.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Offset
	}
	return out
}

// AttemptsOf lists the delivery attempts of msgs.
func AttemptsOf(msgs []*queen.Message) []int {
	out := make([]int, len(msgs))
	for i, m := range msgs {
		out[i] = m.DeliveryAttempt
	}
	return out
}
