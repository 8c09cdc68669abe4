package queen

import (
	"errors"
	"sort"
	"sync"
	"time"
)

// drainer is a running consumer that Close must stop.
type drainer interface {
	// drain stops taking messages and waits for running handlers until
	// deadline, returning what was left unsettled.
	drain(deadline time.Time, cancel <-chan struct{}) error
}

// consumerSet tracks the running consumers of a broker, and the
// deliveries they gave back without handling, so that retry policies
// count only real attempts.
type consumerSet struct {
	mu  sync.Mutex
	set map[drainer]struct{}

	umu     sync.Mutex
	unusedN map[deliveryKey]int
	// failures counts the handled deliveries of messages that carry no
	// DeliveryAttempt (a backend that does not report it, such as Queen's
	// own server): their attempts are counted here instead.
	failures map[deliveryKey]int
}

// deliveryKey names a message as one group sees it.
type deliveryKey struct{ partitionID, group, txid string }

// maxUnused bounds the unused-delivery table; past it the table is
// cleared, and attempts may then be overcounted, never undercounted.
const maxUnused = 1 << 16

func keyOf(m *Message) deliveryKey {
	return deliveryKey{m.PartitionID, m.ConsumerGroup, m.TransactionID}
}

// unused records a delivery of m that no handler ran on.
func (s *consumerSet) unused(m *Message) {
	s.umu.Lock()
	if s.unusedN == nil || len(s.unusedN) >= maxUnused {
		s.unusedN = make(map[deliveryKey]int)
	}
	s.unusedN[keyOf(m)]++
	s.umu.Unlock()
}

// used takes back one unused delivery of m.
func (s *consumerSet) used(m *Message) {
	s.umu.Lock()
	k := keyOf(m)
	if n := s.unusedN[k]; n > 1 {
		s.unusedN[k] = n - 1
	} else {
		delete(s.unusedN, k)
	}
	s.umu.Unlock()
}

// forget drops what is known of m once it is settled for good.
func (s *consumerSet) forget(m *Message) {
	s.umu.Lock()
	delete(s.unusedN, keyOf(m))
	delete(s.failures, keyOf(m))
	s.umu.Unlock()
}

// attempt is how many times a handler has been given m, this delivery
// included. It is called once per failed handling of m.
func (s *consumerSet) attempt(m *Message) int {
	s.umu.Lock()
	defer s.umu.Unlock()
	if m.DeliveryAttempt == 0 { // not reported: count the failures seen here
		if s.failures == nil || len(s.failures) >= maxUnused {
			s.failures = make(map[deliveryKey]int)
		}
		k := keyOf(m)
		s.failures[k]++
		return s.failures[k]
	}
	return max(m.DeliveryAttempt-s.unusedN[keyOf(m)], 1)
}

func (s *consumerSet) add(d drainer) {
	s.mu.Lock()
	if s.set == nil {
		s.set = make(map[drainer]struct{})
	}
	s.set[d] = struct{}{}
	s.mu.Unlock()
}

func (s *consumerSet) remove(d drainer) {
	s.mu.Lock()
	delete(s.set, d)
	s.mu.Unlock()
}

