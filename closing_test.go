package queen_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// closeFixture is what the calls racing Close work on: a broker with
// messages, dead letters, parked messages and a trace.
type closeFixture struct {
	b            *queen.Broker
	m0           queen.PushResult // a message nothing deletes
	dead, parked []string         // letter ids
}

// closeCall is one kind of exported call made while Close runs. It returns
// the first error of the calls it makes; nil or ErrClosed are always
// acceptable, and also the errors allow accepts (those the call can give
// anyway, whatever Close does). waits marks a call that parks until Close.
type closeCall struct {
	name    string
	methods []string // the *Broker methods it exercises
	waits   bool
	allow   func(error) bool
	run     func(ctx context.Context, f *closeFixture) error
}

func notFound(err error) bool { return errors.Is(err, queen.ErrNotFound) }

var pushPopN atomic.Int64

// pushPop pushes one message to a new partition of queue and pops it
// (leased) in group.
func pushPop(ctx context.Context, b *queen.Broker, queue, group string) (*queen.Message, error) {
	part := fmt.Sprint("pp", pushPopN.Add(1))
	if _, err := b.Push(ctx, []queen.PushItem{{Queue: queue, Partition: part, Payload: json.RawMessage(`{"k":1}`)}}); err != nil {
		return nil, err
	}
	res, err := b.Pop(ctx, queen.PopRequest{Queue: queue, Partition: part, Group: group, SubscriptionMode: queen.SubscriptionModeAll})
	if err != nil {
		return nil, err
	}
	if len(res.Messages) == 0 {
		return nil, fmt.Errorf("pop of %s: nothing", queue)
	}
	return res.Messages[0], nil
}

