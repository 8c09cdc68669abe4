package queen_test

import (
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

func TestBroker_ReopenKeepsState(t *testing.T) {
	t.Parallel()
	for _, d := range []queen.Durability{queen.SyncEveryCommit, queen.SyncNever} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := &queen.Options{Durability: d}
			b := itest.OpenDir(t, dir, opts)
			pushN(t, b, "q", "a", 5)
			pushOne(t, b, "q", "b", "dedup-me", `1`)
			// A "new" group joins after five messages; an "all" group reads three.
			require.Empty(t, pop(t, b, queen.PopRequest{Queue: "q", Group: "late", Partition: "a"}).Messages)
			pr := pop(t, b, queen.PopRequest{Queue: "q", Group: "early", SubscriptionMode: queen.SubscriptionModeAll, Partition: "a", Batch: 3})
			items := ackItems(pr.Messages, queen.AckCompleted)
			items[2].Status = queen.AckDLQ
			ack(t, b, items...)
			// A failed ack spends budget; a live lease is held at close.
			pr = pop(t, b, queen.PopRequest{Queue: "q", Group: "early", Partition: "a"})
			ackAll(t, b, pr.Messages, queen.AckFailed)
			held := pop(t, b, queen.PopRequest{Queue: "q", Partition: "b"})
			require.Len(t, held.Messages, 1)
			require.NoError(t, b.Close())

			b = itest.OpenDir(t, dir, opts)
			res := pushN(t, b, "q", "a", 1)
			require.Equal(t, int64(5), res[0].Offset, "offsets continue")
			require.Equal(t, queen.PushDuplicate, pushOne(t, b, "q", "b", "dedup-me", `2`).Status, "dedup survives")
			late := pop(t, b, queen.PopRequest{Queue: "q", Group: "late", Partition: "a", Batch: 10})
			require.Equal(t, []int64{5}, offsets(late.Messages), "the new group's start point survives")
			st, err := b.QueueStats(bg, "q")
			require.NoError(t, err)
			var early queen.CursorStats
			for _, p := range st.Partitions {
				for _, c := range p.Cursors {
					if p.Name == "a" && c.Group == "early" {
						early = c
					}
				}
			}
			require.Equal(t, int64(3), early.Offset, "the cursor survives")
			require.Equal(t, 1, early.Retries, "the retry counter survives")
			require.Equal(t, int64(1), st.DeadLetters)
			page, err := b.DeadLetters(bg, queen.LetterFilter{})
			require.NoError(t, err)
			require.Equal(t, `{"i":2}`, string(page.Letters[0].Payload))
			// Leases do not survive: the held message is delivered again at once.
			again := pop(t, b, queen.PopRequest{Queue: "q", Partition: "b"})
			require.Len(t, again.Messages, 1)
			require.Equal(t, held.Messages[0].TransactionID, again.Messages[0].TransactionID)
			_, err = b.RenewLease(bg, held.LeaseID, time.Minute)
			require.ErrorIs(t, err, queen.ErrNotFound)
		})
	}
}

func TestBroker_OpenValidation(t *testing.T) {
	t.Parallel()
	_, err := queen.Open("", nil)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = queen.Open("somewhere", &queen.Options{InMemory: true})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = queen.Open("", &queen.Options{InMemory: true, Durability: 9})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = queen.OpenDB(nil, nil)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	// The directory is released by Close and opens again at once.
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		b, err := queen.Open(dir, nil)
		require.NoError(t, err)
		require.NoError(t, b.Close())
	}
}

func TestBroker_Ping(t *testing.T) {
	t.Parallel()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	require.NoError(t, err)
	require.NoError(t, b.Ping(bg))
	require.NoError(t, b.Close())
	require.ErrorIs(t, b.Ping(bg), queen.ErrClosed)
}

func TestBroker_OffsetsNeverReusedAfterDeletes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := itest.OpenDir(t, dir, nil)
	res := pushN(t, b, "q", "", 5)
	require.NoError(t, b.DeleteMessage(bg, res[4].PartitionID, res[4].TransactionID)) // the newest
	require.NoError(t, b.DeleteMessage(bg, res[1].PartitionID, res[1].TransactionID)) // one in the middle
	require.NoError(t, b.Close())

	b = itest.OpenDir(t, dir, nil)
	st, err := b.QueueStats(bg, "q")
	require.NoError(t, err)
	require.Equal(t, int64(3), st.Messages, "deleted messages are not counted after a restart")
	require.Equal(t, int64(5), pushN(t, b, "q", "", 1)[0].Offset, "the deleted newest offset is not handed out again")
}
