package queen

import (
	"sync"
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

// ackBatcher writes the acks of one lane's accepted messages, in order,
// with at most one AckBatch in flight:
//
//   - queue: accept queues an accepted message and arms a timer that sends
//     it after ackLinger; queue does the same for a batch handler's lane,
//     without a timer (end sends it);
//   - flush: send writes what is queued, one AckBatch after another, and
//     those accepted while one is being written go in the very next one;
//     flush (or take) is the lane's worker writing the queue itself, after
//     waiting for the batch in flight, when it must ack behind it;
//   - confirm: a batch the backend took whole moves confirmed, the last
//     time the lane's lease was known to be held (see laneConfirm);
//   - end: once the lane's handling is over, what is still queued is sent
//     and done runs.
//
// Its state has its own lock, taken under no other and never held while
// write or done runs.
type ackBatcher struct {
	// write sends one AckBatch for hs and reports how many of its acks
	// the backend refused, or that failed.
	write func(hs []handled) (refused int)
	// now is the client's clock, for confirmed.
	now func() time.Time
	// done runs once the lane's handling is over and its acks are
	// written, from the goroutine that wrote the last of them; it may run
	// more than once.
	done func()

	mu sync.Mutex
	// written is signalled when the batch in flight has been written
	// (flushing turns false). take waits on it, and nothing else does.
	written   sync.Cond
	queued    []handled   // accepted, waiting for the next AckBatch
	flushing  bool        // an AckBatch of the lane is being written
	timer     *time.Timer // starts the first AckBatch of queued
	armed     int         // timers armed so far, numbering the last
	over      bool        // the lane's handling has ended
	confirmed time.Time   // see laneConfirm
}

// init readies b for a lane popped at popped (zero for a batch handler's
// lane, which never asks).
func (b *ackBatcher) init(popped time.Time, write func([]handled) int, now func() time.Time, done func()) {
	b.write, b.now, b.done = write, now, done
	b.written.L = &b.mu
	b.confirmed = popped
}

// accept queues h, accepted, for the next AckBatch: the one being written
// takes it when it is done, or else a timer sends it after ackLinger.
func (b *ackBatcher) accept(h handled) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queued = append(b.queued, h)
	if b.flushing || b.timer != nil {
		return
	}
	b.armed++
	armed := b.armed
	b.timer = time.AfterFunc(ackLinger, func() { b.send(armed) })
}

// queue queues hs, accepted, for the AckBatch that end sends.
func (b *ackBatcher) queue(hs []handled) {
	b.mu.Lock()
	b.queued = append(b.queued, hs...)
	b.mu.Unlock()
}

// send writes the queued acks, one AckBatch after another, until none is
// queued; armed numbers the timer that called it (0 if none). It returns
// at once if a batch is already being written: that writer takes them.
func (b *ackBatcher) send(armed int) {
	b.mu.Lock()
	if armed != 0 && armed == b.armed {
		b.timer = nil
	}
	if b.flushing {
		b.mu.Unlock()
		return
	}
	b.flushing = true
	for len(b.queued) > 0 {
		batch := b.queued
		b.queued = nil
		b.mu.Unlock()
		b.confirm(batch)
		b.mu.Lock()
	}
	b.flushing = false
	over := b.over
	b.written.Broadcast()
	b.mu.Unlock()
	if over {
		b.done()
	}
}

// take waits for the AckBatch being written, if any, and takes the acks
// queued, which the caller then writes itself.
func (b *ackBatcher) take() []handled {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	for b.flushing {
		b.written.Wait()
	}
	q := b.queued
	b.queued = nil
	return q
}

// flush writes the queued acks and returns once none is left being
// written.
func (b *ackBatcher) flush() {
	if q := b.take(); len(q) > 0 {
		b.confirm(q)
	}
}

// confirm writes hs and moves confirmed to the sending time when every
// ack was taken.
func (b *ackBatcher) confirm(hs []handled) {
	sent := b.now()
	if b.write(hs) == 0 {
		b.mu.Lock()
		b.confirmed = sent
		b.mu.Unlock()
	}
}

// unconfirmed reports whether acks are queued or being written and the
// lease was last known to be held d or more ago.
func (b *ackBatcher) unconfirmed(d time.Duration) bool {
	b.mu.Lock()
	pending, confirmed := len(b.queued) > 0 || b.flushing, b.confirmed
	b.mu.Unlock()
	return pending && b.now().Sub(confirmed) >= d
}

// end records that the lane's handling is over and starts writing the
// acks still queued; done runs once they are written (at once if none
// is left).
func (b *ackBatcher) end() {
	b.mu.Lock()
	b.over = true
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	flushing, queued := b.flushing, len(b.queued) > 0
	b.mu.Unlock()
	switch {
	case flushing: // send takes the rest and runs done
	case queued:
		go b.send(0)
	default:
		b.done()
	}
}
