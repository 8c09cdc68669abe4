package queen

import (
	"errors"
	"fmt"
	"strings"
)

// The errors a consume handler returns to choose what becomes of its
// message ([RetryError], [RejectError], [ParkError], [InProgressError])
// and [PanicError] are declared with the outcomes they stand for, beside
// their constructors, in outcome.go.

// Sentinel errors returned by the broker and its consumers. Compare with
// [errors.Is]; the broker wraps them with context but never returns
// storage-engine errors directly.
var (
	// ErrClosed is returned by every method once [Broker.Close] has run, or
	// after a storage failure left the broker unable to continue.
	ErrClosed = errors.New("queen: broker closed")

	// ErrNotFound reports an unknown queue, partition, message, dead letter,
	// parked message or lease, depending on the call.
	ErrNotFound = errors.New("queen: not found")

	// ErrLeaseExpired reports an ack or renewal naming a lease that no longer
	// owns the partition: it expired, was released (by a failed or retry
	// ack of its batch, a seek or a group delete), or was taken over. An
	// ack refused so names a message the group has not settled: it is
	// delivered again (see [AckResult]).
	ErrLeaseExpired = errors.New("queen: invalid or expired lease")

	// ErrAlreadySettled reports an ack of a message the group has already
	// settled: its cursor is past the message (an earlier ack completed,
	// dead-lettered or parked it, or a seek moved over it), or an earlier
	// call acked it in the batch still leased. The ack changed nothing,
	// whatever its status: an ack with status dlq of a completed message
	// does not dead-letter it. The message is not delivered to that group
	// again (unless a seek moves the group back). Queen derives a message's
	// status the same way: completed for a group once its cursor passed it.
	ErrAlreadySettled = errors.New("queen: message already settled")

	// ErrWrongGroup reports an ack whose lease is a live lease of another
	// consumer group of the queue: the ack names the wrong group. Nothing
	// changed; the lease is still that group's. (Once that lease has
	// expired, the ack is answered from the named group's own state.)
	ErrWrongGroup = errors.New("queen: lease held by another consumer group")

	// ErrGroupNotFound reports a consumer group that has never popped from
	// the queue a call names (or from any queue, for calls that take no
	// queue): an ack for it, a seek, [Broker.DeleteGroup] or
	// [Broker.SetGroupSubscription]. It matches [ErrNotFound] under
	// [errors.Is]. A group starts at its first pop; to start one at a
	// time, pop with [PopRequest].SubscriptionFrom (the builder's
	// [QueueBuilder.SubscriptionFrom]).
	ErrGroupNotFound error = &notFoundError{"queen: consumer group not found"}

	// ErrOffsetOutOfRange reports an offset outside a partition's log: below
	// its first retained offset or above its high watermark (see
	// [PartitionRead] and [Position]).
	ErrOffsetOutOfRange = errors.New("queen: offset out of range")

	// ErrInvalidArgument reports a bad input value. The error is always an
	// [*ArgumentError] naming the field.
	ErrInvalidArgument = errors.New("queen: invalid argument")

	// ErrQueueFull reports a push refused because the queue already holds
	// QueueConfig.MaxSize pending messages: messages its slowest consumer
	// group has not settled (every retained message while the queue has no
	// group), the figure [QueueStats].Pending reports. Settling messages
	// (ack, auto-ack, dead letter, park), retention and deleting or
	// seeking the slowest group make room again.
	ErrQueueFull = errors.New("queen: queue full")

	// ErrTooLarge reports a request too big to store: a payload over the
	// broker's limit (see [PushItem]), or a request whose writes do not fit
	// in one storage transaction, e.g. a transaction with too many
	// operations. Nothing of the request was written.
	ErrTooLarge = errors.New("queen: request too large")

	// ErrLocked is returned by [Open] when the directory is already open,
	// by another broker of this process or by another process: Badger holds
	// an exclusive lock on it while it is open.
	ErrLocked = errors.New("queen: directory in use")

	// ErrUnsupported reports a call the backend cannot serve: a feature of
	// this module that the server a remote [Client] talks to lacks (Queen's
	// own server has no fetch by offset, no replay or delete of dead
	// letters and no parked store). Nothing was changed.
	ErrUnsupported = errors.New("queen: not supported by this backend")

	// ErrUnavailable reports a call a remote client could not get served
	// for now: the connection failed, or the server answered 5xx (its
	// broker closing or restarting included). An in-process [Broker] never
	// returns it. A consume loop waits and pops again when a pop fails so
	// (see [QueueBuilder.Consume]); other callers may retry a call that is
	// safe to repeat.
	ErrUnavailable = errors.New("queen: broker unavailable")

	// ErrTransactionAborted reports a transaction rolled back because one of
	// its operations was refused; the error is a [*TransactionError].
	ErrTransactionAborted = errors.New("queen: transaction aborted")

	// ErrIncompatibleStore is returned by [Open], [OpenDB], [Inspect] and
	// [Restore] for a store or backup whose format this release cannot
	// read: one written by a newer release, or one too old to upgrade in
	// place. The error is an [*IncompatibleStoreError] naming both formats.
	ErrIncompatibleStore = errors.New("queen: incompatible store format")

	// ErrCorruptBackup reports a backup stream [Restore] cannot trust: not a
	// backup, a chunk whose checksum does not match, or a stream cut short
	// (no end record). Nothing was restored.
	ErrCorruptBackup = errors.New("queen: corrupt or truncated backup")

	// ErrBackupChain reports backups handed to [Restore] that do not form a
	// chain: the first is not a full backup, or an increment does not start
	// where the one before it ended (out of order, or one missing).
	// Nothing was restored.
	ErrBackupChain = errors.New("queen: backups do not form a chain")

	// ErrDirNotEmpty is returned by [Restore] when the target directory
	// exists and holds anything: a restore never writes over a store.
	ErrDirNotEmpty = errors.New("queen: directory not empty")

	// ErrConsumerStarted is returned by [Consumer.Start] and
	// [Consumer.Execute] on a consumer that has already run: build another
	// with [QueueBuilder.Consume].
	ErrConsumerStarted = errors.New("queen: consumer already started")

	// ErrDrainTimeout is matched by a [*DrainError]: stopping a consumer ran
	// out of time with handlers still running.
	ErrDrainTimeout = errors.New("queen: drain timed out")
)

