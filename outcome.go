package queen

import (
	"errors"
	"fmt"
	"time"
)

// A consume handler says what should happen to its message by what it
// returns. The outcome errors are transparent: their text is the text of
// the error they wrap, and that text is what a dead letter or a parked
// entry keeps. The consume loop finds them with [errors.As], so they still
// work when wrapped, e.g. fmt.Errorf("charge %s: %w", id, queen.Park(err)).
//
// What each result does to the message, the retry budget, the delay before
// the message is seen again and [Message.DeliveryAttempt]:
//
//	result                    ack        budget          next delivery
//	nil                       completed  -               never: settled
//	plain error, panic,       failed     one spent       after the queue's RetryDelay
//	Retry(err)                                           (1 s by default); dead-lettered
//	                                                     once RetryLimit (3) are spent
//	  with a RetryPolicy      retry      none            after the policy's Backoff;
//	                                                     dead-lettered once its
//	                                                     attempts are spent
//	Reject(err), Fatal(err)   dlq        not consulted   never: dead-lettered now
//	Park(err)                 park       not consulted   never: parked now
//	InProgress(d)             retry      none            after d; no attempt counted
//
// The budget is Queen's: one counter per (partition, group), which a
// completed batch of the partition resets. Every redelivery raises
// DeliveryAttempt by one, whatever caused it; a [RetryPolicy] counts as
// attempts only the deliveries a handler really tried (not InProgress, not
// messages given back behind a failure or at a stop). A failed or retried
// message holds back the rest of its partition for its group, in order,
// until it is seen again; other partitions go on. Once the loop is
// stopping, a failure is given back instead (ack retry, no budget, no
// attempt; see [Stopping]), while Reject, Park and InProgress keep their
// meaning.

// RetryError asks for the message to be tried again, as a plain error
// does; it names the intent. Without a [RetryPolicy] the message is acked
// failed: it spends one of the queue's RetryLimit for its (partition,
// group), waits the queue's RetryDelay, and is dead-lettered with the
// error's text once the budget is spent, so a message that always asks
// for a retry is tried RetryLimit+1 times, RetryDelay apart, and never in
// a loop. With a policy, the policy decides the delay and when to give up,
// and no queue budget is spent. Build it with [Retry].
type RetryError struct {
	Err error
}

// Retry returns a [*RetryError] wrapping err: try the message again later
// (see [RetryError] for when and how often).
func Retry(err error) error { return &RetryError{Err: err} }

// Error returns the cause's text, which is what a dead letter keeps.
func (e *RetryError) Error() string { return errText(e.Err, "retry") }

// Unwrap returns the cause.
func (e *RetryError) Unwrap() error { return e.Err }

// RejectError dead-letters the message at once, keeping the cause's text
// with it: the retry budget and any [RetryPolicy] are not consulted or
// spent, the group's cursor moves past the message, and it is not
// delivered again (a replay of the dead letter is a new delivery, attempt
// 1). Build it with [Reject] or [Fatal].
type RejectError struct {
	Err error
}

// Reject returns a [*RejectError]: the message can never succeed (an
// unknown SKU, an address that does not exist) and goes to the dead-letter
// store now.
func Reject(err error) error { return &RejectError{Err: err} }

// Fatal is [Reject] under the name used by handlers that think of the
// failure as fatal to the message rather than to the process.
func Fatal(err error) error { return &RejectError{Err: err} }

// Error returns the cause's text, which is what the dead letter keeps.
func (e *RejectError) Error() string { return errText(e.Err, "rejected") }

// Unwrap returns the cause.
func (e *RejectError) Unwrap() error { return e.Err }

// ParkError moves the message to the parked store, apart from the
// dead letters: it was never going to work here (a schema version this
// service does not know, a field that cannot be read), as opposed to
// having been tried and failed. As with [RejectError], no retry budget or
// policy attempt is consulted or spent, the cursor moves past the message
// and it is not delivered again unless replayed. A payload the loop
// cannot decode is parked the same way before any handler sees it. Build
// it with [Park].
type ParkError struct {
	Err error
}

// Park returns a [*ParkError] wrapping err.
func Park(err error) error { return &ParkError{Err: err} }

// Error returns the cause's text, which is what the parked entry keeps.
func (e *ParkError) Error() string { return errText(e.Err, "parked") }

// Unwrap returns the cause.
func (e *ParkError) Unwrap() error { return e.Err }

// InProgressError puts the message back without counting an attempt and
// without asking the retry policy: somebody else is working on it, look
// again after Delay. It is acked retry with that delay, which spends none
// of the queue's budget; its partition is held back from the group until
// then, and the next delivery's DeliveryAttempt is one higher (a
// [RetryPolicy] does not count it). Build it with [InProgress].
type InProgressError struct {
	Delay time.Duration
}

// InProgress returns an [*InProgressError] with delay (negative means 0).
func InProgress(delay time.Duration) error { return &InProgressError{Delay: max(delay, 0)} }

// Error says how long the message is held back.
func (e *InProgressError) Error() string {
	return fmt.Sprintf("in progress elsewhere, look again in %s", e.Delay)
}

// PanicError is the failure a consume loop records when a handler panics.
// The panic is recovered and treated like any other error.
type PanicError struct {
	Value any // what the handler panicked with
}

// Error returns "panic: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// errText is the text kept with a dead-lettered or parked message.
func errText(err error, def string) string {
	if err == nil {
		return def
	}
	return err.Error()
}

// How the consume loop turns a handler's result into acks.

// decision is how the loop settles one message.
type decision struct {
	status  AckStatus
	delay   time.Duration
	text    string
	outcome Outcome
	unused  bool // the delivery does not count as an attempt
}

// outcomeError is implemented by the errors that pick a handler outcome;
// errors.As finds the outermost one.
type outcomeError interface {
	error
	isOutcome()
}

func (*RetryError) isOutcome()      {}
func (*RejectError) isOutcome()     {}
func (*ParkError) isOutcome()       {}
func (*InProgressError) isOutcome() {}

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

// settle acks each of hs from its handler's result, in one AckBatch, in
// order. rest are the messages of the lane behind the last of hs (nil for
// batches); settle reports whether they come back.
func (r *run) settle(hs []handled, rest []*Message) (back bool) {
	back, _ = r.settleAll(hs, rest)
	return back
}

// settleAll is settle, also counting the acks the backend refused (or
// that failed).
func (r *run) settleAll(hs []handled, rest []*Message) (back bool, refused int) {
	if !r.ackStart(true) {
		// A drain gave up on the loop: it acks nothing more, and hs are
		// left to their leases, as its DrainError says.
		for _, h := range hs {
			r.report([]*Message{h.m}, decision{outcome: OutcomeDiscarded}, h.err, h.ran, nil, nil, h.d)
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
		r.report([]*Message{h.m}, decs[i], h.err, h.ran, ackErrs[i], &items[i], h.d)
	}
	if !back {
		for _, m := range marked {
			r.h.loops().used(m)
		}
	}
	return back, refused
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

// release notes messages the loop will not handle and that come back by
// themselves (behind a failure, or after their lease was lost).
func (r *run) release(msgs []*Message) {
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
	r.cond.Broadcast()
	r.mu.Unlock()
	if count {
		for _, m := range msgs {
			r.h.loops().unused(m)
		}
	}
}

// report tells the Observer and the OnSettled callback what happened.
func (r *run) report(msgs []*Message, dec decision, herr error, handled bool, ackErr error, it *AckItem, d time.Duration) {
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
