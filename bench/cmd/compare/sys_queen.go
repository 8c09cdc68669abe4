package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
)

const benchQueue = "bench"

// qb is a broker, and the Badger database under it when the job tunes
// Badger itself (experiments: -badger-* flags).
type qb struct {
	*queen.Broker
	db *badger.DB
}

func (b *qb) Close() error {
	err := b.Broker.Close()
	if b.db != nil {
		err = errors.Join(err, b.db.Close())
	}
	return err
}

func queenOpen(j *Job, sync bool) (*qb, error) {
	d := queen.SyncNever
	if sync {
		d = queen.SyncEveryCommit
	}
	opts := &queen.Options{Durability: d, MemoryBudget: int64(j.MemoryMB) << 20}
	if j.Tweak != "" {
		bo, err := queen.BadgerOptions(j.Dir, opts)
		if err != nil {
			return nil, err
		}
		if bo, err = applyTweak(bo, j.Tweak); err != nil {
			return nil, err
		}
		return openOnBadger(bo, opts)
	}
	if !j.tunedBadger() {
		b, err := queen.Open(j.Dir, opts)
		return &qb{Broker: b}, err
	}
	return openOnBadger(j.badgerOptions(), opts)
}

// openOnBadger opens a broker on a Badger database opened with bo, which
// the broker's Close leaves to the caller (qb.db).
func openOnBadger(bo badger.Options, opts *queen.Options) (*qb, error) {
	db, err := badger.Open(bo)
	if err != nil {
		return nil, err
	}
	b, err := queen.OpenDB(db, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &qb{Broker: b, db: db}, nil
}

func partNames(prefix string, n int) []string {
	names := make([]string, max(n, 1))
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	return names
}

func runQueen(j *Job) (Result, error) {
	switch j.Kind {
	case "push", "preload":
		return queenPush(j)
	case "drain", "fanout":
		return queenDrain(j)
	case "order":
		return queenOrder(j)
	case "idle":
		return queenIdle(j)
	case "latency":
		return queenLatency(j)
	case "httppush":
		return queenPush(j)
	case "httppop", "httpone":
		return queenPopAck(j)
	case "pushdrain":
		return queenPushDrain(j)
	}
	return Result{}, fmt.Errorf("queen: unknown kind %q", j.Kind)
}

// queenPushAll pushes the messages [0, n) with payload(i) to partition
// names[i % len(names)], batch at a time from producers goroutines.
func queenPushAll(ctx context.Context, b *queen.Broker, j *Job, names []string, payload func(i int) []byte) (produced, error) {
	return produce(j, func(w, lo, hi int) error {
		items := make([]queen.PushItem, 0, hi-lo)
		for i := lo; i < hi; i++ {
			items = append(items, queen.PushItem{Queue: benchQueue, Partition: names[i%len(names)], Payload: payload(i)})
		}
		res, err := b.Push(ctx, items)
		if err != nil {
			return err
		}
		for k := range res {
			if res[k].Status != queen.PushQueued {
				return fmt.Errorf("push item %d: %s %v", k, res[k].Status, res[k].Err)
			}
		}
		return nil
	})
}

func queenPush(j *Job) (Result, error) {
	ctx := context.Background()
	sync := j.Sync
	if j.Kind == "preload" {
		sync = false // the backlog's durability is not what is measured
	}
	b, err := queenOpen(j, sync)
	if err != nil {
		return Result{}, err
	}
	names := partNames("p", j.Partitions)
	payload := fixedPayload(j.Payload)
	prof := startProfile(j)
	p, err := queenPushAll(ctx, b.Broker, j, names, func(int) []byte { return payload })
	prof.stop()
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, err
	}
	// Verify on a reopened broker: the count, and the bytes of the first
	// and last stored message of partition 0.
	b, err = queenOpen(j, false)
	if err != nil {
		return Result{}, err
	}
	defer b.Close()
	qs, err := b.QueueStats(ctx, benchQueue)
	if err != nil {
		return Result{}, fmt.Errorf("verify: %w", err)
	}
	if qs.Messages != p.n {
		return Result{}, fmt.Errorf("verify: queue holds %d messages, pushed %d", qs.Messages, p.n)
	}
	for _, ps := range qs.Partitions {
		if ps.Name != names[0] {
			continue
		}
		for _, off := range []int64{0, ps.NextOffset - 1} {
			fr, err := b.Fetch(ctx, benchQueue, ps.Name, off, 1)
			if err != nil || len(fr.Records) != 1 || !bytes.Equal(fr.Records[0].Payload, payload) || fr.Records[0].Offset != off {
				return Result{}, fmt.Errorf("verify: fetch %s@%d: %v", ps.Name, off, err)
			}
		}
	}
	return p.result(), nil
}

