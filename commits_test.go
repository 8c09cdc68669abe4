package queen_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// openDurable opens a broker on disk with the default durability
// (SyncEveryCommit) and a fake clock, so no timer-driven maintenance
// writes during the test.
func openDurable(t *testing.T) *queen.Broker {
	t.Helper()
	b := itest.OpenDir(t, t.TempDir(), &queen.Options{Clock: itest.NewClock()})
	return b
}

// TestPop_DurableDefaultWritesNothing: a lease lives in memory (a lost
// lease only means redelivery), so a pop that leases messages of an
// existing group commits nothing, and so waits for no fsync; the ack is
// what is written.
func TestPop_DurableDefaultWritesNothing(t *testing.T) {
	b := openDurable(t)
	for p := range 4 {
		_, err := b.Push(bg, []queen.PushItem{{Queue: "q", Partition: string(rune('a' + p)), Payload: []byte(`1`)}, {Queue: "q", Partition: string(rune('a' + p)), Payload: []byte(`2`)}})
		require.NoError(t, err)
	}
	req := queen.PopRequest{Queue: "q", Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Batch: 1}
	first, err := b.Pop(bg, req) // the group's first pop writes its start point
	require.NoError(t, err)
	require.Len(t, first.Messages, 1)

	before := queen.CommitsForTest(b)
	var leased []*queen.Message
	for range 3 {
		res, err := b.Pop(bg, req)
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		leased = append(leased, res.Messages...)
	}
	res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Group: "g", Batch: 10}) // nothing free: every partition leased
	require.NoError(t, err)
	require.Empty(t, res.Messages)
	require.Equal(t, before, queen.CommitsForTest(b), "pops committed")

	_, err = b.Ack(bg, leased[0], true, queen.AckOptions{})
	require.NoError(t, err)
	require.Equal(t, before+1, queen.CommitsForTest(b), "an ack is one commit")
}

// TestAck_ConcurrentAcksShareOneCommit: acks that reach the writer while
// it is busy are written together, in one transaction and one fsync
// (group commit), whoever sent them.
func TestAck_ConcurrentAcksShareOneCommit(t *testing.T) {
	b := openDurable(t)
	const n = 8
	var msgs []*queen.Message
	for p := range n + 1 {
		part := string(rune('a' + p))
		_, err := b.Push(bg, []queen.PushItem{{Queue: "q", Partition: part, Payload: []byte(`1`)}})
		require.NoError(t, err)
		res, err := b.Pop(bg, queen.PopRequest{Queue: "q", Partition: part, Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		msgs = append(msgs, res.Messages[0])
	}

	held, queued, release := queen.HoldCommitsForTest(b)
	defer release()
	before := queen.CommitsForTest(b)
	ack := func(m *queen.Message, errs chan<- error) {
		_, err := b.Ack(bg, m, true, queen.AckOptions{})
		errs <- err
	}
	errs := make(chan error, n+1)
	go ack(msgs[n], errs) // the writer takes it and waits at the gate
	<-held
	var wg sync.WaitGroup
	for _, m := range msgs[:n] {
		wg.Add(1)
		go func() { defer wg.Done(); ack(m, errs) }()
	}
	for queued() != n { // the acks reach the writer's queue
		runtime.Gosched()
	}
	release()
	wg.Wait()
	for range n + 1 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, before+2, queen.CommitsForTest(b), "the held ack, then the %d others in one commit", n)
}
