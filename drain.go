package queen

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ErrDrainTimeout is matched by a [*DrainError]: stopping a consumer ran
// out of time with handlers still running.
var ErrDrainTimeout = errors.New("queen: drain timed out")

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

// drainer is a running consumer that Close must stop.
type drainer interface {
	// drain stops taking messages and waits for running handlers until
	// deadline, returning what was left unsettled.
	drain(deadline time.Time, cancel <-chan struct{}) error
}

// consumerSet tracks the running consumers of a broker, and the
// deliveries they gave back without handling, so that retry policies
// count only real attempts.
type consumerSet struct {
	mu  sync.Mutex
	set map[drainer]struct{}

	umu     sync.Mutex
	unusedN map[deliveryKey]int
	// failures counts the handled deliveries of messages that carry no
	// DeliveryAttempt (a backend that does not report it, such as Queen's
	// own server): their attempts are counted here instead.
	failures map[deliveryKey]int
}

// deliveryKey names a message as one group sees it.
type deliveryKey struct{ partitionID, group, txid string }

// maxUnused bounds the unused-delivery table; past it the table is
// cleared, and attempts may then be overcounted, never undercounted.
const maxUnused = 1 << 16

func keyOf(m *Message) deliveryKey {
	return deliveryKey{m.PartitionID, m.ConsumerGroup, m.TransactionID}
}

// unused records a delivery of m that no handler ran on.
func (s *consumerSet) unused(m *Message) {
	s.umu.Lock()
	if s.unusedN == nil || len(s.unusedN) >= maxUnused {
		s.unusedN = make(map[deliveryKey]int)
	}
	s.unusedN[keyOf(m)]++
	s.umu.Unlock()
}

// used takes back one unused delivery of m.
func (s *consumerSet) used(m *Message) {
	s.umu.Lock()
	k := keyOf(m)
	if n := s.unusedN[k]; n > 1 {
		s.unusedN[k] = n - 1
	} else {
		delete(s.unusedN, k)
	}
	s.umu.Unlock()
}

// forget drops what is known of m once it is settled for good.
func (s *consumerSet) forget(m *Message) {
	s.umu.Lock()
	delete(s.unusedN, keyOf(m))
	delete(s.failures, keyOf(m))
	s.umu.Unlock()
}

// attempt is how many times a handler has been given m, this delivery
// included. It is called once per failed handling of m.
func (s *consumerSet) attempt(m *Message) int {
	s.umu.Lock()
	if m.DeliveryAttempt == 0 { // not reported: count the failures seen here
		if s.failures == nil || len(s.failures) >= maxUnused {
			s.failures = make(map[deliveryKey]int)
		}
		k := keyOf(m)
		s.failures[k]++
		n := s.failures[k]
		s.umu.Unlock()
		return n
	}
	n := m.DeliveryAttempt - s.unusedN[keyOf(m)]
	s.umu.Unlock()
	return max(n, 1)
}

func (s *consumerSet) add(d drainer) {
	s.mu.Lock()
	if s.set == nil {
		s.set = make(map[drainer]struct{})
	}
	s.set[d] = struct{}{}
	s.mu.Unlock()
}

func (s *consumerSet) remove(d drainer) {
	s.mu.Lock()
	delete(s.set, d)
	s.mu.Unlock()
}

// closeAll drains every consumer under one overall deadline, concurrently,
// and joins their errors.
func (s *consumerSet) closeAll(timeout time.Duration) error {
	s.mu.Lock()
	all := make([]drainer, 0, len(s.set))
	for d := range s.set {
		all = append(all, d)
	}
	s.mu.Unlock()
	deadline := time.Now().Add(timeout)
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, d := range all {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = d.drain(deadline, nil) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
