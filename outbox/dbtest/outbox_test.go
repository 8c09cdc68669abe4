// Package dbtest holds the outbox's tests against real databases: a
// SQLite file (modernc.org/sqlite, pure Go) and a PostgreSQL server
// (pgx's database/sql adapter). It is a module of its own so that the
// drivers, and the Go release they require, stay out of the outbox
// module that applications import.
package dbtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/outbox"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestEnqueue_RollbackDeliversNothing(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		ob := newOutbox(t, d, b, outbox.Options{})
		ctx := context.Background()
		tx, err := d.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, ob.Enqueue(ctx, tx, seqItem("orders", "p", 0), seqItem("orders", "p", 1)))
		require.NoError(t, tx.Rollback())
		enqueue(t, d, ob, seqItem("marker", "m", 0)) // committed after: once it is relayed, so would the others be
		startRelay(t, ob)
		waitStored(t, b, "marker", "m", []int{0})
		require.Empty(t, stored(t, b, "orders", "p"))
		waitStats(t, ob, outbox.Stats{Relayed: 1})
	})
}

func TestRelay_CommittedBatchDeliveredOnceInOrder(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		ob := newOutbox(t, d, b, outbox.Options{BatchSize: 7})
		parts := []string{"a", "b", "c"}
		const n = 40
		for i := 0; i < n; i += 4 { // several transactions, each with rows of every partition
			var items []queen.PushItem
			for j := i; j < i+4; j++ {
				for _, p := range parts {
					items = append(items, seqItem("orders", p, j))
				}
			}
			enqueue(t, d, ob, items...)
		}
		startRelay(t, ob)
		for _, p := range parts {
			waitStored(t, b, "orders", p, seq(n))
		}
		waitStats(t, ob, outbox.Stats{Relayed: n * int64(len(parts))})
		// Relayed once: nothing left, nothing pushed again.
		ob.Notify()
		enqueue(t, d, ob, seqItem("marker", "m", 0))
		waitStored(t, b, "marker", "m", []int{0})
		for _, p := range parts {
			require.Equal(t, seq(n), stored(t, b, "orders", p))
		}
	})
}

func TestEnqueue_RefusesWhatPushRefuses(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		ob := newOutbox(t, d, b, outbox.Options{})
		ctx := context.Background()
		big := `"` + strings.Repeat("x", b.PayloadLimit()) + `"`
		bad := []queen.PushItem{
			{Payload: []byte(`1`)},                           // no queue
			{Queue: strings.Repeat("q", queen.MaxNameLen+1)}, // name too long
			{Queue: "q", Partition: "a\x00b"},                // NUL
			{Queue: "q", Payload: []byte(`{`)},               // not JSON
			{Queue: "q", Payload: []byte(big)},               // over the broker's limit
		}
		tx, err := d.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		for _, it := range bad {
			items := []queen.PushItem{seqItem("q", "p", 0), it}
			_, pushErr := b.Push(ctx, items)
			require.Error(t, pushErr)
			err := ob.Enqueue(ctx, tx, items...)
			for _, sentinel := range []error{queen.ErrInvalidArgument, queen.ErrTooLarge} {
				require.Equal(t, errors.Is(pushErr, sentinel), errors.Is(err, sentinel), "%v vs %v", err, pushErr)
			}
			var pa, ea *queen.ArgumentError
			if errors.As(pushErr, &pa) {
				require.ErrorAs(t, err, &ea)
				require.Equal(t, pa.Field, ea.Field)
			}
		}
		// Nothing was written, and the transaction is still usable.
		require.NoError(t, ob.Enqueue(ctx, tx, seqItem("good", "p", 0)))
		require.NoError(t, tx.Commit())
		require.Equal(t, int64(1), stats(t, ob).Waiting)
	})
}

// eventLog is an Observer keeping the outbox's events.
type eventLog struct {
	mu     sync.Mutex
	events []queen.Event
	ch     chan queen.Event
}

func newEventLog() *eventLog { return &eventLog{ch: make(chan queen.Event, 1000)} }

func (l *eventLog) Observe(e queen.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	select {
	case l.ch <- e:
	default:
	}
}

func (l *eventLog) of(kind queen.EventKind) []queen.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []queen.Event
	for _, e := range l.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestRelay_WakesOnEnqueue: with an hour's PollInterval, a relay still
// pushes at once what this process enqueued.
func TestRelay_WakesOnEnqueue(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		log := newEventLog()
		ob := newOutbox(t, d, b, outbox.Options{PollInterval: time.Hour, Observer: log})
		startRelay(t, ob)
		for i := range 3 { // each time the relay is asleep for an hour, or about to be
			enqueue(t, d, ob, seqItem("orders", "p", i))
			deadline := time.After(time.Minute) // a hang detector
			for relayed := false; !relayed; {
				select {
				case e := <-log.ch:
					relayed = e.Kind == queen.EventOutboxRelayed
				case <-deadline:
					t.Fatalf("message %d not relayed within a minute: the relay waits for its PollInterval", i)
				}
			}
		}
		require.Equal(t, seq(3), stored(t, b, "orders", "p"))
	})
}

