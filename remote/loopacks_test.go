package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// The consume loop over remote settles a lane's accepted messages with
// batched acks, not one request per message. The server holds the first
// ack request until the handler has seen the lane's last message: a loop
// that waited for each ack before the next message would never get there
// (the hold gives up after 10 s and the count then fails).
func TestRemote_ConsumeLoopBatchesAcks(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	var mu sync.Mutex
	var requests []string
	lastSeen := make(chan struct{})
	var hold sync.Once
	api := httpapi.New(b, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/v1/ack") {
			mu.Lock()
			requests = append(requests, r.URL.Path)
			mu.Unlock()
			hold.Do(func() {
				select {
				case <-lastSeen:
				case <-time.After(10 * time.Second):
				}
			})
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := remote.Dial(srv.URL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	ctx := context.Background()
	push := make([]queen.PushItem, 100)
	for i := range push {
		push[i] = queen.PushItem{Queue: "q", Partition: "p", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	_, err = b.Push(ctx, push)
	require.NoError(t, err)

	var smu sync.Mutex
	accepted, seen := 0, 0
	err = c.Queue("q").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(100).Concurrency(1).Each().Limit(100).
		Consume(ctx, func(context.Context, *queen.Message) error {
			smu.Lock()
			defer smu.Unlock()
			if seen++; seen == 100 {
				close(lastSeen)
			}
			return nil
		}).
		OnSettled(func(s queen.Settlement) {
			smu.Lock()
			defer smu.Unlock()
			if s.Outcome == queen.OutcomeAccepted && s.AckErr == nil {
				accepted++
			}
		}).
		Execute(ctx)
	require.NoError(t, err)
	require.Equal(t, 100, accepted)
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, len(requests), 2, "ack requests for 100 messages of one lane: %v", requests)
	gs, err := b.ListGroups(ctx, "g")
	require.NoError(t, err)
	require.Len(t, gs, 1)
	require.Zero(t, gs[0].Lag)
}
