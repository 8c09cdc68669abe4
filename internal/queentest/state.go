package queentest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/queenlite/queen"
)

// State is what b reports about everything a request could change: each
// queue's statistics and configuration, every consumer group, the dead
// letters and parked messages (the first 1,000 of each) and maintenance
// mode, as one JSON text. Fuzz tests compare it before and after a refused
// request: a refusal must change nothing.
func State(tb testing.TB, b *queen.Broker) string {
	tb.Helper()
	ctx := context.Background()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatalf("queentest: state: %v", err)
		}
	}
	qs, err := b.ListQueues(ctx)
	must(err)
	var queues []any
	for _, q := range qs {
		s, err := b.QueueStats(ctx, q.Name)
		must(err)
		info, err := b.DescribeQueue(ctx, q.Name)
		must(err)
		queues = append(queues, []any{s, info})
	}
	gs, err := b.ListGroups(ctx, queen.GroupFilter{})
	must(err)
	dl, err := b.DeadLetters(ctx, queen.LetterFilter{Limit: 1000})
	must(err)
	pk, err := b.ParkedMessages(ctx, queen.LetterFilter{Limit: 1000})
	must(err)
	data, err := json.Marshal([]any{qs, queues, gs, dl, pk, b.MaintenanceMode()})
	must(err)
	return string(data)
}

// Serve serves req on h and fails the test if h refused it (a 4xx) yet
// b's [State] changed. ok is false, with nothing judged, when req's context
// ended first (a long-poll outlived its client). where names the request
// in failure messages.
func Serve(tb testing.TB, b *queen.Broker, h http.Handler, req *http.Request, where string) (res *http.Response, body []byte, ok bool) {
	tb.Helper()
	before := State(tb, b)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if req.Context().Err() != nil {
		return nil, nil, false
	}
	res = rec.Result()
	body, _ = io.ReadAll(res.Body)
	if res.StatusCode >= 400 && res.StatusCode < 500 {
		if after := State(tb, b); after != before {
			tb.Fatalf("%s was refused (%d: %s) but changed the broker:\nbefore %s\nafter  %s", where, res.StatusCode, body, before, after)
		}
	}
	return res, body, true
}
