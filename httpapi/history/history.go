// Package history keeps the recent past of a broker's counters in memory,
// for dashboards: how many messages were pushed, popped and acked, how
// long they waited, what retention removed, and this process's CPU time
// and memory, for the whole broker and for each queue, one sample every
// [Options].Interval over the last [Options].Window.
//
// A [Recorder] is shared by whoever draws charts: cmd/queen makes one,
// starts it, and hands it to package httpapi (Options.History, for the
// analytics routes Queen's dashboard reads) and to the console.
//
//	rec := history.New(broker, nil) // 10 s samples, 1 h kept
//	rec.Start()
//	defer rec.Close()
//	now := broker.Now() // the broker's clock, which the samples are stamped with
//	buckets := rec.Series(now.Add(-time.Hour), now, time.Minute)
//
// # What is counted
//
// Totals come from the client's Counters method and per-queue figures
// from its QueueCounters method, when it has them ([*queen.Broker] has
// both); a client without them (a remote one) is sampled through
// ListQueues only, so its push, pop, ack and lag figures are zero. Every
// client gives the queues' depths (Messages, Pending, InFlight,
// DeadLetters, Parked) and partition counts; the long-polls waiting on
// each queue come from its WaitingPops method. CPU time and resident memory
// are this process's, read with getrusage and /proc/self/status (zero
// where the system has neither).
//
// # Memory
//
// A Recorder holds at most Window/Interval samples (360 by default), and
// each sample at most [Options].MaxQueues queues (100 by default), about
// 200 bytes each: with the defaults, at most about 7 MB. Queues beyond
// MaxQueues (the first ones by name are kept) still count in the totals.
// The previous reading of every queue's counters is kept besides, to take
// differences: about 400 bytes per queue the broker has.
package history

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/queenlite/queen"
)

// Defaults of [Options].
const (
	DefaultInterval  = 10 * time.Second
	DefaultWindow    = time.Hour
	DefaultMaxQueues = 100
)

// MinInterval is the shortest [Options].Interval.
const MinInterval = time.Second

// Options configures a [Recorder]. A nil *Options and zero fields mean the
// defaults.
type Options struct {
	// Interval is the time between two samples. Defaults to
	// [DefaultInterval]; at least [MinInterval].
	Interval time.Duration

	// Window is how far back samples are kept: the Recorder holds
	// Window/Interval of them (at least one). Defaults to [DefaultWindow].
	Window time.Duration

	// MaxQueues bounds the queues a sample holds one by one, the first
	// ones by name. Defaults to [DefaultMaxQueues].
	MaxQueues int

	// Now is the clock samples are stamped with. Defaults to the client's
	// Now method when it has one ([*queen.Broker] does, so a broker opened
	// with a fake clock is sampled on it), otherwise time.Now.
	Now func() time.Time

	// Tick, when set, drives [Recorder.Start] instead of a ticker: a
	// sample is taken on each value received, until Close or until Tick
	// is closed. For tests, with a fake clock.
	Tick <-chan time.Time

	// Process reads this process's CPU time and memory. Defaults to
	// [ReadProcess].
	Process func() Process

	// Logger receives the failures of the samples Start takes, at warning
	// level. Defaults to discarding them.
	Logger *slog.Logger
}

// Process is this process's resource use at one moment.
type Process struct {
	CPUUser   time.Duration // user CPU time used since the process started
	CPUSystem time.Duration // system CPU time used since the process started
	RSS       int64         // resident set size in bytes; 0 when unknown
}

// counterSource and queueCounterSource are the optional methods of a
// client the totals and per-queue counters are read with.
type counterSource interface {
	Counters() queen.Counters
}

type queueCounterSource interface {
	QueueCounters() map[string]queen.QueueCounters
}

type waitingSource interface {
	WaitingPops() map[string]int
}

type clockSource interface {
	Now() time.Time
}

// Recorder samples a client's counters at a fixed interval and keeps the
// samples of the last window. It is safe for concurrent use.
type Recorder struct {
	c         queen.Client
	interval  time.Duration
	maxQueues int
	now       func() time.Time
	tick      <-chan time.Time
	process   func() Process
	log       *slog.Logger

	sampling sync.Mutex // one Sample at a time, so that prev stays in step
	prev     *reading

	mu      sync.Mutex
	ring    []Sample // ring[(head+i)%len(ring)] is the i-th oldest of size
	head    int
	size    int
	started bool
	stop    chan struct{}
	done    chan struct{}
}

// ErrClosed is returned by [Recorder.Start] after [Recorder.Close].
var ErrClosed = errors.New("history: recorder closed")

