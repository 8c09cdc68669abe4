package remote_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// canned is a server answering each path with a fixed body, recording
// what it was asked.
type canned struct {
	mu      sync.Mutex
	answers map[string]string // path -> JSON answer (200)
	delay   time.Duration     // before answering
	asked   []cannedReq
}

type cannedReq struct {
	method, path, query string
	body                map[string]any
}

func (s *canned) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.asked = append(s.asked, cannedReq{r.Method, r.URL.Path, r.URL.RawQuery, body})
	ans, ok := s.answers[r.URL.Path]
	s.mu.Unlock()
	if s.delay > 0 {
		time.Sleep(s.delay) // a server slow to answer: what the test is about
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, ans)
}

func (s *canned) requests() []cannedReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cannedReq(nil), s.asked...)
}

// cannedClient serves answers and dials them as a server of kind k.
func cannedClient(t *testing.T, k remote.Server, answers map[string]string, opts *remote.Options) (*remote.Client, *canned) {
	t.Helper()
	s := &canned{answers: answers}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	if opts == nil {
		opts = &remote.Options{}
	}
	opts.Server = k
	c, err := remote.Dial(srv.URL, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, s
}

// jsonOf is v as the decoded JSON a canned server sees.
func jsonOf(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return m
}

func TestFetchPartitions_Answer(t *testing.T) {
	t.Parallel()
	c, s := cannedClient(t, remote.ServerQueenLite, map[string]string{"/api/v1/fetch": `{"entries":[
		{"queue":"q","partition":"Default","records":[
			{"offset":3,"transactionId":"t3","payload":{"n":3},"ts":"2026-08-28T10:00:00.000001Z"},
			{"offset":4,"transactionId":"t4","payload":null,"ts":"2026-08-28T10:00:01.250000Z"}],
		 "highWatermark":7,"logStartOffset":2},
		{"queue":"gone","partition":"p","records":[],"highWatermark":0,"logStartOffset":0,"error":"UNKNOWN_TOPIC_OR_PARTITION"},
		{"queue":"q","partition":"p2","records":[],"highWatermark":9,"logStartOffset":5,"error":"OFFSET_OUT_OF_RANGE"}]}`}, nil)
	reads, err := c.FetchPartitions(context.Background(), queen.FetchRequest{Partitions: []queen.FetchPartition{
		{Queue: "q", Offset: 3}, {Queue: "gone", Partition: "p", Offset: 0, MaxBytes: 10}, {Queue: "q", Partition: "p2", Offset: 1}}})
	require.NoError(t, err)
	require.Len(t, reads, 3)

	r := reads[0]
	require.Equal(t, "q", r.Queue)
	require.Equal(t, "Default", r.Partition)
	require.EqualValues(t, 7, r.HighWatermark)
	require.EqualValues(t, 2, r.LogStartOffset)
	require.NoError(t, r.Err)
	require.Len(t, r.Records, 2)
	require.Equal(t, queen.Record{Offset: 3, TransactionID: "t3", Payload: json.RawMessage(`{"n":3}`),
		CreatedAt: time.Date(2026, 8, 28, 10, 0, 0, 1000, time.UTC)}, r.Records[0])
	require.Equal(t, queen.Record{Offset: 4, TransactionID: "t4", Payload: json.RawMessage(`null`),
		CreatedAt: time.Date(2026, 8, 28, 10, 0, 1, 250000000, time.UTC)}, r.Records[1])

	require.Equal(t, "gone", reads[1].Queue)
	require.Equal(t, "p", reads[1].Partition)
	require.ErrorIs(t, reads[1].Err, queen.ErrNotFound)
	require.NotNil(t, reads[1].Records)
	require.Empty(t, reads[1].Records)

	require.ErrorIs(t, reads[2].Err, queen.ErrOffsetOutOfRange)
	require.EqualValues(t, 9, reads[2].HighWatermark, "bounds reported with the refusal")
	require.EqualValues(t, 5, reads[2].LogStartOffset)

	asked := s.requests()
	require.Len(t, asked, 1)
	require.Equal(t, http.MethodPost, asked[0].method)
	require.Equal(t, jsonOf(t, `{"entries":[
		{"queue":"q","partition":"Default","offset":3,"maxBytes":1048576},
		{"queue":"gone","partition":"p","offset":0,"maxBytes":10},
		{"queue":"q","partition":"p2","offset":1,"maxBytes":1048576}],"maxWaitMs":0,"minBytes":1}`), asked[0].body)
}

// A fetch's wait is added to the request timeout, as a waiting pop's.
func TestFetchPartitions_LongPollOutlivesRequestTimeout(t *testing.T) {
	t.Parallel()
	c, s := cannedClient(t, remote.ServerQueenLite, map[string]string{"/api/v1/fetch": `{"entries":[
		{"queue":"q","partition":"Default","records":[],"highWatermark":0,"logStartOffset":0}]}`},
		&remote.Options{RequestTimeout: 200 * time.Millisecond, Retries: -1})
	s.delay = 500 * time.Millisecond
	reads, err := c.FetchPartitions(context.Background(), queen.FetchRequest{Partitions: []queen.FetchPartition{{Queue: "q"}},
		MaxWait: time.Second, MinBytes: 5})
	require.NoError(t, err)
	require.Len(t, reads, 1)
	body := s.requests()[0].body
	require.EqualValues(t, 1000, body["maxWaitMs"])
	require.EqualValues(t, 5, body["minBytes"])

	_, err = c.FetchPartitions(context.Background(), queen.FetchRequest{Partitions: []queen.FetchPartition{{Queue: "q"}}})
	require.ErrorIs(t, err, queen.ErrUnavailable, "without a wait the timeout is the request's")
}

func TestFetchPartitions_WrongCount(t *testing.T) {
	t.Parallel()
	c, _ := cannedClient(t, remote.ServerQueenLite, map[string]string{"/api/v1/fetch": `{"entries":[]}`}, nil)
	_, err := c.FetchPartitions(context.Background(), queen.FetchRequest{Partitions: []queen.FetchPartition{{Queue: "q"}}})
	var te *remote.TransportError
	require.ErrorAs(t, err, &te)
}

func TestOffsetForTime_Answer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 8, 28, 12, 0, 0, 123456789, time.FixedZone("x", 2*3600))
	for _, tc := range []struct {
		name, answer string
		want         queen.TimeOffset
		err          error
	}{
		{"found", `{"entries":[{"queue":"q","partition":"p","offset":5,"ts":"2026-08-28T10:00:00.123457Z","highWatermark":8,"logStartOffset":1}]}`,
			queen.TimeOffset{Found: true, Offset: 5, At: time.Date(2026, 8, 28, 10, 0, 0, 123457000, time.UTC), HighWatermark: 8, LogStartOffset: 1}, nil},
		{"none", `{"entries":[{"queue":"q","partition":"p","offset":null,"ts":null,"highWatermark":8,"logStartOffset":1}]}`,
			queen.TimeOffset{HighWatermark: 8, LogStartOffset: 1}, nil},
		{"unknown", `{"entries":[{"queue":"q","partition":"p","offset":null,"ts":null,"highWatermark":0,"logStartOffset":0,"error":"UNKNOWN_TOPIC_OR_PARTITION"}]}`,
			queen.TimeOffset{}, queen.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := cannedClient(t, remote.ServerQueenLite, map[string]string{"/api/v1/fetch/offsets": tc.answer}, nil)
			got, err := c.OffsetForTime(ctx, "q", "p", at)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, got)
			asked := s.requests()
			require.Len(t, asked, 1)
			require.Equal(t, jsonOf(t, `{"entries":[{"queue":"q","partition":"p","timestamp":"2026-08-28T10:00:00.123456789Z"}]}`), asked[0].body)
		})
	}
}

