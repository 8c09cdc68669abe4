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

// Divergence 12, found by TestDifferential (-diff.strict moves the fake
// clock by fractions of a millisecond): remote.Client's dead letters (as
// its queue and group descriptions) carry their timestamps with
// millisecond precision, the wire's; a Broker's to the microsecond. The
// package doc of remote lists only a lease's expiry as millisecond
// precise.
func TestDivergence12_TimestampPrecision(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	clock.Advance(1500 * time.Microsecond)
	for _, cl := range []queen.Client{b, c} {
		_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
		require.NoError(t, err)
		p, err := cl.Pop(ctx, queen.PopRequest{Queue: "q"})
		require.NoError(t, err)
		require.True(t, p.Messages[0].CreatedAt.Equal(clock.Now()), "%T: popped CreatedAt", cl)
		_, err = cl.Ack(ctx, p.Messages[0], false, queen.AckOptions{Status: queen.AckDLQ})
		require.NoError(t, err)
		page, err := cl.DeadLetters(ctx, queen.LetterFilter{Queue: "q"})
		require.NoError(t, err)
		require.Len(t, page.Letters, 1)
		l := page.Letters[0]
		require.Equal(t, clock.Now(), l.CreatedAt, "%T: dead letter CreatedAt", cl)
		require.Equal(t, clock.Now(), l.FailedAt, "%T: dead letter FailedAt", cl)
	}
}