func closeCalls() []closeCall {
	return []closeCall{
		{name: "Push", methods: []string{"Push"}, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.Push(ctx, []queen.PushItem{{Queue: "q", Partition: "p1", Payload: json.RawMessage(`{"x":1}`)}})
			return err
		}},
		{name: "Pop", methods: []string{"Pop"}, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.Pop(ctx, queen.PopRequest{Queue: "q", Group: "gpop", SubscriptionMode: queen.SubscriptionModeAll, Batch: 5})
			return err
		}},
		{name: "Pop/discovery", methods: []string{"Pop"}, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.Pop(ctx, queen.PopRequest{Namespace: "ns", Group: "gdisc"})
			return err
		}},
		{name: "Pop/wait-unknown-queue", methods: []string{"Pop"}, waits: true, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.Pop(ctx, queen.PopRequest{Queue: "nowhere", Wait: true, Timeout: 30 * time.Second})
			return err
		}},
		{name: "Pop/wait-queue", methods: []string{"Pop"}, waits: true, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.Pop(ctx, queen.PopRequest{Queue: "idle", Wait: true, Timeout: 30 * time.Second})
			return err
		}},
		{name: "Pop/wait-partition", methods: []string{"Pop"}, waits: true, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.Pop(ctx, queen.PopRequest{Queue: "idle", Partition: "ip", Wait: true, Timeout: 30 * time.Second})
			return err
		}},
		{name: "Pop/wait-group", methods: []string{"Pop"}, waits: true, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.Pop(ctx, queen.PopRequest{Queue: "idle", Group: "ig", Wait: true, Timeout: 30 * time.Second})
			return err
		}},
		{name: "Ack", methods: []string{"Ack"}, run: func(ctx context.Context, f *closeFixture) error {
			m, err := pushPop(ctx, f.b, "aq", "")
			if err != nil {
				return err
			}
			_, err = f.b.Ack(ctx, m, true, queen.AckOptions{})
			return err
		}},
		{name: "AckBatch", methods: []string{"AckBatch"}, run: func(ctx context.Context, f *closeFixture) error {
			m, err := pushPop(ctx, f.b, "abq", "g")
			if err != nil {
				return err
			}
			_, err = f.b.AckBatch(ctx, ackItems([]*queen.Message{m}, queen.AckCompleted))
			return err
		}},
		{name: "Renew", methods: []string{"Renew", "RenewLease"}, run: func(ctx context.Context, f *closeFixture) error {
			m, err := pushPop(ctx, f.b, "rq", "")
			if err != nil {
				return err
			}
			if _, err := f.b.Renew(ctx, m); err != nil {
				return err
			}
			_, err = f.b.RenewLease(ctx, m.LeaseID, time.Minute)
			return err
		}},
		{name: "FetchPartitions", methods: []string{"FetchPartitions", "OffsetForTime"}, run: func(ctx context.Context, f *closeFixture) error {
			// A waiting fetch too: Close must end it (ErrClosed), not wait out MaxWait.
			_, err := f.b.FetchPartitions(ctx, queen.FetchRequest{Partitions: []queen.FetchPartition{{Queue: "q", Partition: "p0", Offset: 1 << 40}}})
			if err != nil {
				return err
			}
			if _, err := f.b.OffsetForTime(ctx, "q", "p0", time.Time{}); err != nil && !notFound(err) {
				return err
			}
			_, err = f.b.FetchPartitions(ctx, queen.FetchRequest{MaxWait: queen.MaxFetchWait,
				Partitions: []queen.FetchPartition{{Queue: "fq", Partition: "none", Offset: 0}}})
			return err
		}},
		{name: "DiskUsage", methods: []string{"DiskUsage"}, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.DiskUsage()
			return err
		}},
		{name: "Positions", methods: []string{"GroupPositions", "SetPosition"}, run: func(ctx context.Context, f *closeFixture) error {
			m, err := pushPop(ctx, f.b, "posq", "gpos")
			if err != nil {
				return err
			}
			if err := f.b.SetPosition(ctx, queen.Position{Group: "gpos", Queue: "posq", Partition: m.Partition, Offset: 1, Metadata: "m"}); err != nil {
				return err
			}
			_, err = f.b.GroupPositions(ctx, "gpos", nil)
			return err
		}},
		{name: "ExecTransaction", methods: []string{"ExecTransaction", "Transaction"}, run: func(ctx context.Context, f *closeFixture) error {
			m, err := pushPop(ctx, f.b, "tq", "")
			if err != nil {
				return err
			}
			it := ackItems([]*queen.Message{m}, queen.AckCompleted)[0]
			if _, err := f.b.ExecTransaction(ctx, []queen.TxOp{{Ack: &it}, {Push: &queen.PushItem{Queue: "tq2", Payload: json.RawMessage(`1`)}}}); err != nil {
				return err
			}
			_, err = f.b.Transaction().Push(queen.PushItem{Queue: "tq2", Payload: json.RawMessage(`2`)}).Commit(ctx)
			return err
		}},
		{name: "Fetch", methods: []string{"Fetch"}, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.Fetch(ctx, "q", "p0", 0, 100)
			return err
		}},
		{name: "Letters", methods: []string{"DeadLetters", "ParkedMessages"}, run: func(ctx context.Context, f *closeFixture) error {
			if _, err := f.b.DeadLetters(ctx, queen.LetterFilter{}); err != nil {
				return err
			}
			_, err := f.b.ParkedMessages(ctx, queen.LetterFilter{Queue: "dq"})
			return err
		}},
		{name: "Replay", methods: []string{"ReplayDeadLetter", "ReplayParked"}, run: func(ctx context.Context, f *closeFixture) error {
			if _, err := f.b.ReplayDeadLetter(ctx, f.dead[0]); err != nil {
				return err
			}
			_, err := f.b.ReplayParked(ctx, f.parked[0])
			return err
		}},
		{name: "DeleteLetters", methods: []string{"DeleteDeadLetter", "DeleteParked"}, allow: notFound, run: func(ctx context.Context, f *closeFixture) error {
			return errors.Join(f.b.DeleteDeadLetter(ctx, f.dead[1]), f.b.DeleteParked(ctx, f.parked[1]))
		}},
		{name: "ListMessages", methods: []string{"ListMessages"}, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.ListMessages(ctx, queen.MessageFilter{Queue: "q", Limit: 50})
			return err
		}},
		{name: "GetMessage", methods: []string{"GetMessage"}, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.GetMessage(ctx, f.m0.PartitionID, f.m0.TransactionID)
			return err
		}},
		{name: "DeleteMessage", methods: []string{"DeleteMessage"}, run: func(ctx context.Context, f *closeFixture) error {
			res, err := f.b.Push(ctx, []queen.PushItem{{Queue: "delq", Payload: json.RawMessage(`1`)}})
			if err != nil {
				return err
			}
			return f.b.DeleteMessage(ctx, res[0].PartitionID, res[0].TransactionID)
		}},
		{name: "Stats", methods: []string{"QueueStats", "ListQueues", "ListGroups", "DescribeQueue", "Counters", "QueueCounters", "WaitingPops"}, run: func(ctx context.Context, f *closeFixture) error {
			_ = f.b.Counters()
			_ = f.b.QueueCounters()
			_ = f.b.WaitingPops()
			_, err1 := f.b.QueueStats(ctx, "q")
			_, err2 := f.b.ListQueues(ctx)
			_, err3 := f.b.ListGroups(ctx, queen.GroupFilter{})
			_, err4 := f.b.DescribeQueue(ctx, "q")
			return errors.Join(err1, err2, err3, err4)
		}},
		{name: "Seek", methods: []string{"SeekGroup", "SeekPartition"}, run: func(ctx context.Context, f *closeFixture) error {
			if _, err := f.b.SeekGroup(ctx, "gseek", "q", queen.SeekOptions{ToEnd: true}); err != nil {
				return err
			}
			_, err := f.b.SeekPartition(ctx, "gseek", "q", "p0", queen.SeekOptions{Timestamp: time.Unix(1, 0)})
			return err
		}},
		{name: "Groups", methods: []string{"DeleteGroup", "SetGroupSubscription"}, allow: notFound, run: func(ctx context.Context, f *closeFixture) error {
			if _, err := f.b.Pop(ctx, queen.PopRequest{Queue: "q", Group: "gdel"}); err != nil {
				return err
			}
			if _, err := f.b.SetGroupSubscription(ctx, "gdel", time.Unix(1, 0)); err != nil {
				return err
			}
			_, err := f.b.DeleteGroup(ctx, "gdel", "q", true)
			return err
		}},
		{name: "Queues", methods: []string{"ConfigureQueue", "DeleteQueue"}, run: func(ctx context.Context, f *closeFixture) error {
			if _, err := f.b.ConfigureQueue(ctx, "tmpq", queen.DefaultQueueConfig()); err != nil {
				return err
			}
			if _, err := f.b.Push(ctx, []queen.PushItem{{Queue: "tmpq", Payload: json.RawMessage(`1`)}}); err != nil {
				return err
			}
			_, err := f.b.DeleteQueue(ctx, "tmpq")
			return err
		}},
		{name: "Traces", methods: []string{"RecordTrace", "Traces", "TracesByName", "TraceNames"}, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.RecordTrace(ctx, queen.TraceEvent{PartitionID: f.m0.PartitionID, TransactionID: f.m0.TransactionID, EventType: "info", Names: []string{"tn"}, Data: json.RawMessage(`{"a":1}`)})
			if err != nil {
				return err
			}
			_, err1 := f.b.Traces(ctx, f.m0.PartitionID, f.m0.TransactionID)
			_, err2 := f.b.TracesByName(ctx, "tn", 10, 0)
			_, err3 := f.b.TraceNames(ctx, 10, 0)
			return errors.Join(err1, err2, err3)
		}},
		{name: "Maintain", methods: []string{"Maintain", "Ping", "SetMaintenanceMode", "MaintenanceMode", "Now", "PayloadLimit"}, run: func(ctx context.Context, f *closeFixture) error {
			_, _, _ = f.b.MaintenanceMode(), f.b.Now(), f.b.PayloadLimit()
			return errors.Join(f.b.Maintain(ctx), f.b.Ping(ctx), f.b.SetMaintenanceMode(ctx, false))
		}},
		{name: "Store", methods: []string{"Backup", "StoreReport"}, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.Backup(ctx, io.Discard, 0)
			_, err2 := f.b.StoreReport(ctx)
			return errors.Join(err, err2)
		}},
		{name: "Console", methods: []string{"ListPartitions", "Facts"}, run: func(ctx context.Context, f *closeFixture) error {
			_ = f.b.Facts()
			_, err1 := f.b.ListPartitions(ctx, "q", queen.PartitionFilter{Limit: 10})
			_, err2 := f.b.ListGroups(ctx, queen.GroupFilter{Queue: "q", MaxProbes: 10})
			return errors.Join(err1, err2)
		}},
		{name: "Admin", methods: []string{"Admin"}, run: func(ctx context.Context, f *closeFixture) error {
			_, err := f.b.Admin().ListQueues(ctx)
			return err
		}},
		{name: "Builder", methods: []string{"Queue"}, run: func(ctx context.Context, f *closeFixture) error {
			if _, err := f.b.Queue("bq").Push(ctx, map[string]any{"a": 1}); err != nil {
				return err
			}
			if _, err := f.b.Queue("bq").Batch(2).Wait(false).AutoAck(true).Pop(ctx); err != nil {
				return err
			}
			_, err := f.b.Queue("bq").Fetch(ctx, []string{queen.DefaultPartition})
			return err
		}},
		{name: "Consumer", methods: nil, run: func(ctx context.Context, f *closeFixture) error {
			var herr atomic.Value
			c := f.b.Queue("cq").Group("cg").SubscriptionMode(queen.SubscriptionModeAll).Limit(1).Consume(ctx, func(ctx context.Context, m *queen.Message) error {
				// A call from a handler: it may race Close too.
				if _, err := f.b.Push(ctx, []queen.PushItem{{Queue: "cq-out", Payload: m.Payload}}); err != nil {
					herr.Store(err)
				}
				return nil
			})
			if err := c.Start(ctx); err != nil {
				return err
			}
			if _, err := f.b.Push(ctx, []queen.PushItem{{Queue: "cq", Payload: json.RawMessage(`1`)}}); err != nil {
				return err
			}
			select {
			case <-c.Done():
			case <-time.After(3 * time.Minute): // a hang, not a slow machine
				return errors.New("the consumer did not stop")
			}
			if err, _ := herr.Load().(error); err != nil {
				return err
			}
			return c.Err()
		}},
	}
}

