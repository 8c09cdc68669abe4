package remote_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// Divergence 12, found by TestDifferential (-diff.strict moved the fake
// clock by fractions of a millisecond): remote.Client's dead letters (as
// its queue and group descriptions) carry their timestamps with
// millisecond precision, the wire's; a Broker's to the microsecond.
//
// A deliberate difference, now documented in remote's package doc: the
// wire is Queen's, whose admin answers write timestamps with
// milliseconds ("2006-01-02T15:04:05.000Z", wire contract 1.6), and
// Queen's clients and dashboard read them; only a message's CreatedAt in
// a pop or a fetch has microseconds. This test pins the difference: the
// remote timestamps are the broker's truncated to the millisecond, and
// nothing else differs.
func TestDivergence12_TimestampPrecision(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	clock.Advance(1500 * time.Microsecond)
	var letters [2]queen.DeadLetter
	for i, cl := range []queen.Client{b, c} {
		_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
		require.NoError(t, err)
		p, err := cl.Pop(ctx, queen.PopRequest{Queue: "q"})
		require.NoError(t, err)
		require.True(t, p.Messages[0].CreatedAt.Equal(clock.Now()), "%T: popped CreatedAt (microseconds)", cl)
		_, err = cl.Ack(ctx, p.Messages[0], false, queen.AckOptions{Status: queen.AckDLQ})
		require.NoError(t, err)
		page, err := cl.DeadLetters(ctx, queen.LetterFilter{Queue: "q"})
		require.NoError(t, err)
		require.Len(t, page.Letters, 1)
		letters[i] = page.Letters[0]
	}
	bl, rl := letters[0], letters[1]
	require.Equal(t, clock.Now(), bl.CreatedAt, "Broker: dead letter CreatedAt")
	require.Equal(t, clock.Now(), bl.FailedAt, "Broker: dead letter FailedAt")
	require.NotEqual(t, bl.CreatedAt, bl.CreatedAt.Truncate(time.Millisecond), "the clock is between two milliseconds")
	require.Equal(t, bl.CreatedAt.Truncate(time.Millisecond), rl.CreatedAt, "remote: dead letter CreatedAt")
	require.Equal(t, bl.FailedAt.Truncate(time.Millisecond), rl.FailedAt, "remote: dead letter FailedAt")
	// Nothing else differs but the ids each broker drew.
	bl.CreatedAt, bl.FailedAt = rl.CreatedAt, rl.FailedAt
	bl.ID, bl.MessageID, bl.TransactionID, bl.PartitionID = rl.ID, rl.MessageID, rl.TransactionID, rl.PartitionID
	require.Equal(t, bl, rl)
}
