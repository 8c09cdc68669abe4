package contract

import (
	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// item is the ack item of m with status st, fenced by m's lease.
func item(m *queen.Message, st queen.AckStatus) queen.AckItem {
	return queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: st}
}

// parked is the number of parked messages of queue.
func (e *env) parked(queue string) int {
	e.t.Helper()
	page, err := e.c.ParkedMessages(e.ctx, queen.LetterFilter{Queue: queue})
	require.NoError(e.t, err)
	return len(page.Letters)
}

// testParkAnswers: AckResult.Parked says what the ack did, not what it
// asked for. A park behind a retry of the same batch (in an ack batch or
// a transaction) parks nothing and says so; so does a repeat of a park in
// the same call, and a park of a message settled before is refused. A
// park that parks says true.
func testParkAnswers(e *env) {
	t := e.t
	e.needs(ParkedStore)

	// An ack batch: the retry gives the batch back, the park above it
	// changes nothing.
	e.push("pa", "", numbered(2)...)
	msgs := e.pop(e.c.Queue("pa").Batch(2))
	require.Len(t, msgs, 2)
	res, err := e.c.AckBatch(e.ctx, []queen.AckItem{item(msgs[0], queen.AckRetry), item(msgs[1], queen.AckPark)})
	require.NoError(t, err)
	require.True(t, res[0].Success)
	require.True(t, res[1].Success, "accepted")
	require.False(t, res[1].Parked, "behind a retry: delivered again, not parked")
	require.False(t, res[1].DeadLettered)
	require.Zero(t, e.parked("pa"))
	again := e.pop(e.c.Queue("pa").Batch(2))
	require.Len(t, again, 2, "both delivered again")

	// The first of two parks of one message parks it; the second changes
	// nothing; a park in a later call is refused.
	res, err = e.c.AckBatch(e.ctx, []queen.AckItem{item(again[0], queen.AckPark), item(again[0], queen.AckPark)})
	require.NoError(t, err)
	require.True(t, res[0].Success && res[0].Parked)
	require.True(t, res[1].Success)
	require.False(t, res[1].Parked, "a repeat in the same call parks nothing")
	r, err := e.c.Ack(e.ctx, again[0], false, queen.AckOptions{Status: queen.AckPark})
	require.ErrorIs(t, err, queen.ErrAlreadySettled)
	require.False(t, r.Success)
	require.False(t, r.Parked)
	require.Equal(t, 1, e.parked("pa"))

	// The normal park.
	r, err = e.c.Ack(e.ctx, again[1], false, queen.AckOptions{Status: queen.AckPark, Error: "unreadable"})
	require.NoError(t, err)
	require.True(t, r.Success)
	require.True(t, r.Parked)
	require.Equal(t, 2, e.parked("pa"))

	// A transaction: the same.
	e.push("pt", "", numbered(2)...)
	msgs = e.pop(e.c.Queue("pt").Batch(2))
	require.Len(t, msgs, 2)
	tx, err := e.c.Transaction().
		Ack(msgs[0], queen.AckRetry, queen.AckOptions{}).
		Ack(msgs[1], queen.AckPark, queen.AckOptions{}).
		Commit(e.ctx)
	require.NoError(t, err)
	require.True(t, tx.Results[1].Ack.Success)
	require.False(t, tx.Results[1].Ack.Parked, "behind a retry: delivered again, not parked")
	require.Zero(t, e.parked("pt"))
	again = e.pop(e.c.Queue("pt").Batch(2))
	require.Len(t, again, 2, "both delivered again")
	tx, err = e.c.Transaction().
		Ack(again[0], queen.AckPark, queen.AckOptions{Error: "unreadable"}).
		Ack(again[1], queen.AckCompleted, queen.AckOptions{}).
		Commit(e.ctx)
	require.NoError(t, err)
	require.True(t, tx.Results[0].Ack.Parked)
	require.False(t, tx.Results[1].Ack.Parked)
	require.Equal(t, 1, e.parked("pt"))
}
