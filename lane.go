package queen

import (
	"errors"
	"time"
)

// lane is a partition's run of messages: the messages of one partition
// from one pop, handled one at a time and in order, and acked by its own
// ackBatcher. For a batch handler a whole pop is one lane, handled at
// once. A worker takes a lane from run.pending (work), handles it
// (runLane or runBatch), ends it (endLane), and forgets it once its acks
// are written (forgetLane).
type lane struct {
	msgs    []*Message
	leaseID string
	next    int // index of the next message to start (under run.mu)
	acks    ackBatcher
	// forgotten is set, under run.mu, once the lane is no longer current
	// and its lease no longer renewed for it; see run.forgetLane.
	forgotten bool
}

// laneConfirm is how long a lane goes on handling messages without
// knowing its lease is still held, on a backend whose leaseState learns
// of a lost lease only from a refused ack or renewal (a remote client):
// before it starts a message more than this after the pop or its last
// AckBatch taken whole, it waits for its acks to land, so that a lease
// lost under a slow handler (every lease lasts at least 1 s) stops the
// lane before the next message rather than after it. The time is the
// client's clock's. A Broker knows of every lost lease at once.
const laneConfirm = time.Second

// split cuts a pop into lanes.
func (r *run) split(res *PopResult, popped time.Time) []*lane {
	if !r.byPartition {
		return []*lane{r.newLane(res.Messages, res.LeaseID, time.Time{})}
	}
	var lanes []*lane
	byPart := make(map[string]*lane)
	for _, m := range res.Messages {
		ln := byPart[m.PartitionID]
		if ln == nil {
			ln = r.newLane(nil, res.LeaseID, popped)
			byPart[m.PartitionID] = ln
			lanes = append(lanes, ln)
		}
		ln.msgs = append(ln.msgs, m)
	}
	return lanes
}

// newLane is a lane of msgs under leaseID, popped at popped, whose acks
// are written by writeAcks and which is forgotten once they are.
func (r *run) newLane(msgs []*Message, leaseID string, popped time.Time) *lane {
	ln := &lane{msgs: msgs, leaseID: leaseID}
	ln.acks.init(popped, func(hs []handled) int {
		_, refused := r.writeAcks(hs, nil)
		return refused
	}, r.h.clockNow, func() {
		r.mu.Lock()
		r.forgetLane(ln)
		r.mu.Unlock()
	})
	return ln
}

// work runs lanes until the loop stops.
func (r *run) work() {
	// A lane's acks are still being written when its handling ends: the
	// worker sends the last of them, frees its handler slot (a fetcher may
	// pop for it), and only then waits for the acks of the lane it handled
	// before, if any (or, when it returns, for the last lane's), so its
	// unwritten acks are those of at most two lanes: the one it handles and
	// the one before. The lane's acks join the writer's queue while the
	// commit of the lane before is written, and share the next commit with
	// the other workers' acks.
	var prev *lane
	defer func() {
		if prev != nil {
			r.retire(prev)
		}
	}()
	for {
		r.mu.Lock()
		for len(r.pending) == 0 && r.fetchers > 0 && !r.stopping {
			r.hasWork.Wait()
		}
		if len(r.pending) == 0 || r.abandoned {
			r.mu.Unlock()
			return
		}
		ln := r.pending[0]
		r.pending = r.pending[1:]
		r.running++
		r.current[ln] = struct{}{}
		if len(r.pending) == 0 {
			r.canPop.Broadcast() // the fetcher waits for pending to empty
		}
		r.mu.Unlock()

		if r.byPartition {
			r.runLane(ln)
		} else {
			r.runBatch(ln)
		}
		r.endLane(ln)
		r.mu.Lock()
		r.running--
		r.lastActive = time.Now()
		r.canPop.Broadcast()
		r.mu.Unlock()
		if prev != nil {
			r.retire(prev)
		}
		prev = ln
	}
}

// endLane starts writing the acks lane ln still has queued, now that its
// handling is over; once they are written, ln is forgotten.
func (r *run) endLane(ln *lane) { ln.acks.end() }

// retire waits until lane ln's acks are written, writing those still
// queued itself, and forgets ln.
func (r *run) retire(ln *lane) {
	ln.acks.flush()
	r.mu.Lock()
	r.forgetLane(ln)
	r.mu.Unlock()
}

// forgetLane ends ln: it is no longer current and its lease no longer
// renewed for it. Under r.mu; what runs after the first call does
// nothing.
func (r *run) forgetLane(ln *lane) {
	if ln.forgotten {
		return
	}
	ln.forgotten = true
	delete(r.current, ln)
	r.leaseDone(ln)
}

// leaseDone forgets one lane of ln's lease for renewals. Under r.mu.
func (r *run) leaseDone(ln *lane) {
	r.h.untrack(ln.leaseID)
	if n, ok := r.leases[ln.leaseID]; ok {
		if n <= 1 {
			delete(r.leases, ln.leaseID)
		} else {
			r.leases[ln.leaseID] = n - 1
		}
	}
}

