package queen

import (
	"errors"
	"sync"
	"time"
)

// drainer is a running consumer that Close must stop.
type drainer interface {
	// drain stops taking messages and waits for running handlers until
	// deadline, returning what was left unsettled.
	drain(deadline time.Time) error
}

// consumerSet tracks the running consumers of a broker.
type consumerSet struct {
	mu  sync.Mutex
	set map[drainer]struct{}
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
		wg.Go(func() { errs[i] = d.drain(deadline) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