// TestRelay_TwoRelaysKeepOrderAndSendNothingTwice runs relays of two
// outboxes (two application instances) and two relays in each, over one
// database, while producers commit each partition's messages in order.
func TestRelay_TwoRelaysKeepOrderAndSendNothingTwice(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		obs := []*outbox.Outbox{newOutbox(t, d, b, outbox.Options{BatchSize: 5}), newOutbox(t, d, b, outbox.Options{BatchSize: 5})}
		for _, ob := range obs {
			startRelay(t, ob)
			startRelay(t, ob)
		}
		parts := []string{"p0", "p1", "p2", "p3"}
		const n = 60
		var wg sync.WaitGroup
		for i, p := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ob := obs[i%2]
				for j := 0; j < n; j += 3 {
					enqueue(t, d, ob, seqItem("orders", p, j), seqItem("orders", p, j+1), seqItem("orders", p, j+2))
				}
			}()
		}
		wg.Wait()
		for _, p := range parts {
			waitStored(t, b, "orders", p, seq(n))
		}
		waitFor(t, "an empty table", func() bool { return stats(t, obs[0]).Waiting == 0 })
		if d.dialect == outbox.Postgres {
			// Each row pushed by one relay, once: the partition locks.
			// (The count follows the delete's commit by a moment.)
			relayed := func() int64 { return stats(t, obs[0]).Relayed + stats(t, obs[1]).Relayed }
			waitFor(t, "every row counted", func() bool { return relayed() >= n*int64(len(parts)) })
			require.Equal(t, n*int64(len(parts)), relayed())
		}
	})
}

// TestRelay_FullQueueDelaysNeverLoses: a queue at its MaxSize refuses the
// relay's pushes until a consumer makes room; every message arrives, in
// order.
func TestRelay_FullQueueDelaysNeverLoses(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		ctx := context.Background()
		cfg := queen.DefaultQueueConfig()
		cfg.MaxSize = 4
		_, err := b.ConfigureQueue(ctx, "orders", cfg)
		require.NoError(t, err)
		logs := &logCapture{}
		ob := newOutbox(t, d, b, outbox.Options{BatchSize: 3, Logger: slog.New(logs)})
		const n = 30
		for i := range n {
			enqueue(t, d, ob, seqItem("orders", "p", i))
		}
		startRelay(t, ob)
		waitFor(t, "the full queue refusing the relay twice", func() bool { return logs.refused.Load() >= 2 })
		require.Equal(t, seq(4), stored(t, b, "orders", "p"))
		s := stats(t, ob)
		require.Equal(t, outbox.Stats{Waiting: n - 4, OldestAge: s.OldestAge, Relayed: 4}, s)
		var got []int
		deadline := time.Now().Add(time.Minute) // a hang detector
		for len(got) < n {
			require.True(t, time.Now().Before(deadline), "got %v after a minute", got)
			pr, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Group: "g", Batch: 2, Wait: true, Timeout: 5 * time.Second, SubscriptionMode: queen.SubscriptionModeAll})
			require.NoError(t, err)
			for _, m := range pr.Messages {
				var v struct{ N int }
				require.NoError(t, json.Unmarshal(m.Payload, &v))
				got = append(got, v.N)
				_, err := b.Ack(ctx, m, true, queen.AckOptions{})
				require.NoError(t, err)
			}
		}
		require.Equal(t, seq(n), got)
		require.Equal(t, seq(n), stored(t, b, "orders", "p"))
	})
}

// TestRelay_MaintenanceModeNeverLoses: pushes are served in maintenance
// mode, pops are not; the messages relayed meanwhile are delivered once
// it is turned off.
func TestRelay_MaintenanceModeNeverLoses(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		ctx := context.Background()
		require.NoError(t, b.SetMaintenanceMode(ctx, true))
		ob := newOutbox(t, d, b, outbox.Options{})
		startRelay(t, ob)
		for i := range 5 {
			enqueue(t, d, ob, seqItem("orders", "p", i))
		}
		waitFor(t, "the rows relayed", func() bool { return stats(t, ob).Relayed == 5 })
		pr, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Group: "g", Batch: 10, SubscriptionMode: queen.SubscriptionModeAll})
		require.NoError(t, err)
		require.Empty(t, pr.Messages)
		require.NoError(t, b.SetMaintenanceMode(ctx, false))
		pr, err = b.Pop(ctx, queen.PopRequest{Queue: "orders", Group: "g", Batch: 10, SubscriptionMode: queen.SubscriptionModeAll})
		require.NoError(t, err)
		require.Len(t, pr.Messages, 5)
	})
}