// TestClose_CallsCoverEveryMethod makes sure the race test below cannot
// forget a method: every exported method of *Broker but Close is exercised
// by some entry of closeCalls.
func TestClose_CallsCoverEveryMethod(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{"Close": true}
	for _, c := range closeCalls() {
		for _, m := range c.methods {
			covered[m] = true
		}
	}
	bt := reflect.TypeFor[*queen.Broker]()
	for i := range bt.NumMethod() {
		name := bt.Method(i).Name
		require.True(t, covered[name], "closeCalls has no entry calling Broker.%s: add one", name)
	}
}

func newCloseFixture(t *testing.T, b *queen.Broker) *closeFixture {
	f := &closeFixture{b: b}
	for i := range 4 {
		pushN(t, b, "q", fmt.Sprint("p", i), 20)
	}
	f.m0 = pushOne(t, b, "q", "p0", "m0", `{"m":0}`)
	cfg := queen.DefaultQueueConfig()
	cfg.Namespace = "ns"
	_, err := b.ConfigureQueue(bg, "nsq", cfg)
	require.NoError(t, err)
	pushN(t, b, "nsq", "", 5)
	pushN(t, b, "idle", "ip", 1)
	_ = pop(t, b, queen.PopRequest{Queue: "idle", Group: "ig", SubscriptionMode: queen.SubscriptionModeAll, CommitOnDelivery: true})
	_ = pop(t, b, queen.PopRequest{Queue: "idle", CommitOnDelivery: true})
	_ = pop(t, b, queen.PopRequest{Queue: "q", Group: "gseek"})
	pushN(t, b, "dq", "", 4)
	msgs := pop(t, b, queen.PopRequest{Queue: "dq", Batch: 4}).Messages
	require.Len(t, msgs, 4)
	items := ackItems(msgs, queen.AckDLQ)
	items[2].Status, items[3].Status = queen.AckPark, queen.AckPark
	ack(t, b, items...)
	for _, l := range must(b.DeadLetters(bg, queen.LetterFilter{})).Letters {
		f.dead = append(f.dead, l.ID)
	}
	for _, l := range must(b.ParkedMessages(bg, queen.LetterFilter{})).Letters {
		f.parked = append(f.parked, l.ID)
	}
	require.Len(t, f.dead, 2)
	require.Len(t, f.parked, 2)
	return f
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestClose_EveryCallRacingClose runs every kind of exported call in a
// loop while Close runs: each returns nil, ErrClosed or an error it can
// give anyway, none panics (Badger's "DB Closed" panic would kill the
// test), waiting pops end with ErrClosed, no call outlasts Close's bound,
// and every call made after Close returns ErrClosed.
func TestClose_EveryCallRacingClose(t *testing.T) {
	t.Parallel()
	iterations := map[bool]int{false: 20, true: 3} // by disk
	if testing.Short() {
		iterations = map[bool]int{false: 3, true: 1}
	}
	for _, disk := range []bool{false, true} {
		for i := range iterations[disk] {
			name := fmt.Sprintf("memory/%d", i)
			if disk {
				name = fmt.Sprintf("disk/%d", i)
			}
			t.Run(name, func(t *testing.T) { raceClose(t, disk) })
		}
	}
}

func raceClose(t *testing.T, disk bool) {
	logs := &itest.LogBuffer{}
	// The drain bound is set far beyond any handler's run here, so that
	// the Consumer call's handler, however slow a loaded machine makes
	// it, settles before Close gives up on it (queentest's brokers drain
	// for 2 s only); a drain that times out says a handler hung.
	opts := &queen.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Durability: queen.SyncNever, DrainTimeout: 2 * time.Minute}
	var b *queen.Broker
	if disk {
		b = itest.OpenDir(t, t.TempDir(), opts)
	} else {
		b = queentest.NewBroker(t, opts)
	}
	f := newCloseFixture(t, b)
	calls := closeCalls()

	var ran sync.WaitGroup // every looping call made one call
	var done sync.WaitGroup
	waiting := 0
	for _, c := range calls {
		if c.waits {
			waiting++
		} else {
			ran.Add(1)
		}
		done.Add(1)
		go func() {
			defer done.Done()
			first := true
			for n := 0; ; n++ {
				err := c.run(bg, f)
				if first && !c.waits {
					ran.Done()
					first = false
				}
				switch {
				case err == nil && c.waits:
					t.Errorf("%s: a waiting pop returned before Close", c.name)
					return
				case err == nil:
				case errors.Is(err, queen.ErrClosed):
					return
				case c.allow != nil && c.allow(err):
				default:
					t.Errorf("%s (call %d): %v", c.name, n, err)
					return
				}
			}
		}()
	}
	ran.Wait()
	itest.AwaitWaiting(t, b, waiting)

	// An error here would say calls were still running after Close's
	// bound: a waiting pop left parked, or a call stuck.
	require.NoError(t, b.Close())
	ended := make(chan struct{})
	go func() { done.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(time.Minute): // a hang, not a slow machine
		t.Fatal("calls still running a minute after Close")
	}

	for _, c := range calls {
		require.ErrorIs(t, c.run(bg, f), queen.ErrClosed, "%s after Close", c.name)
	}
	require.NotContains(t, logs.String(), "storage failure", "a write refused because of Close is not a storage failure")
	require.NotContains(t, logs.String(), "level=ERROR")
}

