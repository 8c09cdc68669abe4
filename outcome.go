package queen

import (
	"fmt"
	"time"
)

// A consume handler says what should happen to its message by what it
// returns. The outcome errors are transparent: their text is the text of
// the error they wrap, and that text is what a dead letter or a parked
// entry keeps. nil accepts the message (ack completed). Any other error is a
// failure that may be tried again; the functions below pick another
// outcome. The consume loop finds them with [errors.As], so they still work
// when wrapped, e.g. fmt.Errorf("charge %s: %w", id, queen.Park(err)).
//
//	nil                        completed
//	plain error (or a panic)   failed: the queue's retry budget, or the
//	                           consumer's RetryPolicy, decides what comes next
//	Retry(err)                 retry without spending the queue's budget
//	Reject(err), Fatal(err)    dead-lettered at once, with err's text
//	Park(err)                  moved to the parked store, not the DLQ
//	InProgress(delay)          put back untouched, looked at again after delay

// RetryError asks for the message to be delivered again. Without a
// [RetryPolicy] it is given back with an ack of status retry, which spends
// none of the queue's retry budget; with one, the policy decides the delay
// and when to give up. Build it with [Retry].
type RetryError struct {
	Err error
}

// Retry returns a [*RetryError] wrapping err.
func Retry(err error) error { return &RetryError{Err: err} }

// Error returns the cause's text, which is what a dead letter keeps.
func (e *RetryError) Error() string { return errText(e.Err, "retry") }

// Unwrap returns the cause.
func (e *RetryError) Unwrap() error { return e.Err }

// RejectError dead-letters the message at once, whatever retries are left,
// keeping the cause's text with it. Build it with [Reject] or [Fatal].
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
// having been tried and failed. Build it with [Park].
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
// again after Delay. Its partition is held back from the group until then.
// Build it with [InProgress].
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
