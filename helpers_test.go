package queen_test

import (
	"context"
	"encoding/json"
	"testing"

	"sync"
	"time"

	"sort"

	"io/fs"
	"os"
	"path/filepath"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

// The calls most tests make, failing the test on an error (see
// internal/queentest).
var (
	pushN      = itest.PushN
	pop        = itest.Pop
	ackItems   = itest.AckItems
	ack        = itest.Ack
	offsets    = itest.Offsets
	attemptsOf = itest.AttemptsOf
)

func pushOne(t testing.TB, b *queen.Broker, queue, partition, txid, payload string) queen.PushResult {
	t.Helper()
	res, err := b.Push(bg, []queen.PushItem{{Queue: queue, Partition: partition, TransactionID: txid, Payload: json.RawMessage(payload)}})
	require.NoError(t, err)
	return res[0]
}

// configureWith creates queue with the default configuration changed by set.
func configureWith(t testing.TB, b *queen.Broker, queue string, set func(*queen.QueueConfig)) {
	t.Helper()
	cfg := queen.DefaultQueueConfig()
	set(&cfg)
	_, err := b.ConfigureQueue(bg, queue, cfg)
	require.NoError(t, err)
}

func ackAll(t testing.TB, b *queen.Broker, msgs []*queen.Message, st queen.AckStatus) []queen.AckResult {
	t.Helper()
	res := ack(t, b, ackItems(msgs, st)...)
	for _, r := range res {
		require.True(t, r.Success, "ack refused: %v", r.Err)
	}
	return res
}

// skipUnderRace skips a test that moves hundreds of MiB on one goroutine
// when the race detector is on: it finds nothing there and makes the test
// take minutes on a loaded machine. The suites CI runs without -race (the
// shifted-epoch runs of CONTRIBUTING.md) run it.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if itest.RaceEnabled {
		t.Skip("one goroutine moving hundreds of MiB: run without -race")
	}
}

// storedCounts maps every queue to its stored message count.
func storedCounts(t *testing.T, b *queen.Broker) map[string]int64 {
	t.Helper()
	qs, err := b.ListQueues(bg)
	require.NoError(t, err)
	m := make(map[string]int64, len(qs))
	for _, q := range qs {
		m[q.Name] = q.Messages
	}
	return m
}

// inWriterOrder runs steps, each in a goroutine of its own, queued for the
// writer one after the other behind a held commit (a push to queue
// "other"), then lets the writer go and waits for them: whatever a step
// decides in memory before it waits for the writer is decided in this
// order, before any of their writes is applied.
func inWriterOrder(t *testing.T, b *queen.Broker, steps ...func()) {
	t.Helper()
	behindCommit(t, b, func() { pushOne(t, b, "other", "", "blocker", `0`) }, steps...)
}

// behindCommit is inWriterOrder behind the commit of first's write: the
// writer holds that write alone, and commits it before the steps'.
func behindCommit(t *testing.T, b *queen.Broker, first func(), steps ...func()) {
	t.Helper()
	held, queued, release := queen.HoldCommitsForTest(b)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); first() }()
	<-held // the writer waits in front of first's commit
	for i, step := range steps {
		wg.Add(1)
		go func() { defer wg.Done(); step() }()
		require.Eventually(t, func() bool { return queued() == i+1 }, 10*time.Second, time.Millisecond)
	}
	release()
	wg.Wait()
}

// sortedTxids lists the transaction ids of msgs, sorted.
func sortedTxids(msgs []*queen.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.TransactionID
	}
	sort.Strings(out)
	return out
}

// comeBack expires every lease on clock and pops what is delivered again
// from queue (queue mode).
func comeBack(t *testing.T, b *queen.Broker, advance func(time.Duration), queue string) []*queen.Message {
	t.Helper()
	advance(61 * time.Second) // the leases run out
	msgs, err := b.Queue(queue).Autopilot(false).Wait(false).Batch(100).Partitions(10).Pop(context.Background())
	require.NoError(t, err)
	return msgs
}

// statusGate is an Observer that holds the first ack call applying items
// of one status, after its commit and before it returns, until release is
// closed; entered is closed once that call is held, left once it goes on.
type statusGate struct {
	status  queen.AckStatus
	entered chan struct{}
	release chan struct{}
	left    chan struct{}
	once    sync.Once
	held    bool // the call was released by release, not by a timeout; read after left
}

func newStatusGate(st queen.AckStatus) *statusGate {
	return &statusGate{status: st, entered: make(chan struct{}), release: make(chan struct{}), left: make(chan struct{})}
}

func (g *statusGate) Observe(e queen.Event) {
	if e.Kind != queen.EventAck || e.Status != g.status {
		return
	}
	g.once.Do(func() {
		close(g.entered)
		g.held = await(g.release)
		close(g.left)
	})
}

// laneAcks is an Observer that reports the size of each ack call that
// completed messages on calls, holding the first one, after its commit
// and before it returns, until release is closed.
type laneAcks struct {
	calls   chan int
	release chan struct{}
	once    sync.Once
}

func (l *laneAcks) Observe(e queen.Event) {
	if e.Kind != queen.EventAck || e.Status != queen.AckCompleted {
		return
	}
	l.calls <- e.Count
	l.once.Do(func() { await(l.release) })
}

// awaitValue waits for a value on ch, up to `within`.
func awaitValue[T any](ch <-chan T) (T, bool) {
	select {
	case v := <-ch:
		return v, true
	case <-time.After(within):
		var zero T
		return zero, false
	}
}

// limitQueue configures queue with MaxSize n.
func limitQueue(t *testing.T, b *queen.Broker, queue string, n int) {
	t.Helper()
	cfg := queen.DefaultQueueConfig()
	cfg.MaxSize = n
	_, err := b.ConfigureQueue(bg, queue, cfg)
	require.NoError(t, err)
}

func queueStats(t *testing.T, b *queen.Broker, queue string) *queen.QueueStats {
	t.Helper()
	st, err := b.QueueStats(bg, queue)
	require.NoError(t, err)
	return st
}

// openDurable opens a broker on disk with the default durability
// (SyncEveryCommit) and a fake clock, so no timer-driven maintenance
// writes during the test.
func openDurable(t *testing.T) *queen.Broker {
	t.Helper()
	b := itest.OpenDir(t, t.TempDir(), &queen.Options{Clock: itest.NewClock()})
	return b
}

// walkFiles calls fn with the contents of every regular file under dir.
func walkFiles(dir string, fn func([]byte)) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(data)
		return nil
	})
}
