package queen

import (
	"context"
	"errors"
	"sync"
	"time"
)

// pollInterval is how long a consume loop with Wait(false) waits after
// an empty pop before the next one.
const pollInterval = 100 * time.Millisecond

// unavailableBackoff is the longest wait between pops of a consume loop
// whose pops fail with ErrUnavailable; the wait doubles from pollInterval.
const unavailableBackoff = 5 * time.Second

// maxFetchers bounds the goroutines of a loop that pop at once.
const maxFetchers = 4

// fetchersFor is how many goroutines of a loop with concurrency n and
// limit pop: one per handler up to maxFetchers, so that pops overlap one
// another and the handlers; one under a Limit, which each pop is sized
// against.
func fetchersFor(n, limit int) int {
	if limit > 0 {
		return 1
	}
	return max(1, min(n, maxFetchers))
}

// schedule is what a run's fetchers and workers share, under run.mu: the
// lanes popped and waiting for a worker, the lanes being handled, and the
// counts that decide when to pop again.
type schedule struct {
	pending    []*lane            // popped, waiting for a worker
	current    map[*lane]struct{} // taken by a worker and not yet forgotten
	running    int                // workers handling a lane
	fetchers   int                // fetch goroutines still running
	popping    int                // pops in flight
	taken      int                // messages taken and not given back, for Limit
	lastActive time.Time          // when a pop brought messages or a lane ended, for Idle
	leases     map[string]int     // lease id -> lanes not finished, for renewals
	// canPop is signalled when a fetcher may pop again: pending emptied,
	// a handler or pop ended, taken dropped, or the loop is stopping.
	// Fetchers wait on it, and nothing else does.
	canPop sync.Cond
	// hasWork is signalled when a worker may have something to do: a lane
	// joined pending, a fetcher ended, or the loop is stopping. Workers
	// wait on it, and nothing else does.
	hasWork sync.Cond
}

// fetch pops whenever a handler is free, nothing is waiting for one and
// no pop already in flight is for it. Several run at once (fetchersFor).
func (r *run) fetch() {
	defer func() {
		r.mu.Lock()
		r.fetchers--
		r.hasWork.Broadcast()
		r.mu.Unlock()
	}()
	backoff := time.Duration(0) // after pops that failed with ErrUnavailable
	for {
		r.mu.Lock()
		for !r.stopping && (len(r.pending) > 0 || r.running+r.popping >= r.n || r.limit > 0 && r.taken >= r.limit && r.running > 0) {
			r.canPop.Wait()
		}
		if r.stopping || r.limit > 0 && r.taken >= r.limit {
			r.mu.Unlock()
			return
		}
		req := r.req
		if r.limit > 0 {
			left := r.limit - r.taken
			switch {
			case req.Batch > 0:
				req.Batch = min(req.Batch, left)
			case !req.Autopilot:
				req.Batch = 1
			case left < 1000:
				req.Batch = left
			}
		}
		if r.idle > 0 {
			// Idle time counts only while no handler runs; a poll made
			// while one runs still looks again within r.idle.
			left := r.idle
			if r.running == 0 {
				left -= time.Since(r.lastActive)
				if left <= 0 {
					r.mu.Unlock()
					return
				}
			}
			timeout := req.Timeout
			if timeout == 0 {
				timeout = DefaultPopTimeout
			}
			req.Timeout = max(min(timeout, left), time.Millisecond)
		}
		r.popping++
		r.mu.Unlock()

		popped := r.h.clockNow()
		res, err := r.h.Pop(r.popCtx, req)
		r.mu.Lock()
		r.popping--
		r.canPop.Broadcast()
		r.mu.Unlock()
		if err != nil {
			if r.popCtx.Err() != nil {
				return
			}
			if errors.Is(err, ErrUnavailable) {
				// The broker is out of reach for now (a remote client):
				// wait and pop again, up to unavailableBackoff apart.
				backoff = min(max(2*backoff, pollInterval), unavailableBackoff)
				r.h.logger().Warn("queen: consume: pop failed; popping again", "queue", r.req.Queue, "group", r.group, "in", backoff, "err", err)
				sleepCtx(r.popCtx, backoff)
				continue
			}
			r.mu.Lock()
			r.loopErr = err
			r.mu.Unlock()
			r.requestStop()
			return
		}
		backoff = 0
		if len(res.Messages) == 0 {
			if !req.Wait {
				wait := pollInterval
				if r.idle > 0 {
					r.mu.Lock() // workers and other fetchers write lastActive
					wait = min(wait, max(r.idle-time.Since(r.lastActive), time.Millisecond))
					r.mu.Unlock()
				}
				sleepCtx(r.popCtx, wait)
			}
			continue
		}
		lanes := r.split(res, popped)
		r.mu.Lock()
		r.hold(res.Messages)
		r.lastActive = time.Now()
		r.taken += len(res.Messages)
		if r.stopping {
			r.mu.Unlock()
			r.giveBack(res.Messages)
			return
		}
		r.pending = append(r.pending, lanes...)
		r.leases[res.LeaseID] += len(lanes)
		for range lanes {
			r.h.track(res.LeaseID)
		}
		r.hasWork.Broadcast()
		r.mu.Unlock()
	}
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// giveBack returns messages taken but not started with an ack of status
// retry on the first of each partition, which spends no retry.
func (r *run) giveBack(msgs []*Message) {
	if len(msgs) == 0 {
		return
	}
	first := make(map[string]int) // partition id -> item index
	var items []AckItem
	for _, m := range msgs {
		if _, ok := first[m.PartitionID]; ok || r.h.leaseState(m) != leaseHeld {
			continue
		}
		first[m.PartitionID] = len(items)
		items = append(items, AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: r.ackGroup, Status: AckRetry})
	}
	for _, m := range msgs {
		r.h.loops().unused(m)
	}
	var results []AckResult
	var err error
	if len(items) > 0 {
		// Not gated by an abandon: what is given back comes back at once,
		// listed by the drain or not.
		r.ackStart(false)
		results, err = r.h.AckBatch(r.ackCtx, items)
		r.ackEnd(func() {
			for _, m := range msgs {
				i, ok := first[m.PartitionID]
				r.let([]*Message{m}, ok && err == nil && results[i].Err == nil)
			}
		})
	} else {
		r.letGo(msgs, false)
	}
	r.unclaim(msgs, false)
	r.observeReleased(len(msgs))
	for _, m := range msgs {
		var ackErr error
		status := AckStatus("")
		if i, ok := first[m.PartitionID]; ok {
			status = AckRetry
			switch {
			case err != nil:
				ackErr = err
			case results[i].Err != nil:
				ackErr = results[i].Err
			}
		}
		r.reportOne(Settlement{Message: m, Outcome: OutcomeReleased, Status: status, AckErr: ackErr})
	}
}
