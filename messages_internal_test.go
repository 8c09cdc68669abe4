package queen

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A message delete whose caller stopped waiting (its write still on the
// way) and a second delete of the same message record one hole: the
// second is ErrNotFound, and the counts stay right.
func TestDeleteMessage_RepeatedCountsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	var pid string
	for _, tx := range []string{"a", "b", "c"} {
		res, err := b.Push(ctx, []PushItem{{Queue: "q", TransactionID: tx, Payload: []byte(`1`)}})
		require.NoError(t, err)
		pid = res[0].PartitionID
	}
	held, _, release := HoldCommitsForTest(b)
	defer release() // before Close, should the test fail while the writer waits
	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, b.DeleteMessage(gone, pid, "b"), context.Canceled, "its write is queued behind the hold")
	<-held
	// The second finds the hole: ErrNotFound before it would write (or wait).
	require.ErrorIs(t, b.DeleteMessage(gone, pid, "b"), ErrNotFound, "already deleted")
	release()
	require.ErrorIs(t, b.DeleteMessage(ctx, pid, "b"), ErrNotFound)

	st, err := b.QueueStats(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Messages)
	b.mu.Lock()
	p := b.queues["q"].parts[DefaultPartition]
	var runs []holeRun
	if hs := p.holeSet(); hs != nil {
		runs = append(runs, hs.runs...)
	}
	n := p.holes()
	b.mu.Unlock()
	require.Equal(t, []holeRun{{1, 2}}, runs)
	require.Equal(t, int64(1), n)
}
