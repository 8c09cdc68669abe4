package main

import (
	"context"
	"fmt"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/crashtest"
)

// consumeLoop is the -loop mode: it pushes a backlog of n messages over
// crashtest.LoopPartitions (unless an earlier round confirmed them all),
// then runs the README's consume loop on it in group crashtest.LoopGroup,
// logging what each handler saw and each ack OnSettled confirmed, until it
// is killed, runFor runs out or, with drain, the group has nothing left.
//
// Lines (see package crashtest):
//
//	push QUEUE PARTITION TXID OFFSET   a confirmed push
//	pushed                             every push of the backlog is confirmed
//	lag N                              the group has N messages left to consume
//	handled PARTITION OFFSET ATTEMPT   a handler ran and is about to return nil
//	acked PARTITION OFFSET             OnSettled: accepted, its ack returned success
//	other PARTITION OFFSET OUTCOME ERR OnSettled reported anything else
//	drained                            (drain) the loop stopped with lag 0, broker closed
func consumeLoop(log *logger, prev []crashtest.Line, dir string, opts *queen.Options, n, round int, drain bool, runFor time.Duration) {
	pushedAll := false
	for _, l := range prev {
		pushedAll = pushedAll || l.Kind == "pushed"
	}
	b, err := queen.Open(dir, opts)
	if err != nil {
		log.fatal("open: %v", err)
	}
	log.write(fmt.Sprintf("ready %d", round))
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()

	if !pushedAll {
		// Idempotent: a round killed during its pushes (the test does not
		// kill there, but a failure would) gets duplicates at the same offsets.
		const chunk = 500
		for lo := 0; lo < n; lo += chunk {
			items := make([]queen.PushItem, 0, chunk)
			for i := lo; i < min(lo+chunk, n); i++ {
				items = append(items, queen.PushItem{Queue: crashtest.LoopQueue, Partition: crashtest.LoopPartitions[i%len(crashtest.LoopPartitions)],
					TransactionID: fmt.Sprintf("m%d", i), Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))})
			}
			res, err := b.Push(ctx, items)
			if err != nil {
				log.fatal("push: %v", err)
			}
			lines := make([]string, 0, len(res))
			for _, r := range res {
				if r.Status == queen.PushFailed {
					log.fatal("push %s: %v", r.TransactionID, r.Err)
				}
				lines = append(lines, fmt.Sprintf("push %s %s %s %d", crashtest.LoopQueue, r.Partition, r.TransactionID, r.Offset))
			}
			log.write(lines...)
		}
		log.write("pushed")
	}

	// What is left for the group, so the test can choose when to kill.
	qs, err := b.QueueStats(ctx, crashtest.LoopQueue)
	if err != nil {
		log.fatal("queue stats: %v", err)
	}
	lag := int64(0)
	for _, ps := range qs.Partitions {
		left := ps.Messages // a group not yet created reads them all
		for _, c := range ps.Cursors {
			if c.Group == crashtest.LoopGroup {
				left = c.Lag
			}
		}
		lag += left
	}
	log.write(fmt.Sprintf("lag %d", lag))

	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	if drain {
		go func() {
			for loopCtx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
				gs, err := b.ListGroups(loopCtx, queen.GroupFilter{Group: crashtest.LoopGroup})
				if err != nil {
					continue
				}
				for _, g := range gs {
					if g.Queue == crashtest.LoopQueue && g.Lag == 0 && g.InFlight == 0 {
						stop()
					}
				}
			}
		}()
	}
	h := func(ctx context.Context, m *queen.Message) error {
		if m.Offset%64 == 63 {
			// Now and then a handler outlasts the ack linger, so a lane's
			// acks are also written while its next handler runs.
			time.Sleep(2 * time.Millisecond)
		}
		log.write(fmt.Sprintf("handled %s %d %d", m.Partition, m.Offset, m.DeliveryAttempt))
		return nil
	}
	err = b.Queue(crashtest.LoopQueue).Group(crashtest.LoopGroup).SubscriptionMode(queen.SubscriptionModeAll).
		Batch(100).Concurrency(4).Each().
		Consume(loopCtx, h).
		OnSettled(func(s queen.Settlement) {
			m := s.Message
			if s.Outcome == queen.OutcomeAccepted && s.AckErr == nil {
				log.write(fmt.Sprintf("acked %s %d", m.Partition, m.Offset))
				return
			}
			log.write(fmt.Sprintf("other %s %d %s %v", m.Partition, m.Offset, s.Outcome, s.AckErr))
		}).
		Execute(loopCtx)
	if err != nil {
		log.fatal("consume loop: %v", err)
	}
	if ctx.Err() != nil {
		log.fatal("the loop ran for %v without being killed or drained", runFor)
	}
	if err := b.Close(); err != nil {
		log.fatal("close: %v", err)
	}
	log.write("drained")
}
