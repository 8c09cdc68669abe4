package wire

import "github.com/queenlite/queen"

// Counts are the message counts of a queue or a partition as package queen
// defines them ([queen.QueueStats], [queen.PartitionStats]). Package
// httpapi sends them as "counts" beside Queen's counters, which cannot be
// read back into them when several groups lease the same messages (see
// [QueenCounts.Counts]); package remote reads them whenever they are sent.
type Counts struct {
	Messages int64 `json:"messages"`
	Pending  int64 `json:"pending"`
	InFlight int64 `json:"inFlight"`
	// DeadLetters and Parked are a queue's; package queen does not count
	// them per partition, so a partition's are absent.
	DeadLetters int64 `json:"deadLetters,omitempty"`
	Parked      int64 `json:"parked,omitempty"`
}

// QueueCounts are qs's counts.
func QueueCounts(qs *queen.QueueStats) Counts {
	return Counts{Messages: qs.Messages, Pending: qs.Pending, InFlight: qs.InFlight, DeadLetters: qs.DeadLetters, Parked: qs.Parked}
}

// PartitionCounts are p's counts.
func PartitionCounts(p *queen.PartitionStats) Counts {
	return Counts{Messages: p.Messages, Pending: p.Pending, InFlight: p.InFlight}
}

// SetQueue sets the counts of qs to c.
func (c Counts) SetQueue(qs *queen.QueueStats) {
	qs.Messages, qs.Pending, qs.InFlight, qs.DeadLetters, qs.Parked = c.Messages, c.Pending, c.InFlight, c.DeadLetters, c.Parked
}

// SetPartition sets the counts of p to c.
func (c Counts) SetPartition(p *queen.PartitionStats) {
	p.Messages, p.Pending, p.InFlight = c.Messages, c.Pending, c.InFlight
}

// QueenCounts are Queen's counters of a queue or a partition: the
// "messages" object of the queue listings, and the "messages", "stats"
// and "totals" objects of GET /api/v1/status/queues/{queue}. Pending is
// [Counts.Waiting], Completed [Counts.Completed]; Failed counts parked
// messages.
type QueenCounts struct {
	Total      int64 `json:"total"`
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
	DeadLetter int64 `json:"deadLetter"`
}

// Waiting is the one definition of "pending" that the HTTP API and the
// console show, for a queue (from its totals) or a partition: the
// messages the slowest group has not settled, less those under a lease
// (Pending − InFlight, not below 0). A queue's is computed from the
// queue's totals, never summed from its partitions'.
func (c Counts) Waiting() int64 { return max(0, c.Pending-c.InFlight) }

// Completed is the one definition of "completed": the stored messages
// the slowest group has settled (Messages − Pending), less the dead
// letters and parked entries counted in c, which are settled but not
// completed; not below 0.
func (c Counts) Completed() int64 {
	return max(0, c.Messages-c.Pending-c.DeadLetters-c.Parked)
}

// Queen derives Queen's counters from c: total is Messages, processing
// InFlight, pending [Counts.Waiting], completed [Counts.Completed], failed
// Parked and deadLetter DeadLetters. A message leased by several groups is
// in processing once for each, so processing can exceed total, and
// pending + processing then says more than Pending.
func (c Counts) Queen() QueenCounts {
	return QueenCounts{Total: c.Messages, Pending: c.Waiting(), Processing: c.InFlight,
		Completed: c.Completed(), Failed: c.Parked, DeadLetter: c.DeadLetters}
}

// Add adds o's counters to q's.
func (q *QueenCounts) Add(o QueenCounts) {
	q.Total += o.Total
	q.Pending += o.Pending
	q.Processing += o.Processing
	q.Completed += o.Completed
	q.Failed += o.Failed
	q.DeadLetter += o.DeadLetter
}

// Counts reads Queen's counters back, for a server that sends only them
// (Queen's own): Messages is total, InFlight processing, Pending pending
// + processing but never more than total, DeadLetters deadLetter and
// Parked failed. It undoes [Counts.Queen] exactly while no message is
// leased by more than one group; past that, Pending is only bounded.
func (q QueenCounts) Counts() Counts {
	return Counts{Messages: q.Total, Pending: min(q.Total, q.Pending+q.Processing), InFlight: q.Processing,
		DeadLetters: q.DeadLetter, Parked: q.Failed}
}
