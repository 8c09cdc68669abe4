package queen_test

import (
	"testing"

	"context"
	"fmt"
	"sync"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestCounters_CountDiscoveryPops: Counters.Popped counts the
// messages of a discovery pop (by Namespace/Task, without a queue), and
// the Observer sees it as a pop of the queue it served.
func TestCounters_CountDiscoveryPops(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	cfg := queen.DefaultQueueConfig()
	cfg.Namespace, cfg.Task = "ns", "task"
	_, err := b.ConfigureQueue(bg, "q", cfg)
	require.NoError(t, err)
	pushN(t, b, "q", "", 3)
	res := pop(t, b, queen.PopRequest{Namespace: "ns", Batch: 2})
	require.Len(t, res.Messages, 2)
	ackAll(t, b, res.Messages, queen.AckCompleted)
	res = pop(t, b, queen.PopRequest{Task: "task", Batch: 5, CommitOnDelivery: true})
	require.Len(t, res.Messages, 1)
	res = pop(t, b, queen.PopRequest{Namespace: "ns", Task: "task"})
	require.Empty(t, res.Messages)
	require.Equal(t, int64(3), b.Counters().Popped)
}

// TestCounters_AcksCountWhatChanged: an ack item is counted once, when it
// settles or gives back a message; acking an already settled message
// again, or an item behind one that comes back in the same call, changes
// nothing and is not counted.
func TestCounters_AcksCountWhatChanged(t *testing.T) {
	t.Parallel()
	t.Run("re-acks of settled messages", func(t *testing.T) {
		t.Parallel()
		var obs eventLog
		b := queentest.NewBroker(t, &queen.Options{Observer: &obs})
		pushTo(t, b, "q", "Default", numbered(2)...)
		msgs := pop(t, b, queen.PopRequest{Queue: "q", Batch: 2}).Messages
		require.Len(t, msgs, 2)
		m1, m2 := msgs[0], msgs[1]
		completed := func() int64 { return b.Counters().Acked[queen.AckCompleted] }

		ackAll(t, b, []*queen.Message{m2}, queen.AckCompleted) // settled, cursor held by m1
		require.EqualValues(t, 1, completed())
		again := ack(t, b, ackItems([]*queen.Message{m2}, queen.AckCompleted)...) // same lease
		require.ErrorIs(t, again[0].Err, queen.ErrAlreadySettled)
		require.EqualValues(t, 1, completed(), "a re-ack within the lease")
		ackAll(t, b, []*queen.Message{m1}, queen.AckCompleted)
		require.EqualValues(t, 2, completed())
		require.EqualValues(t, 2, cursorOf(t, b, "q", "Default", "").Offset)
		for _, m := range msgs { // below the cursor now, fenced and unfenced
			res, err := b.Ack(context.Background(), m, true, queen.AckOptions{LeaseID: "-"})
			require.ErrorIs(t, err, queen.ErrAlreadySettled, "fenced by a lease that is gone")
			require.False(t, res.Success)
			m.LeaseID = ""
			res, err = b.Ack(context.Background(), m, true, queen.AckOptions{})
			require.ErrorIs(t, err, queen.ErrAlreadySettled, "unfenced")
			require.False(t, res.Success, "settled before: refused")
		}
		require.EqualValues(t, 2, completed(), "settled before: not counted")
		require.Equal(t, map[eventKey]int{{kind: queen.EventAck, queue: "q", group: queen.QueueModeGroup, status: queen.AckCompleted}: 2}, obs.acks())
	})
	t.Run("items behind one that comes back", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, nil)
		configure(t, b, "q", 3)
		pushTo(t, b, "q", "Default", numbered(3)...)
		msgs := pop(t, b, queen.PopRequest{Queue: "q", Batch: 3}).Messages
		require.Len(t, msgs, 3)
		items := ackItems(msgs, queen.AckCompleted)
		items[0].Status = queen.AckFailed
		for _, r := range ack(t, b, items...) {
			require.True(t, r.Success)
		}
		cnt := b.Counters()
		require.EqualValues(t, 1, cnt.Acked[queen.AckFailed])
		require.Zero(t, cnt.Acked[queen.AckCompleted], "delivered again, not completed")

		msgs = pop(t, b, queen.PopRequest{Queue: "q", Batch: 3}).Messages
		require.Len(t, msgs, 3)
		ackAll(t, b, msgs, queen.AckCompleted)
		require.EqualValues(t, 3, b.Counters().Acked[queen.AckCompleted])
	})
}