func TestGroupPositions_Answer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, s := cannedClient(t, remote.ServerQueenLite, map[string]string{"/api/v1/consumer-groups/positions": `{"consumerGroup":"__QUEUE_MODE__","entries":[
		{"queue":"q","partition":"p","offset":42,"metadata":"note"},
		{"queue":"q","partition":"Default","offset":0,"metadata":""},
		{"queue":"r","partition":"x","offset":null}]}`}, nil)
	got, err := c.GroupPositions(ctx, "", []queen.PartitionRef{{Queue: "q", Partition: "p"}, {Queue: "q"}, {Queue: "r", Partition: "x"}})
	require.NoError(t, err)
	require.Equal(t, []queen.Position{
		{Group: queen.QueueModeGroup, Queue: "q", Partition: "p", Offset: 42, Metadata: "note"},
		{Group: queen.QueueModeGroup, Queue: "q", Partition: "Default", Offset: 0},
		{Group: queen.QueueModeGroup, Queue: "r", Partition: "x", Offset: queen.NoOffset},
	}, got)
	require.Equal(t, jsonOf(t, `{"consumerGroup":"__QUEUE_MODE__","entries":[
		{"queue":"q","partition":"p"},{"queue":"q","partition":"Default"},{"queue":"r","partition":"x"}]}`), s.requests()[0].body)

	// No partitions named: every position, and no entries key sent.
	all, err := c.GroupPositions(ctx, "g", nil)
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, jsonOf(t, `{"consumerGroup":"g"}`), s.requests()[1].body)
}

