package dbtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/outbox"
	"github.com/stretchr/testify/require"
)

// benchItems is the number of messages per operation: one order
// transaction's events.
const benchItems = 10

// BenchmarkOutbox measures, on each database, one operation of
// benchItems messages three ways, with a broker on disk (fsync on every
// commit), under two loads: 4producers (four goroutines, each starting
// its next operation as soon as its last one returned: throughput) and
// 1by1 (one goroutine waiting for each operation's messages to be stored
// before the next: latency without a backlog). The ways:
//
//	push             Push of the items, no database: the broker alone
//	commit-then-push the application's transaction (an INSERT of the
//	                 orders), commit, then Push: today's way, not atomic
//	outbox           the same transaction with Enqueue, a relay pushing
//
// The timer runs until every message is in the broker. Reported: msgs/s,
// and the latency from the end of the operation's commit (push: its
// start) to the return of the Push that stored its messages, p50 and
// p99 in ms.
func BenchmarkOutbox(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			for _, load := range []struct {
				name      string
				producers int
			}{{"4producers", 4}, {"1by1", 1}} {
				for _, mode := range []string{"push", "commit-then-push", "outbox"} {
					b.Run(load.name+"/"+mode, func(b *testing.B) {
						var d *database
						if kind == "sqlite" {
							d = openSQLite(b)
						} else {
							d = openPostgres(b)
						}
						benchOutbox(b, d, mode, load.producers)
					})
				}
			}
		})
	}
}

// timedClient records when each TransactionID's push returned.
type timedClient struct {
	queen.Client
	mu      sync.Mutex
	done    map[string]time.Time
	waiters map[string]chan struct{} // closed when the id is stored
	n       atomic.Int64
}

// stored returns a channel closed once id is stored.
func (c *timedClient) stored(id string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if _, ok := c.done[id]; ok {
		close(ch)
	} else {
		c.waiters[id] = ch
	}
	return ch
}

func (c *timedClient) Push(ctx context.Context, items []queen.PushItem) ([]queen.PushResult, error) {
	res, err := c.Client.Push(ctx, items)
	if err == nil {
		now := time.Now()
		c.mu.Lock()
		for _, r := range res {
			if r.Status == queen.PushQueued {
				c.done[r.TransactionID] = now
				if ch := c.waiters[r.TransactionID]; ch != nil {
					close(ch)
					delete(c.waiters, r.TransactionID)
				}
			}
		}
		c.mu.Unlock()
		c.n.Add(int64(len(res)))
	}
	return res, err
}

func benchOutbox(b *testing.B, d *database, mode string, producers int) {
	ctx := context.Background()
	broker, err := queen.Open(b.TempDir(), nil)
	require.NoError(b, err)
	defer broker.Close()
	c := &timedClient{Client: broker, done: map[string]time.Time{}, waiters: map[string]chan struct{}{}}
	table := strings.TrimSuffix(d.table, "queen_outbox") + "orders"
	_, err = d.db.Exec("CREATE TABLE " + table + " (id TEXT PRIMARY KEY, customer TEXT NOT NULL, body TEXT NOT NULL)")
	require.NoError(b, err)
	ob := newOutbox(b, d, c, outbox.Options{})
	d.db.SetMaxOpenConns(16)
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	if mode == "outbox" {
		go func() { relayDone <- ob.Relay(relayCtx) }()
	} else {
		relayDone <- nil
	}
	defer func() {
		stopRelay()
		require.NoError(b, <-relayDone)
	}()

	var mu sync.Mutex
	started := map[string]time.Time{} // by the op's first TransactionID
	var seq atomic.Int64
	insert := "INSERT INTO " + table + " (id, customer, body) VALUES "
	for i := range benchItems {
		if i > 0 {
			insert += ","
		}
		if d.dialect == outbox.Postgres {
			insert += fmt.Sprintf("($%d,$%d,$%d)", 3*i+1, 3*i+2, 3*i+3)
		} else {
			insert += "(?,?,?)"
		}
	}
	op := func(p int) error {
		n := seq.Add(1)
		items := make([]queen.PushItem, benchItems)
		args := make([]any, 0, 3*benchItems)
		customer := fmt.Sprintf("c-%d", p)
		for i := range items {
			id := fmt.Sprintf("o-%d-%d", n, i)
			body := fmt.Sprintf(`{"order":%q,"total":12.5}`, id)
			items[i] = queen.PushItem{Queue: "orders", Partition: customer, TransactionID: id, Payload: []byte(body)}
			args = append(args, id, customer, body)
		}
		if mode == "push" {
			mu.Lock()
			started[items[0].TransactionID] = time.Now()
			mu.Unlock()
			_, err := c.Push(ctx, items)
			return err
		}
		tx, err := d.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, insert, args...); err != nil {
			return err
		}
		if mode == "outbox" {
			if err := ob.Enqueue(ctx, tx, items...); err != nil {
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		mu.Lock()
		started[items[0].TransactionID] = time.Now()
		mu.Unlock()
		if mode == "commit-then-push" {
			_, err := c.Push(ctx, items)
			return err
		}
		if producers == 1 {
			select {
			case <-c.stored(items[0].TransactionID):
			case <-time.After(time.Minute):
				return fmt.Errorf("%s not stored within a minute", items[0].TransactionID)
			}
		}
		return nil
	}

	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Value
	var next atomic.Int64
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := op(p); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	want := int64(b.N * benchItems)
	for c.n.Load() < want {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()

	var lat []time.Duration
	mu.Lock()
	c.mu.Lock()
	for id, t0 := range started {
		t1, ok := c.done[id]
		require.True(b, ok, "message %s never stored", id)
		lat = append(lat, t1.Sub(t0))
	}
	c.mu.Unlock()
	mu.Unlock()
	slices.Sort(lat)
	st, err := broker.QueueStats(ctx, "orders")
	require.NoError(b, err)
	require.EqualValues(b, want, st.Messages, "every message stored once")
	b.ReportMetric(float64(want)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
}