// closeAll drains every consumer under one overall deadline, concurrently,
// and joins their errors.
func (s *consumerSet) closeAll(timeout time.Duration) error {
	s.mu.Lock()
	all := make([]drainer, 0, len(s.set))
	for d := range s.set {
		all = append(all, d)
	}
	s.mu.Unlock()
	deadline := time.Now().Add(timeout)
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, d := range all {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = d.drain(deadline, nil) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopState is how far a run is from its end, under run.mu: whether it
// was asked to stop, whether a drain gave up on it (abandoned), the
// messages it still holds (what a drain that gives up lists), the
// AckBatches it has in flight (which such a drain waits for), and the
// error it ends with.
type stopState struct {
	stopping bool
	stopCh   chan struct{} // closed with stopping: what Stopping returns
	gaveBack chan struct{} // closed once requestStop has given back the pending lanes
	// unhook stop the ctx AfterFuncs that drain the loop, once it is over.
	unhook    []func() bool
	abandoned bool
	// acking counts the loop's AckBatch calls in flight (ackStart, ackEnd).
	acking int
	// acksLanded is signalled when acking drops. abandon waits on it for
	// acking to reach 0, and nothing else does.
	acksLanded sync.Cond
	// listed is closed once abandon has made drainErr: nothing the loop
	// does changes it any more. A second abandon waits for it.
	listed chan struct{}
	// held are the messages the loop took and has not finished with, in
	// the order taken (see hold): after an abandon, exactly those left to
	// their leases.
	held    map[*Message]uint64
	heldSeq uint64
	// testListWait, set only by tests, runs (under mu) when a drain
	// starts waiting for another one's list.
	testListWait func()
	loopErr      error // the error that ended the loop
	drainErr     error // the DrainError of an abandon
}

// interrupted reports whether the loop has been asked to stop: Stopping is
// closed, or a context whose end stops the loop has ended (its AfterFunc
// may not have run yet). A handler failure seen then is put down to the
// stop. It never turns false again.
func (r *run) interrupted() bool {
	select {
	case <-r.stopCh:
		return true
	default:
	}
	for _, ctx := range r.ends {
		if ctx != nil && ctx.Err() != nil {
			return true
		}
	}
	return false
}

// stopIfInterrupted makes the loop stop at once if it has been asked to,
// without waiting for the hook of an ended ctx to run: a handler that
// cancels the loop's ctx sees no further message started.
func (r *run) stopIfInterrupted() {
	if r.interrupted() {
		r.requestStop()
	}
}

// requestStop makes the loop take no more messages and gives back those
// not started.
func (r *run) requestStop() {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return
	}
	r.stopping = true
	close(r.stopCh)
	var rest []*Message
	for _, ln := range r.pending {
		rest = append(rest, ln.msgs[ln.next:]...)
		r.leaseDone(ln)
	}
	r.pending = nil
	r.canPop.Broadcast()
	r.hasWork.Broadcast()
	r.mu.Unlock()
	r.popCancel()
	r.giveBack(rest)
	close(r.gaveBack)
}

// drain stops the loop and waits for it until deadline or cancel, then
// abandons what is still running. It implements drainer. The loop's own
// drain timeout, counted from now, bounds deadline: whoever stops it
// (Stop, its ctx, the client's Close) waits no longer than that.
func (r *run) drain(deadline time.Time, cancel <-chan struct{}) error {
	if own := time.Now().Add(r.drainTimeout); own.Before(deadline) {
		deadline = own
	}
	r.requestStop()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-r.over:
	case <-t.C:
		r.abandon()
	case <-cancel:
		r.abandon()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drainErr
}

// abandon gives up on the running handlers: their outcomes will be
// discarded and their messages left to their leases. The loop sends no
// ack from now on; abandon waits for those already being written, so that
// the DrainError it makes lists exactly the messages left to their leases:
// those whose ack landed are not listed, those whose ack was refused,
// failed or never sent are.
func (r *run) abandon() {
	r.mu.Lock()
	if r.abandoned {
		select {
		case <-r.listed:
		default:
			if r.testListWait != nil {
				r.testListWait()
			}
		}
		r.mu.Unlock()
		<-r.listed // another drain is making the list
		return
	}
	if r.running == 0 && r.fetchers == 0 && len(r.current) == 0 {
		r.mu.Unlock()
		return
	}
	select {
	case <-r.done:
		r.mu.Unlock()
		return
	default:
	}
	r.abandoned = true
	r.mu.Unlock()
	r.hcancel()
	r.mu.Lock()
	for r.acking > 0 {
		r.acksLanded.Wait()
	}
	if len(r.held) > 0 {
		left := make([]*Message, 0, len(r.held))
		for m := range r.held {
			left = append(left, m)
		}
		sort.Slice(left, func(a, b int) bool { return r.held[left[a]] < r.held[left[b]] })
		r.drainErr = &DrainError{Queue: r.req.Queue, Group: r.group, Unsettled: left}
	}
	close(r.listed)
	r.mu.Unlock()
	r.finish()
}

// hold records msgs, just taken, as messages the loop has to finish
// with. Under r.mu.
func (r *run) hold(msgs []*Message) {
	for _, m := range msgs {
		r.heldSeq++
		r.held[m] = r.heldSeq
	}
}

// let records that the loop is done with msgs: an ack of its own for them
// landed (landed), or they are released, given back or left to a handler
// that settles them. Once the loop is abandoned only a landed ack takes a
// message out of the list. Under r.mu.
func (r *run) let(msgs []*Message, landed bool) {
	if r.abandoned && !landed {
		return
	}
	for _, m := range msgs {
		delete(r.held, m)
	}
}

// letGo is let under r.mu's lock.
func (r *run) letGo(msgs []*Message, landed bool) {
	r.mu.Lock()
	r.let(msgs, landed)
	r.mu.Unlock()
}

// ackStart counts an AckBatch of the loop in flight; with gated, it
// refuses (false) once the loop was abandoned: nothing it then sends
// would be in the drain's list.
func (r *run) ackStart(gated bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gated && r.abandoned {
		return false
	}
	r.acking++
	return true
}

// ackEnd ends an AckBatch of the loop: under r.mu, it records what it
// settled with let, then wakes an abandon waiting for it.
func (r *run) ackEnd(settled func()) {
	r.mu.Lock()
	settled()
	r.acking--
	r.acksLanded.Broadcast()
	r.mu.Unlock()
}