// New returns a Recorder of c, not yet sampling: call [Recorder.Start],
// or [Recorder.Sample] yourself. It panics if c is nil. opts may be nil.
func New(c queen.Client, opts *Options) *Recorder {
	if c == nil {
		panic("history: New called with a nil Client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	o.Interval = max(o.Interval, MinInterval)
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.MaxQueues <= 0 {
		o.MaxQueues = DefaultMaxQueues
	}
	if o.Now == nil {
		o.Now = time.Now
		if cs, ok := c.(clockSource); ok {
			o.Now = cs.Now
		}
	}
	if o.Process == nil {
		o.Process = ReadProcess
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Recorder{
		c: c, interval: o.Interval, maxQueues: o.MaxQueues, now: o.Now, tick: o.Tick,
		process: o.Process, log: o.Logger,
		ring: make([]Sample, max(int(o.Window/o.Interval), 1)),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// Interval returns the time between two samples.
func (r *Recorder) Interval() time.Duration { return r.interval }

// Capacity returns how many samples the Recorder keeps.
func (r *Recorder) Capacity() int { return len(r.ring) }

// Start takes a first reading now and then a sample every Interval (or
// on each [Options].Tick) in a goroutine, until [Recorder.Close]. A
// sample that fails (the broker closed, say) is logged and skipped.
// Calling Start again does nothing; after Close it returns [ErrClosed].
func (r *Recorder) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.stop:
		return ErrClosed
	default:
	}
	if r.started {
		return nil
	}
	r.started = true
	tick, stopTicker := r.tick, func() {}
	if tick == nil {
		t := time.NewTicker(r.interval)
		tick, stopTicker = t.C, t.Stop
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(r.done)
		defer cancel()
		defer stopTicker()
		go func() { // a sample in progress ends with Close
			select {
			case <-r.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		r.sampleLogged(ctx)
		for {
			select {
			case <-r.stop:
				return
			case _, ok := <-tick:
				if !ok {
					return
				}
				r.sampleLogged(ctx)
			}
		}
	}()
	return nil
}

// sampleLogged takes a sample for Start, logging a failure.
func (r *Recorder) sampleLogged(ctx context.Context) {
	if err := r.Sample(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("history: sample failed", "err", err)
	}
}

// Close stops the sampling Start began and waits for it to end. The
// samples taken stay readable. Close may be called more than once, and
// without Start; it always returns nil.
func (r *Recorder) Close() error {
	r.mu.Lock()
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	started := r.started
	r.mu.Unlock()
	if started {
		<-r.done
	}
	return nil
}

// Sample reads the client's counters now and records what changed since
// the previous reading as one sample. The first reading only sets the
// baseline (figures are differences between two readings), so it
// records nothing. It returns the error of the client's ListQueues, and
// then records nothing.
func (r *Recorder) Sample(ctx context.Context) error {
	r.sampling.Lock()
	defer r.sampling.Unlock()
	cur, err := r.read(ctx)
	if err != nil {
		return err
	}
	prev := r.prev
	r.prev = cur
	if prev == nil {
		return nil
	}
	s := cur.since(prev, r.maxQueues)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size < len(r.ring) {
		r.ring[(r.head+r.size)%len(r.ring)] = s
		r.size++
	} else {
		r.ring[r.head] = s
		r.head = (r.head + 1) % len(r.ring)
	}
	return nil
}

// Samples returns the samples taken at times in (from, to], oldest
// first. A zero from or to leaves that side open.
func (r *Recorder) Samples(from, to time.Time) []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Sample
	for i := 0; i < r.size; i++ {
		s := &r.ring[(r.head+i)%len(r.ring)]
		if (!from.IsZero() && !s.At.After(from)) || (!to.IsZero() && s.At.After(to)) {
			continue
		}
		out = append(out, s.clone())
	}
	return out
}

// Latest returns the newest sample, and false when there is none yet.
func (r *Recorder) Latest() (Sample, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size == 0 {
		return Sample{}, false
	}
	return r.ring[(r.head+r.size-1)%len(r.ring)].clone(), true
}

// Series sums the samples taken in (from, to] into buckets width long,
// oldest first, leaving out spans with no sample. A sample belongs to
// the span, aligned on multiples of width since the Unix epoch, that
// holds the middle of its interval. A width under the Interval is taken
// as the Interval.
func (r *Recorder) Series(from, to time.Time, width time.Duration) []Bucket {
	width = max(width, r.interval)
	var out []Bucket
	for _, s := range r.Samples(from, to) {
		start := s.Span(width)
		if n := len(out); n == 0 || !out[n-1].Start.Equal(start) {
			out = append(out, Bucket{Start: start, Width: width})
		}
		out[len(out)-1].add(s)
	}
	return out
}

// Span returns the start of the span width long, aligned on multiples
// of width since the Unix epoch, that holds the middle of the sample's
// interval: the bucket [Recorder.Series] puts it in.
func (s *Sample) Span(width time.Duration) time.Time {
	return spanStart(s.At.Add(-s.Elapsed/2), width)
}

// spanStart is the start of the span width long that holds t.
func spanStart(t time.Time, width time.Duration) time.Time {
	ns := t.UnixNano()
	off := ns % int64(width)
	if off < 0 {
		off += int64(width)
	}
	return time.Unix(0, ns-off).In(t.Location())
}

// byName sorts queue figures by name.
func byName(qs []QueueFigures) {
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
}
