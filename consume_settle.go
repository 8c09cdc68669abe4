package queen

import (
	"errors"
	"time"
)

// handle runs the handler on msgs and settles them. rest are the messages
// of the lane behind msgs; handle reports whether they come back (msgs
// were given back, not settled for good). With ln, a batch lane, accepted
// messages are queued on ln for their AckBatch instead (see work).
func (r *run) handle(ln *lane, msgs, rest []*Message) (back bool) {
	ok := msgs[:0:0]
	for _, m := range msgs {
		if _, err := m.Decode(); err != nil { // parked before the handler runs
			r.ackHandled([]handled{{m: m, err: Park(&DecodeError{Type: "map[string]any", Err: err})}}, nil)
			continue
		}
		ok = append(ok, m)
	}
	if len(ok) == 0 {
		return false
	}
	d, err := r.call(ok)
	r.mu.Lock()
	abandoned := r.abandoned
	r.mu.Unlock()
	if abandoned {
		// A drain gave up on the loop while the handler ran (see
		// DrainError): no callback runs and nothing is settled.
		r.reportOutcome(ok, decision{outcome: OutcomeDiscarded}, err, true, nil, nil, d)
		return false
	}
	if err != nil && r.interrupted() {
		// The stop caused this failure, and its context may have ended
		// before the loop's own hook ran: stop taking messages before the
		// message is given back, so the loop does not pop it again.
		r.requestStop()
	}
	if r.userSettles {
		return r.userSettle(ok, err, d, rest)
	}
	hs := make([]handled, len(ok))
	for i, m := range ok {
		hs[i] = handled{m: m, err: err, ran: true, d: d}
	}
	if ln != nil && err == nil {
		ln.acks.queue(hs)
		return false
	}
	return r.ackHandled(hs, rest)
}

// call runs the handler, turning a panic into a *PanicError, and reports
// how long it ran.
func (r *run) call(msgs []*Message) (d time.Duration, err error) {
	start := time.Now()
	r.inflight.Add(1)
	r.h.observe(Event{Kind: EventInFlight, Queue: r.req.Queue, Group: r.group, Count: 1})
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p}
		}
		r.inflight.Add(-1)
		r.h.observe(Event{Kind: EventInFlight, Queue: r.req.Queue, Group: r.group, Count: -1})
		d = time.Since(start)
	}()
	if r.each != nil {
		return 0, r.each(r.hctx, msgs[0])
	}
	return 0, r.batch(r.hctx, msgs)
}

// callback runs an OnSuccess or OnError callback, recovering a panic.
func callback(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p}
		}
	}()
	return fn()
}

// userSettle is what follows a handler under AutoAck(false) or with
// callbacks: the handler or callbacks settle, and the loop settles as a
// failure whatever a failure left unsettled.
func (r *run) userSettle(msgs []*Message, herr error, d time.Duration, rest []*Message) (back bool) {
	for _, m := range msgs {
		var err error
		switch {
		case herr == nil && r.onSuccess != nil:
			err = callback(func() error { return r.onSuccess(r.hctx, m) })
		case herr == nil:
		case r.interrupted(): // not a failure: the loop gives it back
			err = herr
		case r.onError != nil:
			err = callback(func() error { return r.onError(r.hctx, m, herr) })
		default:
			err = herr
		}
		if err != nil && r.h.leaseState(m) == leaseHeld {
			back = r.ackHandled([]handled{{m: m, err: err, ran: true, d: d}}, rest) || back
			continue
		}
		r.letGo([]*Message{m}, false)
		r.reportOutcome([]*Message{m}, decision{outcome: OutcomeHandled}, herr, true, nil, nil, d)
	}
	return back
}

// decision is how the loop settles one message.
type decision struct {
	status  AckStatus
	delay   time.Duration
	text    string
	outcome Outcome
	unused  bool // the delivery does not count as an attempt
}

// decide turns a handler's result for msg into an ack.
func (r *run) decide(msg *Message, err error) decision {
	if err == nil {
		return decision{status: AckCompleted, outcome: OutcomeAccepted}
	}
	text := err.Error()
	var oe outcomeError
	if errors.As(err, &oe) {
		switch e := oe.(type) {
		case *InProgressError:
			return decision{status: AckRetry, delay: e.Delay, outcome: OutcomeInProgress, unused: true}
		case *ParkError:
			return decision{status: AckPark, text: text, outcome: OutcomeParked}
		case *RejectError:
			return decision{status: AckDLQ, text: text, outcome: OutcomeDeadLettered}
		}
	}
	if r.interrupted() { // the stop caused it: given back, no attempt spent
		return decision{status: AckRetry, text: text, outcome: OutcomeReleased, unused: true}
	}
	if p := r.retry; p != nil {
		attempt := r.h.loops().attempt(msg)
		if p.exhausted(attempt, msg.CreatedAt, r.h.clockNow()) {
			return decision{status: AckDLQ, text: text, outcome: OutcomeDeadLettered}
		}
		return decision{status: AckRetry, delay: p.Backoff(attempt), text: text, outcome: OutcomeRetried}
	}
	// Without a policy every failure, Retry included, is Queen's failed
	// ack: the queue's RetryLimit and RetryDelay decide.
	return decision{status: AckFailed, text: text, outcome: OutcomeRetried}
}

// ackHandled acks each of hs from its handler's result, in one AckBatch, in
// order. rest are the messages of the lane behind the last of hs (nil for
// batches); ackHandled reports whether they come back.
func (r *run) ackHandled(hs []handled, rest []*Message) (back bool) {
	back, _ = r.writeAcks(hs, rest)
	return back
}