// queenConsumer pops and acks for one group until target messages are
// settled or the deadline passes.
type queenConsumer struct {
	b          queen.Client // a *queen.Broker, or a remote client (scenario 10)
	group      string       // "" = queue mode
	workers    int
	batch      int
	partitions int
	target     int64
	end        time.Time
	check      func(msgs []*queen.Message) error // verification, before the ack
}

func (qc *queenConsumer) run(ctx context.Context) (n int64, last time.Time, capped bool, err error) {
	var done atomic.Int64
	var lt lastTime
	var firstErr error
	var once sync.Once
	var failed atomic.Bool
	var wg sync.WaitGroup
	var capFlag atomic.Bool
	fail := func(e error) { once.Do(func() { firstErr = e; failed.Store(true) }) }
	for range max(qc.workers, 1) {
		wg.Go(func() {
			var items []queen.AckItem
			for done.Load() < qc.target && !failed.Load() {
				if time.Now().After(qc.end) {
					capFlag.Store(true)
					return
				}
				res, err := qc.b.Pop(ctx, queen.PopRequest{
					Queue: benchQueue, Group: qc.group, Batch: qc.batch, Partitions: qc.partitions,
					Wait: true, Timeout: 100 * time.Millisecond, SubscriptionMode: queen.SubscriptionModeAll,
				})
				if err != nil {
					fail(fmt.Errorf("pop: %w", err))
					return
				}
				if len(res.Messages) == 0 {
					continue
				}
				if qc.check != nil {
					if err := qc.check(res.Messages); err != nil {
						fail(err)
						return
					}
				}
				items = items[:0]
				for _, m := range res.Messages {
					items = append(items, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: qc.group})
				}
				ar, err := qc.b.AckBatch(ctx, items)
				if err != nil {
					fail(fmt.Errorf("ack: %w", err))
					return
				}
				for k := range ar {
					if !ar[k].Success || ar[k].Err != nil {
						fail(fmt.Errorf("ack item %d refused: %v", k, ar[k].Err))
						return
					}
				}
				lt.note(time.Now())
				done.Add(int64(len(items)))
			}
		})
	}
	wg.Wait()
	return done.Load(), lt.get(), capFlag.Load(), firstErr
}

// offsetChecker verifies that each (group, partition) sees consecutive
// offsets from its start, each once.
type offsetChecker struct {
	mu   sync.Mutex
	next map[string]int64
}

func newOffsetChecker() *offsetChecker { return &offsetChecker{next: map[string]int64{}} }

func (oc *offsetChecker) check(msgs []*queen.Message) error {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	for _, m := range msgs {
		k := m.ConsumerGroup + "\x00" + m.Partition
		if want := oc.next[k]; m.Offset != want {
			return fmt.Errorf("order: group %s partition %s: got offset %d, want %d", m.ConsumerGroup, m.Partition, m.Offset, want)
		}
		oc.next[k] = m.Offset + 1
		if m.DeliveryAttempt != 1 {
			return fmt.Errorf("group %s partition %s offset %d delivered %d times", m.ConsumerGroup, m.Partition, m.Offset, m.DeliveryAttempt)
		}
	}
	return nil
}

