package queen_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// deadLetter pushes one message and dead-letters it for group.
func deadLetter(t *testing.T, b *queen.Broker, queue, group, payload string) {
	t.Helper()
	pushOne(t, b, queue, "p", "", payload)
	pr := pop(t, b, queen.PopRequest{Queue: queue, Group: group, SubscriptionMode: queen.SubscriptionModeAll, Partition: "p", Batch: 100})
	require.NotEmpty(t, pr.Messages)
	items := ackItems(pr.Messages, queen.AckCompleted)
	items[len(items)-1].Status, items[len(items)-1].Error = queen.AckDLQ, "gave up"
	ack(t, b, items...)
}

func TestDLQ_ReplayCopiesToEveryGroupOnce(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		deadLetter(t, b, "orders", "billing", `{"order":9}`)
		// A second group has read everything already.
		other := pop(t, b, queen.PopRequest{Queue: "orders", Group: "emails", SubscriptionMode: queen.SubscriptionModeAll, Partition: "p", Batch: 10})
		ackAll(t, b, other.Messages, queen.AckCompleted)

		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "orders", ConsumerGroup: "billing"})
		require.NoError(t, err)
		require.Equal(t, 1, page.Total)
		id := page.Letters[0].ID

		rr, err := b.ReplayDeadLetter(bg, id)
		require.NoError(t, err)
		require.Equal(t, "dlq:"+id, rr.TransactionID)
		require.Equal(t, int64(1), rr.Offset, "appended at the end of the partition")
		require.False(t, rr.Duplicate)
		again, err := b.ReplayDeadLetter(bg, id)
		require.NoError(t, err)
		require.True(t, again.Duplicate, "a second replay is not a second copy")
		require.Equal(t, rr.MessageID, again.MessageID)

		for _, g := range []string{"billing", "emails"} {
			got := pop(t, b, queen.PopRequest{Queue: "orders", Group: g, Partition: "p", Batch: 10})
			require.Len(t, got.Messages, 1, g)
			require.Equal(t, `{"order":9}`, string(got.Messages[0].Payload))
			require.Equal(t, "dlq:"+id, got.Messages[0].TransactionID)
		}

		require.NoError(t, b.DeleteDeadLetter(bg, id))
		require.ErrorIs(t, b.DeleteDeadLetter(bg, id), queen.ErrNotFound)
		_, err = b.ReplayDeadLetter(bg, id)
		require.ErrorIs(t, err, queen.ErrNotFound)
		_, err = b.ReplayDeadLetter(bg, "not-an-id")
		require.ErrorIs(t, err, queen.ErrNotFound)
		page, err = b.DeadLetters(bg, queen.LetterFilter{})
		require.NoError(t, err)
		require.Zero(t, page.Total)
	})
}

func TestDLQ_ParkedReplayAndDelete(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushOne(t, b, "q", "p", "", `"v9"`)
	pr := pop(t, b, queen.PopRequest{Queue: "q"})
	ackAll(t, b, pr.Messages, queen.AckPark)
	page, err := b.ParkedMessages(bg, queen.LetterFilter{Queue: "q"})
	require.NoError(t, err)
	require.Equal(t, 1, page.Total)
	dl, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "q"})
	require.NoError(t, err)
	require.Zero(t, dl.Total, "parking is not dead-lettering")
	rr, err := b.ReplayParked(bg, page.Letters[0].ID)
	require.NoError(t, err)
	require.Equal(t, "parked:"+page.Letters[0].ID, rr.TransactionID)
	require.Len(t, pop(t, b, queen.PopRequest{Queue: "q"}).Messages, 1)
	require.NoError(t, b.DeleteParked(bg, page.Letters[0].ID))
	st, err := b.QueueStats(bg, "q")
	require.NoError(t, err)
	require.Zero(t, st.Parked)
}

func TestDLQ_ListFiltersAndPages(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	start := clock.Now()
	for i := 0; i < 5; i++ {
		deadLetter(t, b, "a", "g1", `1`)
		clock.Advance(time.Minute)
	}
	deadLetter(t, b, "a", "g2", `2`)
	deadLetter(t, b, "b", "g1", `3`)

	page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "a", ConsumerGroup: "g1", Limit: 2, Offset: 1})
	require.NoError(t, err)
	require.Equal(t, 5, page.Total)
	require.Len(t, page.Letters, 2)
	require.True(t, page.Letters[0].FailedAt.After(page.Letters[1].FailedAt), "newest first")
	page, err = b.DeadLetters(bg, queen.LetterFilter{From: start.Add(90 * time.Second), To: start.Add(3*time.Minute + time.Second)})
	require.NoError(t, err)
	require.Equal(t, 2, page.Total)
	page, err = b.DeadLetters(bg, queen.LetterFilter{Partition: "nope"})
	require.NoError(t, err)
	require.Zero(t, page.Total)
	_, err = b.DeadLetters(bg, queen.LetterFilter{Limit: -1})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

func TestDLQ_HugeDeadLetterBatchIsWrittenWhole(t *testing.T) {
	t.Parallel()
	var logs itest.LogBuffer
	// The smallest memory budget has the smallest storage transactions;
	// payloads under Badger's value threshold stay inline in them.
	opts := &queen.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), MemoryBudget: queen.MinMemoryBudget}
	itest.Run(t, opts, func(t *testing.T, b *queen.Broker) {
		const n = 5000 // about 1 MB of dead-letter copies: more than one storage transaction
		payload := []byte(`"` + strings.Repeat("p", 100) + `"`)
		items := make([]queen.PushItem, n)
		for i := range items {
			items[i] = queen.PushItem{Queue: "huge", Payload: payload}
		}
		_, err := b.Push(bg, items)
		require.NoError(t, err)
		pr := pop(t, b, queen.PopRequest{Queue: "huge", Batch: n})
		require.Len(t, pr.Messages, n)
		splits := strings.Count(logs.String(), "split")
		ackAll(t, b, pr.Messages, queen.AckDLQ)
		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "huge", Limit: 1000})
		require.NoError(t, err)
		require.Equal(t, n, page.Total)
		require.Equal(t, string(payload), string(page.Letters[0].Payload))
		require.Greater(t, strings.Count(logs.String(), "split"), splits, "the ack's write took several storage transactions")
		// The broker still serves.
		pushN(t, b, "huge", "", 1)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "huge"}).Messages, 1)
	})
}