// TestClose_WritesRacingCloseGetErrClosed pushes and acks from many
// goroutines while Close runs: each write either succeeds or returns an
// error that is ErrClosed, and the broker logs no storage failure.
func TestClose_WritesRacingCloseGetErrClosed(t *testing.T) {
	t.Parallel()
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			logs := &itest.LogBuffer{}
			b := queentest.NewBroker(t, &queen.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			var wg sync.WaitGroup
			var writes atomic.Int64
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						m, err := pushPop(bg, b, fmt.Sprint("w", w), "")
						if err == nil {
							_, err = b.AckBatch(bg, ackItems([]*queen.Message{m}, queen.AckCompleted))
						}
						if err != nil {
							if !errors.Is(err, queen.ErrClosed) {
								t.Errorf("writer %d: %v", w, err)
							}
							return
						}
						writes.Add(1)
					}
				}()
			}
			for writes.Load() < 8 {
				time.Sleep(time.Millisecond)
			}
			require.NoError(t, b.Close())
			wg.Wait()
			require.NotContains(t, logs.String(), "storage failure")
		})
	}
}

// TestClose_HandlersCallDuringDrain checks the order of Close: while it
// drains consumers every call still works, so a handler that goes on
// working once it is told to stop can push, read and have its message
// acked, and the messages it never started are given back.
func TestClose_HandlersCallDuringDrain(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		pushN(t, b, "work", "p", 3)
		started := make(chan struct{})
		var calls []error
		var mu sync.Mutex
		var settled []queen.Settlement
		c := b.Queue("work").Batch(3).Concurrency(1).Consume(bg, func(ctx context.Context, m *queen.Message) error {
			if m.Offset != 0 {
				return errors.New("only the first message should be handled")
			}
			close(started)
			<-queen.Stopping(ctx) // Close has begun
			_, err1 := b.Push(ctx, []queen.PushItem{{Queue: "out", Payload: m.Payload}})
			_, err2 := b.ListMessages(ctx, queen.MessageFilter{Queue: "work"})
			_, err3 := b.Renew(ctx, m)
			calls = []error{err1, err2, err3}
			return nil
		}).OnSettled(func(s queen.Settlement) {
			mu.Lock()
			settled = append(settled, s)
			mu.Unlock()
		})
		require.NoError(t, c.Start(bg))
		<-started
		require.NoError(t, b.Close())
		for i, err := range calls {
			require.NoError(t, err, "call %d from the handler during the drain", i)
		}
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, settled, 3)
		for _, s := range settled {
			require.NoError(t, s.AckErr, "offset %d: %s", s.Message.Offset, s.Outcome)
			if s.Message.Offset == 0 {
				require.Equal(t, queen.AckCompleted, s.Status)
			} else {
				require.Equal(t, queen.AckRetry, s.Status, "given back")
			}
		}
		late := b.Queue("work").Consume(bg, func(context.Context, *queen.Message) error { return nil })
		require.ErrorIs(t, late.Start(bg), queen.ErrClosed, "a consumer cannot start after Close")
	})
}

