package queen

import "time"

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
	EventPush          EventKind = iota + 1 // Count messages queued by one push call; Duration its latency
	EventPop                                // Count messages delivered by one pop; Duration its latency
	EventAck                                // Count items of one status settled by an ack call; Status set
	EventLeaseRenewed                       // a lease was renewed
	EventLeaseExpired                       // a lease ran out; Count partitions it held
	EventConsume                            // a consume handler finished; Outcome and Duration set
	EventInFlight                           // Count is the change (+1/-1) in running consume handlers
	EventDeadLettered                       // Count messages moved to the dead-letter store
	EventParked                             // Count messages moved to the parked store
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
)