func TestGroupPositions_WrongCount(t *testing.T) {
	t.Parallel()
	c, _ := cannedClient(t, remote.ServerQueenLite, map[string]string{"/api/v1/consumer-groups/positions": `{"consumerGroup":"g","entries":[]}`}, nil)
	_, err := c.GroupPositions(context.Background(), "g", []queen.PartitionRef{{Queue: "q"}})
	var te *remote.TransportError
	require.ErrorAs(t, err, &te)
}

// A transaction's positions travel beside its operations, and their
// results come after the operations' in the answer.
func TestExecTransaction_Positions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ops := []queen.TxOp{
		{Ack: &queen.AckItem{TransactionID: "t1", PartitionID: "p1", LeaseID: "l1"}},
		{Position: &queen.Position{Group: "g", Queue: "q", Offset: 4, Metadata: "m"}},
		{Push: &queen.PushItem{Queue: "out", TransactionID: "t2", Payload: json.RawMessage(`{}`)}},
		{Position: &queen.Position{Queue: "q", Partition: "p", Forget: true}},
	}
	c, s := cannedClient(t, remote.ServerQueenLite, map[string]string{"/api/v1/transaction": `{"transactionId":"x","success":true,"results":[
		{"index":0,"type":"ack","success":true,"transactionId":"t1"},
		{"index":1,"type":"push","success":true,"transactionId":"t2","status":"queued","offset":0},
		{"index":2,"type":"position","success":true,"offset":4},
		{"index":3,"type":"position","success":true,"offset":2}]}`}, nil)
	res, err := c.ExecTransaction(ctx, ops)
	require.NoError(t, err)
	require.Len(t, res.Results, 4)
	require.True(t, res.Results[0].Ack.Success)
	require.Equal(t, "t2", res.Results[2].Push.TransactionID)
	require.Equal(t, &queen.Position{Group: "g", Queue: "q", Partition: "Default", Offset: 4, Metadata: "m"}, res.Results[1].Position)
	require.Equal(t, &queen.Position{Queue: "q", Partition: "p", Offset: 2, Forget: true}, res.Results[3].Position,
		"a forgotten position at the group's start point")
	body := s.requests()[0].body
	require.Len(t, body["operations"], 2)
	require.Equal(t, jsonOf(t, `{"positions":[
		{"queue":"q","partition":"Default","consumerGroup":"g","offset":4,"metadata":"m"},
		{"queue":"q","partition":"p","consumerGroup":"__QUEUE_MODE__","offset":null,"metadata":""}]}`)["positions"], body["positions"])

	// Positions alone: an empty operations list beside them.
	require.NoError(t, c.SetPosition(ctx, queen.Position{Group: "g", Queue: "q", Offset: 1}))
	body = s.requests()[1].body
	require.Equal(t, []any{}, body["operations"])
	require.Len(t, body["positions"], 1)
}

