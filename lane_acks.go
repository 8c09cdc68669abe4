package queen

import (
	"time"
)

// handled is a message the loop has a result for, waiting to be acked.
type handled struct {
	m   *Message
	err error         // the handler's result
	ran bool          // the handler ran on m
	d   time.Duration // how long the handler took
}

// ackLinger is how long a lane's first accepted message waits for its ack
// to be sent, so that those accepted after it within that time share one
// AckBatch (one commit, one fsync) with it. While a lane's AckBatch is
// being written, the messages accepted meanwhile wait for it and then go
// together in the next one: a lane never has two acks in flight, so its
// acks are written in order, and its handler never waits for one.
const ackLinger = time.Millisecond

// accepted queues h, accepted, for lane ln's next AckBatch: the one being
// written takes it when it is done, or else a timer sends it after
// ackLinger.
func (r *run) accepted(ln *lane, h handled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ln.queued = append(ln.queued, h)
	if ln.flushing || ln.timer != nil {
		return
	}
	ln.armed++
	armed := ln.armed
	ln.timer = time.AfterFunc(ackLinger, func() { r.sendAcks(ln, armed) })
}

// sendAcks writes lane ln's queued acks, one AckBatch after another, until
// none is queued; armed numbers the timer that called it (0 if none).
func (r *run) sendAcks(ln *lane, armed int) {
	r.mu.Lock()
	if armed != 0 && armed == ln.armed {
		ln.timer = nil
	}
	if ln.flushing {
		r.mu.Unlock()
		return
	}
	ln.flushing = true
	for len(ln.queued) > 0 {
		batch := ln.queued
		ln.queued = nil
		r.mu.Unlock()
		r.settleLane(ln, batch)
		r.mu.Lock()
	}
	ln.flushing = false
	if ln.over {
		r.forgetLane(ln)
	}
	r.cond.Broadcast()
	r.mu.Unlock()
}

// takeAcks waits for lane ln's AckBatch being written, if any, and takes
// the acks queued, which the caller then writes itself.
func (r *run) takeAcks(ln *lane) []handled {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ln.timer != nil {
		ln.timer.Stop()
		ln.timer = nil
	}
	for ln.flushing {
		r.cond.Wait()
	}
	q := ln.queued
	ln.queued = nil
	return q
}

// flushAcks writes lane ln's queued acks and returns once none is left
// being written.
func (r *run) flushAcks(ln *lane) {
	if q := r.takeAcks(ln); len(q) > 0 {
		r.settleLane(ln, q)
	}
}

// settleLane acks hs, accepted messages of lane ln, and moves ln.confirmed
// to the sending time when every ack was taken.
func (r *run) settleLane(ln *lane, hs []handled) {
	sent := r.h.clockNow()
	if _, refused := r.writeAcks(hs, nil); refused == 0 {
		r.mu.Lock()
		ln.confirmed = sent
		r.mu.Unlock()
	}
}
