package queen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flag"
	"math/rand/v2"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/compat"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// openStore opens a broker in dir on clock, with maintenance left to the
// test (it calls Maintain when it wants retention to run).
func openStore(t testing.TB, dir string, clock queen.Clock) *queen.Broker {
	t.Helper()
	return itest.OpenDir(t, dir, &queen.Options{Clock: clock, Durability: queen.SyncNever, MaintenanceInterval: time.Hour})
}

// richQueues are the queues richState fills: every kind of durable state.
var richQueues = []string{"orders", "events", "jobs"}

// keepDLQ sets Queen's deadLetterQueue setting of c, which the broker
// stores and reports back.
func keepDLQ(c *queen.QueueConfig) {
	f := compat.Of(c)
	f.DeadLetterQueue = true
	compat.Set(c, f)
}

// richState gives b every kind of durable state a backup must keep:
// queue configurations, partitions, messages, cursors of named groups and
// of queue mode, a group started at a time, a retry counter, dead letters,
// parked messages and dedup entries. No lease is left running.
func richState(t *testing.T, b *queen.Broker, clock *queentest.Clock) {
	t.Helper()
	configureWith(t, b, "orders", func(c *queen.QueueConfig) {
		c.RetryLimit, c.LeaseTime, c.Priority = 2, 45*time.Second, 3
		keepDLQ(c)
	})
	configureWith(t, b, "events", func(c *queen.QueueConfig) { c.MaxSize, c.Retention = 500, 48*time.Hour })
	for i := range 6 {
		for _, p := range []string{"eu", "us"} {
			pushOne(t, b, "orders", p, fmt.Sprintf("o-%s-%d", p, i), fmt.Sprintf(`{"order":%d,"region":%q}`, i, p))
		}
	}
	pushN(t, b, "events", "Default", 4)
	clock.Advance(time.Minute)
	from := clock.Now()
	pushN(t, b, "events", "late", 3)
	pushOne(t, b, "jobs", "", "job-1", `{"job":1}`)
	pushOne(t, b, "jobs", "", "job-2", `{"job":2}`)
	pushOne(t, b, "jobs", "", "job-3", `{"job":3}`)

	// billing reads two orders of eu and completes them.
	r := pop(t, b, queen.PopRequest{Queue: "orders", Partition: "eu", Group: "billing", Batch: 2, SubscriptionMode: queen.SubscriptionModeAll})
	require.Len(t, r.Messages, 2)
	ackAll(t, b, r.Messages, queen.AckCompleted)
	// Queue mode: one failed ack (a stored retry counter), then one order
	// dead-lettered and one parked.
	r = pop(t, b, queen.PopRequest{Queue: "orders", Partition: "us", Batch: 1})
	ackAll(t, b, r.Messages, queen.AckFailed)
	clock.Advance(2 * time.Second) // past the retry delay, which a restart forgets
	r = pop(t, b, queen.PopRequest{Queue: "orders", Partition: "us", Batch: 1})
	require.Equal(t, int64(0), r.Messages[0].Offset)
	ackAll(t, b, r.Messages, queen.AckDLQ)
	r = pop(t, b, queen.PopRequest{Queue: "orders", Partition: "us", Batch: 1})
	ackAll(t, b, r.Messages, queen.AckPark)
	r = pop(t, b, queen.PopRequest{Queue: "orders", Partition: "us", Batch: 1})
	ackAll(t, b, r.Messages, queen.AckFailed) // offset 2, one retry spent
	clock.Advance(2 * time.Second)
	// A group that starts at a time: it skips what came before.
	r = pop(t, b, queen.PopRequest{Queue: "events", Group: "audit", Batch: 10, SubscriptionFrom: from})
	require.NotEmpty(t, r.Messages)
	ackAll(t, b, r.Messages[:1], queen.AckCompleted)
	ackAll(t, b, r.Messages[1:], queen.AckRetry)
	// jobs: one dead letter from a named group.
	r = pop(t, b, queen.PopRequest{Queue: "jobs", Group: "runner", Batch: 1, SubscriptionMode: queen.SubscriptionModeAll})
	ackAll(t, b, r.Messages, queen.AckDLQ)
	clock.Advance(2 * time.Second)
}

