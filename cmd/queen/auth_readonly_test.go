package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestAuthorize_ReadOnlyCannotDeleteMessage: DELETE
// /api/v1/messages/{partitionId}/{transactionId} needs read-write. A
// read-only JWT is answered 403 and the message is still there, readable
// by the same token; a read-write token then deletes it, so the path the
// refusal was given for is the right one.
func TestAuthorize_ReadOnlyCannotDeleteMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	a := newAuthorizer(&config{jwtSecret: []byte(testSecret), jwtSkew: 30 * time.Second}, time.Now)
	e := authEnv{t, httpapi.New(b, &httpapi.Options{Authorize: a.authorize, ProducerSub: a.producerSub})}
	res, err := b.Push(ctx, []queen.PushItem{{Queue: "orders", TransactionID: "o-1", Payload: []byte(`{"n":1}`)}})
	require.NoError(t, err)
	require.Equal(t, queen.PushQueued, res[0].Status)
	path := "/api/v1/messages/" + res[0].PartitionID + "/o-1"

	exp := time.Now().Add(time.Hour).Unix()
	reader := "Bearer " + hs256(t, map[string]any{"role": "read-only", "exp": exp})
	writer := "Bearer " + hs256(t, map[string]any{"role": "read-write", "exp": exp})

	e.status("DELETE", path, reader, "", http.StatusForbidden, "insufficient permissions")
	_, err = b.GetMessage(ctx, res[0].PartitionID, "o-1")
	require.NoError(t, err, "the refused delete removed the message")
	e.status("GET", path, reader, "", http.StatusOK, "")

	rec := e.send("DELETE", path, writer, "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"success":true`)
	_, err = b.GetMessage(ctx, res[0].PartitionID, "o-1")
	require.ErrorIs(t, err, queen.ErrNotFound)
}
