package queen

import (
	"container/heap"
	"time"

	"github.com/queenlite/queen/internal/testhook"
)

func init() {
	testhook.Waiting = func(b any) int { return b.(*Broker).waiting() }
}

// waiting counts the pops waiting now, on any queue, group or partition,
// and the FetchPartitions calls waiting for a push.
// Tests use it (through internal/testhook) to know a pop waits
// instead of sleeping.
func (b *Broker) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := int(b.fetchWaiting.Load())
	for _, wl := range b.queueWait {
		n += wl.n
	}
	for _, q := range b.queues {
		for _, g := range q.groups {
			n += g.waiters.n
			for _, wl := range g.partWaiters {
				n += wl.n
			}
		}
	}
	return n
}

// WaitingPops returns the long-poll pops waiting now for a message, by
// queue; queues with none are left out. A pop of a queue that does not
// exist yet counts under its name. Dashboards chart it as the gauge
// Queen's wire calls parkedCount; it takes the broker's lock once, so
// read it at a sampling interval, not per request.
func (b *Broker) WaitingPops() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int)
	for name, wl := range b.queueWait {
		if wl.n > 0 {
			out[name] += wl.n
		}
	}
	for name, q := range b.queues {
		n := 0
		for _, g := range q.groups {
			n += g.waiters.n
			for _, wl := range g.partWaiters {
				n += wl.n
			}
		}
		if n > 0 {
			out[name] += n
		}
	}
	return out
}

// waiter is a pop waiting until something it could take appears.
type waiter struct {
	ch    chan struct{} // receives one token per wake
	place links[waiter]
	list  *waitList
}

func (w *waiter) links() *links[waiter] { return &w.place }

// waitList is a FIFO of waiting pops. Guarded by Broker.mu. A list kept in
// a map removes itself from it when its last waiter leaves.
type waitList struct {
	chain[waiter, *waiter]
	owner map[string]*waitList
	key   string
}

// waitListIn returns the list under key in m, creating it.
func waitListIn(m map[string]*waitList, key string) *waitList {
	wl := m[key]
	if wl == nil {
		wl = &waitList{owner: m, key: key}
		m[key] = wl
	}
	return wl
}

func (l *waitList) add() *waiter {
	w := &waiter{ch: make(chan struct{}, 1), list: l}
	l.pushBack(w)
	return w
}

func (l *waitList) remove(w *waiter) {
	if w.list != l {
		return
	}
	l.chain.remove(w)
	w.list = nil
	if l.n == 0 && l.owner != nil {
		delete(l.owner, l.key)
	}
}

// wakeOne wakes the longest-waiting pop.
func (l *waitList) wakeOne() {
	if w := l.head; w != nil {
		l.remove(w)
		w.ch <- struct{}{}
	}
}

func (l *waitList) wakeAll() {
	for l.head != nil {
		l.wakeOne()
	}
}

// leave unregisters w after its wait ended. If w was woken but will not use
// the wake (its pop is giving up), the wake passes to the next waiter.
func (l *waitList) leave(w *waiter) {
	if w.list == l {
		l.remove(w)
		return
	}
	select {
	case <-w.ch:
		l.wakeOne()
	default:
	}
}

// timerWheel wakes cursors whose state changes at a known time: lease
// expiry, retry delay, window buffer, delayed messages. It is a min-heap
// served by one goroutine; pops also serve it synchronously, so a fake
// clock needs no goroutine to move.
type timerWheel struct {
	b    *Broker
	h    timerHeap
	kick chan struct{}
}

type timerEntry struct {
	at int64
	c  *cursor
}

type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (t *timerWheel) init(b *Broker) {
	t.b = b
	t.kick = make(chan struct{}, 1)
}

// schedule asks for c to be checked at time at, under b.mu.
func (t *timerWheel) schedule(c *cursor, at int64) {
	if c.wakeAt != 0 && c.wakeAt <= at {
		return
	}
	c.wakeAt = at
	earliest := len(t.h) == 0 || at < t.h[0].at
	heap.Push(&t.h, timerEntry{at, c})
	if earliest {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// next is when the earliest timer is due (µs), 0 when none is set. Under
// b.mu.
func (t *timerWheel) next() int64 {
	if len(t.h) == 0 {
		return 0
	}
	return t.h[0].at
}

// fire checks every cursor due by now, under b.mu.
func (t *timerWheel) fire(now int64) {
	for len(t.h) > 0 && t.h[0].at <= now {
		e := heap.Pop(&t.h).(timerEntry)
		if e.c.wakeAt != e.at {
			continue // superseded by an earlier wake
		}
		e.c.wakeAt = 0
		t.b.check(e.c, now)
	}
}

func (t *timerWheel) run() {
	b := t.b
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	cc, _ := b.clock.(SignalingClock)
	for {
		var moved <-chan struct{}
		if cc != nil {
			moved = cc.Changed()
		}
		b.mu.Lock()
		now := b.now()
		t.fire(now)
		// A clock that tells when it moves needs no polling; a real one is
		// looked at again at least every second.
		wait := time.Second
		if cc != nil {
			wait = time.Hour
		}
		if len(t.h) > 0 && cc == nil {
			wait = min(wait, time.Duration(t.h[0].at-now)*time.Microsecond)
		}
		b.mu.Unlock()
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-b.stop:
			return
		case <-t.kick:
		case <-moved:
		case <-timer.C:
		}
	}
}