// observe describes what b answers about queues (nil: every queue) without
// changing anything: configurations, statistics, partitions, every
// message, cursors with their retry counters, groups, dead letters, parked
// messages and maintenance mode.
func observe(t *testing.T, b *queen.Broker, queues ...string) map[string]string {
	t.Helper()
	out := map[string]string{"maintenance": fmt.Sprint(b.MaintenanceMode())}
	if queues == nil {
		all, err := b.ListQueues(bg)
		require.NoError(t, err)
		for _, q := range all {
			queues = append(queues, q.Name)
		}
	}
	want := map[string]bool{}
	for _, name := range queues {
		want[name] = true
		info, err := b.DescribeQueue(bg, name)
		require.NoError(t, err, name)
		cfg, _ := json.Marshal(info.Config)
		out["queue "+name] = fmt.Sprintf("%s %d %s %s", info.ID, info.CreatedAt.UnixMicro(), cfg, info.DefaultPartitionID)
		qs, err := b.QueueStats(bg, name)
		require.NoError(t, err)
		out["stats "+name] = fmt.Sprintf("%d %d %d %d %d %v", qs.Messages, qs.Pending, qs.DeadLetters, qs.Parked, qs.PartitionN, qs.Groups)
		for _, ps := range qs.Partitions {
			key := name + "/" + ps.Name
			out["partition "+key] = fmt.Sprintf("%s %d %d %d %d %d", ps.ID, ps.CreatedAt.UnixMicro(), ps.Messages, ps.FirstOffset, ps.NextOffset, ps.LastPushAt.UnixMicro())
			for _, cs := range ps.Cursors {
				out["cursor "+key+"/"+cs.Group] = fmt.Sprintf("%d %d %d %d %d", cs.Offset, cs.Lag, cs.Retries, cs.Consumed, cs.LastAckAt.UnixMicro())
			}
			res, err := b.Fetch(bg, name, ps.Name, 0, 1000)
			require.NoError(t, err)
			for _, rec := range res.Records {
				out[fmt.Sprintf("record %s@%d", key, rec.Offset)] = fmt.Sprintf("%s %s %s %d", rec.MessageID, rec.TransactionID, rec.Payload, rec.CreatedAt.UnixMicro())
			}
		}
		for kind, list := range map[string]func(context.Context, queen.LetterFilter) (*queen.LetterPage, error){"dead": b.DeadLetters, "parked": b.ParkedMessages} {
			page, err := list(bg, queen.LetterFilter{Queue: name, Limit: 1000})
			require.NoError(t, err)
			for _, e := range page.Letters {
				out[kind+" "+e.ID] = fmt.Sprintf("%s %s %s %s %d %s %d %s %d %d", e.MessageID, e.TransactionID, e.ConsumerGroup, e.PartitionID, e.Offset, e.Error, e.RetryCount, e.Payload, e.CreatedAt.UnixMicro(), e.FailedAt.UnixMicro())
			}
		}
	}
	gs, err := b.ListGroups(bg, queen.GroupFilter{})
	require.NoError(t, err)
	for _, g := range gs {
		if want[g.Queue] {
			out["group "+g.Queue+"/"+g.Group] = fmt.Sprintf("%s %d %d %v %d %d %d %d", g.Mode, g.From.UnixMicro(), g.JoinedAt.UnixMicro(), g.Conflation, g.Lag, g.Consumed, g.LastAckAt.UnixMicro(), g.OldestPendingAt.UnixMicro())
		}
	}
	return out
}