// TestCounters_BatchAckCountsEachItemUnderItsQueueAndGroup: one AckBatch
// over several queues and groups is observed per queue and group.
func TestCounters_BatchAckCountsEachItemUnderItsQueueAndGroup(t *testing.T) {
	t.Parallel()
	var obs eventLog
	b := queentest.NewBroker(t, &queen.Options{Observer: &obs})
	configure(t, b, "b", 3)
	pushTo(t, b, "a", "Default", `{"n":0}`)
	pushTo(t, b, "b", "Default", numbered(2)...)
	g1 := pop(t, b, queen.PopRequest{Queue: "a", Group: "g1", SubscriptionMode: queen.SubscriptionModeAll}).Messages
	qm := pop(t, b, queen.PopRequest{Queue: "b", Batch: 2}).Messages
	g2 := pop(t, b, queen.PopRequest{Queue: "a", Group: "g2", SubscriptionMode: queen.SubscriptionModeAll}).Messages
	require.Len(t, g1, 1)
	require.Len(t, qm, 2)
	require.Len(t, g2, 1)
	items := append(ackItems(g1, queen.AckCompleted), ackItems(qm, queen.AckCompleted)...)
	items[2].Status = queen.AckFailed
	items = append(items, ackItems(g2, queen.AckDLQ)...)
	for _, r := range ack(t, b, items...) {
		require.True(t, r.Success, "%v", r.Err)
	}
	require.Equal(t, map[eventKey]int{
		{kind: queen.EventAck, queue: "a", group: "g1", status: queen.AckCompleted}:                 1,
		{kind: queen.EventAck, queue: "b", group: queen.QueueModeGroup, status: queen.AckCompleted}: 1,
		{kind: queen.EventAck, queue: "b", group: queen.QueueModeGroup, status: queen.AckFailed}:    1,
		{kind: queen.EventAck, queue: "a", group: "g2", status: queen.AckDLQ}:                       1,
	}, obs.acks())
}

// TestCounters_BatchAckOverManyQueues: an ack call over more queues than
// the few it expects, items interleaved, still counts each under its own.
func TestCounters_BatchAckOverManyQueues(t *testing.T) {
	t.Parallel()
	const queues = 20
	var obs eventLog
	var mu sync.Mutex
	events := map[string]int{} // EventAck events per queue
	b := queentest.NewBroker(t, &queen.Options{Observer: queen.ObserverFunc(func(e queen.Event) {
		obs.Observe(e)
		if e.Kind == queen.EventAck {
			mu.Lock()
			events[e.Queue]++
			mu.Unlock()
		}
	})})
	var msgs [queues][]*queen.Message
	for i := range queues {
		q := fmt.Sprintf("q%02d", i)
		pushTo(t, b, q, "Default", numbered(i%3+1)...)
		msgs[i] = pop(t, b, queen.PopRequest{Queue: q, Batch: 3}).Messages
		require.Len(t, msgs[i], i%3+1)
	}
	var items []queen.AckItem
	want := map[eventKey]int{}
	for k := range 3 { // k-th message of every queue, then the next
		for i := range queues {
			if k < len(msgs[i]) {
				items = append(items, ackItems(msgs[i][k:k+1], queen.AckCompleted)...)
				want[eventKey{kind: queen.EventAck, queue: fmt.Sprintf("q%02d", i), group: queen.QueueModeGroup, status: queen.AckCompleted}]++
			}
		}
	}
	for _, r := range ack(t, b, items...) {
		require.True(t, r.Success, "%v", r.Err)
	}
	require.Equal(t, want, obs.acks())
	require.EqualValues(t, len(items), b.Counters().Acked[queen.AckCompleted])
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, events, queues)
	for q, n := range events {
		require.Equal(t, 1, n, "one event for %s", q)
	}
}

// TestCounters_DeadLetterAndParkInOneAck: one ack call that dead-letters
// one message and parks the next of the same partition counts one of each,
// not both as the kind of the first.
func TestCounters_DeadLetterAndParkInOneAck(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "mixed", "p", 2)
	got := pop(t, b, queen.PopRequest{Queue: "mixed", Batch: 2})
	require.Len(t, got.Messages, 2)
	items := ackItems(got.Messages, queen.AckDLQ)
	items[1].Status = queen.AckPark
	for _, r := range ack(t, b, items...) {
		require.True(t, r.Success, "%v", r.Err)
	}
	c := b.Counters()
	require.EqualValues(t, 1, c.DeadLettered)
	require.EqualValues(t, 1, c.Parked)
	st, err := b.QueueStats(bg, "mixed")
	require.NoError(t, err)
	require.EqualValues(t, 1, st.DeadLetters)
	require.EqualValues(t, 1, st.Parked)
}

// pushLog sums EventPush counts by queue.
type pushLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *pushLog) Observe(e queen.Event) {
	if e.Kind != queen.EventPush {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[e.Queue] += e.Count
}

// TestCounters_PushesAndTransactions: a push over several queues reports
// each queue's messages under that queue, and a transaction's acks and
// pushes are counted as the stand-alone calls are.
func TestCounters_PushesAndTransactions(t *testing.T) {
	t.Parallel()
	var pl pushLog
	b := queentest.NewBroker(t, &queen.Options{Observer: &pl})
	_, err := b.Push(bg, []queen.PushItem{
		{Queue: "a", Payload: []byte(`1`)}, {Queue: "b", Payload: []byte(`2`)},
		{Queue: "a", Payload: []byte(`3`)}, {Queue: "c", TransactionID: "x", Payload: []byte(`4`)},
		{Queue: "c", TransactionID: "x", Payload: []byte(`4`)}, // a duplicate: not counted
	})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"a": 2, "b": 1, "c": 1}, pl.n)

	got := pop(t, b, queen.PopRequest{Queue: "a"})
	require.Len(t, got.Messages, 1)
	_, err = b.Transaction().Ack(got.Messages[0], queen.AckCompleted, queen.AckOptions{}).
		Push(queen.PushItem{Queue: "out", Payload: []byte(`5`)}).Commit(bg)
	require.NoError(t, err)
	c := b.Counters()
	require.EqualValues(t, 1, c.Acked[queen.AckCompleted], "the transaction's ack")
	require.EqualValues(t, 5, c.Pushed, "four pushed, one by the transaction")
	require.Equal(t, 1, pl.n["out"])
}