// A refused position aborts the transaction, naming the position's index
// in the operations given.
func TestExecTransaction_PositionRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		reason string
		want   error
	}{
		{"POSITION operation failed: Offset out of range", queen.ErrOffsetOutOfRange},
		{"POSITION operation failed: Queue not found", queen.ErrNotFound},
		{"POSITION operation failed: Partition not found", queen.ErrNotFound},
	} {
		answer := `{"transactionId":"x","success":false,"error":"` + tc.reason + `","results":[
			{"index":0,"type":"ack","success":true,"transactionId":"t1"},
			{"index":1,"type":"push","success":false,"transactionId":"t2"},
			{"index":2,"type":"position","success":false}]}`
		c, _ := cannedClient(t, remote.ServerQueenLite, map[string]string{"/api/v1/transaction": answer}, nil)
		res, err := c.ExecTransaction(ctx, []queen.TxOp{
			{Position: &queen.Position{Group: "g", Queue: "q", Offset: 99}},
			{Ack: &queen.AckItem{TransactionID: "t1", PartitionID: "p1", LeaseID: "l1"}},
			{Push: &queen.PushItem{Queue: "out", TransactionID: "t2", Payload: json.RawMessage(`{}`)}},
		})
		require.ErrorIs(t, err, queen.ErrTransactionAborted, tc.reason)
		require.ErrorIs(t, err, tc.want, tc.reason)
		var te *queen.TransactionError
		require.ErrorAs(t, err, &te)
		require.Equal(t, 0, te.Index, "the position is ops[0]")
		require.Equal(t, "position", te.Op)
		require.NotNil(t, res)
		require.Len(t, res.Results, 1, "as a Broker's: up to the refused operation")
		require.Nil(t, res.Results[0].Position, "nothing was set")

		err = c.SetPosition(ctx, queen.Position{Group: "g", Queue: "q", Offset: 99})
		require.ErrorIs(t, err, tc.want, "SetPosition returns the cause")
		require.NotErrorIs(t, err, queen.ErrTransactionAborted)
	}
}

// With two positions, the refused one is the answer's last result.
func TestExecTransaction_SecondPositionRefused(t *testing.T) {
	t.Parallel()
	c, s := cannedClient(t, remote.ServerQueenLite, map[string]string{"/api/v1/transaction": `{"transactionId":"x","success":false,
		"error":"POSITION operation failed: Offset out of range","results":[
		{"index":0,"type":"ack","success":true,"transactionId":"t1"},
		{"index":1,"type":"position","success":false},
		{"index":2,"type":"position","success":false}]}`}, nil)
	res, err := c.ExecTransaction(context.Background(), []queen.TxOp{
		{Position: &queen.Position{Group: "g", Queue: "q", Offset: 1}},
		{Ack: &queen.AckItem{TransactionID: "t1", PartitionID: "p1", LeaseID: "l1"}},
		{Position: &queen.Position{Group: "g", Queue: "q", Partition: "p", Offset: 99}},
	})
	var te *queen.TransactionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 2, te.Index)
	require.Equal(t, "position", te.Op)
	require.ErrorIs(t, err, queen.ErrOffsetOutOfRange)
	require.Len(t, res.Results, 3)
	require.Nil(t, res.Results[0].Position)
	require.False(t, res.Results[1].Ack.Success, "an aborted transaction settled nothing")
	require.Len(t, s.requests()[0].body["positions"], 2)
}

