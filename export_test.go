package queen

import "time"

// ShutCallsForTest makes b refuse every gated call, as Close does once it
// has drained consumers, without closing anything; reopen undoes it.
func ShutCallsForTest(b *Broker) (reopen func()) {
	b.calls.Add(callsShut)
	return func() { b.calls.Add(-callsShut) }
}

// BuilderDurations returns the duration options q carries: the pop
// timeout, the lease, the renewal interval and the idle stop.
func BuilderDurations(q *QueueBuilder) (timeout, lease, renew, idle time.Duration) {
	return q.timeout, q.lease, q.renew, q.idle
}
