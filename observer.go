package queen

import (
	"slices"
	"sync/atomic"
	"time"
)

// Observer receives the broker's and consumers' counts and durations, for
// metrics. Observe is called synchronously on hot paths and must be fast and
// safe for concurrent use; it must not call back into the broker.
type Observer interface {
	Observe(Event)
}

// EventKind says what an [Event] counts.
type EventKind int

// Kinds of [Event].
const (
	EventPush         EventKind = iota + 1 // Count messages queued by one push call; Duration its latency
	EventPop                               // Count messages delivered by one pop; Duration its latency
	EventAck                               // Count items of one status, queue and group that an ack call applied (see Counters.Acked); Status set
	EventLeaseRenewed                      // a lease was renewed
	EventLeaseExpired                      // a lease ran out; Count partitions it held
	EventConsume                           // Count messages a consume loop finished with one Outcome, released ones included; Duration the handler's
	EventInFlight                          // Count is the change (+1/-1) in running consume handlers
	EventDeadLettered                      // Count messages moved to the dead-letter store
	EventParked                            // Count messages moved to the parked store
	// EventGroupJoined reports a consumer group's first pop of a queue
	// (queue mode's too): the group now exists there. Count is how many of
	// the queue's retained messages its start point skips: all of them
	// for a group that starts in mode "new" (the default, see
	// [Options].DefaultSubscriptionMode), those pushed before the time for
	// one that starts at [PopRequest].SubscriptionFrom, none in mode "all"
	// or for a group that popped before the queue existed. A join that
	// skips messages is also logged at Info level.
	EventGroupJoined
	// EventOutboxRelayed reports rows a relay of package outbox pushed
	// into the broker and deleted from its table, per queue and batch:
	// Count rows (duplicates of an earlier push included), Duration the
	// age of the oldest of them, from its enqueue to the push.
	EventOutboxRelayed
	// EventOutboxHeld reports rows a relay of package outbox kept aside
	// because the broker refused them for good: Count rows, per queue.
	EventOutboxHeld
	// EventOutboxBacklog is a snapshot of an outbox table, reported by
	// its relays about once a second: Count rows waiting to be relayed,
	// Duration the age of the oldest (zero when none waits). Queue is
	// empty.
	EventOutboxBacklog
)

// Event is one observation.
type Event struct {
	Kind     EventKind
	Queue    string
	Group    string    // consumer group, when the event has one
	Status   AckStatus // for EventAck
	Outcome  Outcome   // for EventConsume
	Count    int
	Duration time.Duration
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

type nopObserver struct{}

// Observe does nothing.
func (nopObserver) Observe(Event) {}

// Outcome is what a consume handler's result did to a message.
type Outcome string

// Outcomes of a handled message.
const (
	OutcomeAccepted     Outcome = "accepted"      // completed
	OutcomeRetried      Outcome = "retried"       // given back to be delivered again
	OutcomeDeadLettered Outcome = "dead_lettered" // moved to the dead-letter store
	OutcomeParked       Outcome = "parked"        // moved to the parked store
	OutcomeInProgress   Outcome = "in_progress"   // put back without spending an attempt
	OutcomeHandled      Outcome = "handled"       // settled by the handler or its callbacks, not by the loop
	OutcomeReleased     Outcome = "released"      // given back, or left to come back, unsettled: not handled, failed because the loop was stopping, or its ack refused
	OutcomeDiscarded    Outcome = "discarded"     // handled after a drain ran out of time; nothing settled
)

var outcomes = [...]Outcome{OutcomeAccepted, OutcomeRetried, OutcomeDeadLettered, OutcomeParked, OutcomeInProgress, OutcomeHandled, OutcomeReleased, OutcomeDiscarded}

// Counters are running totals since the broker opened, for metrics
// endpoints. Read them with [Broker.Counters].
type Counters struct {
	Pushed int64 // messages queued by pushes (duplicates and failures excluded)
	Popped int64 // messages delivered by pops
	// Acked counts the ack items that settled or gave back a message, by
	// status. Refused items are not counted (a re-ack of a message already
	// settled is refused with [ErrAlreadySettled]), nor items that changed
	// nothing: a repeat of an item in the same call, or an item behind one
	// that comes back in the same call (delivered again).
	Acked         map[AckStatus]int64
	LeasesRenewed int64 // lease renewals
	LeasesExpired int64 // leases that ran out
	DeadLettered  int64 // messages moved to the dead-letter store
	Parked        int64 // messages moved to the parked store
	// Consumed counts the messages consume loops finished with, by
	// outcome, released ones included (whether or not a handler ran).
	Consumed map[Outcome]int64
	// HandlersInFlight is the number of consume handlers running now.
	HandlersInFlight int64
}

// counters is the broker's live, lock-free form of Counters.
type counters struct {
	// byKind sums the Count of each kind of Event (for EventLeaseExpired,
	// which counts partitions, the events); acks and consume outcomes are
	// summed by status and outcome instead.
	byKind   [EventGroupJoined + 1]atomic.Int64
	acked    [5]atomic.Int64 // by ackStatuses index
	consumed [len(outcomes)]atomic.Int64
}

var ackStatuses = [5]AckStatus{AckCompleted, AckFailed, AckRetry, AckDLQ, AckPark}

// observe counts e and hands it to the Observer.
func (b *Broker) observe(e Event) {
	c := &b.counters
	n := int64(e.Count)
	switch e.Kind {
	case EventAck:
		if i := slices.Index(ackStatuses[:], e.Status); i >= 0 {
			c.acked[i].Add(n)
		}
	case EventConsume:
		if i := slices.Index(outcomes[:], e.Outcome); i >= 0 {
			c.consumed[i].Add(n)
		}
	default:
		if e.Kind == EventLeaseExpired {
			n = 1
		}
		if e.Kind > 0 && int(e.Kind) < len(c.byKind) {
			c.byKind[e.Kind].Add(n)
		}
	}
	b.qcounters.countQueue(e)
	b.obs.Observe(e)
}

// Counters returns the running totals.
func (b *Broker) Counters() Counters {
	c := &b.counters
	total := func(k EventKind) int64 { return c.byKind[k].Load() }
	out := Counters{
		Pushed: total(EventPush), Popped: total(EventPop), LeasesRenewed: total(EventLeaseRenewed),
		LeasesExpired: total(EventLeaseExpired), DeadLettered: total(EventDeadLettered), Parked: total(EventParked),
		Acked: make(map[AckStatus]int64, len(ackStatuses)), HandlersInFlight: total(EventInFlight),
		Consumed: make(map[Outcome]int64, len(outcomes)),
	}
	for i, o := range outcomes {
		out.Consumed[o] = c.consumed[i].Load()
	}
	for i, s := range ackStatuses {
		out.Acked[s] = c.acked[i].Load()
	}
	return out
}
