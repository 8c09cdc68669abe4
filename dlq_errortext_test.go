package queen_test

import (
	"context"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestDLQ_ErrorTextIsCappedAt4KiB: a dead letter keeps the first 4 KiB of
// its ack's error text, no more.
func TestDLQ_ErrorTextIsCappedAt4KiB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	_, err := b.Push(ctx, []queen.PushItem{{Queue: "long", Payload: []byte(`1`)}})
	require.NoError(t, err)
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "long"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	text := strings.Repeat("e", 5<<10)
	_, err = b.Ack(ctx, res.Messages[0], false, queen.AckOptions{Status: queen.AckDLQ, Error: text})
	require.NoError(t, err)
	page, err := b.DeadLetters(ctx, queen.LetterFilter{Queue: "long"})
	require.NoError(t, err)
	require.Len(t, page.Letters, 1)
	require.Equal(t, text[:4<<10], page.Letters[0].Error)
}