// answers describes what b answers to the calls that change state: each
// group's next pop (up to 20 messages), and a push repeating a
// transactionId and one that does not. It turns maintenance mode off
// first (pops would take nothing).
func answers(t *testing.T, b *queen.Broker) []string {
	t.Helper()
	require.NoError(t, b.SetMaintenanceMode(bg, false))
	var out []string
	for _, req := range []queen.PopRequest{
		{Queue: "orders", Partition: "eu", Group: "billing"},
		{Queue: "orders", Partition: "us"},
		{Queue: "orders", Partition: "eu"},
		{Queue: "events", Group: "audit"},
		{Queue: "events", Partition: "Default", Group: "audit"},
		{Queue: "jobs", Group: "runner"},
	} {
		req.Batch = 20
		r := pop(t, b, req)
		for _, m := range r.Messages {
			out = append(out, fmt.Sprintf("pop %s/%s %s@%d %s %s", m.Queue, m.ConsumerGroup, m.Partition, m.Offset, m.TransactionID, m.Payload))
		}
		out = append(out, "--")
	}
	for _, txid := range []string{"o-eu-3", "job-2", "fresh-1"} {
		q, p := "orders", "eu"
		if strings.HasPrefix(txid, "job") {
			q, p = "jobs", ""
		}
		res := pushOne(t, b, q, p, txid, `{"again":true}`)
		out = append(out, fmt.Sprintf("push %s %s %d", txid, res.Status, res.Offset))
	}
	return out
}

// restored restores backups into a new directory and opens it on clock.
func restored(t *testing.T, clock queen.Clock, backups ...[]byte) *queen.Broker {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	rs := make([]io.Reader, len(backups))
	for i, bk := range backups {
		rs[i] = bytes.NewReader(bk)
	}
	require.NoError(t, queen.Restore(bg, dir, nil, rs...))
	return openStore(t, dir, clock)
}

// loadRun is a push/pop/ack load on queue "load": pushers each append
// {"p":i,"n":k} with k = 0, 1, ... to partition p-i, and a consumer of
// group "w" acks what it pops.
type loadRun struct {
	started, done []atomic.Int64 // per pusher: pushes begun, pushes confirmed
	stop          chan struct{}
	wg            sync.WaitGroup
	errs          chan error
}

const loadPushers = 3

func startLoad(b *queen.Broker) *loadRun {
	l := &loadRun{started: make([]atomic.Int64, loadPushers), done: make([]atomic.Int64, loadPushers), stop: make(chan struct{}), errs: make(chan error, loadPushers+1)}
	for i := range loadPushers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for k := 0; ; k++ {
				select {
				case <-l.stop:
					return
				default:
				}
				l.started[i].Add(1)
				res, err := b.Push(bg, []queen.PushItem{{Queue: "load", Partition: fmt.Sprintf("p-%d", i), TransactionID: fmt.Sprintf("l-%d-%d", i, k), Payload: json.RawMessage(fmt.Sprintf(`{"p":%d,"n":%d}`, i, k))}})
				if err == nil && res[0].Status != queen.PushQueued {
					err = fmt.Errorf("push %d/%d: %s %v", i, k, res[0].Status, res[0].Err)
				}
				if err != nil {
					l.errs <- err
					return
				}
				l.done[i].Add(1)
			}
		}()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			r, err := b.Pop(bg, queen.PopRequest{Queue: "load", Group: "w", Batch: 7, SubscriptionMode: queen.SubscriptionModeAll})
			if err == nil && len(r.Messages) > 0 {
				_, err = b.AckBatch(bg, ackItems(r.Messages, queen.AckCompleted))
			}
			if err != nil {
				l.errs <- err
				return
			}
		}
	}()
	return l
}

// warm waits until every pusher has confirmed n pushes.
func (l *loadRun) warm(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := range l.done {
		for l.done[i].Load() < n {
			select {
			case err := <-l.errs:
				t.Fatal(err)
			default:
			}
			require.True(t, time.Now().Before(deadline), "pusher %d is stuck", i)
			runtime.Gosched()
		}
	}
}

func (l *loadRun) end(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	select {
	case err := <-l.errs:
		t.Fatal(err)
	default:
	}
}