func TestPop_Queen2Echoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	msg := `[{"id":"m","transactionId":"t","partitionId":"pid","partition":"Default","queue":"q","leaseId":"l","data":{}}]`
	for _, tc := range []struct {
		name, answer string
		conflation   bool // asked
		conflating   bool
		conflict     bool
		autopilot    *queen.AutopilotAdvice
	}{
		{"all", `{"success":true,"conflation":true,"conflationConflict":true,"autopilot":{"partitions":3,"batch":150,"waitMs":250},"messages":` + msg + `}`,
			false, true, true, &queen.AutopilotAdvice{Partitions: 3, Batch: 150, Wait: 250 * time.Millisecond}},
		{"ours and 2.x", `{"success":true,"conflating":false,"conflation":true,"autopilot":{"partitions":1,"batch":100},"messages":` + msg + `}`,
			false, true, false, &queen.AutopilotAdvice{Partitions: 1, Batch: 100}},
		{"stored off", `{"messages":[],"conflationConflict":true}`, true, false, true, nil},
		{"stored on, empty", `{"messages":[],"conflation":true,"conflationConflict":true}`, false, true, true, nil},
		{"malformed autopilot", `{"success":true,"autopilot":"fast","messages":` + msg + `}`, false, false, false, nil},
		{"autopilot without batch", `{"success":true,"autopilot":{"partitions":2},"messages":` + msg + `}`, false, false, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := cannedClient(t, remote.ServerQueenLite, map[string]string{"/api/v1/pop/queue/q": tc.answer}, nil)
			req := queen.PopRequest{Queue: "q", Autopilot: true}
			if tc.conflation {
				req.Group, req.Conflation = "g", true
			}
			res, err := c.Pop(ctx, req)
			require.NoError(t, err)
			require.Equal(t, tc.conflating, res.Conflating, "Conflating")
			require.Equal(t, tc.conflict, res.ConflationConflict, "ConflationConflict")
			require.Equal(t, tc.autopilot, res.Autopilot, "Autopilot")
		})
	}
}

// Against Queen's 1.x server the new calls are ErrUnsupported, and
// nothing is sent.
func TestReads_UnsupportedOnQueen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, s := cannedClient(t, remote.ServerQueen, map[string]string{}, nil)
	_, err := c.FetchPartitions(ctx, queen.FetchRequest{Partitions: []queen.FetchPartition{{Queue: "q"}}})
	require.ErrorIs(t, err, queen.ErrUnsupported)
	_, err = c.OffsetForTime(ctx, "q", "", time.Now())
	require.ErrorIs(t, err, queen.ErrUnsupported)
	_, err = c.GroupPositions(ctx, "g", nil)
	require.ErrorIs(t, err, queen.ErrUnsupported)
	err = c.SetPosition(ctx, queen.Position{Group: "g", Queue: "q", Offset: 1})
	require.ErrorIs(t, err, queen.ErrUnsupported)
	_, err = c.ExecTransaction(ctx, []queen.TxOp{
		{Push: &queen.PushItem{Queue: "q", Payload: json.RawMessage(`{}`)}},
		{Position: &queen.Position{Group: "g", Queue: "q", Forget: true}},
	})
	require.ErrorIs(t, err, queen.ErrUnsupported)
	require.Empty(t, s.requests())
}

// A server without the routes (an older cmd/queen) answers them as
// unsupported, not as a missing queue.
func TestReads_MissingRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := cannedClient(t, remote.ServerQueenLite, map[string]string{}, nil)
	_, err := c.FetchPartitions(ctx, queen.FetchRequest{Partitions: []queen.FetchPartition{{Queue: "q"}}})
	require.ErrorIs(t, err, queen.ErrUnsupported)
	_, err = c.OffsetForTime(ctx, "q", "", time.Now())
	require.ErrorIs(t, err, queen.ErrUnsupported)
	_, err = c.GroupPositions(ctx, "g", nil)
	require.ErrorIs(t, err, queen.ErrUnsupported)
}

