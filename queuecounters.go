package queen

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// LagBuckets is the number of buckets of [LagCounts].Buckets.
const LagBuckets = 32

// QueueCounters are one queue's running totals since the broker opened
// (or since the queue was created, if later), for dashboards: what
// [Counters] counts for the whole broker, plus what only a queue has,
// its empty pops, its lag and its retention. Read them with
// [Broker.QueueCounters]. Deleting a queue drops its counters; a queue
// created again under the name starts from zero.
type QueueCounters struct {
	Pushed int64 // messages queued by pushes (duplicates and failures excluded)
	Popped int64 // messages delivered by pops
	// EmptyPops counts the pops of the queue that delivered nothing
	// (after waiting, with Wait). Pops of a queue that was never pushed to
	// since the broker opened are not counted, so that polling arbitrary
	// names cannot grow the table.
	EmptyPops int64
	// Acked counts the ack items that settled or gave back a message, by
	// status, as [Counters].Acked does.
	Acked        map[AckStatus]int64
	DeadLettered int64 // messages moved to the dead-letter store
	Parked       int64 // messages moved to the parked store
	// Retained counts the messages deleted for being older than the
	// queue's Retention, CompletedRetained those deleted for being older
	// than its CompletedRetention after every group passed them, and
	// Evicted those MaxWaitTime removed: dead-lettered for the groups that
	// had not settled them, or deleted where no group reads.
	Retained, CompletedRetained, Evicted int64
	// PushBatches, PopBatches and AckBatches count the calls that queued,
	// delivered or applied at least one message of the queue: Pushed over
	// PushBatches is the mean batch of a push. An ack call that applied
	// items of several statuses counts once per status.
	PushBatches, PopBatches, AckBatches int64
	// Lag is how long the popped messages had waited.
	Lag LagCounts
}

// LagCounts sums the lag of popped messages: how long each had waited,
// from its push (its CreatedAt) to its delivery, by the broker's clock.
// A redelivered message counts again, with its whole wait.
type LagCounts struct {
	Count int64         // messages
	Total time.Duration // their lags summed
	Max   time.Duration // the longest one so far
	// Buckets[0] counts lags under 1 ms, Buckets[i] those of at least
	// 2^(i-1) ms and under 2^i ms, and the last bucket every longer one:
	// the difference of two readings tells the largest lag between them
	// within a factor of two (see [LagCounts.MaxSince]).
	Buckets [LagBuckets]int64
}

// MaxSince returns the longest lag counted after an earlier reading
// prev of the same counters: the upper bound of the highest bucket that
// grew, clipped to Max. It is exact when the longest lag ever was counted
// in between, and otherwise at most twice the real one. It returns 0 when
// no message was popped in between.
func (l LagCounts) MaxSince(prev LagCounts) time.Duration {
	for i := LagBuckets - 1; i >= 0; i-- {
		if l.Buckets[i] > prev.Buckets[i] {
			if i == LagBuckets-1 {
				return l.Max
			}
			return min(time.Duration(1)<<i*time.Millisecond, l.Max)
		}
	}
	return 0
}

// queueCounters is the live, lock-free form of one queue's QueueCounters.
type queueCounters struct {
	pushed, popped, empty, dead, parked atomic.Int64
	pushCalls, popCalls, ackCalls       atomic.Int64
	acked                               [len(ackStatuses)]atomic.Int64
	retained, completedRetained         atomic.Int64
	evicted                             atomic.Int64
	lagCount, lagTotal, lagMax          atomic.Int64 // lagTotal and lagMax in microseconds
	lagBuckets                          [LagBuckets]atomic.Int64
}

// queueTable maps queue names to their counters. Entries are made by the
// first push, pop, ack or letter of a queue and dropped by DeleteQueue.
type queueTable struct {
	m sync.Map // string → *queueCounters
}

// get returns the counters of queue, made if need be.
func (t *queueTable) get(queue string) *queueCounters {
	if v, ok := t.m.Load(queue); ok {
		return v.(*queueCounters)
	}
	v, _ := t.m.LoadOrStore(queue, new(queueCounters))
	return v.(*queueCounters)
}

// lookup returns the counters of queue, or nil if it has none yet.
func (t *queueTable) lookup(queue string) *queueCounters {
	if v, ok := t.m.Load(queue); ok {
		return v.(*queueCounters)
	}
	return nil
}

