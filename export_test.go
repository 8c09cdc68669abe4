package queen

// ShutCallsForTest makes b refuse every gated call, as Close does once it
// has drained consumers, without closing anything; reopen undoes it.
func ShutCallsForTest(b *Broker) (reopen func()) {
	b.calls.Add(callsShut)
	return func() { b.calls.Add(-callsShut) }
}
