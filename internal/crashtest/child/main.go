// Command child is the process the crash test kills. It opens a broker on
// -dir and, until it is killed (or -for runs out), pushes, pops, acks with
// every status, replays dead letters and lets retention delete, logging to
// -log what returned success (see package crashtest for the format).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/crashtest"
)

type logger struct {
	mu sync.Mutex
	f  *os.File
}

// write appends lines in one write(2): after it returns, a SIGKILL cannot
// take them back.
func (l *logger) write(lines ...string) {
	var sb strings.Builder
	for _, s := range lines {
		sb.WriteString(s)
		sb.WriteByte('\n')
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write([]byte(sb.String())); err != nil {
		fmt.Fprintln(os.Stderr, "child: log:", err)
		os.Exit(2)
	}
}

func (l *logger) fatal(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.write("ERR " + strings.ReplaceAll(msg, "\n", " "))
	fmt.Fprintln(os.Stderr, "child:", msg)
	os.Exit(3)
}

func main() {
	dir := flag.String("dir", "", "broker directory")
	logPath := flag.String("log", "", "log file (appended)")
	durability := flag.String("durability", queen.SyncEveryCommit.String(), "durability mode, by its String name")
	round := flag.Int("round", 0, "round number, part of every transactionId")
	seed := flag.Uint64("seed", 1, "random seed")
	runFor := flag.Duration("for", 20*time.Second, "exit by itself after this long")
	seq := flag.Int("seq", 0, "instead: push this many messages one at a time, then pop and ack each (for syscall tracing)")
	vlogSize := flag.Int64("vlogsize", 0, "with -seq: open Badger with this value-log file size, through queen.OpenDB")
	loopN := flag.Int("loop", 0, "instead: push a backlog of this many messages (first round) and run a consume loop on it (see loop.go)")
	drain := flag.Bool("drain", false, "with -loop: stop once the group has consumed everything, close the broker and log drained")
	flag.Parse()

	f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	log := &logger{f: f}
	prev, err := crashtest.ReadLog(*logPath)
	if err != nil {
		log.fatal("read log: %v", err)
	}

	opts := &queen.Options{MaintenanceInterval: 50 * time.Millisecond, GCInterval: 500 * time.Millisecond}
	for _, m := range []queen.Durability{queen.SyncEveryCommit, queen.SyncNever, queen.SyncPushes} {
		if m.String() == *durability {
			opts.Durability = m
		}
	}
	if opts.Durability.String() != *durability {
		log.fatal("unknown durability %q", *durability)
	}
	if *seq > 0 {
		sequential(log, *dir, opts, *seq, *vlogSize)
		return
	}
	if *loopN > 0 {
		consumeLoop(log, prev, *dir, opts, *loopN, *round, *drain, *runFor)
		return
	}
	b, err := queen.Open(*dir, opts)
	if err != nil {
		log.fatal("open: %v", err)
	}
	ctx := context.Background()
	work := queen.DefaultQueueConfig()
	work.RetryLimit, work.RetryDelay, work.LeaseTime = 2, 0, time.Minute
	if _, err := b.ConfigureQueue(ctx, crashtest.WorkQueue, work); err != nil {
		log.fatal("configure: %v", err)
	}
	capped := queen.DefaultQueueConfig()
	capped.MaxSize = crashtest.CapMax
	if _, err := b.ConfigureQueue(ctx, crashtest.CapOut, capped); err != nil {
		log.fatal("configure: %v", err)
	}
	retain := queen.DefaultQueueConfig()
	retain.Retention = 300 * time.Millisecond
	if _, err := b.ConfigureQueue(ctx, crashtest.RetainQueue, retain); err != nil {
		log.fatal("configure: %v", err)
	}

	// Pushes confirmed in earlier rounds, pushed again: each must be a
	// duplicate at the same offset.
	type pushed struct {
		part, txid string
		off        int64
	}
	var old []pushed
	for _, l := range prev {
		if l.Kind == "push" && l.Fields[0] == crashtest.WorkQueue {
			old = append(old, pushed{l.Fields[1], l.Fields[2], l.Int(3)})
		}
	}

	log.write(fmt.Sprintf("ready %d", *round))
	var stop atomic.Bool
	var wg sync.WaitGroup
	rngFor := func(i uint64) *rand.Rand { return rand.New(rand.NewPCG(*seed, uint64(*round)<<16|i)) }

	producer := func(id int, queue string, parts []string, pause time.Duration) {
		defer wg.Done()
		rng := rngFor(uint64(id))
		for n := 0; !stop.Load(); {
			time.Sleep(pause)
			items := make([]queen.PushItem, 1+rng.IntN(20))
			for i := range items {
				txid := fmt.Sprintf("r%d-w%d-%d", *round, id, n)
				n++
				items[i] = queen.PushItem{Queue: queue, Partition: parts[rng.IntN(len(parts))], TransactionID: txid, Payload: crashtest.Payload(txid)}
			}
			again, againAt := pushed{}, -1
			if len(old) > 0 && queue == crashtest.WorkQueue && rng.IntN(4) == 0 {
				again, againAt = old[rng.IntN(len(old))], len(items)
				items = append(items, queen.PushItem{Queue: queue, Partition: again.part, TransactionID: again.txid, Payload: crashtest.Payload(again.txid)})
			}
			res, err := b.Push(ctx, items)
			if err != nil {
				log.fatal("push: %v", err)
			}
			lines := make([]string, 0, len(res))
			for i, r := range res {
				if r.Status == queen.PushFailed {
					log.fatal("push %s: %v", r.TransactionID, r.Err)
				}
				if i == againAt && (r.Status != queen.PushDuplicate || r.Offset != again.off) {
					log.fatal("re-push of %s/%s (offset %d before the crash): %s at %d", again.part, again.txid, again.off, r.Status, r.Offset)
				}
				lines = append(lines, fmt.Sprintf("push %s %s %s %d", queue, r.Partition, r.TransactionID, r.Offset))
			}
			log.write(lines...)
		}
	}

	statuses := []queen.AckStatus{queen.AckFailed, queen.AckRetry, queen.AckDLQ, queen.AckPark}
	consumer := func(id int, group string) {
		defer wg.Done()
		rng := rngFor(100 + uint64(id))
		logGroup := group
		if group == "" {
			logGroup = queen.QueueModeGroup
		}
		for !stop.Load() {
			res, err := b.Pop(ctx, queen.PopRequest{Queue: crashtest.WorkQueue, Group: group, SubscriptionMode: queen.SubscriptionModeAll,
				Batch: 1 + rng.IntN(10), Partitions: 1 + rng.IntN(2), Wait: true, Timeout: 100 * time.Millisecond})
			if err != nil {
				log.fatal("pop: %v", err)
			}
			if len(res.Messages) == 0 {
				continue
			}
			items := make([]queen.AckItem, len(res.Messages))
			intents := make([]string, len(items))
			for i, m := range res.Messages {
				st := queen.AckCompleted
				if rng.IntN(100) < 30 {
					st = statuses[rng.IntN(len(statuses))]
				}
				items[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: group, Status: st, Error: "e:" + m.TransactionID}
				intents[i] = fmt.Sprintf("intent %s %s %d %s", logGroup, m.Partition, m.Offset, st)
			}
			log.write(intents...)
			results, err := b.AckBatch(ctx, items)
			if err != nil {
				log.fatal("ack: %v", err)
			}
			// Per partition: the cursor moved through the leading run of
			// settled messages (the whole batch when all settled).
			type span struct {
				end     int64
				back    int64 // first offset that comes back, -1 if none
				refused bool
			}
			spans := map[string]*span{}
			var lines []string
			for i, m := range res.Messages {
				s := spans[m.Partition]
				if s == nil {
					s = &span{back: -1}
					spans[m.Partition] = s
				}
				s.end = m.Offset + 1
				r := results[i]
				if !r.Success {
					s.refused = true
					if !errors.Is(r.Err, queen.ErrLeaseExpired) {
						log.fatal("ack %s refused: %v", m.TransactionID, r.Err)
					}
					continue
				}
				dest := "-"
				switch {
				case r.DeadLettered:
					dest = "dl"
				case r.Parked:
					dest = "pk"
				}
				settled := items[i].Status == queen.AckCompleted || r.DeadLettered || r.Parked
				if !settled && s.back < 0 {
					s.back = m.Offset
				}
				lines = append(lines, fmt.Sprintf("ack %s %s %d %s %s", logGroup, m.Partition, m.Offset, items[i].Status, dest))
			}
			for part, s := range spans {
				if s.refused {
					continue
				}
				c := s.end
				if s.back >= 0 {
					c = s.back
				}
				lines = append(lines, fmt.Sprintf("cursor %s %s %d", logGroup, part, c))
			}
			log.write(lines...)
		}
	}

	replayer := func() {
		defer wg.Done()
		rng := rngFor(200)
		for !stop.Load() {
			time.Sleep(20 * time.Millisecond)
			page, err := b.DeadLetters(ctx, queen.LetterFilter{Queue: crashtest.WorkQueue, Limit: 20})
			if err != nil {
				log.fatal("dead letters: %v", err)
			}
			if len(page.Letters) == 0 {
				continue
			}
			dl := page.Letters[rng.IntN(len(page.Letters))]
			r, err := b.ReplayDeadLetter(ctx, dl.ID)
			if err != nil {
				log.fatal("replay %s: %v", dl.ID, err)
			}
			log.write(fmt.Sprintf("replay %s %s %d %d", dl.Partition, r.TransactionID, r.Offset, dl.Offset),
				fmt.Sprintf("push %s %s %s %d", crashtest.WorkQueue, dl.Partition, r.TransactionID, r.Offset))
		}
	}

	// Reads TxQueue and, per batch, acks it and pushes one output per
	// input in one transaction.
	transformer := func() {
		defer wg.Done()
		rng := rngFor(300)
		for !stop.Load() {
			res, err := b.Pop(ctx, queen.PopRequest{Queue: crashtest.TxQueue, Batch: 1 + rng.IntN(5), Wait: true, Timeout: 100 * time.Millisecond})
			if err != nil {
				log.fatal("tx pop: %v", err)
			}
			if len(res.Messages) == 0 {
				continue
			}
			tx := b.Transaction()
			for _, m := range res.Messages {
				tx.Ack(m, queen.AckCompleted, queen.AckOptions{})
				tx.Push(queen.PushItem{Queue: crashtest.OutQueue, Partition: m.Partition, TransactionID: "out:" + m.TransactionID, Payload: crashtest.Payload("out:" + m.TransactionID)})
			}
			tr, err := tx.Commit(ctx)
			if err != nil {
				log.fatal("transaction: %v", err)
			}
			var lines []string
			for _, r := range tr.Results {
				if r.Push != nil {
					lines = append(lines, fmt.Sprintf("push %s %s %s %d", crashtest.OutQueue, r.Push.Partition, r.Push.TransactionID, r.Push.Offset))
				}
			}
			m := res.Messages[len(res.Messages)-1]
			lines = append(lines, fmt.Sprintf("cursor %s %s %d", "tx", m.Partition, m.Offset+1))
			log.write(lines...)
		}
	}

	// Reads AutoQueue with CommitOnDelivery: what a pop returned is settled, never
	// delivered again, crash or not.
	autoAcker := func() {
		defer wg.Done()
		rng := rngFor(400)
		for !stop.Load() {
			res, err := b.Pop(ctx, queen.PopRequest{Queue: crashtest.AutoQueue, Group: crashtest.AutoGroup, SubscriptionMode: queen.SubscriptionModeAll,
				CommitOnDelivery: true, Batch: 1 + rng.IntN(5), Wait: true, Timeout: 100 * time.Millisecond})
			if err != nil {
				log.fatal("auto-ack pop: %v", err)
			}
			if len(res.Messages) == 0 {
				continue
			}
			m := res.Messages[len(res.Messages)-1]
			log.write(fmt.Sprintf("cursor %s %s %d", crashtest.AutoGroup, m.Partition, m.Offset+1))
		}
	}

	// Reads AutoQueue in a conflating group: each pop returns the newest
	// message of a partition, acked completed.
	conflater := func() {
		defer wg.Done()
		for !stop.Load() {
			res, err := b.Pop(ctx, queen.PopRequest{Queue: crashtest.AutoQueue, Group: crashtest.ConflateGroup, Conflation: true, SubscriptionMode: queen.SubscriptionModeAll,
				Wait: true, Timeout: 100 * time.Millisecond})
			if err != nil {
				log.fatal("conflating pop: %v", err)
			}
			if len(res.Messages) == 0 {
				continue
			}
			if len(res.Messages) != 1 {
				log.fatal("conflating pop returned %d messages", len(res.Messages))
			}
			m := res.Messages[0]
			r, err := b.Ack(ctx, m, true, queen.AckOptions{})
			if err != nil || !r.Success {
				log.fatal("conflating ack of %s: %v", m.TransactionID, err)
			}
			log.write(fmt.Sprintf("cursor %s %s %d", crashtest.ConflateGroup, m.Partition, m.Offset+1))
			time.Sleep(5 * time.Millisecond)
		}
	}

	// Like transformer, into CapOut, which is full most of the time: a
	// refused transaction must change nothing, its lease included.
	capper := func() {
		defer wg.Done()
		rng := rngFor(500)
		for !stop.Load() {
			res, err := b.Pop(ctx, queen.PopRequest{Queue: crashtest.CapIn, Batch: 1 + rng.IntN(3), Wait: true, Timeout: 100 * time.Millisecond})
			if err != nil {
				log.fatal("cap pop: %v", err)
			}
			if len(res.Messages) == 0 {
				continue
			}
			tx := b.Transaction()
			for _, m := range res.Messages {
				tx.Ack(m, queen.AckCompleted, queen.AckOptions{})
				tx.Push(queen.PushItem{Queue: crashtest.CapOut, Partition: m.Partition, TransactionID: "cap:" + m.TransactionID, Payload: crashtest.Payload("cap:" + m.TransactionID)})
			}
			last := res.Messages[len(res.Messages)-1]
			tr, err := tx.Commit(ctx)
			switch {
			case err == nil:
				var lines []string
				for _, r := range tr.Results {
					if r.Push != nil {
						if r.Push.Status == queen.PushFailed {
							log.fatal("transaction committed without its push of %s: %v", r.Push.TransactionID, r.Push.Err)
						}
						lines = append(lines, fmt.Sprintf("push %s %s %s %d", crashtest.CapOut, r.Push.Partition, r.Push.TransactionID, r.Push.Offset))
					}
				}
				log.write(append(lines, fmt.Sprintf("cursor %s %s %d", "cap", last.Partition, last.Offset+1))...)
			case errors.Is(err, queen.ErrQueueFull):
				// Nothing was applied: the lease still holds every input.
				items := make([]queen.AckItem, len(res.Messages))
				for i, m := range res.Messages {
					items[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: queen.AckRetry}
				}
				results, err := b.AckBatch(ctx, items)
				if err != nil {
					log.fatal("retry after a refused transaction: %v", err)
				}
				for i, r := range results {
					if !r.Success {
						log.fatal("a refused transaction changed %s: %v", items[i].TransactionID, r.Err)
					}
				}
				log.write(fmt.Sprintf("refused %s %d", last.Partition, last.Offset))
			default:
				log.fatal("cap transaction: %v", err)
			}
		}
	}

	// Drains CapOut slowly, so some transactions into it go through.
	capDrainer := func() {
		defer wg.Done()
		for !stop.Load() {
			time.Sleep(15 * time.Millisecond)
			res, err := b.Pop(ctx, queen.PopRequest{Queue: crashtest.CapOut, Partitions: 2, Batch: 1})
			if err != nil {
				log.fatal("drain pop: %v", err)
			}
			for _, m := range res.Messages {
				if _, err := b.Ack(ctx, m, true, queen.AckOptions{}); err != nil {
					log.fatal("drain ack: %v", err)
				}
			}
		}
	}

	for i := range 3 {
		wg.Add(1)
		go producer(i, crashtest.WorkQueue, crashtest.WorkPartitions, 0)
	}
	wg.Add(2)
	go producer(8, crashtest.TxQueue, crashtest.TxPartitions, 0)
	go transformer()
	wg.Add(1)
	go producer(9, crashtest.RetainQueue, crashtest.RetainPartitions, 0)
	wg.Add(3)
	go producer(10, crashtest.AutoQueue, crashtest.AutoPartitions, 5*time.Millisecond)
	go autoAcker()
	go conflater()
	wg.Add(3)
	go producer(11, crashtest.CapIn, crashtest.CapPartitions, 10*time.Millisecond)
	go capper()
	go capDrainer()
	for i := range 4 {
		wg.Add(1)
		go consumer(i, []string{"", crashtest.NamedGroup}[i%2])
	}
	wg.Add(1)
	go replayer()

	time.Sleep(*runFor)
	stop.Store(true)
	wg.Wait()
	if err := b.Close(); err != nil {
		log.fatal("close: %v", err)
	}
	log.write("closed")
}

// sequential pushes n messages one by one (every third one 1.2 MB, kept
// in the value log), then pops and acks them one by one (the pops of a
// queue-mode group: only the first writes, outside the bracketed calls). Each call is
// bracketed by "begin" and "ok" lines, so a syscall trace shows what the
// broker synced between the two.
func sequential(log *logger, dir string, opts *queen.Options, n int, vlogSize int64) {
	opts.MaintenanceInterval, opts.GCInterval = time.Hour, time.Hour
	// Under SyncPushes no background sync falls inside a traced call.
	opts.AckSyncDelay = queen.MaxAckSyncDelay
	var b *queen.Broker
	var db *badger.DB
	var err error
	if vlogSize > 0 {
		// The options queen.Open uses, with a small value-log file.
		db, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithSyncWrites(false).WithNumVersionsToKeep(1).
			WithCompactL0OnClose(true).WithDetectConflicts(false).WithValueLogFileSize(vlogSize))
		if err == nil {
			b, err = queen.OpenDB(db, opts)
		}
	} else {
		b, err = queen.Open(dir, opts)
	}
	if err != nil {
		log.fatal("open: %v", err)
	}
	ctx := context.Background()
	for i := range n {
		txid := fmt.Sprintf("s%d", i)
		payload := []byte(fmt.Sprintf(`{"i":%d}`, i))
		big := i%3 == 2
		if big {
			payload = []byte(`"` + strings.Repeat("v", 1200<<10) + `"`)
		}
		log.write(fmt.Sprintf("begin push %d %v", i, big))
		if _, err := b.Push(ctx, []queen.PushItem{{Queue: "seq", TransactionID: txid, Payload: payload}}); err != nil {
			log.fatal("push: %v", err)
		}
		log.write(fmt.Sprintf("ok push %d %v", i, big))
	}
	for i := range n {
		res, err := b.Pop(ctx, queen.PopRequest{Queue: "seq"})
		if err != nil || len(res.Messages) != 1 {
			log.fatal("pop %d: %v", i, err)
		}
		log.write(fmt.Sprintf("begin ack %d false", i))
		if _, err := b.AckBatch(ctx, []queen.AckItem{{TransactionID: res.Messages[0].TransactionID, PartitionID: res.Messages[0].PartitionID, LeaseID: res.LeaseID}}); err != nil {
			log.fatal("ack: %v", err)
		}
		log.write(fmt.Sprintf("ok ack %d false", i))
	}
	if err := b.Close(); err != nil {
		log.fatal("close: %v", err)
	}
	if db != nil {
		_ = db.Close()
	}
}
