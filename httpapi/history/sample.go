package history

import (
	"context"
	"sort"
	"time"

	"github.com/queenlite/queen"
)

// Figures are what happened over some time: counts of messages, and the
// lag of the popped ones.
type Figures struct {
	Pushed    int64 // messages queued
	Popped    int64 // messages delivered
	EmptyPops int64 // pops that delivered nothing (see [queen.QueueCounters].EmptyPops)
	Acked     int64 // ack items applied, every status
	AckFailed int64 // of Acked, those with status failed
	// DeadLettered and Parked count the messages moved to the dead-letter
	// and parked stores.
	DeadLettered, Parked int64
	// Retained, CompletedRetained and Evicted count the messages Retention,
	// CompletedRetention and MaxWaitTime removed.
	Retained, CompletedRetained, Evicted int64
	// PartitionsCreated and PartitionsDeleted count partitions that
	// appeared and went (with their queue, or by a delete).
	PartitionsCreated, PartitionsDeleted int64
	// PushBatches, PopBatches and AckBatches count the calls that pushed,
	// delivered or acked at least one message (see
	// [queen.QueueCounters].PushBatches).
	PushBatches, PopBatches, AckBatches int64
	// LagCount messages were popped after waiting LagTotal in all, the
	// longest about LagMax (see [queen.LagCounts].MaxSince).
	LagCount int64
	LagTotal time.Duration
	LagMax   time.Duration
}

// AvgLag returns the mean wait of the popped messages, 0 with none.
func (f Figures) AvgLag() time.Duration {
	if f.LagCount == 0 {
		return 0
	}
	return f.LagTotal / time.Duration(f.LagCount)
}

// Add adds g to f: counts are summed, LagMax is the larger.
func (f *Figures) Add(g Figures) {
	f.Pushed += g.Pushed
	f.Popped += g.Popped
	f.EmptyPops += g.EmptyPops
	f.Acked += g.Acked
	f.AckFailed += g.AckFailed
	f.DeadLettered += g.DeadLettered
	f.Parked += g.Parked
	f.Retained += g.Retained
	f.CompletedRetained += g.CompletedRetained
	f.Evicted += g.Evicted
	f.PartitionsCreated += g.PartitionsCreated
	f.PartitionsDeleted += g.PartitionsDeleted
	f.PushBatches += g.PushBatches
	f.PopBatches += g.PopBatches
	f.AckBatches += g.AckBatches
	f.LagCount += g.LagCount
	f.LagTotal += g.LagTotal
	f.LagMax = max(f.LagMax, g.LagMax)
}

// QueueState is a queue's depth at one moment, as ListQueues tells it.
type QueueState struct {
	Messages    int64 // stored messages
	Pending     int64 // not settled by the slowest group
	InFlight    int64 // under live leases
	DeadLetters int64
	Parked      int64
	Partitions  int
}

// QueueFigures are one queue's figures over an interval, and its state
// at the interval's end.
type QueueFigures struct {
	Name string
	Figures
	State QueueState
	// WaitingPops is the long-poll pops waiting on the queue (see
	// [queen.Broker.WaitingPops]): in a Sample, at its time; in a Bucket,
	// the mean over the samples that held the queue (the gauge Queen's
	// wire calls parkedCount). Zero for a client without WaitingPops.
	WaitingPops float64

	samples int // in a Bucket: how many samples held the queue
}

// Sample is what changed between two readings of the client, taken
// Elapsed apart, the second at At.
type Sample struct {
	At      time.Time
	Elapsed time.Duration
	Totals  Figures        // the whole broker, every queue included
	Queues  []QueueFigures // by name, at most [Options].MaxQueues
	// CPUUser and CPUSystem are the CPU time this process used over the
	// interval, RSS its resident memory at At.
	CPUUser, CPUSystem time.Duration
	RSS                int64
	// HandlersInFlight is the consume handlers running at At (see
	// [queen.Counters].HandlersInFlight).
	HandlersInFlight int64
}

// clone returns a copy of s that shares no slice with it.
func (s *Sample) clone() Sample {
	c := *s
	c.Queues = append([]QueueFigures(nil), s.Queues...)
	return c
}

// Queue returns the figures of the queue named, and false when the sample
// does not hold it.
func (s *Sample) Queue(name string) (QueueFigures, bool) {
	for _, q := range s.Queues {
		if q.Name == name {
			return q, true
		}
	}
	return QueueFigures{}, false
}

