package queen_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// A restart finds every partition's next offset, message count and last
// push time, however long the partition (the loader steps through short
// ones and seeks to the end of long ones), and after its newest message
// was deleted.
func TestLoad_PartitionEndsAfterRestart(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	dir := t.TempDir()
	opts := &queen.Options{Clock: clock, Durability: queen.SyncNever}
	b := itest.OpenDir(t, dir, opts)
	for _, n := range []int{1, 2, 31, 32, 33, 34, 100} {
		for i := 0; i < n; i++ {
			clock.Advance(time.Millisecond)
			pushOne(t, b, "ends", "p"+strconv.Itoa(n), "", `0`)
		}
	}
	clock.Advance(time.Millisecond)
	gone := pushOne(t, b, "ends", "p100", "", `0`)
	require.NoError(t, b.DeleteMessage(bg, gone.PartitionID, gone.TransactionID))
	ends := func(b *queen.Broker) map[string][3]int64 {
		st, err := b.QueueStats(bg, "ends")
		require.NoError(t, err)
		out := map[string][3]int64{}
		for _, p := range st.Partitions {
			out[p.Name] = [3]int64{p.NextOffset, p.Messages, p.LastPushAt.UnixMicro()}
		}
		return out
	}
	live := ends(b)
	require.Equal(t, [3]int64{34, 34, live["p34"][2]}, live["p34"])
	require.Equal(t, int64(101), live["p100"][0])
	require.NoError(t, b.Close())

	b = itest.OpenDir(t, dir, opts)
	got := ends(b)
	require.Equal(t, [2]int64{101, 100}, [2]int64{got["p100"][0], got["p100"][1]}, "the deleted newest offset is not handed out again")
	require.Equal(t, live, got)
	r := pushOne(t, b, "ends", "p33", "", `0`)
	require.EqualValues(t, 33, r.Offset)
}
