package remote_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/console"
	"github.com/queenlite/queen/internal/contract"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// The tests named RealQueen run against Queen MQ's own server, started
// outside the test (../shared/realqueen/start.sh prints the variables):
// QUEEN_REAL_URL (or the first of QUEEN_REAL_URLS) is its base URL, and
// QUEEN_REAL_STATE the state directory that reset.sh (beside start.sh, or
// QUEEN_REAL_RESET) empties its tables with between cases. Unset, they
// skip.

// realQueen returns the server's URL and a function that empties it, or
// skips t.
func realQueen(t testing.TB) (string, func(testing.TB)) {
	url := os.Getenv("QUEEN_REAL_URL")
	if url == "" {
		url, _, _ = strings.Cut(os.Getenv("QUEEN_REAL_URLS"), ",")
	}
	if url == "" {
		t.Skip("QUEEN_REAL_URL is not set: these tests run against Queen's own server (start it with ../shared/realqueen/start.sh)")
	}
	reset := os.Getenv("QUEEN_REAL_RESET")
	if reset == "" {
		reset = filepath.Join("..", "..", "shared", "realqueen", "reset.sh")
	}
	if os.Getenv("QUEEN_REAL_STATE") == "" {
		t.Fatal("QUEEN_REAL_URL is set but QUEEN_REAL_STATE is not: the tests cannot empty the server between cases")
	}
	return url, func(t testing.TB) {
		t.Helper()
		var out []byte
		var err error
		// The truncation can deadlock with the server's own background
		// work on the same tables (PostgreSQL then aborts one side): try
		// again.
		for try := 0; try < 3; try++ {
			if out, err = exec.Command("bash", reset).CombinedOutput(); err == nil {
				return
			}
		}
		require.NoError(t, err, "%s: %s", reset, out)
	}
}

// queenLacks is what Queen's server lacks, as docs/remote.md lists it.
var queenLacks = map[contract.Feature]string{
	contract.Offsets:       "Queen's server sends no offsets nor delivery attempts",
	contract.FetchByOffset: "Queen's server has no read by offset",
	contract.ParkedStore:   "Queen's server has no parked store",
	contract.LetterAdmin:   "Queen's server cannot replay or delete a dead letter, and names none by id",
	contract.Conflation:    "Queen's server ignores conflation",
	contract.ShortPopLease: "Queen's server leases for the queue's LeaseTime and never shortens a lease",
	contract.RetryDelay:    "Queen's server redelivers a failed message at once",
	contract.FullConfig:    "Queen's status route sends back only part of a queue's configuration",
	contract.GroupDetails:  "Queen's group listing has no mode, join time nor lag",
	contract.AckReasons:    "Queen's server tells only an unknown message and a lost lease apart",
	contract.UnknownNames:  "Queen's server answers a seek, delete or subscription of an unknown queue or group as a success moving nothing",
	contract.MaxSize:       "Queen's server stores MaxSize but never enforces it",
	contract.KeyCheck:      "Queen's server accepts encryptionEnabled without a key",
}

// TestRealQueen_Contract runs the contract suite through package remote
// against Queen's server, emptied before each case.
func TestRealQueen_Contract(t *testing.T) {
	url, reset := realQueen(t)
	contract.Run(t, []contract.Backend{{
		Name:   "queen",
		Server: "Queen's server",
		Lacks:  queenLacks,
		New: func(t *testing.T, _ queen.Clock) queen.Client {
			reset(t)
			c, err := remote.Dial(url, nil) // the dialect is learned from /health
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, c.Ping(ctx))
			return c
		},
	}})
}