// IncompatibleStoreError names the store format found and the formats
// this release reads. It matches [ErrIncompatibleStore] under [errors.Is].
type IncompatibleStoreError struct {
	Dir       string // the store's directory ("" in memory or for a backup)
	Found     int    // the format of the store or backup
	Supported int    // the newest format this release reads and writes
	// Oldest is the oldest format this release upgrades in place.
	Oldest int
	// Hint says what to do, e.g. which release opens the store.
	Hint string
}

// Error names both formats and, when known, what to do.
func (e *IncompatibleStoreError) Error() string {
	where := ""
	if e.Dir != "" {
		where = " " + e.Dir
	}
	s := fmt.Sprintf("queen: store%s has format %d; this release (%s) reads formats %d to %d", where, e.Found, Version, e.Oldest, e.Supported)
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// Is reports whether target is [ErrIncompatibleStore].
func (e *IncompatibleStoreError) Is(target error) bool { return target == ErrIncompatibleStore }

// notFoundError is a more precise [ErrNotFound].
type notFoundError struct{ text string }

func (e *notFoundError) Error() string        { return e.text }
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// ArgumentError describes an invalid input. It matches [ErrInvalidArgument]
// under [errors.Is].
type ArgumentError struct {
	Field  string // the option or field at fault, e.g. "PopRequest.Batch"
	Reason string // what is wrong with it
}

// Error describes the invalid input.
func (e *ArgumentError) Error() string {
	return fmt.Sprintf("queen: invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is [ErrInvalidArgument].
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

func argErr(field, format string, args ...any) error {
	return &ArgumentError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// TransactionError describes why a transaction was rolled back. It matches
// [ErrTransactionAborted] and unwraps to the cause.
type TransactionError struct {
	Index int   // position of the refused operation
	Err   error // the cause, e.g. ErrNotFound, ErrLeaseExpired, ErrQueueFull or ErrTooLarge
	// Op says what the refused operation was: "ack", "push" or "position".
	Op string
}

// Error says which operation aborted the transaction, and why.
func (e *TransactionError) Error() string {
	op := e.Op
	if op == "" {
		op = "operation"
	}
	return fmt.Sprintf("queen: transaction aborted at operation %d (%s): %v", e.Index, op, e.Err)
}

// Unwrap returns the cause.
func (e *TransactionError) Unwrap() []error { return []error{ErrTransactionAborted, e.Err} }

// DrainError reports the messages a drain left unsettled when its time ran
// out. It matches [ErrDrainTimeout] under [errors.Is].
//
// When the time runs out the loop gives up: it sends no ack from then on,
// and running handlers are not killed, but their outcomes are discarded
// (reported [OutcomeDiscarded]). An AckBatch the loop was already writing
// is waited for, so the drain returns once it is answered (at once on a
// [Broker]; within the request's timeout on a remote client). Unsettled
// then lists exactly the messages left to their leases, which the broker
// delivers again when their leases end: those whose handlers were still
// running, the messages of their partitions behind them, accepted
// messages whose ack was still waiting to be sent (it is not sent), and
// those whose ack was refused or failed. A message whose ack landed,
// even after the time ran out, is settled and not listed. Two cases can
// still differ: a handler that settles its own messages ([QueueBuilder.AutoAck]
// false, [Consumer.OnSuccess], [Consumer.OnError]) and is still running may
// settle its message itself, which then does not come back; and an ack
// whose answer never arrived (a remote client's broken connection) counts
// as failed, though it may have landed.
type DrainError struct {
	// Queue and Group name the loop.
	Queue string
	Group string
	// Unsettled are the messages left to their leases, in the order the
	// loop took them.
	Unsettled []*Message
}

// Error names the queue, the group and (up to ten of) the messages.
func (e *DrainError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "queen: drain timed out on queue %q group %q: %d message(s) left unsettled:", e.Queue, e.Group, len(e.Unsettled))
	for i, m := range e.Unsettled {
		if i == 10 {
			fmt.Fprintf(&sb, " and %d more", len(e.Unsettled)-i)
			break
		}
		fmt.Fprintf(&sb, " %s@%d (%s)", m.Partition, m.Offset, m.TransactionID)
	}
	return sb.String()
}

// Is reports whether target is [ErrDrainTimeout].
func (e *DrainError) Is(target error) bool { return target == ErrDrainTimeout }

// DecodeError reports a payload a [Codec] could not decode. Typed handlers
// park such messages with it (wrapped in a [*ParkError]).
type DecodeError struct {
	Type string // the Go type it was decoded into
	Err  error  // the codec's error
}

// Error names the type and the codec's error.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("queen: cannot decode payload into %s: %v", e.Type, e.Err)
}

// Unwrap returns the codec's error.
func (e *DecodeError) Unwrap() error { return e.Err }

// signed is a field of an argument and whether its value is negative.
type signed struct {
	field    string
	negative bool
}

// firstNegative is the [*ArgumentError] of the first of fields whose
// value is negative, or nil.
func firstNegative(fields ...signed) error {
	for _, f := range fields {
		if f.negative {
			return argErr(f.field, "must not be negative")
		}
	}
	return nil
}