// Bucket sums the samples of one span of time.
type Bucket struct {
	Start   time.Time     // the span's start
	Width   time.Duration // the span's length
	Elapsed time.Duration // the time its samples cover, summed
	Samples int
	Totals  Figures
	// Queues sums each queue's figures over the span, by name, with the
	// state of the newest sample that held it.
	Queues []QueueFigures
	// CPUUser and CPUSystem sum the samples' CPU time; RSS is the largest
	// resident memory and HandlersInFlight the newest count.
	CPUUser, CPUSystem time.Duration
	RSS                int64
	HandlersInFlight   int64
}

// PerSecond returns n over the time the bucket's samples cover, 0 when
// they cover none.
func (b *Bucket) PerSecond(n int64) float64 {
	if b.Elapsed <= 0 {
		return 0
	}
	return float64(n) / b.Elapsed.Seconds()
}

// CPUPercent returns d, a CPU time used in the bucket, as a percentage of
// the time its samples cover (100 is one core busy throughout).
func (b *Bucket) CPUPercent(d time.Duration) float64 {
	if b.Elapsed <= 0 {
		return 0
	}
	return 100 * d.Seconds() / b.Elapsed.Seconds()
}

// Queue returns the figures of the queue named, and false when no sample
// of the bucket holds it.
func (b *Bucket) Queue(name string) (QueueFigures, bool) {
	for _, q := range b.Queues {
		if q.Name == name {
			return q, true
		}
	}
	return QueueFigures{}, false
}

// add sums s into b.
func (b *Bucket) add(s Sample) {
	b.Elapsed += s.Elapsed
	b.Samples++
	b.Totals.Add(s.Totals)
	b.CPUUser += s.CPUUser
	b.CPUSystem += s.CPUSystem
	b.RSS = max(b.RSS, s.RSS)
	b.HandlersInFlight = s.HandlersInFlight
	for _, q := range s.Queues {
		i := 0
		for i < len(b.Queues) && b.Queues[i].Name != q.Name {
			i++
		}
		if i == len(b.Queues) {
			b.Queues = append(b.Queues, QueueFigures{Name: q.Name})
		}
		bq := &b.Queues[i]
		bq.Add(q.Figures)
		bq.State = q.State
		bq.WaitingPops = (bq.WaitingPops*float64(bq.samples) + q.WaitingPops) / float64(bq.samples+1)
		bq.samples++
	}
	byName(b.Queues)
}

// reading is one look at the client: running totals and states.
type reading struct {
	at       time.Time
	totals   *queen.Counters                // nil when the client has no Counters
	counters map[string]queen.QueueCounters // nil when it has no QueueCounters
	states   map[string]QueueState
	names    []string       // of states, sorted
	waiting  map[string]int // nil when the client has no WaitingPops
	proc     Process
}

// read looks at the client now.
func (r *Recorder) read(ctx context.Context) (*reading, error) {
	qs, err := r.c.ListQueues(ctx)
	if err != nil {
		return nil, err
	}
	cur := &reading{at: r.now(), states: make(map[string]QueueState, len(qs)), proc: r.process()}
	for i := range qs {
		q := &qs[i]
		cur.states[q.Name] = QueueState{Messages: q.Messages, Pending: q.Pending, InFlight: q.InFlight,
			DeadLetters: q.DeadLetters, Parked: q.Parked, Partitions: q.PartitionN}
		cur.names = append(cur.names, q.Name)
	}
	sort.Strings(cur.names)
	if cs, ok := r.c.(counterSource); ok {
		t := cs.Counters()
		cur.totals = &t
	}
	if qc, ok := r.c.(queueCounterSource); ok {
		cur.counters = qc.QueueCounters()
	}
	if pp, ok := r.c.(waitingSource); ok {
		cur.waiting = pp.WaitingPops()
	}
	return cur, nil
}

