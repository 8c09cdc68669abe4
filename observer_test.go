package queen_test

import (
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestCounters_CountDiscoveryPops: Counters.Popped counts the
// messages of a discovery pop (by Namespace/Task, without a queue), and
// the Observer sees it as a pop of the queue it served.
func TestCounters_CountDiscoveryPops(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	cfg := queen.DefaultQueueConfig()
	cfg.Namespace, cfg.Task = "ns", "task"
	_, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	pushN(t, b, "q", "", 3)
	res := pop(t, b, queen.PopRequest{Namespace: "ns", Batch: 2})
	require.Len(t, res.Messages, 2)
	ackAll(t, b, res.Messages, queen.AckCompleted)
	res = pop(t, b, queen.PopRequest{Task: "task", Batch: 5, CommitOnDelivery: true})
	require.Len(t, res.Messages, 1)
	res = pop(t, b, queen.PopRequest{Namespace: "ns", Task: "task"})
	require.Empty(t, res.Messages)
	require.Equal(t, int64(3), b.Counters().Popped)
}