// TestRelay_StatsAndBacklog: waiting rows and the oldest one's age by the
// injected clock, and the backlog event.
func TestRelay_StatsAndBacklog(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		clock := queentest.NewClock(time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC))
		b := queentest.NewBroker(t, nil)
		log := newEventLog()
		ob := newOutbox(t, d, b, outbox.Options{Now: clock.Now, Observer: log, PollInterval: time.Hour})
		enqueue(t, d, ob, seqItem("orders", "p", 0), seqItem("orders", "p", 1))
		clock.Advance(90 * time.Second)
		enqueue(t, d, ob, seqItem("orders", "p", 2))
		clock.Advance(30 * time.Second)
		require.Equal(t, outbox.Stats{Waiting: 3, OldestAge: 2 * time.Minute}, stats(t, ob))
		startRelay(t, ob)
		waitStored(t, b, "orders", "p", seq(3))
		waitFor(t, "the relayed events", func() bool { return len(log.of(queen.EventOutboxRelayed)) > 0 })
		backlog := log.of(queen.EventOutboxBacklog)
		require.NotEmpty(t, backlog)
		require.Equal(t, queen.Event{Kind: queen.EventOutboxBacklog, Count: 3, Duration: 2 * time.Minute}, backlog[0]) // before the first step
		require.Equal(t, queen.Event{Kind: queen.EventOutboxRelayed, Queue: "orders", Count: 3, Duration: 2 * time.Minute}, log.of(queen.EventOutboxRelayed)[0])
		waitStats(t, ob, outbox.Stats{Relayed: 3})
	})
}

func TestMigrate_IdempotentAndConcurrent(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ob, err := outbox.New(d.db, b, outbox.Options{Dialect: d.dialect, Table: d.table})
				if err == nil {
					err = ob.Migrate(context.Background())
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		newOutbox(t, d, b, outbox.Options{}) // once more
	})
}

func TestRelay_RefusesAnUnmigratedTable(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		ob, err := outbox.New(d.db, queentest.NewBroker(t, nil), outbox.Options{Dialect: d.dialect, Table: d.table})
		require.NoError(t, err)
		require.Error(t, ob.Relay(context.Background()))
	})
}

func TestNew_RefusesBadOptions(t *testing.T) {
	db, b := &sql.DB{}, queentest.NewBroker(t, nil)
	for _, o := range []outbox.Options{
		{},
		{Dialect: outbox.SQLite, Table: "a;drop"},
		{Dialect: outbox.SQLite, Table: "a.b.c"},
		{Dialect: outbox.SQLite, BatchSize: queen.MaxPushItems + 1},
		{Dialect: outbox.SQLite, PollInterval: -1},
		{Dialect: outbox.SQLite, MinBackoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		_, err := outbox.New(db, b, o)
		require.Error(t, err, fmt.Sprintf("%+v", o))
	}
}

// TestRelay_WakesOnEnqueueDuringAStep: an Enqueue made while the relay is
// in a step (here, from its Observer) whose transaction commits a while
// later is still found without waiting for PollInterval, however many
// times in a row: the relay looks closely again after every Enqueue.
func TestRelay_WakesOnEnqueueDuringAStep(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		relayed, release := make(chan struct{}), make(chan struct{})
		obs := queen.ObserverFunc(func(e queen.Event) {
			if e.Kind == queen.EventOutboxRelayed {
				relayed <- struct{}{}
				<-release // the relay waits inside its step
			}
		})
		ob := newOutbox(t, d, b, outbox.Options{PollInterval: time.Hour, Observer: obs})
		startRelay(t, ob)
		enqueue(t, d, ob, seqItem("orders", "p", 0))
		ctx := context.Background()
		const n = 20 // 20 × 300 ms: more than the 5 s a relay looks closely after one wake-up
		for i := 1; i <= n; i++ {
			select {
			case <-relayed:
			case <-time.After(time.Minute): // a hang detector
				t.Fatalf("message %d not relayed within a minute", i-1)
			}
			tx, err := d.db.BeginTx(ctx, nil)
			require.NoError(t, err)
			require.NoError(t, ob.Enqueue(ctx, tx, seqItem("orders", "p", i))) // during the step
			release <- struct{}{}
			time.Sleep(300 * time.Millisecond) // the application's transaction goes on
			require.NoError(t, tx.Commit())
		}
		select {
		case <-relayed:
		case <-time.After(time.Minute):
			t.Fatalf("message %d not relayed within a minute", n)
		}
		close(release)
		require.Equal(t, seq(n+1), stored(t, b, "orders", "p"))
	})
}