// since returns the sample of what changed from prev to cur, holding the
// first maxQueues queues by name.
func (cur *reading) since(prev *reading, maxQueues int) Sample {
	s := Sample{
		At: cur.at, Elapsed: max(cur.at.Sub(prev.at), 0), RSS: cur.proc.RSS,
		CPUUser:   max(cur.proc.CPUUser-prev.proc.CPUUser, 0),
		CPUSystem: max(cur.proc.CPUSystem-prev.proc.CPUSystem, 0),
	}
	kept := cur.names[:min(len(cur.names), maxQueues)]
	s.Queues = make([]QueueFigures, len(kept))
	index := make(map[string]int, len(kept))
	for i, name := range kept {
		s.Queues[i] = QueueFigures{Name: name, State: cur.states[name], WaitingPops: float64(cur.waiting[name])}
		index[name] = i
	}
	for name, c := range cur.counters {
		f := counterDiff(c, prev.counters[name])
		s.Totals.Add(f)
		if i, ok := index[name]; ok {
			s.Queues[i].Figures = f
		}
	}
	for _, name := range cur.names {
		now, before := cur.states[name].Partitions, prev.states[name].Partitions
		var f Figures
		if now > before {
			f.PartitionsCreated = int64(now - before)
		} else {
			f.PartitionsDeleted = int64(before - now)
		}
		s.Totals.Add(f)
		if i, ok := index[name]; ok {
			s.Queues[i].PartitionsCreated, s.Queues[i].PartitionsDeleted = f.PartitionsCreated, f.PartitionsDeleted
		}
	}
	for _, name := range prev.names {
		if _, ok := cur.states[name]; !ok { // deleted with its partitions
			s.Totals.PartitionsDeleted += int64(prev.states[name].Partitions)
		}
	}
	if cur.totals != nil && prev.totals != nil {
		c, p := cur.totals, prev.totals
		s.Totals.Pushed = delta(c.Pushed, p.Pushed)
		s.Totals.Popped = delta(c.Popped, p.Popped)
		s.Totals.Acked = delta(sumAcked(c.Acked), sumAcked(p.Acked))
		s.Totals.AckFailed = delta(c.Acked[queen.AckFailed], p.Acked[queen.AckFailed])
		s.Totals.DeadLettered = delta(c.DeadLettered, p.DeadLettered)
		s.Totals.Parked = delta(c.Parked, p.Parked)
		s.HandlersInFlight = c.HandlersInFlight
	}
	return s
}

// counterDiff returns what a queue's counters counted from prev to cur.
// Counters that went back belong to a queue deleted and made again in
// between: all of cur is new.
func counterDiff(cur, prev queen.QueueCounters) Figures {
	if cur.Pushed < prev.Pushed || cur.Popped < prev.Popped || cur.EmptyPops < prev.EmptyPops ||
		sumAcked(cur.Acked) < sumAcked(prev.Acked) || cur.Lag.Count < prev.Lag.Count ||
		cur.DeadLettered < prev.DeadLettered || cur.Parked < prev.Parked ||
		cur.PushBatches < prev.PushBatches || cur.PopBatches < prev.PopBatches || cur.AckBatches < prev.AckBatches ||
		cur.Retained < prev.Retained || cur.CompletedRetained < prev.CompletedRetained || cur.Evicted < prev.Evicted {
		prev = queen.QueueCounters{}
	}
	return Figures{
		Pushed: cur.Pushed - prev.Pushed, Popped: cur.Popped - prev.Popped, EmptyPops: cur.EmptyPops - prev.EmptyPops,
		Acked:        sumAcked(cur.Acked) - sumAcked(prev.Acked),
		AckFailed:    delta(cur.Acked[queen.AckFailed], prev.Acked[queen.AckFailed]),
		DeadLettered: cur.DeadLettered - prev.DeadLettered, Parked: cur.Parked - prev.Parked,
		Retained: cur.Retained - prev.Retained, CompletedRetained: cur.CompletedRetained - prev.CompletedRetained,
		Evicted:     cur.Evicted - prev.Evicted,
		PushBatches: cur.PushBatches - prev.PushBatches, PopBatches: cur.PopBatches - prev.PopBatches,
		AckBatches: cur.AckBatches - prev.AckBatches,
		LagCount:   cur.Lag.Count - prev.Lag.Count, LagTotal: cur.Lag.Total - prev.Lag.Total,
		LagMax: cur.Lag.MaxSince(prev.Lag),
	}
}

// delta is cur-prev, or cur when the counter started again in between.
func delta(cur, prev int64) int64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

func sumAcked(m map[queen.AckStatus]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
