package queen

// Conflation: a group created with PopRequest.Conflation receives only the
// newest message of each partition. When a pop claims a partition for such
// a group, the claim covers just the last committed offset, and the
// group's cursor moves past everything older (durably, in the same step),
// so older messages are never delivered to that group. Other groups of the
// queue are unaffected. A conflating group is fixed at its first pop,
// needs a name (not queue mode), refuses AutoAck, and its empty pops are
// reported with PopResult.Conflating set.

// conflatedRange is the claim of a conflating group in c's partition: only
// the newest message, with the cursor to move up to it.
func conflatedRange(c *cursor) (from, end, skipTo int64) {
	end = c.p.next
	from = c.p.lastStoredBefore(end) // the newest may have been deleted
	return from, end, from
}