// verifyDrained checks that every named group has settled everything.
func verifyDrained(ctx context.Context, b *queen.Broker, groups []string) error {
	qs, err := b.QueueStats(ctx, benchQueue)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, g := range groups {
		want[groupLabel(g)] = true
	}
	for _, ps := range qs.Partitions {
		found := 0
		for _, cs := range ps.Cursors {
			if !want[cs.Group] {
				continue
			}
			found++
			if cs.Offset != ps.NextOffset || cs.InFlight != 0 {
				return fmt.Errorf("verify: group %s partition %s at %d of %d, %d in flight", cs.Group, ps.Name, cs.Offset, ps.NextOffset, cs.InFlight)
			}
		}
		if found != len(want) && ps.Messages > 0 {
			return fmt.Errorf("verify: partition %s has %d of %d group cursors", ps.Name, found, len(want))
		}
	}
	return nil
}

func groupLabel(g string) string {
	if g == "" {
		return queen.QueueModeGroup
	}
	return g
}

// queenDrain is scenario 3 (one group) and 4 (j.Groups groups) on a
// preloaded backlog of j.N messages.
func queenDrain(j *Job) (Result, error) {
	ctx := context.Background()
	b, err := queenOpen(j, j.Sync)
	if err != nil {
		return Result{}, err
	}
	defer b.Close()
	groups := []string{"drain-" + j.Tag}
	workers := j.Consumers
	if j.Kind == "fanout" {
		groups = nil
		for g := range max(j.Groups, 1) {
			groups = append(groups, fmt.Sprintf("fan-%s-%d", j.Tag, g))
		}
		workers = 1
	}
	oc := newOffsetChecker()
	end := deadline(j)
	prof := startProfile(j)
	start := time.Now()
	type out struct {
		n      int64
		last   time.Time
		capped bool
		err    error
	}
	outs := make([]out, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			qc := &queenConsumer{b: b.Broker, group: g, workers: workers, batch: j.Batch, partitions: 1, target: int64(j.N), end: end, check: oc.check}
			o := &outs[i]
			o.n, o.last, o.capped, o.err = qc.run(ctx)
		})
	}
	wg.Wait()
	prof.stop()
	var r Result
	var last time.Time
	for i, o := range outs {
		if o.err != nil {
			return Result{}, fmt.Errorf("group %s: %w", groups[i], o.err)
		}
		r.Msgs += o.n
		r.Capped = r.Capped || o.capped
		if o.last.After(last) {
			last = o.last
		}
	}
	r.Seconds = last.Sub(start).Seconds()
	if !r.Capped {
		if r.Msgs != int64(j.N*len(groups)) {
			return Result{}, fmt.Errorf("verify: settled %d, want %d", r.Msgs, j.N*len(groups))
		}
		if err := verifyDrained(ctx, b.Broker, groups); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}

// queenOrder is scenario 5: j.N messages over j.Partitions keyed
// partitions (one per key), consumed by j.Consumers workers with every
// message acked and per-key order checked against the producer's sequence.
func queenOrder(j *Job) (Result, error) {
	ctx := context.Background()
	b, err := queenOpen(j, j.Sync)
	if err != nil {
		return Result{}, err
	}
	defer b.Close()
	keys := max(j.Partitions, 1)
	names := partNames("k", keys)
	pre := *j
	pre.Producers, pre.Batch, pre.MaxTime = 1, 1000, 0 // one producer keeps each key's sequence in push order
	if _, err := queenPushAll(ctx, b.Broker, &pre, names, func(i int) []byte { return seqPayload(i%keys, i/keys, 0, j.Payload) }); err != nil {
		return Result{}, fmt.Errorf("preload: %w", err)
	}
	var mu sync.Mutex
	next := make([]int, keys)
	check := func(msgs []*queen.Message) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			k, s, _, ok := parseSeq(m.Payload)
			if !ok || k < 0 || k >= keys || "k"+strconv.Itoa(k) != m.Partition {
				return fmt.Errorf("bad payload %q in %s", m.Payload, m.Partition)
			}
			if s != next[k] {
				return fmt.Errorf("order: key %d got seq %d, want %d", k, s, next[k])
			}
			next[k]++
		}
		return nil
	}
	prof := startProfile(j)
	start := time.Now()
	qc := &queenConsumer{b: b.Broker, group: "order-" + j.Tag, workers: j.Consumers, batch: j.Batch, partitions: 1, target: int64(j.N), end: deadline(j), check: check}
	n, last, capped, err := qc.run(ctx)
	prof.stop()
	if err != nil {
		return Result{}, err
	}
	r := Result{Msgs: n, Seconds: last.Sub(start).Seconds(), Capped: capped}
	if !capped {
		for k := range keys {
			if want := j.N/keys + btoi(k < j.N%keys); next[k] != want {
				return Result{}, fmt.Errorf("verify: key %d got %d messages, want %d", k, next[k], want)
			}
		}
	}
	return r, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// queenIdle is scenario 6: pop/ack throughput over 10 busy partitions,