// countQueue adds e to its queue's counters. Events with no queue (a
// discovery pop that found nothing) and kinds a queue does not count are
// skipped.
func (t *queueTable) countQueue(e Event) {
	if e.Queue == "" {
		return
	}
	n := int64(e.Count)
	switch e.Kind {
	case EventPush:
		if n > 0 {
			qc := t.get(e.Queue)
			qc.pushed.Add(n)
			qc.pushCalls.Add(1)
		}
	case EventPop:
		if n > 0 {
			qc := t.get(e.Queue)
			qc.popped.Add(n)
			qc.popCalls.Add(1)
		} else if qc := t.lookup(e.Queue); qc != nil {
			qc.empty.Add(1)
		}
	case EventAck:
		if k := statusIndex(e.Status); k >= 0 && n > 0 {
			qc := t.get(e.Queue)
			qc.acked[k].Add(n)
			qc.ackCalls.Add(1)
		}
	case EventDeadLettered:
		if n > 0 {
			t.get(e.Queue).dead.Add(n)
		}
	case EventParked:
		if n > 0 {
			t.get(e.Queue).parked.Add(n)
		}
	}
}

// countLag adds the lags of msgs, delivered at now, to queue's counters.
func (t *queueTable) countLag(queue string, msgs []*Message, now time.Time) {
	if queue == "" || len(msgs) == 0 {
		return
	}
	qc := t.get(queue)
	var total, longest int64
	var buckets [LagBuckets]int32 // summed here: one atomic add a bucket, not a message
	at := now.UnixMicro()
	for _, m := range msgs {
		us := max(at-m.CreatedAt.UnixMicro(), 0)
		total += us
		longest = max(longest, us)
		buckets[lagBucket(us)]++
	}
	for i, n := range buckets {
		if n > 0 {
			qc.lagBuckets[i].Add(int64(n))
		}
	}
	qc.lagCount.Add(int64(len(msgs)))
	qc.lagTotal.Add(total)
	for {
		cur := qc.lagMax.Load()
		if longest <= cur || qc.lagMax.CompareAndSwap(cur, longest) {
			break
		}
	}
}

// lagBucket is the index in LagCounts.Buckets of a lag of us microseconds.
func lagBucket(us int64) int {
	return min(bits.Len64(uint64(us/1000)), LagBuckets-1)
}

// countRetained adds n messages deleted by retention of kind to queue's
// counters.
func (t *queueTable) countRetained(queue string, kind retainKind, n int) {
	if n <= 0 {
		return
	}
	qc := t.get(queue)
	switch kind {
	case retainAll:
		qc.retained.Add(int64(n))
	case retainCompleted:
		qc.completedRetained.Add(int64(n))
	case retainUnread:
		qc.evicted.Add(int64(n))
	}
}

// snapshot reads one queue's counters.
func (qc *queueCounters) snapshot() QueueCounters {
	out := QueueCounters{
		Pushed: qc.pushed.Load(), Popped: qc.popped.Load(), EmptyPops: qc.empty.Load(),
		DeadLettered: qc.dead.Load(), Parked: qc.parked.Load(),
		Retained: qc.retained.Load(), CompletedRetained: qc.completedRetained.Load(), Evicted: qc.evicted.Load(),
		Acked:       make(map[AckStatus]int64, len(ackStatuses)),
		PushBatches: qc.pushCalls.Load(), PopBatches: qc.popCalls.Load(), AckBatches: qc.ackCalls.Load(),
	}
	for i, s := range ackStatuses {
		out.Acked[s] = qc.acked[i].Load()
	}
	out.Lag = LagCounts{
		Count: qc.lagCount.Load(),
		Total: time.Duration(qc.lagTotal.Load()) * time.Microsecond,
		Max:   time.Duration(qc.lagMax.Load()) * time.Microsecond,
	}
	for i := range qc.lagBuckets {
		out.Lag.Buckets[i] = qc.lagBuckets[i].Load()
	}
	return out
}

// QueueCounters returns the running totals of every queue that has been
// pushed to, popped from, acked or dead-lettered since the broker opened,
// by name. Each queue's figures are read without stopping the broker, so
// two of them may be a few operations apart.
func (b *Broker) QueueCounters() map[string]QueueCounters {
	out := make(map[string]QueueCounters)
	b.qcounters.m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*queueCounters).snapshot()
		return true
	})
	return out
}
