package unittest

import (
	"context"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestNotifier_WelcomeIsQueuedOnce(t *testing.T) {
	b := queentest.NewBroker(t, nil) // the whole broker, in memory, closed when the test ends

	n := &Notifier{Broker: b}
	ctx := context.Background()
	require.NoError(t, n.Welcome(ctx, "u-1", "ada@example.com"))
	require.NoError(t, n.Welcome(ctx, "u-1", "ada@example.com"))

	res, err := b.Pop(ctx, queen.PopRequest{Queue: "emails", Batch: 10})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	require.JSONEq(t, `{"template":"welcome","to":"ada@example.com"}`, string(res.Messages[0].Payload))
}
