package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// The consume loop survives losing one of three of Queen's real servers
// over one database, as TestCluster_ConsumeSurvivesLosingAServer does with
// httpapi fronts. Opt-in: it needs the servers of
//
//	eval "$(QUEEN_REAL_SERVERS=3 ../shared/realqueen/start.sh)"
//
// (QUEEN_REAL_URLS lists them; QUEEN_REAL_STATE/queen.pid has their pids,
// in the same order), and it kills one of them with SIGKILL: start them
// again for another run. It runs on real time: Queen's server leases for
// the queue's leaseTime (here 3 s), whatever the pop asks.
func TestRealQueen_ClusterSurvivesLosingAServer(t *testing.T) {
	urls := strings.Split(os.Getenv("QUEEN_REAL_URLS"), ",")
	state := os.Getenv("QUEEN_REAL_STATE")
	if len(urls) < 3 || state == "" {
		t.Skip("needs three of Queen's servers over one database: QUEEN_REAL_URLS and QUEEN_REAL_STATE, as printed by " +
			"QUEEN_REAL_SERVERS=3 ../shared/realqueen/start.sh (it kills one of them)")
	}
	pids, err := os.ReadFile(filepath.Join(state, "queen.pid"))
	require.NoError(t, err)
	pidOf := map[string]int{}
	for i, line := range strings.Fields(string(pids)) {
		pid, err := strconv.Atoi(line)
		require.NoError(t, err)
		if i < len(urls) {
			pidOf[urls[i]] = pid
		}
	}
	const parts, perPart, batch, resume = 6, 100, 10, 50
	c, err := remote.Dial(strings.Join(urls, ","), &remote.Options{Server: remote.ServerQueen, RetryBackoff: 10 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	queue := fmt.Sprintf("cluster-%08x", rand.Uint32())
	_, err = c.ConfigureQueue(ctx, queue, queen.QueueConfig{LeaseTime: 3 * time.Second})
	require.NoError(t, err)
	defer func() { _, _ = c.DeleteQueue(context.Background(), queue) }()
	var items []queen.PushItem
	for p := range parts {
		for i := range perPart {
			items = append(items, queen.PushItem{Queue: queue, Partition: fmt.Sprintf("p%d", p),
				TransactionID: fmt.Sprintf("m-%d-%d", p, i), Payload: json.RawMessage(`{}`)})
		}
	}
	for len(items) > 0 {
		n := min(len(items), 200)
		res, err := c.Push(ctx, items[:n])
		require.NoError(t, err)
		for _, r := range res {
			require.Equal(t, queen.PushQueued, r.Status, "%+v", r)
		}
		items = items[n:]
	}
	const total = parts * perPart

	victim := c.ServerFor(queue + ":*:g") // every pop of the loop goes there
	pid, ok := pidOf[victim]
	require.True(t, ok, "no pid for %s in %s", victim, state)

	var mu sync.Mutex
	handled := map[string]int{}
	count, afterKill, ackErrs := 0, 0, 0
	var firstAt, killedAt, resumedAt time.Time
	kill := make(chan struct{})
	done := make(chan struct{})
	start := time.Now()
	cons := c.Queue(queue).Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(batch).Concurrency(3).
		Wait(true).Timeout(time.Second).
		Consume(ctx, func(_ context.Context, m *queen.Message) error {
			mu.Lock()
			defer mu.Unlock()
			handled[m.TransactionID]++
			if count++; count == 1 {
				firstAt = time.Now()
			}
			if !killedAt.IsZero() {
				// More than the loop can hold (3 handlers, batches of 10):
				// these came from pops sent after the kill.
				if afterKill++; afterKill == resume {
					resumedAt = time.Now()
				}
			}
			if count == total/4 {
				close(kill)
			}
			if len(handled) == total && done != nil {
				close(done)
				done = nil
			}
			return nil
		}).
		OnSettled(func(s queen.Settlement) {
			if s.AckErr != nil {
				mu.Lock()
				ackErrs++
				mu.Unlock()
			}
		})
	finished := done
	require.NoError(t, cons.Start(ctx))
	defer func() { _ = cons.Stop(context.Background()) }()

	select {
	case <-kill:
	case <-ctx.Done():
		t.Fatal("the loop never got a quarter through")
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()

	select {
	case <-finished:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d messages delivered in %s", len(handled), total, time.Since(start))
	}
	end := time.Now()
	require.NoError(t, cons.Stop(ctx))

	var victimState remote.ServerState
	for _, s := range c.Servers() {
		if s.URL == victim {
			victimState = s
		}
	}
	// On real time the client may have readmitted the dead server for a
	// try by now (ReadmitBackoff), so its health is not asked; that it was
	// found dead is.
	require.Positive(t, victimState.Failures, "%+v", c.Servers())
	require.Contains(t, victimState.LastError, strings.TrimPrefix(victim, "http://"), "%+v", c.Servers())
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for _, n := range handled {
		dups += n - 1
	}
	t.Logf("%d messages over %d servers, one killed (SIGKILL) after %d: all delivered in %s; the %d before the kill took %s, "+
		"the %d after it %s; %d acks refused or cut, %d delivered again (duplicates); the dead server: %+v",
		total, len(urls), total/4, end.Sub(start).Round(time.Millisecond), total/4, killedAt.Sub(firstAt).Round(time.Millisecond),
		resume, resumedAt.Sub(killedAt).Round(time.Millisecond), ackErrs, dups, victimState)
}
