package remote_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// Divergence 11, found by TestDifferential: a payload does not travel
// byte for byte through remote.Client. Push sends it compacted and with
// <, > and & escaped (encoding/json's treatment of a json.RawMessage),
// the broker behind the server stores that, and pops and fetches return
// it; a Broker stores and returns the bytes pushed (PushItem.Payload:
// "stored byte for byte", docs/limits.md: "stored and returned byte for
// byte"). Fixed: remote.Client and httpapi write payloads as they are
// (package internal/verbatim).
func TestDivergence11_PayloadByteForByte(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	payload := json.RawMessage(`[1, {"a" : "<&>"}]`)
	for _, cl := range []queen.Client{b, c} {
		_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: payload}})
		require.NoError(t, err)
		p, err := cl.Pop(ctx, queen.PopRequest{Queue: "q"})
		require.NoError(t, err)
		require.Len(t, p.Messages, 1)
		require.Equal(t, string(payload), string(p.Messages[0].Payload), "%T: popped", cl)
		f, err := cl.Fetch(ctx, "q", queen.DefaultPartition, 0, 1)
		require.NoError(t, err)
		require.Equal(t, string(payload), string(f.Records[0].Payload), "%T: fetched", cl)
	}
}