// TestClose_ConcurrentCloseWaitsForTheFirst: a second Close, made while
// the first drains a consumer, returns only once the broker is closed.
func TestClose_ConcurrentCloseWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "q", "", 1)
	started := make(chan struct{})
	draining := make(chan struct{})
	release := make(chan struct{})
	c := b.Queue("q").Consume(bg, func(ctx context.Context, m *queen.Message) error {
		close(started)
		<-queen.Stopping(ctx) // the first Close drains the consumer
		close(draining)
		<-release
		return nil
	})
	require.NoError(t, c.Start(bg))
	<-started
	first := make(chan error, 1)
	go func() { first <- b.Close() }()
	<-draining
	second := make(chan error, 1)
	go func() {
		err := b.Close()
		second <- errors.Join(err, b.Ping(bg))
	}()
	select {
	case err := <-second:
		t.Fatalf("a second Close returned while the first was draining (then Ping: %v)", err)
	case <-time.After(100 * time.Millisecond): // a negative check: it can only pass late
	}
	close(release)
	require.NoError(t, <-first)
	require.ErrorIs(t, <-second, queen.ErrClosed, "the second Close returned once the broker was closed")
}

// TestClose_EveryMethodIsGated calls every exported method of *Broker that
// returns an error while the broker refuses calls (as Close does before it
// closes storage) but nothing is closed yet: each must be refused with
// ErrClosed at its door, before touching anything, whatever its arguments.
// A method without the guard would run (and fail otherwise, or succeed).
func TestClose_EveryMethodIsGated(t *testing.T) {
	t.Parallel()
	// Methods that return no error touch no storage and need no guard.
	ungated := map[string]bool{"Admin": true, "Queue": true, "Transaction": true, "Counters": true, "QueueCounters": true, "WaitingPops": true, "Close": true, "Now": true, "MaintenanceMode": true, "PayloadLimit": true, "Facts": true}
	b := queentest.NewBroker(t, nil)
	pushN(t, b, "q", "", 1)
	reopen := queen.ShutCallsForTest(b)
	defer reopen()
	errType := reflect.TypeFor[error]()
	bv := reflect.ValueOf(b)
	for i := range bv.NumMethod() {
		m := bv.Type().Method(i)
		ft := m.Type // receiver first
		if ungated[m.Name] {
			continue
		}
		require.True(t, ft.NumOut() > 0 && ft.Out(ft.NumOut()-1) == errType, "Broker.%s returns no error: gate it, or list it as ungated", m.Name)
		args := make([]reflect.Value, ft.NumIn()-1)
		for j := range args {
			at := ft.In(j + 1)
			args[j] = reflect.Zero(at)
			if at == reflect.TypeFor[context.Context]() {
				args[j] = reflect.ValueOf(bg)
			}
		}
		out := bv.Method(i).Call(args)
		err, _ := out[len(out)-1].Interface().(error)
		require.ErrorIs(t, err, queen.ErrClosed, "Broker.%s ran although calls are refused", m.Name)
	}
}
