package queen_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// Defects found by the widened model test, each with a focused regression
// test.

// storedCounts maps every queue to its stored message count.
func storedCounts(t *testing.T, b *queen.Broker) map[string]int64 {
	t.Helper()
	qs, err := b.ListQueues(bg)
	require.NoError(t, err)
	m := make(map[string]int64, len(qs))
	for _, q := range qs {
		m[q.Name] = q.Messages
	}
	return m
}

// TestModelFound_PushRacingDeleteQueueSurvivesReopen: a push racing
// DeleteQueue may re-create the queue; once both returned, what the broker
// serves (the queue and its messages, or no queue) is what it serves after
// a restart. The deletion's write used to remove the re-created queue's
// metadata, so the queue and its acknowledged messages were lost at Open.
func TestModelFound_PushRacingDeleteQueueSurvivesReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := queentest.OpenDir(t, dir, nil)
	const rounds, pushers, pushes = 60, 3, 4
	for r := range rounds {
		name := fmt.Sprintf("q%d", r)
		pushOne(t, b, name, "", "seed", `1`)
		var wg sync.WaitGroup
		wg.Add(1 + pushers)
		go func() {
			defer wg.Done()
			_, err := b.DeleteQueue(bg, name)
			require.NoError(t, err)
		}()
		for g := range pushers {
			go func() {
				defer wg.Done()
				for i := range pushes {
					_, err := b.Push(bg, []queen.PushItem{{Queue: name, TransactionID: fmt.Sprintf("t%d-%d", g, i), Payload: []byte(`1`)}})
					require.NoError(t, err)
				}
			}()
		}
		wg.Wait()
	}
	before := storedCounts(t, b)
	require.NoError(t, b.Close())
	b = queentest.OpenDir(t, dir, nil)
	require.Equal(t, before, storedCounts(t, b))
}
