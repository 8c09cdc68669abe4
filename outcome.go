package queen

import (
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