// with j.Idle idle partitions (each pushed once and consumed) beside them
// in the same queue and group.
func queenIdle(j *Job) (Result, error) {
	ctx := context.Background()
	b, err := queenOpen(j, j.Sync)
	if err != nil {
		return Result{}, err
	}
	group := "g"
	h0 := heapAfterGC() // Badger's memtable arena is allocated whole at open: this is the base
	store0 := heapUnder("github.com/dgraph-io/")
	if j.Idle > 0 {
		pre := *j
		pre.N, pre.Producers, pre.Batch, pre.MaxTime = j.Idle, 2, 1000, 0
		small := fixedPayload(16)
		if _, err := queenPushAll(ctx, b.Broker, &pre, partNames("i", j.Idle), func(int) []byte { return small }); err != nil {
			b.Close()
			return Result{}, fmt.Errorf("idle preload: %w", err)
		}
		qc := &queenConsumer{b: b.Broker, group: group, workers: 2, batch: 64, partitions: 64, target: int64(j.Idle), end: time.Now().Add(time.Hour)}
		if _, _, _, err := qc.run(ctx); err != nil {
			b.Close()
			return Result{}, fmt.Errorf("idle drain: %w", err)
		}
	} else {
		// The group exists before the measured phase in both variants.
		if _, err := b.Pop(ctx, queen.PopRequest{Queue: benchQueue, Group: group, SubscriptionMode: queen.SubscriptionModeAll}); err != nil {
			b.Close()
			return Result{}, err
		}
	}
	live := heapAfterGC() - h0
	store := heapUnder("github.com/dgraph-io/") - store0
	writeHeapProfile(j, "live")
	busy := partNames("b", j.Partitions)
	payload := fixedPayload(j.Payload)
	pre := *j
	pre.Producers, pre.Batch, pre.MaxTime = 2, 1000, 0
	if _, err := queenPushAll(ctx, b.Broker, &pre, busy, func(int) []byte { return payload }); err != nil {
		b.Close()
		return Result{}, fmt.Errorf("busy preload: %w", err)
	}
	// Reopen, so that both variants read the backlog from the same kind of
	// storage state (as scenario 3 does) and the load of every partition
	// is timed and checked.
	if err := b.Close(); err != nil {
		return Result{}, err
	}
	t := time.Now()
	if b, err = queenOpen(j, j.Sync); err != nil {
		return Result{}, err
	}
	defer b.Close()
	load := time.Since(t)
	qs, err := b.QueueStats(ctx, benchQueue)
	if err != nil {
		return Result{}, err
	}
	if qs.PartitionN != j.Idle+len(busy) {
		return Result{}, fmt.Errorf("verify: %d partitions after reopen, want %d", qs.PartitionN, j.Idle+len(busy))
	}
	oc := newOffsetChecker()
	prof := startProfile(j)
	start := time.Now()
	qc := &queenConsumer{b: b.Broker, group: group, workers: j.Consumers, batch: j.Batch, partitions: 1, target: int64(j.N), end: deadline(j), check: oc.check}
	n, last, capped, err := qc.run(ctx)
	prof.stop()
	if err != nil {
		return Result{}, err
	}
	r := Result{Msgs: n, Seconds: last.Sub(start).Seconds(), Capped: capped, HeapLive: live, HeapStore: store, Note: fmt.Sprintf("open (load) %d ms", load.Milliseconds())}
	if !capped {
		if err := verifyDrained(ctx, b.Broker, []string{group}); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}

// queenLatency is scenario 7: one producer pushes single messages at
// j.Rate per second (open loop: latency counts from the scheduled send
// time) over j.Partitions partitions; j.Consumers workers pop (waiting)
// and ack; latency is push start → the message in the consumer's hands.
func queenLatency(j *Job) (Result, error) {
	ctx := context.Background()
	b, err := queenOpen(j, j.Sync)
	if err != nil {
		return Result{}, err
	}
	defer b.Close()
	names := partNames("p", j.Partitions)
	l := &lats{}
	sn := newSeen(j.N)
	check := func(msgs []*queen.Message) error {
		now := time.Now().UnixNano()
		for _, m := range msgs {
			_, s, t, ok := parseSeq(m.Payload)
			if !ok {
				return fmt.Errorf("bad payload %q", m.Payload)
			}
			l.add(time.Duration(now - t))
			sn.mark(uint64(s))
		}
		return nil
	}
	// The queue exists before the consumers start waiting on it.
	if _, err := b.ConfigureQueue(ctx, benchQueue, queen.DefaultQueueConfig()); err != nil {
		return Result{}, err
	}
	qc := &queenConsumer{b: b.Broker, group: "", workers: j.Consumers, batch: 100, partitions: 1, target: int64(j.N), end: time.Now().Add(j.MaxTime + 30*time.Second), check: check}
	type out struct {
		n   int64
		err error
	}
	ch := make(chan out, 1)
	go func() {
		n, _, _, err := qc.run(ctx)
		ch <- out{n, err}
	}()
	prof := startProfile(j)
	note, sent, perr := openLoop(j, func(i int, at time.Time) error { // at: the call's start
		res, err := b.Push(ctx, []queen.PushItem{{Queue: benchQueue, Partition: names[i%len(names)], Payload: seqPayload(i%len(names), i, at.UnixNano(), j.Payload)}})
		if err == nil && res[0].Status != queen.PushQueued {
			err = fmt.Errorf("push: %s %v", res[0].Status, res[0].Err)
		}
		return err
	})
	o := <-ch
	prof.stop()
	if err := errors.Join(perr, o.err); err != nil {
		return Result{}, err
	}
	if o.n != int64(j.N) || sn.n != int64(j.N) || sn.dups != 0 {
		return Result{}, fmt.Errorf("verify: consumed %d (%d distinct, %d dups) of %d", o.n, sn.n, sn.dups, j.N)
	}
	r := Result{Msgs: int64(j.N), Seconds: sent.Seconds(), Note: note}
	l.fill(&r)
	return r, nil
}

// queenPushDrain is scenario 9: one broker, opened once, takes j.N
// messages (j.Batch per call from j.Producers producers over j.Partitions
// partitions) and then drains them with j.Consumers consumers popping
// j.PopBatch and acking each batch; both phases are timed, and the
// process's peak RSS is the row's point.
func queenPushDrain(j *Job) (Result, error) {
	ctx := context.Background()
	b, err := queenOpen(j, j.Sync)
	if err != nil {
		return Result{}, err
	}
	defer b.Close()
	names := partNames("p", j.Partitions)
	payload := fixedPayload(j.Payload)
	prof := startProfile(j)
	p, err := queenPushAll(ctx, b.Broker, j, names, func(int) []byte { return payload })
	if err != nil {
		return Result{}, err
	}
	r := p.result()
	if r.Capped {
		return r, nil
	}
	group := "mem-" + j.Tag
	oc := newOffsetChecker()
	start := time.Now()
	qc := &queenConsumer{b: b.Broker, group: group, workers: j.Consumers, batch: j.PopBatch, partitions: 1, target: p.n, end: deadline(j), check: oc.check}
	n, last, capped, err := qc.run(ctx)
	prof.stop()
	if err != nil {
		return Result{}, err
	}
	r.DrainSeconds, r.Capped = last.Sub(start).Seconds(), capped
	if !capped {
		if n != p.n {
			return Result{}, fmt.Errorf("verify: settled %d, want %d", n, p.n)
		}
		if err := verifyDrained(ctx, b.Broker, []string{group}); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}