// writeAcks is ackHandled, also counting the acks the backend refused (or
// that failed).
func (r *run) writeAcks(hs []handled, rest []*Message) (back bool, refused int) {
	if !r.ackStart(true) {
		// A drain gave up on the loop: it acks nothing more, and hs are
		// left to their leases, as its DrainError says.
		for _, h := range hs {
			r.reportOutcome([]*Message{h.m}, decision{outcome: OutcomeDiscarded}, h.err, h.ran, nil, nil, h.d)
		}
		return false, len(hs)
	}
	items := make([]AckItem, len(hs))
	decs := make([]decision, len(hs))
	giving := false
	for i, h := range hs {
		m := h.m
		decs[i] = r.decide(m, h.err)
		items[i] = AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID,
			Group: r.ackGroup, Status: decs[i].status, Error: decs[i].text, Delay: decs[i].delay}
		giving = giving || decs[i].status == AckFailed || decs[i].status == AckRetry
	}
	// What comes back is counted as unused before the ack frees the
	// partition, so the next worker to get it counts attempts right.
	var marked []*Message
	if giving {
		marked = append(marked, rest...)
		for i, h := range hs {
			if decs[i].unused {
				marked = append(marked, h.m)
			}
		}
		for _, m := range marked {
			r.h.loops().unused(m)
		}
	}
	results, err := r.h.AckBatch(r.ackCtx, items)
	ackErrs := make([]error, len(hs))
	for i := range hs {
		dec := &decs[i]
		switch {
		case err != nil:
			ackErrs[i] = err
		case results[i].Err != nil:
			ackErrs[i] = results[i].Err
		case results[i].DeadLettered:
			dec.outcome = OutcomeDeadLettered
		case results[i].Parked:
			dec.outcome = OutcomeParked
		}
		switch {
		case errors.Is(ackErrs[i], ErrAlreadySettled):
			// Settled meanwhile by someone else (the handler itself, a
			// seek): it does not come back.
			dec.outcome = OutcomeHandled
			ackErrs[i] = nil
		case ackErrs[i] != nil: // nothing settled: it comes back by itself
			dec.outcome = OutcomeReleased
			refused++
		}
		if ackErrs[i] == nil {
			switch dec.outcome {
			case OutcomeAccepted, OutcomeDeadLettered, OutcomeParked, OutcomeHandled:
			default:
				back = true
			}
		}
	}
	r.ackEnd(func() {
		for i, h := range hs {
			r.let([]*Message{h.m}, ackErrs[i] == nil)
		}
		if back { // rest comes back behind hs, by an ack that landed
			r.let(rest, true)
		}
	})
	if err != nil {
		r.h.logger().Warn("queen: consume: ack failed", "queue", r.req.Queue, "group", r.group, "err", err)
		if errors.Is(err, ErrClosed) {
			r.mu.Lock()
			if r.loopErr == nil {
				r.loopErr = err
			}
			r.mu.Unlock()
			r.requestStop()
		}
	}
	for i, h := range hs {
		if ackErrs[i] == nil {
			switch decs[i].outcome {
			case OutcomeAccepted, OutcomeDeadLettered, OutcomeParked, OutcomeHandled:
				r.h.loops().forget(h.m)
			}
		}
		r.reportOutcome([]*Message{h.m}, decs[i], h.err, h.ran, ackErrs[i], &items[i], h.d)
	}
	if !back {
		for _, m := range marked {
			r.h.loops().used(m)
		}
	}
	return back, refused
}

// leaveToLease notes messages the loop will not handle and that come back by
// themselves (behind a failure, or after their lease was lost).
func (r *run) leaveToLease(msgs []*Message) {
	if len(msgs) == 0 {
		return
	}
	r.letGo(msgs, false)
	r.unclaim(msgs, true)
	r.reportReleased(msgs)
}

// reportReleased tells the Observer and the OnSettled callback that msgs
// were released unhandled, with no ack.
func (r *run) reportReleased(msgs []*Message) {
	r.observeReleased(len(msgs))
	for _, m := range msgs {
		r.reportOne(Settlement{Message: m, Outcome: OutcomeReleased})
	}
}

// observeReleased counts n messages released unhandled.
func (r *run) observeReleased(n int) {
	if n > 0 {
		r.h.observe(Event{Kind: EventConsume, Queue: r.req.Queue, Group: r.group, Outcome: OutcomeReleased, Count: n})
	}
}

// unclaim takes msgs out of the Limit count and, with count, out of their
// attempts.
func (r *run) unclaim(msgs []*Message, count bool) {
	r.mu.Lock()
	r.taken -= len(msgs)
	r.canPop.Broadcast()
	r.mu.Unlock()
	if count {
		for _, m := range msgs {
			r.h.loops().unused(m)
		}
	}
}

// reportOutcome tells the Observer and the OnSettled callback what happened.
func (r *run) reportOutcome(msgs []*Message, dec decision, herr error, handled bool, ackErr error, it *AckItem, d time.Duration) {
	r.h.observe(Event{Kind: EventConsume, Queue: r.req.Queue, Group: r.group, Outcome: dec.outcome, Count: len(msgs), Duration: d})
	for _, m := range msgs {
		s := Settlement{Message: m, Outcome: dec.outcome, Err: herr, AckErr: ackErr, Handled: handled}
		if it != nil {
			s.Status, s.Delay = it.Status, it.Delay
		}
		r.reportOne(s)
	}
}

func (r *run) reportOne(s Settlement) {
	if r.onSettled != nil {
		r.onSettled(s)
	}
}