// Remote refuses what a Broker refuses, with the same ArgumentError,
// before sending.
func TestReads_Arguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	c, s := cannedClient(t, remote.ServerQueenLite, map[string]string{}, nil)
	long := strings.Repeat("x", queen.MaxNameLen+1)
	many := make([]queen.FetchPartition, queen.MaxFetchPartitions+1)
	for i := range many {
		many[i].Queue = "q"
	}
	fetch := func(req queen.FetchRequest) func(queen.Client) error {
		return func(c queen.Client) error { _, err := c.FetchPartitions(ctx, req); return err }
	}
	setPos := func(pos queen.Position) func(queen.Client) error {
		return func(c queen.Client) error { return c.SetPosition(ctx, pos) }
	}
	one := func(p queen.FetchPartition) queen.FetchRequest {
		return queen.FetchRequest{Partitions: []queen.FetchPartition{{Queue: "ok"}, p}}
	}
	for name, call := range map[string]func(queen.Client) error{
		"fetch negative offset":  fetch(one(queen.FetchPartition{Queue: "q", Offset: -1})),
		"fetch empty queue":      fetch(one(queen.FetchPartition{})),
		"fetch long queue":       fetch(one(queen.FetchPartition{Queue: long})),
		"fetch long partition":   fetch(one(queen.FetchPartition{Queue: "q", Partition: long})),
		"fetch NUL":              fetch(one(queen.FetchPartition{Queue: "a\x00b"})),
		"fetch big MaxBytes":     fetch(one(queen.FetchPartition{Queue: "q", MaxBytes: queen.MaxFetchBytes + 1})),
		"fetch negative bytes":   fetch(one(queen.FetchPartition{Queue: "q", MaxBytes: -1})),
		"fetch too many":         fetch(queen.FetchRequest{Partitions: many}),
		"fetch long wait":        fetch(queen.FetchRequest{MaxWait: queen.MaxFetchWait + time.Millisecond}),
		"fetch negative wait":    fetch(queen.FetchRequest{MaxWait: -1}),
		"fetch negative bytes2":  fetch(queen.FetchRequest{MinBytes: -1}),
		"offsets empty queue":    func(c queen.Client) error { _, err := c.OffsetForTime(ctx, "", "", time.Now()); return err },
		"offsets long partition": func(c queen.Client) error { _, err := c.OffsetForTime(ctx, "q", long, time.Now()); return err },
		"positions long group":   func(c queen.Client) error { _, err := c.GroupPositions(ctx, long, nil); return err },
		"positions empty queue": func(c queen.Client) error {
			_, err := c.GroupPositions(ctx, "g", []queen.PartitionRef{{Queue: "q"}, {}})
			return err
		},
		"positions too many": func(c queen.Client) error {
			_, err := c.GroupPositions(ctx, "g", make([]queen.PartitionRef, queen.MaxPositionReads+1))
			return err
		},
		"set negative offset": setPos(queen.Position{Group: "g", Queue: "q", Offset: -1}),
		"set long metadata":   setPos(queen.Position{Group: "g", Queue: "q", Metadata: strings.Repeat("m", queen.MaxPositionMetadata+1)}),
		"set empty queue":     setPos(queen.Position{Group: "g"}),
		"set long group":      setPos(queen.Position{Group: long, Queue: "q"}),
		"txn two kinds": func(c queen.Client) error {
			_, err := c.ExecTransaction(ctx, []queen.TxOp{{Push: &queen.PushItem{Queue: "q"}, Position: &queen.Position{Queue: "q"}}})
			return err
		},
	} {
		want, got := call(b), call(c)
		var wa, ga *queen.ArgumentError
		require.ErrorAs(t, want, &wa, "%s: the Broker's", name)
		require.ErrorAs(t, got, &ga, "%s: remote's", name)
		require.Equal(t, *wa, *ga, name)
	}
	// Forgetting ignores Offset and Metadata, in both.
	forget := queen.Position{Group: "g", Queue: "nowhere", Offset: -5, Forget: true}
	require.ErrorIs(t, b.SetPosition(ctx, forget), queen.ErrNotFound)
	require.Empty(t, s.requests())
}