// checkLoad checks what a broker restored from a backup taken under load
// holds of queue "load": per pusher partition, exactly the messages
// k = 0 .. n-1 in order, with lo[i] <= n <= hi[i] (every push confirmed
// before the backup began is in, none begun after it ended); group w's
// cursors inside them; and popping w to the end delivers each message
// past its cursor once, in order.
func checkLoad(t *testing.T, b *queen.Broker, lo, hi []int64) {
	t.Helper()
	qs, err := b.QueueStats(bg, "load")
	require.NoError(t, err)
	next := map[string]int64{}
	for _, ps := range qs.Partitions {
		var i int
		_, err := fmt.Sscanf(ps.Name, "p-%d", &i)
		require.NoError(t, err)
		res, err := b.Fetch(bg, "load", ps.Name, 0, 1000)
		require.NoError(t, err)
		n := int64(len(res.Records))
		require.Equal(t, ps.NextOffset, n, ps.Name)
		for k, rec := range res.Records {
			require.Equal(t, int64(k), rec.Offset)
			require.JSONEq(t, fmt.Sprintf(`{"p":%d,"n":%d}`, i, k), string(rec.Payload))
		}
		require.GreaterOrEqual(t, n, lo[i], "%s lost pushes confirmed before the backup", ps.Name)
		require.LessOrEqual(t, n, hi[i], "%s holds pushes begun after the backup", ps.Name)
		for _, cs := range ps.Cursors {
			require.LessOrEqual(t, cs.Offset, n)
			next[ps.Name] = cs.Offset
		}
	}
	for {
		r := pop(t, b, queen.PopRequest{Queue: "load", Group: "w", Batch: 50})
		if len(r.Messages) == 0 {
			break
		}
		for _, m := range r.Messages {
			require.Equal(t, next[m.Partition], m.Offset, "%s delivered out of order or twice", m.Partition)
			next[m.Partition]++
		}
		ackAll(t, b, r.Messages, queen.AckCompleted)
	}
	for _, ps := range qs.Partitions {
		require.Equal(t, ps.NextOffset, next[ps.Name], "%s: group w did not get to the end", ps.Name)
	}
}

func TestBackup_UnderLoadRestoresToTheSameAnswers(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := openStore(t, t.TempDir(), clock)
	richState(t, b, clock)
	richBefore := observe(t, b, richQueues...)

	load := startLoad(b)
	load.warm(t, 300)
	lo := make([]int64, loadPushers)
	for i := range lo {
		lo[i] = load.done[i].Load()
	}
	var full bytes.Buffer
	next, err := b.Backup(bg, &full, 0)
	require.NoError(t, err)
	hi := make([]int64, loadPushers)
	for i := range hi {
		hi[i] = load.started[i].Load()
	}
	load.warm(t, hi[0]+10) // more load after the backup, for the increment
	load.end(t)

	// Between the backups: deletes an increment must carry too.
	dead, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "jobs"})
	require.NoError(t, err)
	require.NoError(t, b.DeleteDeadLetter(bg, dead.Letters[0].ID))
	parked, err := b.ParkedMessages(bg, queen.LetterFilter{Queue: "orders"})
	require.NoError(t, err)
	_, err = b.ReplayParked(bg, parked.Letters[0].ID)
	require.NoError(t, err)
	require.NoError(t, b.DeleteMessage(bg, partitionID(t, b, "orders", "eu"), "o-eu-5"))
	require.NoError(t, b.SetMaintenanceMode(bg, true))
	var inc bytes.Buffer
	next2, err := b.Backup(bg, &inc, next)
	require.NoError(t, err)
	require.Greater(t, next2, next)
	require.Less(t, inc.Len(), full.Len(), "an increment carries no unchanged value")

	t.Logf("full %d B, increment %d B, lo %v hi %v, %d observations", full.Len(), inc.Len(), lo, hi, len(observe(t, b)))
	t.Run("full backup taken under load", func(t *testing.T) {
		r := restored(t, clock, full.Bytes())
		require.Equal(t, richBefore, observe(t, r, richQueues...))
		require.False(t, r.MaintenanceMode())
		checkLoad(t, r, lo, hi)
	})
	t.Run("full and increment", func(t *testing.T) {
		r := restored(t, clock, full.Bytes(), inc.Bytes())
		require.Equal(t, observe(t, b), observe(t, r))
		require.True(t, r.MaintenanceMode())
		// The last full backup gives the same store as the chain.
		var again bytes.Buffer
		_, err := b.Backup(bg, &again, 0)
		require.NoError(t, err)
		r2 := restored(t, clock, again.Bytes())
		require.Equal(t, observe(t, r), observe(t, r2))
		// And the same answers as the original to pops and pushes.
		want := answers(t, b)
		require.Equal(t, want, answers(t, r))
		require.Equal(t, want, answers(t, r2))
	})
}