// runLane handles one partition's messages in order, stopping at the
// first one no longer leased to the loop (its failure gave the rest back,
// or the lane's lease was lost). The acks of what it accepted may still be
// queued or being written when it returns (see work).
func (r *run) runLane(ln *lane) {
	for {
		r.stopIfInterrupted()
		r.mu.Lock()
		if r.abandoned || ln.next >= len(ln.msgs) {
			r.mu.Unlock()
			return
		}
		if r.stopping {
			rest := ln.msgs[ln.next:]
			ln.next = len(ln.msgs)
			r.mu.Unlock()
			// What was accepted is acked before the rest is given back:
			// giving back releases the partition.
			ln.acks.flush()
			r.giveBack(rest)
			return
		}
		msg := ln.msgs[ln.next]
		ln.next++
		r.mu.Unlock()
		if !r.exact && ln.acks.unconfirmed(laneConfirm) {
			ln.acks.flush()
		}

		switch r.h.leaseState(msg) {
		case leaseSettled: // the handler settled it ahead
			r.letGo([]*Message{msg}, true)
			continue
		case leaseLost:
			r.mu.Lock()
			rest := ln.msgs[ln.next-1:]
			ln.next = len(ln.msgs)
			r.mu.Unlock()
			ln.acks.flush() // reported before the rest, in the lane's order
			r.leaveToLease(rest)
			return
		}
		r.mu.Lock()
		rest := ln.msgs[ln.next:]
		r.mu.Unlock()
		var back bool
		if r.userSettles {
			back = r.handle(nil, []*Message{msg}, rest)
		} else {
			back = r.handleInLane(ln, msg, rest)
		}
		if back { // the rest comes back behind msg
			r.mu.Lock()
			ln.next = len(ln.msgs)
			r.mu.Unlock()
			r.unclaim(rest, false)
			r.reportReleased(rest)
			return
		}
	}
}

// handleInLane runs the handler on msg, one of lane ln's, when the loop
// acks by itself. An accepted message joins the lane's next AckBatch and
// the lane goes on at once; any other result is acked now, in one AckBatch
// behind the lane's accepted messages not yet acked, so the lane's acks
// keep its order. It reports whether rest comes back (see handle).
func (r *run) handleInLane(ln *lane, msg *Message, rest []*Message) (back bool) {
	if _, err := msg.Decode(); err != nil { // parked before the handler runs
		r.ackHandled(append(ln.acks.take(), handled{m: msg, err: Park(&DecodeError{Type: "map[string]any", Err: err})}), nil)
		return false
	}
	// Once a drain gives up on the loop (see DrainError), what follows
	// reaches no backend: writeAcks reports these messages discarded.
	d, err := r.call([]*Message{msg})
	if err == nil {
		ln.acks.accept(handled{m: msg, ran: true, d: d})
		return false
	}
	if r.interrupted() {
		r.requestStop() // see handle
	}
	return r.ackHandled(append(ln.acks.take(), handled{m: msg, err: err, ran: true, d: d}), rest)
}

// runBatch hands a whole pop to the batch handler.
func (r *run) runBatch(ln *lane) {
	r.stopIfInterrupted()
	r.mu.Lock()
	if r.stopping {
		ln.next = len(ln.msgs)
		r.mu.Unlock()
		r.giveBack(ln.msgs)
		return
	}
	ln.next = len(ln.msgs)
	r.mu.Unlock()
	var live, lost []*Message
	for _, m := range ln.msgs {
		switch r.h.leaseState(m) {
		case leaseHeld:
			live = append(live, m)
		case leaseLost:
			lost = append(lost, m)
		}
	}
	r.leaveToLease(lost)
	if len(live) > 0 {
		r.handle(ln, live, nil)
	}
}

// renewLoop renews the leases of unfinished lanes every r.renew.
func (r *run) renewLoop() {
	t := time.NewTicker(r.renew)
	defer t.Stop()
	for {
		select {
		case <-r.over:
			return
		case <-t.C:
		}
		r.mu.Lock()
		ids := make([]string, 0, len(r.leases))
		for id := range r.leases {
			ids = append(ids, id)
		}
		r.mu.Unlock()
		d := r.lease
		if d == 0 {
			d = r.h.leaseFor(r.ackCtx, r.req.Queue)
		}
		for _, id := range ids {
			_, err := r.h.RenewLease(r.ackCtx, id, d)
			switch {
			case err == nil:
			case errors.Is(err, ErrNotFound), errors.Is(err, ErrLeaseExpired):
				r.h.lost(id)
				r.mu.Lock()
				delete(r.leases, id)
				r.mu.Unlock()
			case errors.Is(err, ErrClosed):
				return
			}
		}
	}
}
