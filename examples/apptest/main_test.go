package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"example.com/apptest/mailer"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/contrib/queenprom"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// flakySender fails its first send.
type flakySender struct{ n atomic.Int32 }

func (f *flakySender) Send(ctx context.Context, e mailer.Email) error {
	if f.n.Add(1) == 1 {
		return errors.New("421 try again later")
	}
	return nil
}

// A sign-up over HTTP queues an e-mail; the worker fails once and then
// sends it; /metrics shows it.
func TestHandler_SignupAndMetrics(t *testing.T) {
	obs, err := queenprom.NewObserver(nil)
	require.NoError(t, err)
	clock := queentest.NewClock(time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC))
	b := queentest.NewBroker(t, &queen.Options{Clock: clock, Observer: obs})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	svc := mailer.New(b, &flakySender{})
	_, err = svc.Start(ctx)
	require.NoError(t, err)
	h, err := newHandler(b, obs, svc)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	res, err := http.Post(srv.URL+"/signup?email=ada@example.com", "", nil)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusAccepted, res.StatusCode)
	res, err = http.Post(srv.URL+"/signup", "", nil)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)

	queentest.WaitOutcome(t, b, queen.OutcomeRetried, 1)
	clock.Advance(mailer.RetryDelay)
	queentest.WaitDrained(t, b, mailer.Queue, "")

	res, err = http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	lines := strings.Split(string(body), "\n")
	for _, want := range []string{
		"queen_messages_pushed_total 1",
		`queen_consume_messages_total{outcome="retried"} 1`,
		`queen_consume_messages_total{outcome="accepted"} 1`,
		`queen_queue_messages{queue="emails"} 1`,
	} {
		require.Contains(t, lines, want)
	}
}