// partitionID is the id of queue's partition.
func partitionID(t *testing.T, b *queen.Broker, queue, partition string) string {
	t.Helper()
	qs, err := b.QueueStats(bg, queue)
	require.NoError(t, err)
	for _, ps := range qs.Partitions {
		if ps.Name == partition {
			return ps.ID
		}
	}
	t.Fatalf("no partition %s/%s", queue, partition)
	return ""
}

var (
	soakSeeds  = flag.Int("backupsoak.seeds", 0, "TestBackup_ChainSoak: seeds (stores) to run; 0 skips it")
	soakRounds = flag.Int("backupsoak.rounds", 3, "TestBackup_ChainSoak: increments per store")
	soakOps    = flag.Int("backupsoak.ops", 60, "TestBackup_ChainSoak: operations between two backups")
	soakSeed   = flag.Uint64("backupsoak.seed", 0, "TestBackup_ChainSoak: first seed (0: from the clock)")
)

// TestBackup_ChainSoak builds backup chains over random work: per seed, a
// store under SyncPushes with an encrypted queue and a plain one, random
// pushes, pops acked completed, failed (to dead letters) or parked, dead
// letters deleted and replayed, a full backup and then increments, the
// broker closed and reopened between two backups. After each backup the
// chain so far is restored and must answer as the store did at that
// backup, and the store's version must not go back across a reopen; at the
// end a fresh full backup restores to the same store as the whole chain.
// On demand only: -backupsoak.seeds=N runs it (docs/long-runs.md).
func TestBackup_ChainSoak(t *testing.T) {
	if testing.Short() || *soakSeeds == 0 {
		t.Skip("a soak, on demand: -backupsoak.seeds=N (docs/long-runs.md)")
	}
	t.Parallel()
	first := *soakSeed
	if first == 0 {
		first = uint64(time.Now().UnixNano())
	}
	t.Logf("seeds %d.. (rerun one with -backupsoak.seed=N -backupsoak.seeds=1)", first)
	start := time.Now()
	var backups, bytesWritten, messages, restores int
	for s := range *soakSeeds {
		seed := first + uint64(s)
		n, m, bw, rs := soakChain(t, seed)
		backups, bytesWritten, messages, restores = backups+n, bytesWritten+bw, messages+m, restores+rs
		if t.Failed() {
			t.Fatalf("seed %d failed (rerun with -backupsoak.seed=%d -backupsoak.seeds=1)", seed, seed)
		}
	}
	t.Logf("%d seeds x %d increments: %d backups (%d bytes), %d restores compared, %d messages pushed, %s",
		*soakSeeds, *soakRounds, backups, bytesWritten, restores, messages, time.Since(start).Round(time.Millisecond))
}

