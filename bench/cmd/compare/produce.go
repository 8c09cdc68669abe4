package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// produced is the outcome of a producer phase.
type produced struct {
	n      int64
	secs   float64
	capped bool
	lat    *lats
}

// produce runs j.Producers goroutines that claim runs of j.Batch messages,
// by global sequence number, until j.N are claimed or the time cap passes,
// and sends each run with send(worker, lo, hi). Each call's duration is
// recorded.
func produce(j *Job, send func(w, lo, hi int) error) (produced, error) {
	batch := max(j.Batch, 1)
	var claimed, done atomic.Int64
	var capped atomic.Bool
	var firstErr error
	var errOnce sync.Once
	l := &lats{}
	end := deadline(j)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range max(j.Producers, 1) {
		wg.Go(func() {
			mine := make([]int64, 0, 1024)
			defer func() { l.addAll(mine) }()
			for {
				if time.Now().After(end) {
					capped.Store(true)
					return
				}
				lo := int(claimed.Add(int64(batch))) - batch
				if lo >= j.N {
					return
				}
				hi := min(lo+batch, j.N)
				t := time.Now()
				if err := send(w, lo, hi); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("producer %d: %w", w, err) })
					return
				}
				mine = append(mine, int64(time.Since(t)))
				done.Add(int64(hi - lo))
			}
		})
	}
	wg.Wait()
	p := produced{n: done.Load(), secs: time.Since(start).Seconds(), capped: capped.Load(), lat: l}
	return p, firstErr
}

func (p produced) result() Result {
	r := Result{Msgs: p.n, Seconds: p.secs, Capped: p.capped}
	p.lat.fill(&r)
	return r
}

// lastTime keeps the latest of many timestamps, as Unix nanoseconds.
type lastTime struct{ ns atomic.Int64 }

func (l *lastTime) note(t time.Time) {
	v := t.UnixNano()
	for {
		old := l.ns.Load()
		if v <= old || l.ns.CompareAndSwap(old, v) {
			return
		}
	}
}

func (l *lastTime) get() time.Time { return time.Unix(0, l.ns.Load()) }

// openLoop offers j.N messages at j.Rate per second, message i scheduled at
// t0 + i/rate, sent by j.Producers goroutines so that a slow call (an
// fsync) delays only its own message, never the schedule. send gets the
// time the call starts, which the message carries: latency counts from
// there, because Go's timers wake a sleeping goroutine up to about a
// millisecond late on Linux, which is the harness's delay, not the
// system's. How late the calls started (lateness) and how long they took
// are returned as a note, so a sender pool that fell behind shows.
func openLoop(j *Job, send func(i int, start time.Time) error) (note string, took time.Duration, err error) {
	var callLat, late lats
	interval := time.Second / time.Duration(max(j.Rate, 1))
	t0 := time.Now().Add(20 * time.Millisecond)
	var next atomic.Int64
	var once sync.Once
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range max(j.Producers, 1) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= j.N {
					return
				}
				at := t0.Add(time.Duration(i) * interval)
				if d := time.Until(at); d > 0 {
					time.Sleep(d)
				}
				start := time.Now()
				if e := send(i, start); e != nil {
					once.Do(func() { err = e; failed.Store(true) })
					return
				}
				callLat.add(time.Since(start))
				late.add(start.Sub(at))
			}
		})
	}
	wg.Wait()
	took = time.Since(t0)
	var c, l Result
	callLat.fill(&c)
	late.fill(&l)
	return fmt.Sprintf("push call p50 %s p99 %s ms; send lateness p50 %s p99 %s ms", fmtMS(c.P50), fmtMS(c.P99), fmtMS(l.P50), fmtMS(l.P99)), took, err
}