// dialReal empties Queen's server and dials it.
func dialReal(t *testing.T) *remote.Client {
	url, reset := realQueen(t)
	reset(t)
	c, err := remote.Dial(url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// popReal pops from Queen's server, polling for a second: it may not see
// a partition for a moment after the push that made it.
func popReal(t *testing.T, c *remote.Client, req queen.PopRequest) *queen.PopResult {
	t.Helper()
	ctx := context.Background()
	for end := time.Now().Add(time.Second); ; {
		res, err := c.Pop(ctx, req)
		require.NoError(t, err)
		if len(res.Messages) > 0 || time.Now().After(end) {
			return res
		}
		time.Sleep(50 * time.Millisecond) // another process's state: no event to wait for
	}
}

// The answers remote once read wrong without an error, checked on Queen's
// server.
func TestRealQueen_Answers(t *testing.T) {
	c := dialReal(t)
	ctx := context.Background()

	_, err := c.DescribeQueue(ctx, "nope")
	require.ErrorIs(t, err, queen.ErrNotFound)
	_, err = c.QueueStats(ctx, "nope")
	require.ErrorIs(t, err, queen.ErrNotFound)

	// Counts are those of the call, not of the server's last stats pass.
	_, err = c.Push(ctx, []queen.PushItem{{Queue: "st", Payload: json.RawMessage(`1`)}, {Queue: "st", Payload: json.RawMessage(`2`)}})
	require.NoError(t, err)
	st, err := c.QueueStats(ctx, "st")
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Messages)
	require.EqualValues(t, 2, st.Pending)
	all, err := c.ListQueues(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, all[0].Messages)

	// Partition seeks.
	p := popReal(t, c, queen.PopRequest{Queue: "st", Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
	require.Len(t, p.Messages, 1)
	_, err = c.SeekPartition(ctx, "g", "st", "nope", queen.SeekOptions{ToEnd: true})
	require.ErrorIs(t, err, queen.ErrNotFound)
	sr, err := c.SeekPartition(ctx, "g", "st", queen.DefaultPartition, queen.SeekOptions{ToEnd: true})
	require.NoError(t, err)
	require.Equal(t, 1, sr.PartitionsUpdated)

	// Deleted queue.
	_, err = c.DeleteQueue(ctx, "st")
	require.NoError(t, err)
	_, err = c.DescribeQueue(ctx, "st")
	require.ErrorIs(t, err, queen.ErrNotFound)
}

// A pop Lease on Queen's server: shorter than the queue's is
// ErrUnsupported with nothing popped, longer is reached by an extension.
func TestRealQueen_PopLease(t *testing.T) {
	c := dialReal(t)
	ctx := context.Background()
	leaseQueue(t, c)
	_, err := c.Pop(ctx, queen.PopRequest{Queue: "l", Lease: 10 * time.Second})
	require.ErrorIs(t, err, queen.ErrUnsupported)
	p := popReal(t, c, queen.PopRequest{Queue: "l", Lease: 10 * time.Minute})
	require.Len(t, p.Messages, 1, "the refused pop took nothing")
	// An extension by 1 s keeps the later expiry: the one the pop's Lease set.
	ren, err := c.RenewLease(ctx, p.LeaseID, time.Second)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(10*time.Minute), ren.ExpiresAt, 30*time.Second)
}

// A mixed ack batch on Queen's server tells the same story as on a
// broker (see ackScript): the failed message comes back and spends the
// retry budget, then is dead-lettered; the completed one behind it comes
// back with it.
func TestRealQueen_MixedAckBatch(t *testing.T) {
	c := dialReal(t)
	b := queentest.NewBroker(t, nil)
	require.Equal(t, ackScript(t, b, b), ackScript(t, c, c))
}

// On Queen's server a transaction with a failed or retry ack is
// ErrUnsupported, unsent (Queen dead-letters the failed one at once, or
// aborts); completed and dlq acks in a transaction work.
func TestRealQueen_TransactionFailedAck(t *testing.T) {
	c := dialReal(t)
	ctx := context.Background()
	_, err := c.Push(ctx, []queen.PushItem{{Queue: "txf", Payload: json.RawMessage(`1`)}, {Queue: "txf", Payload: json.RawMessage(`2`)}})
	require.NoError(t, err)
	msgs := popReal(t, c, queen.PopRequest{Queue: "txf", Batch: 2}).Messages
	require.Len(t, msgs, 2)
	for _, st := range []queen.AckStatus{queen.AckFailed, queen.AckRetry} {
		_, err = c.Transaction().Ack(msgs[0], queen.AckCompleted, queen.AckOptions{}).Ack(msgs[1], st, queen.AckOptions{}).Commit(ctx)
		require.ErrorIs(t, err, queen.ErrUnsupported, st)
	}
	tx, err := c.Transaction().Ack(msgs[0], queen.AckCompleted, queen.AckOptions{}).Ack(msgs[1], queen.AckDLQ, queen.AckOptions{Error: "bad"}).
		Commit(ctx)
	require.NoError(t, err)
	require.True(t, tx.Results[1].Ack.DeadLettered)
	page, err := c.DeadLetters(ctx, queen.LetterFilter{Queue: "txf"})
	require.NoError(t, err)
	require.Len(t, page.Letters, 1)
	require.Equal(t, "bad", page.Letters[0].Error)
	require.Empty(t, popReal(t, c, queen.PopRequest{Queue: "txf", Batch: 2}).Messages)
}

// The operator console over remote on Queen's server: every page renders
// the server's data, and what Queen has no route for (the message browser,
// which needs Fetch, and the parked store) says so instead of failing.
func TestRealQueen_Console(t *testing.T) {
	c := dialReal(t)
	ctx := context.Background()
	_, err := c.Push(ctx, []queen.PushItem{{Queue: "orders", Partition: "eu", Payload: json.RawMessage(`{"a":1}`)}, {Queue: "orders", Payload: json.RawMessage(`{"b":2}`)}})
	require.NoError(t, err)
	require.Len(t, popReal(t, c, queen.PopRequest{Queue: "orders", Group: "billing", SubscriptionMode: queen.SubscriptionModeAll}).Messages, 1)

	srv := httptest.NewServer(console.New(c, nil))
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		t.Helper()
		res, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	for path, want := range map[string]string{
		"/":                      `<tr data-row="orders">`,
		"/queues/orders":         `/groups/orders/billing">billing</a>`,
		"/queues/orders?q=eu":    `<tr data-row="eu">`,
		"/groups":                `<tr data-row="billing" data-queue="orders">`,
		"/groups/orders/billing": `data-page="group"`,
		"/deadletters":           `data-page="deadletters"`,
		"/traces":                `data-page="traces"`,
	} {
		code, body := get(path)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		require.Contains(t, body, want, path)
		require.NotContains(t, body, "internal error", path)
	}
	code, body := get("/queues/orders?partition=eu")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "not supported by this client", "the message browser needs Fetch")
	code, body = get("/parked")
	require.Equal(t, http.StatusNotImplemented, code)
	require.Contains(t, body, "not supported by this client")
}