// soakChain runs one seed of TestBackup_ChainSoak and returns its figures.
func soakChain(t *testing.T, seed uint64) (backups, pushed, written, restores int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(rng.IntN(256))
	}
	clock := itest.NewClock()
	opts := &queen.Options{Clock: clock, Durability: queen.SyncPushes, EncryptionKey: key, MaintenanceInterval: time.Hour}
	dir := t.TempDir()
	b, err := queen.Open(dir, opts)
	require.NoError(t, err)
	defer func() { _ = b.Close() }()
	configureWith(t, b, "enc", func(c *queen.QueueConfig) { c.EncryptionEnabled, c.RetryLimit = true, 1; keepDLQ(c) })
	configureWith(t, b, "plain", func(c *queen.QueueConfig) { c.RetryLimit = 1; keepDLQ(c) })
	queues := []string{"enc", "plain"}
	var chain [][]byte
	var next uint64
	for round := 0; round <= *soakRounds; round++ {
		for range *soakOps {
			q := queues[rng.IntN(2)]
			switch op := rng.IntN(10); {
			case op < 5:
				items := make([]queen.PushItem, 1+rng.IntN(4))
				for i := range items {
					items[i] = queen.PushItem{Queue: q, Partition: fmt.Sprint("p", rng.IntN(3)), TransactionID: fmt.Sprintf("s%d-%d", seed, pushed),
						Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":%q}`, pushed, strings.Repeat("x", rng.IntN(600))))}
					pushed++
				}
				_, err := b.Push(bg, items)
				require.NoError(t, err)
			case op < 8:
				req := queen.PopRequest{Queue: q, Batch: 1 + rng.IntN(3)}
				if rng.IntN(2) == 0 {
					req.Group, req.SubscriptionMode = "g", queen.SubscriptionModeAll
				}
				r := pop(t, b, req)
				st := []queen.AckStatus{queen.AckCompleted, queen.AckCompleted, queen.AckFailed, queen.AckDLQ, queen.AckPark}[rng.IntN(5)]
				if len(r.Messages) > 0 {
					ackAll(t, b, r.Messages, st)
				}
				clock.Advance(2 * time.Second) // past retry delays
			default:
				page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: q, Limit: 5})
				require.NoError(t, err)
				if len(page.Letters) > 0 {
					l := page.Letters[rng.IntN(len(page.Letters))]
					if rng.IntN(2) == 0 {
						require.NoError(t, b.DeleteDeadLetter(bg, l.ID))
					} else {
						_, err := b.ReplayDeadLetter(bg, l.ID)
						require.NoError(t, err)
					}
				}
			}
		}
		var w bytes.Buffer
		since := next
		next, err = b.Backup(bg, &w, since)
		require.NoError(t, err)
		chain = append(chain, w.Bytes())
		backups, written = backups+1, written+w.Len()
		want := observe(t, b)
		got := restoredWith(t, opts, chain...)
		require.Equal(t, want, observe(t, got), "seed %d: the chain of %d backups restores otherwise", seed, len(chain))
		require.NoError(t, got.Close())
		restores++
		// Reopen between two backups: versions go on across it.
		require.NoError(t, b.Close())
		b, err = queen.Open(dir, opts)
		require.NoError(t, err)
		reopened, err := b.Backup(bg, io.Discard, 0)
		require.NoError(t, err)
		require.GreaterOrEqual(t, reopened, next, "seed %d: the store's version went back across a reopen", seed)
	}
	var w bytes.Buffer
	_, err = b.Backup(bg, &w, 0)
	require.NoError(t, err)
	one, all := restoredWith(t, opts, w.Bytes()), restoredWith(t, opts, chain...)
	require.Equal(t, observe(t, one), observe(t, all), "seed %d: a full backup and the chain differ", seed)
	require.NoError(t, one.Close())
	require.NoError(t, all.Close())
	return backups, pushed, written, restores + 1
}

// restoredWith restores backups into a new directory and opens it with
// opts (the encryption key: the restored payloads are as stored).
func restoredWith(t *testing.T, opts *queen.Options, backups ...[]byte) *queen.Broker {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	require.NoError(t, queen.Restore(bg, dir, nil, readers(backups...)...))
	r, err := queen.Open(dir, opts)
	require.NoError(t, err)
	return r
}

