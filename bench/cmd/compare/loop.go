package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/remote"
)

// Scenario 10 drains the same backlog (j.N messages over j.Partitions
// partitions, pushed untimed into a fresh store by the child) with one
// group in subscription mode all, three ways, each in process (system
// "queen...") and over HTTP (system "http...": package remote against
// httpapi on a loopback listener in the same process):
//
//   - "queen", "http": the hand drain, j.Consumers goroutines each popping
//     j.Batch (Pop) and acking what it got in one AckBatch (scenario 3's
//     consumer, on a queen.Client);
//   - "+each": the README's consume loop, Batch(j.Batch),
//     Concurrency(j.Consumers), Each(), Consume with a handler that
//     returns nil;
//   - "+batch": the same builder with ConsumeBatch (no Each: the handler
//     gets each pop's messages).
//
// The loops stop when OnSettled has counted every message accepted (or at
// the time cap). The table gives each loop's rate over the hand drain's of
// the same transport, batch and round.

// loopStyles are the systems' suffixes: "" is the hand drain.
var loopStyles = []string{"", "+each", "+batch"}

func runLoopJob(j *Job) (Result, error) {
	transport, style, _ := strings.Cut(j.System, "+")
	if transport != "queen" && transport != "http" || style != "" && style != "each" && style != "batch" {
		return Result{}, fmt.Errorf("scenario 10: unknown system %q", j.System)
	}
	ctx := context.Background()
	preload := func(b *queen.Broker) error { return preloadBacklog(b, j) }
	var (
		c      queen.Client
		broker *queen.Broker // the store's own broker, for the verification
	)
	if transport == "http" {
		e, err := httpStart(j, preload, nil)
		if err != nil {
			return Result{}, err
		}
		defer e.close()
		rc, err := remote.Dial(e.base, nil)
		if err != nil {
			return Result{}, err
		}
		defer rc.Close()
		c, broker = rc, e.b.Broker
	} else {
		b, err := queenOpen(j, j.Sync)
		if err != nil {
			return Result{}, err
		}
		defer b.Close()
		if err := preload(b.Broker); err != nil {
			return Result{}, fmt.Errorf("preload: %w", err)
		}
		c, broker = b.Broker, b.Broker
	}
	group := "loop-" + j.Tag
	oc := newOffsetChecker()
	end := deadline(j)
	prof := startProfile(j)
	start := time.Now()
	var (
		n      int64
		last   time.Time
		capped bool
		err    error
	)
	if style == "" {
		qc := &queenConsumer{b: c, group: group, workers: j.Consumers, batch: j.Batch, partitions: 1, target: int64(j.N), end: end, check: oc.check}
		n, last, capped, err = qc.run(ctx)
	} else {
		n, last, capped, err = consumeLoop(ctx, c, j, group, style == "batch", end, oc)
	}
	prof.stop()
	if err != nil {
		return Result{}, err
	}
	r := Result{Msgs: n, Seconds: last.Sub(start).Seconds(), Capped: capped}
	if !capped {
		if n != int64(j.N) {
			return Result{}, fmt.Errorf("verify: settled %d, want %d", n, j.N)
		}
		if err := verifyDrained(ctx, broker, []string{group}); err != nil {
			return Result{}, err
		}
		if err := verifyLag(ctx, broker, group, int64(j.N)); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}

// consumeLoop runs the consume loop on c until OnSettled has counted
// j.N messages accepted, or until end. Every message must be handled in
// offset order per partition (oc) and accepted exactly once; any other
// outcome before the loop is stopped fails the run.
func consumeLoop(parent context.Context, c queen.Client, j *Job, group string, batch bool, end time.Time, oc *offsetChecker) (int64, time.Time, bool, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	target := int64(j.N)
	var (
		settled  atomic.Int64
		lt       lastTime
		stopped  atomic.Bool // ctx is cancelled (done, capped or failed): give-backs are expected
		timedOut atomic.Bool
		once     sync.Once
		firstErr error
		mu       sync.Mutex
		accepted = map[string]*seen{} // partition -> offsets accepted
	)
	fail := func(err error) {
		once.Do(func() { firstErr = err })
		stopped.Store(true)
		cancel()
	}
	onSettled := func(s queen.Settlement) {
		m := s.Message
		if s.Outcome != queen.OutcomeAccepted {
			if !stopped.Load() {
				fail(fmt.Errorf("partition %s offset %d: outcome %s (status %q, handler error %v, ack error %v)", m.Partition, m.Offset, s.Outcome, s.Status, s.Err, s.AckErr))
			}
			return
		}
		mu.Lock()
		sn := accepted[m.Partition]
		if sn == nil {
			sn = newSeen(j.N / max(j.Partitions, 1))
			accepted[m.Partition] = sn
		}
		sn.mark(uint64(m.Offset))
		dup := sn.dups > 0
		mu.Unlock()
		if dup {
			fail(fmt.Errorf("partition %s offset %d accepted twice", m.Partition, m.Offset))
			return
		}
		lt.note(time.Now())
		if settled.Add(1) == target {
			stopped.Store(true)
			cancel()
		}
	}
	qb := c.Queue(benchQueue).Group(group).SubscriptionMode(queen.SubscriptionModeAll).Batch(j.Batch).Concurrency(j.Consumers)
	var cons *queen.Consumer
	if batch {
		cons = qb.ConsumeBatch(ctx, func(_ context.Context, msgs []*queen.Message) error {
			if err := oc.check(msgs); err != nil {
				fail(err)
			}
			return nil
		})
	} else {
		cons = qb.Each().Consume(ctx, func(_ context.Context, msg *queen.Message) error {
			if err := oc.check([]*queen.Message{msg}); err != nil {
				fail(err)
			}
			return nil
		})
	}
	cons.OnSettled(onSettled)
	timer := time.AfterFunc(time.Until(end), func() {
		timedOut.Store(true)
		stopped.Store(true)
		cancel()
	})
	err := cons.Execute(ctx)
	timer.Stop()
	if firstErr != nil {
		return 0, time.Time{}, false, firstErr
	}
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("consume loop: %w", err)
	}
	n := settled.Load()
	capped := n < target && timedOut.Load()
	if !capped {
		mu.Lock()
		defer mu.Unlock()
		var total int64
		for p, sn := range accepted {
			if sn.dups != 0 {
				return 0, time.Time{}, false, fmt.Errorf("verify: partition %s: %d offsets accepted twice", p, sn.dups)
			}
			total += sn.n
		}
		if n != target || total != target {
			return 0, time.Time{}, false, fmt.Errorf("verify: loop stopped with %d accepted (%d distinct) of %d", n, total, target)
		}
	}
	return n, lt.get(), capped, nil
}

// verifyLag checks the group's own statistics: nothing left to read,
// nothing in flight, and want messages consumed.
func verifyLag(ctx context.Context, b *queen.Broker, group string, want int64) error {
	gs, err := b.ListGroups(ctx, queen.GroupFilter{Group: group})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for _, g := range gs {
		if g.Queue != benchQueue {
			continue
		}
		if g.Lag != 0 || g.InFlight != 0 || g.Consumed != want {
			return fmt.Errorf("verify: group %s: lag %d, in flight %d, consumed %d of %d", group, g.Lag, g.InFlight, g.Consumed, want)
		}
		return nil
	}
	return fmt.Errorf("verify: group %s not found on queue %s", group, benchQueue)
}
