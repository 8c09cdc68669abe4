package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// A handler's own ack that finds the message already settled (here by
// another client of the same broker) tells the loop the message is
// settled: when the handler then fails, the loop does not try to settle
// it again as a failure (which would be refused and reported released).
func TestConsume_HandlerAckFindsMessageSettled(t *testing.T) {
	t.Parallel()
	c, b := served(t, nil, nil)
	ctx := context.Background()
	_, err := b.Push(ctx, []queen.PushItem{{Queue: "twice", Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	boom := errors.New("boom")
	var mu sync.Mutex
	var got []queen.Settlement
	var handlerErr error
	err = c.Queue("twice").AutoAck(false).Limit(1).Each().
		Consume(ctx, func(ctx context.Context, m *queen.Message) error {
			_, err := b.Ack(ctx, m, true, queen.AckOptions{}) // another client settles it
			require.NoError(t, err)
			_, handlerErr = c.Ack(ctx, m, false, queen.AckOptions{})
			return boom
		}).OnSettled(func(s queen.Settlement) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	}).Execute(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, handlerErr, queen.ErrAlreadySettled)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	require.Equal(t, queen.OutcomeHandled, got[0].Outcome)
	require.ErrorIs(t, got[0].Err, boom)
	require.NoError(t, got[0].AckErr)
	require.Empty(t, got[0].Status, "the loop sent no ack of its own")
}