// TestBackup_IncrementAfterAReopenThatFollowedADeleteOnlyCommit: when the
// last commit before a backup only deleted (here a dead letter), Badger
// keeps no entry of that version through a close, so a reopened store
// could give its next commit the backup's own next version again, and the
// following increment would name that commit's keys without their values
// (a stale cursor, or ErrBackupChain for a new key). Each backup leaves a
// write after its snapshot, so the store's versions stay ahead of every
// next it returned, and the increment carries that commit whole.
func TestBackup_IncrementAfterAReopenThatFollowedADeleteOnlyCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := itest.NewClock()
	opts := &queen.Options{Clock: clock, Durability: queen.SyncPushes, MaintenanceInterval: time.Hour}
	b, err := queen.Open(dir, opts)
	require.NoError(t, err)
	configureWith(t, b, "q", keepDLQ)
	pushN(t, b, "q", "", 3)
	r := pop(t, b, queen.PopRequest{Queue: "q", Batch: 1})
	ackAll(t, b, r.Messages, queen.AckDLQ)
	dead, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "q"})
	require.NoError(t, err)
	require.NoError(t, b.DeleteDeadLetter(bg, dead.Letters[0].ID)) // the last commit only deletes
	var full bytes.Buffer
	next, err := b.Backup(bg, &full, 0)
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b, err = queen.Open(dir, opts)
	require.NoError(t, err)
	defer b.Close()
	r = pop(t, b, queen.PopRequest{Queue: "q", Batch: 1}) // moves the cursor: a key the base has
	ackAll(t, b, r.Messages, queen.AckCompleted)
	pushOne(t, b, "q", "p2", "new", `{"new":1}`) // a partition the base lacks
	var inc bytes.Buffer
	_, err = b.Backup(bg, &inc, next)
	require.NoError(t, err)
	got := restoredWith(t, opts, full.Bytes(), inc.Bytes())
	defer got.Close()
	require.Equal(t, observe(t, b), observe(t, got))
}

// TestBackup_CancelledBetweenChunks: a store larger than one chunk (1 MiB)
// backed up under a cancelled ctx stops with ctx's error, and what it
// wrote is not a backup Restore accepts.
func TestBackup_CancelledBetweenChunks(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	payload := []byte(`"` + strings.Repeat("x", 64<<10) + `"`)
	for range 40 { // about 2.5 MiB
		_, err := b.Push(context.Background(), []queen.PushItem{{Queue: "big", Payload: payload}})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var w bytes.Buffer
	_, err := b.Backup(ctx, &w, 0)
	require.ErrorIs(t, err, context.Canceled)
	err = queen.Restore(context.Background(), t.TempDir()+"/store", nil, bytes.NewReader(w.Bytes()))
	require.ErrorIs(t, err, queen.ErrCorruptBackup, "no end record")
}

func TestBackup_SinceAheadOfTheStoreIsRefused(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	var w bytes.Buffer
	next, err := b.Backup(bg, &w, 0)
	require.NoError(t, err)
	_, err = b.Backup(bg, &w, next+1000)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	require.NoError(t, b.Close())
	_, err = b.Backup(bg, &w, 0)
	require.ErrorIs(t, err, queen.ErrClosed)
}

// TestBackup_IncrementAfterARestart: versions go on across a restart, so
// an increment taken after one applies over a backup taken before.
func TestBackup_IncrementAfterARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := itest.NewClock()
	b := openStore(t, dir, clock)
	pushOne(t, b, "q", "", "a", `{"n":1}`)
	var full, inc bytes.Buffer
	next, err := b.Backup(bg, &full, 0)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	b = openStore(t, dir, clock)
	pushOne(t, b, "q", "", "b", `{"n":2}`)
	_, err = b.Backup(bg, &inc, next)
	require.NoError(t, err)
	restoredTo := filepath.Join(t.TempDir(), "r")
	require.NoError(t, queen.Restore(bg, restoredTo, nil, readers(full.Bytes(), inc.Bytes())...))
	require.Equal(t, observe(t, b), observe(t, openStore(t, restoredTo, clock)))
}
