package queen

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Handler handles one message. What it returns decides what happens to
// the message: nil accepts it, an error fails it, and [Retry], [Reject],
// [Fatal], [Park] and [InProgress] choose other outcomes. A panic is
// recovered and counts as a failure ([*PanicError]).
type Handler func(ctx context.Context, msg *Message) error

// BatchHandler handles a whole pop at once: nil accepts every message, an
// error applies its outcome to every message.
type BatchHandler func(ctx context.Context, msgs []*Message) error

// ErrConsumerStarted is returned by [Consumer.Start] and
// [Consumer.Execute] on a consumer that has already run: build another
// with [QueueBuilder.Consume].
var ErrConsumerStarted = errors.New("queen: consumer already started")

// pollInterval is how long a consume loop with Wait(false) waits after
// an empty pop before the next one.
const pollInterval = 100 * time.Millisecond

// unavailableBackoff is the longest wait between pops of a consume loop
// whose pops fail with ErrUnavailable; the wait doubles from pollInterval.
const unavailableBackoff = 5 * time.Second

// Settlement reports what a consume loop did with one message; see
// [Consumer.OnSettled].
type Settlement struct {
	Message *Message
	// Outcome is what became of the message.
	Outcome Outcome
	// Status is the ack the loop sent for it, "" when it sent none (the
	// handler settled it, or it was left to its lease).
	Status AckStatus
	// Delay is the ack's delay, for retries and in-progress answers.
	Delay time.Duration
	// Err is the handler's error; nil when it succeeded or never ran.
	Err error
	// AckErr says why the ack failed or was refused, if it was; the
	// message then comes back when its lease ends, and Outcome is
	// [OutcomeReleased] (Status is the ack that was tried). An ack refused
	// with [ErrAlreadySettled] (the handler, or a seek, settled the
	// message first) is not an error: Outcome is then [OutcomeHandled].
	AckErr error
	// Handled reports that the handler ran on the message.
	Handled bool
}

// Consume builds a consume loop that calls fn with one message at a time.
// Run it with [Consumer.Execute] (blocking) or [Consumer.Start].
//
// The loop long-polls for messages (see the builder's Batch, Partitions,
// Wait and Timeout), calls fn, and settles each message from fn's
// result (see [Handler]). When a message is not settled for good (it fails
// with retries left, or is retried or in progress), the rest of its
// partition's messages in that pop are skipped: they come back, in order,
// after it. Other partitions' messages are handled as usual.
//
// # Acks
//
// A message counts as handled when fn returns. The loop does not wait for
// an accepted message's ack before it starts the next one: the accepted
// messages of a partition's run (its messages of one pop) share one
// [Client.AckBatch], sent 1 ms after the first of them or, while the run's
// previous AckBatch is being written, right after it, so a run never has
// two in flight and its acks are written in order. Any other result is
// acked at once, behind the run's accepted messages not yet acked, and the
// loop reads its answer before going on. A worker takes its next run while
// the last one's acks are written and waits for them after that run. So a
// process killed between fn's return and the ack reaching storage gets the
// message delivered again: at least once, as when it is killed while fn
// runs; with fast handlers up to a pop's messages per running worker. A
// message reported [OutcomeAccepted] to [Consumer.OnSettled] had its ack
// written with the client's durability (see [Durability]). Acks stay
// fenced by the lease: one refused because the lease was lost is reported
// [OutcomeReleased], and the message comes back.
//
// The loop stops when ctx (or the ctx given to Execute or Start) ends,
// after Limit messages, after Idle with nothing to do, or with
// [Consumer.Stop] or the client's Close ([Broker.Close]). A pop that fails
// with [ErrUnavailable] (a remote client's server out of reach, or
// restarting) does not stop it: the loop logs a warning and pops again,
// waiting 100 ms, then twice as long each time up to 5 s; any other pop
// error ends the loop with that error. Stopping takes
// no new messages, gives back at once (with an ack of status retry, which
// spends no retry) those taken but not started, and waits for running
// handlers up to the drain timeout. A handler that fails because of the
// stop spends no retry either: see [Stopping].
//
// # Contexts
//
// One context governs a loop's whole life. Queen's clients take it here
// and again in Execute, so the usual form passes the same ctx twice:
//
//	err := c.Queue("tasks").Consume(ctx, handle).Execute(ctx)
//
// The two places mean the same, so passing [context.Background] to either
// one leaves the other in charge:
//   - the end of either ctx stops the loop, gracefully, as described above;
//   - the handlers' ctx carries the values of both (those of Execute's or
//     Start's ctx first), but not their end: a stop does not cancel a
//     running handler, which learns of it through [Stopping]; its ctx ends
//     only when the drain timeout runs out;
//   - acks, lease renewals and give-backs run with the same values and
//     are not cut short by the stop.
//
// Consume keeps ctx until the loop ends, for that purpose only. Two other
// contexts bound single calls: [Consumer.Stop]'s bounds one drain, and
// [QueueBuilder.Pop]'s one pop.
func (q *QueueBuilder) Consume(ctx context.Context, fn Handler) *Consumer {
	c := &Consumer{q: *q, parent: ctx, each: fn}
	if fn == nil {
		c.err = argErr("fn", "must not be nil")
	}
	return c.validate()
}

// ConsumeBatch is [QueueBuilder.Consume] with a handler that gets each
// pop's messages at once (one at a time with Each). Its result applies to
// every message of the batch. ctx is as in Consume.
func (q *QueueBuilder) ConsumeBatch(ctx context.Context, fn BatchHandler) *Consumer {
	c := &Consumer{q: *q, parent: ctx, batch: fn}
	if fn == nil {
		c.err = argErr("fn", "must not be nil")
	}
	return c.validate()
}

func (c *Consumer) validate() *Consumer {
	if c.err != nil {
		return c
	}
	if c.q.commitOnDelivery {
		c.err = argErr("QueueBuilder.CommitOnDelivery", "a consume loop refuses it: messages committed on delivery cannot be acked or given back; use Pop")
		return c
	}
	if _, err := c.q.popRequest(); err != nil {
		c.err = err
	}
	return c
}

// Consumer is a consume loop built by [QueueBuilder.Consume] or
// [QueueBuilder.ConsumeBatch]. Set its callbacks, then run it once, with
// Execute or Start. Its methods are safe for concurrent use.
type Consumer struct {
	q      QueueBuilder
	parent context.Context // the ctx given to Consume; only its end is used
	each   Handler
	batch  BatchHandler
	err    error

	mu        sync.Mutex
	onSuccess func(ctx context.Context, msg *Message) error
	onError   func(ctx context.Context, msg *Message, err error) error
	onSettled func(Settlement)
	r         *run
}

// OnSuccess makes the loop call fn, instead of acking, for each message
// whose handler succeeded: fn settles the message. An error from fn
// counts as a failure of the message, which the loop then settles as
// such if fn left it unsettled. Set it before the loop runs.
func (c *Consumer) OnSuccess(fn func(ctx context.Context, msg *Message) error) *Consumer {
	c.mu.Lock()
	c.onSuccess = fn
	c.mu.Unlock()
	return c
}

// OnError makes the loop call fn, instead of settling the failure itself,
// for each message whose handler failed: fn decides what to do, e.g. ack
// it dlq or failed. If fn returns an error, the loop settles the message
// as a failure with that error, if fn left it unsettled. fn is not called
// for an error returned once the loop was asked to stop: the loop gives
// that message back (see [Stopping]). Set it before the loop runs.
func (c *Consumer) OnError(fn func(ctx context.Context, msg *Message, err error) error) *Consumer {
	c.mu.Lock()
	c.onError = fn
	c.mu.Unlock()
	return c
}

// OnSettled makes the loop call fn with what it did with each message it
// took: accepted, retried, dead-lettered, parked, put back in progress,
// released unhandled, left to the handler, or discarded after a drain ran
// out of time. fn runs on the loop's goroutines, concurrently when
// Concurrency is above 1, and must not block for long. Set it before the
// loop runs.
func (c *Consumer) OnSettled(fn func(Settlement)) *Consumer {
	c.mu.Lock()
	c.onSettled = fn
	c.mu.Unlock()
	return c
}

// Execute runs the loop until it stops (see [QueueBuilder.Consume]); ctx
// governs the loop as the ctx given to Consume does (see Contexts there).
// It returns nil when the loop stopped cleanly, including on cancellation
// of ctx; a [*DrainError] when stopping left handlers running past the
// drain timeout; or the error that ended the loop (an invalid option, or a
// closed client).
func (c *Consumer) Execute(ctx context.Context) error {
	if err := c.Start(ctx); err != nil {
		return err
	}
	r := c.run()
	<-r.over
	return r.result()
}

// Start runs the loop in the background until it stops; ctx ending stops
// it, as [Consumer.Stop] does, and ctx otherwise governs the loop as the
// ctx given to Consume does (see Contexts at [QueueBuilder.Consume]). See
// [Consumer.Done] and [Consumer.Err]. It returns [ErrClosed] once the
// client's Close ([Broker.Close]) has begun, [ErrConsumerStarted] if the
// loop already ran, the error of either ctx if it has ended, and the
// invalid option, if any; the loop then does not start.
func (c *Consumer) Start(ctx context.Context) error {
	if c.err != nil {
		return c.err
	}
	if err := c.q.h.usableErr(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.parent != nil {
		if err := c.parent.Err(); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if c.r != nil {
		c.mu.Unlock()
		return ErrConsumerStarted
	}
	r := newRun(c, ctx)
	c.r = r
	c.mu.Unlock()
	r.start(ctx, c.parent)
	return nil
}

// Stop stops the loop and drains it: it takes no new messages, gives back
// those not started, and waits for running handlers until the drain
// timeout, or until ctx ends, whichever comes first. It returns nil once
// everything taken is settled or given back, or a [*DrainError] naming
// exactly what was left unsettled; those handlers keep running, but their
// outcomes are discarded, the loop sends no more acks, and the messages
// listed come back when their lease ends. An AckBatch being written when
// time runs out is waited for, so that its messages are listed only if it
// did not land (see [DrainError]).
func (c *Consumer) Stop(ctx context.Context) error {
	r := c.run()
	if r == nil {
		return nil
	}
	deadline := time.Now().Add(r.drainTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return r.drain(deadline, ctx.Done())
}

// Done returns a channel closed when the loop has stopped, or nil if it
// has not started.
func (c *Consumer) Done() <-chan struct{} {
	if r := c.run(); r != nil {
		return r.over
	}
	return nil
}

// Err returns what Execute returns, once [Consumer.Done] is closed; nil
// before.
func (c *Consumer) Err() error {
	r := c.run()
	if r == nil {
		return nil
	}
	select {
	case <-r.over:
		return r.result()
	default:
		return nil
	}
}

// InFlight is the number of handlers running now.
func (c *Consumer) InFlight() int {
	if r := c.run(); r != nil {
		return int(r.inflight.Load())
	}
	return 0
}

func (c *Consumer) run() *run {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r
}

type stopKey struct{}

// valuesOf is a context with the values of its own Context and, for keys
// that one lacks, those of also; everything else is its own Context's.
type valuesOf struct {
	context.Context
	also context.Context
}

// Value returns the value of key in the context, else in also.
func (v valuesOf) Value(key any) any {
	if x := v.Context.Value(key); x != nil {
		return x
	}
	return v.also.Value(key)
}

// Stopping returns a channel that is closed once the consume loop that
// called the handler holding ctx has been asked to stop, so a long handler
// can wrap up early. It returns nil for any other ctx.
//
// A stop costs no retry: a failure (an error, a panic or [Retry]) that a
// handler returns once its loop has been asked to stop (Stopping closed,
// or the ctx given to Consume, Start or Execute ended) is put down to the
// stop, whatever the error wraps. The message is given back with an ack of
// status retry, which spends none of the (partition, group) retry budget
// and no attempt of a [RetryPolicy], OnError is not called, and it is
// reported [OutcomeReleased]. An error wrapping [context.Canceled] or
// [context.DeadlineExceeded] while the loop is not stopping (the handler's
// own call timing out) is a failure like any other. [Reject], [Park] and
// [InProgress] keep their meaning during a stop.
func Stopping(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(stopKey{}).(chan struct{})
	return ch
}

// job is a unit of work: the messages of one partition from one pop
// (handled one at a time), or a whole pop for a batch handler.
type job struct {
	msgs    []*Message
	leaseID string
	next    int        // index of the next message to start
	cur     []*Message // being handled

	// A lane's accepted messages waiting for the next AckBatch (under
	// run.mu). See run.accepted.
	queued   []handled
	flushing bool        // an AckBatch of the lane is being written
	timer    *time.Timer // starts the first AckBatch of queued
	armed    int         // timers armed so far, numbering the last
	over     bool        // the lane's handling has ended
	// confirmed is when the lane's lease was last known to be held: the
	// pop's start, then the sending of its last AckBatch that the backend
	// took whole (see laneConfirm).
	confirmed time.Time
	forgotten bool // see run.forgetJob
}

// laneConfirm is how long a lane goes on handling messages without
// knowing its lease is still held, on a backend whose leaseState learns
// of a lost lease only from a refused ack or renewal (a remote client):
// before it starts a message more than this after the pop or its last
// AckBatch taken whole, it waits for its acks to land, so that a lease
// lost under a slow handler (every lease lasts at least 1 s) stops the
// lane before the next message rather than after it. The time is the
// client's clock's. A Broker knows of every lost lease at once.
const laneConfirm = time.Second

// handled is a message the loop has a result for, waiting to be acked.
type handled struct {
	m   *Message
	err error         // the handler's result
	ran bool          // the handler ran on m
	d   time.Duration // how long the handler took
}

// ackLinger is how long a lane's first accepted message waits for its ack
// to be sent, so that those accepted after it within that time share one
// AckBatch (one commit, one fsync) with it. While a lane's AckBatch is
// being written, the messages accepted meanwhile wait for it and then go
// together in the next one: a lane never has two acks in flight, so its
// acks are written in order, and its handler never waits for one.
const ackLinger = time.Millisecond

// run is one execution of a Consumer.
type run struct {
	h            host
	req          PopRequest
	group        string // group name for events
	ackGroup     string // group for acks ("" in queue mode)
	each         Handler
	batch        BatchHandler
	lanes        bool // split pops by partition, one message per call
	userSettles  bool
	exact        bool // the host's leaseState is exact (see host.exactLeases)
	onSuccess    func(ctx context.Context, msg *Message) error
	onError      func(ctx context.Context, msg *Message, err error) error
	onSettled    func(Settlement)
	retry        *RetryPolicy
	n            int
	limit        int
	idle         time.Duration
	renew        time.Duration
	lease        time.Duration
	drainTimeout time.Duration

	popCtx    context.Context // ends when the loop is asked to stop
	popCancel context.CancelFunc
	hctx      context.Context // handlers' ctx: ends if a drain runs out of time
	hcancel   context.CancelFunc
	ackCtx    context.Context // never ends: settling outlives a stop
	// ends are the contexts whose end stops the loop (the ctx given to
	// Start or Execute, and the one given to Consume); only their Err is
	// read, to tell a failure caused by the stop.
	ends [2]context.Context

	mu        sync.Mutex
	cond      *sync.Cond
	pending   []*job
	current   map[*job]struct{}
	running   int
	fetchers  int // fetch goroutines still running
	popping   int // pops in flight
	stopping  bool
	giving    int // requestStop calls still giving back pending jobs; the loop is not done before they are
	abandoned bool
	listed    bool // abandon has made drainErr: nothing the loop does changes it any more
	acking    int  // AckBatch calls of the loop in flight; abandon waits for them
	// held are the messages the loop took and has not finished with, in
	// the order taken (see hold): after an abandon, exactly those left to
	// their leases.
	held    map[*Message]uint64
	heldSeq uint64
	// testListWait, set only by tests, runs (under mu) when a drain
	// starts waiting for another one's list.
	testListWait func()
	taken        int            // messages taken and not given back, for Limit
	lastActive   time.Time      // under mu
	leases       map[string]int // lease id -> jobs not finished
	loopErr      error
	drainErr     error
	stopCh       chan struct{}
	done         chan struct{} // every goroutine of the loop returned
	over         chan struct{} // done, or abandoned by a drain
	overOnce     sync.Once
	unhook       []func() bool
	inflight     atomic.Int32
}

func newRun(c *Consumer, ctx context.Context) *run {
	q := &c.q
	req, _ := q.popRequest() // validated by Consume
	r := &run{
		h: q.h, req: req, group: groupName(req.Group), ackGroup: req.Group,
		each: c.each, batch: c.batch, lanes: c.each != nil || q.each,
		onSuccess: c.onSuccess, onError: c.onError, onSettled: c.onSettled,
		retry: q.retry, n: q.concurrency, limit: q.limit, idle: q.idle, renew: q.renew, lease: q.lease,
		drainTimeout: q.drainTimeout,
		current:      make(map[*job]struct{}),
		leases:       make(map[string]int),
		held:         make(map[*Message]uint64),
		stopCh:       make(chan struct{}),
		done:         make(chan struct{}),
		over:         make(chan struct{}),
		fetchers:     fetchersFor(q.concurrency, q.limit),
		lastActive:   time.Now(),
	}
	if r.drainTimeout == 0 {
		r.drainTimeout = r.h.defaultDrain()
	}
	r.userSettles = !q.autoAck || r.onSuccess != nil || r.onError != nil
	r.exact = r.h.exactLeases()
	r.ends = [2]context.Context{ctx, c.parent}
	r.cond = sync.NewCond(&r.mu)
	base := context.WithoutCancel(ctx)
	if c.parent != nil && c.parent != ctx {
		base = valuesOf{base, c.parent}
	}
	r.ackCtx = base
	r.popCtx, r.popCancel = context.WithCancel(base)
	hctx, hcancel := context.WithCancel(base)
	r.hctx, r.hcancel = context.WithValue(hctx, stopKey{}, r.stopCh), hcancel
	return r
}

func (r *run) start(ctx, parent context.Context) {
	r.h.loops().add(r)
	stop := func() { r.drain(time.Now().Add(r.drainTimeout), nil) }
	r.mu.Lock()
	r.unhook = append(r.unhook, context.AfterFunc(ctx, stop))
	if parent != nil {
		r.unhook = append(r.unhook, context.AfterFunc(parent, stop))
	}
	r.mu.Unlock()
	go func() {
		var wg sync.WaitGroup
		wg.Add(r.fetchers + r.n)
		for range r.fetchers {
			go func() { defer wg.Done(); r.fetch() }()
		}
		for range r.n {
			go func() { defer wg.Done(); r.work() }()
		}
		if r.renew > 0 {
			go r.renewLoop()
		}
		wg.Wait()
		// A stop gives back the jobs no worker took on its own goroutine
		// (a ctx's AfterFunc, Stop, Close): the loop is done, and Execute
		// returns, once they are given back and reported.
		r.mu.Lock()
		for r.giving > 0 {
			r.cond.Wait()
		}
		r.mu.Unlock()
		close(r.done)
		r.finish()
	}()
}

// interrupted reports whether the loop has been asked to stop: Stopping is
// closed, or a context whose end stops the loop has ended (its AfterFunc
// may not have run yet). A handler failure seen then is put down to the
// stop. It never turns false again.
func (r *run) interrupted() bool {
	select {
	case <-r.stopCh:
		return true
	default:
	}
	for _, ctx := range r.ends {
		if ctx != nil && ctx.Err() != nil {
			return true
		}
	}
	return false
}

// stopIfInterrupted makes the loop stop at once if it has been asked to,
// without waiting for the hook of an ended ctx to run: a handler that
// cancels the loop's ctx sees no further message started.
func (r *run) stopIfInterrupted() {
	if r.interrupted() {
		r.requestStop()
	}
}

// finish marks the loop over for its callers.
func (r *run) finish() {
	r.overOnce.Do(func() {
		r.popCancel()
		r.hcancel()
		close(r.over)
		r.h.loops().remove(r)
		r.mu.Lock()
		unhook := r.unhook
		r.mu.Unlock()
		for _, u := range unhook {
			u()
		}
	})
}

func (r *run) result() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drainErr != nil {
		return r.drainErr
	}
	return r.loopErr
}

// requestStop makes the loop take no more messages and gives back those
// not started.
func (r *run) requestStop() {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return
	}
	r.stopping = true
	close(r.stopCh)
	var rest []*Message
	for _, j := range r.pending {
		rest = append(rest, j.msgs[j.next:]...)
		r.leaseDone(j)
	}
	r.pending = nil
	r.giving++
	r.cond.Broadcast()
	r.mu.Unlock()
	r.popCancel()
	r.giveBack(rest)
	r.mu.Lock()
	r.giving--
	r.cond.Broadcast()
	r.mu.Unlock()
}

// drain stops the loop and waits for it until deadline or cancel, then
// abandons what is still running. It implements drainer. The loop's own
// drain timeout, counted from now, bounds deadline: whoever stops it
// (Stop, its ctx, the client's Close) waits no longer than that.
func (r *run) drain(deadline time.Time, cancel <-chan struct{}) error {
	if own := time.Now().Add(r.drainTimeout); own.Before(deadline) {
		deadline = own
	}
	r.requestStop()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-r.over:
	case <-t.C:
		r.abandon()
	case <-cancel:
		r.abandon()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drainErr
}

// abandon gives up on the running handlers: their outcomes will be
// discarded and their messages left to their leases. The loop sends no
// ack from now on; abandon waits for those already being written, so that
// the DrainError it makes lists exactly the messages left to their leases:
// those whose ack landed are not listed, those whose ack was refused,
// failed or never sent are.
func (r *run) abandon() {
	r.mu.Lock()
	if r.abandoned {
		if !r.listed && r.testListWait != nil {
			r.testListWait()
		}
		for !r.listed { // another drain is making the list
			r.cond.Wait()
		}
		r.mu.Unlock()
		return
	}
	if r.running == 0 && r.fetchers == 0 && len(r.current) == 0 {
		r.mu.Unlock()
		return
	}
	select {
	case <-r.done:
		r.mu.Unlock()
		return
	default:
	}
	r.abandoned = true
	r.mu.Unlock()
	r.hcancel()
	r.mu.Lock()
	for r.acking > 0 {
		r.cond.Wait()
	}
	if len(r.held) > 0 {
		left := make([]*Message, 0, len(r.held))
		for m := range r.held {
			left = append(left, m)
		}
		sort.Slice(left, func(a, b int) bool { return r.held[left[a]] < r.held[left[b]] })
		r.drainErr = &DrainError{Queue: r.req.Queue, Group: r.group, Unsettled: left}
	}
	r.listed = true
	r.cond.Broadcast()
	r.mu.Unlock()
	r.finish()
}

// hold records msgs, just taken, as messages the loop has to finish
// with. Under r.mu.
func (r *run) hold(msgs []*Message) {
	for _, m := range msgs {
		r.heldSeq++
		r.held[m] = r.heldSeq
	}
}

// let records that the loop is done with msgs: an ack of its own for them
// landed (landed), or they are released, given back or left to a handler
// that settles them. Once the loop is abandoned only a landed ack takes a
// message out of the list. Under r.mu.
func (r *run) let(msgs []*Message, landed bool) {
	if r.abandoned && !landed {
		return
	}
	for _, m := range msgs {
		delete(r.held, m)
	}
}

// letGo is let under r.mu's lock.
func (r *run) letGo(msgs []*Message, landed bool) {
	r.mu.Lock()
	r.let(msgs, landed)
	r.mu.Unlock()
}

// ackStart counts an AckBatch of the loop in flight; with gated, it
// refuses (false) once the loop was abandoned: nothing it then sends
// would be in the drain's list.
func (r *run) ackStart(gated bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gated && r.abandoned {
		return false
	}
	r.acking++
	return true
}

// ackEnd ends an AckBatch of the loop: under r.mu, it records what it
// settled with let, then wakes an abandon waiting for it.
func (r *run) ackEnd(settled func()) {
	r.mu.Lock()
	settled()
	r.acking--
	r.cond.Broadcast()
	r.mu.Unlock()
}

// maxFetchers bounds the goroutines of a loop that pop at once.
const maxFetchers = 4

// fetchersFor is how many goroutines of a loop with concurrency n and
// limit pop: one per handler up to maxFetchers, so that pops overlap one
// another and the handlers; one under a Limit, which each pop is sized
// against.
func fetchersFor(n, limit int) int {
	if limit > 0 {
		return 1
	}
	return max(1, min(n, maxFetchers))
}

// fetch pops whenever a handler is free, nothing is waiting for one and
// no pop already in flight is for it. Several run at once (fetchersFor).
func (r *run) fetch() {
	defer func() {
		r.mu.Lock()
		r.fetchers--
		r.cond.Broadcast()
		r.mu.Unlock()
	}()
	backoff := time.Duration(0) // after pops that failed with ErrUnavailable
	for {
		r.mu.Lock()
		for !r.stopping && (len(r.pending) > 0 || r.running+r.popping >= r.n || r.limit > 0 && r.taken >= r.limit && r.running > 0) {
			r.cond.Wait()
		}
		if r.stopping || r.limit > 0 && r.taken >= r.limit {
			r.mu.Unlock()
			return
		}
		req := r.req
		if r.limit > 0 {
			left := r.limit - r.taken
			switch {
			case req.Batch > 0:
				req.Batch = min(req.Batch, left)
			case !req.Autopilot:
				req.Batch = 1
			case left < 1000:
				req.Batch = left
			}
		}
		if r.idle > 0 {
			// Idle time counts only while no handler runs; a poll made
			// while one runs still looks again within r.idle.
			left := r.idle
			if r.running == 0 {
				left -= time.Since(r.lastActive)
				if left <= 0 {
					r.mu.Unlock()
					return
				}
			}
			timeout := req.Timeout
			if timeout == 0 {
				timeout = 30 * time.Second
			}
			req.Timeout = max(min(timeout, left), time.Millisecond)
		}
		r.popping++
		r.mu.Unlock()

		popped := r.h.clockNow()
		res, err := r.h.Pop(r.popCtx, req)
		r.mu.Lock()
		r.popping--
		r.cond.Broadcast()
		r.mu.Unlock()
		if err != nil {
			if r.popCtx.Err() != nil {
				return
			}
			if errors.Is(err, ErrUnavailable) {
				// The broker is out of reach for now (a remote client):
				// wait and pop again, up to unavailableBackoff apart.
				backoff = min(max(2*backoff, pollInterval), unavailableBackoff)
				r.h.logger().Warn("queen: consume: pop failed; popping again", "queue", r.req.Queue, "group", r.group, "in", backoff, "err", err)
				sleepCtx(r.popCtx, backoff)
				continue
			}
			r.mu.Lock()
			r.loopErr = err
			r.mu.Unlock()
			r.requestStop()
			return
		}
		backoff = 0
		if len(res.Messages) == 0 {
			if !req.Wait {
				wait := pollInterval
				if r.idle > 0 {
					r.mu.Lock() // workers and other fetchers write lastActive
					wait = min(wait, max(r.idle-time.Since(r.lastActive), time.Millisecond))
					r.mu.Unlock()
				}
				sleepCtx(r.popCtx, wait)
			}
			continue
		}
		jobs := r.split(res, popped)
		r.mu.Lock()
		r.hold(res.Messages)
		r.lastActive = time.Now()
		r.taken += len(res.Messages)
		if r.stopping {
			r.mu.Unlock()
			r.giveBack(res.Messages)
			return
		}
		r.pending = append(r.pending, jobs...)
		r.leases[res.LeaseID] += len(jobs)
		for range jobs {
			r.h.track(res.LeaseID)
		}
		r.cond.Broadcast()
		r.mu.Unlock()
	}
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// split cuts a pop into jobs.
func (r *run) split(res *PopResult, popped time.Time) []*job {
	if !r.lanes {
		return []*job{{msgs: res.Messages, leaseID: res.LeaseID}}
	}
	var jobs []*job
	byPart := make(map[string]*job)
	for _, m := range res.Messages {
		j := byPart[m.PartitionID]
		if j == nil {
			j = &job{leaseID: res.LeaseID, confirmed: popped}
			byPart[m.PartitionID] = j
			jobs = append(jobs, j)
		}
		j.msgs = append(j.msgs, m)
	}
	return jobs
}

// work runs jobs until the loop stops.
func (r *run) work() {
	// A job's acks are still being written when its handling ends: the
	// worker takes its next job meanwhile, and waits for them only once
	// the next job has been handled (or when it returns), so it never has
	// more than one job's acks in flight.
	var prev *job
	defer func() {
		if prev != nil {
			r.retire(prev)
		}
	}()
	for {
		r.mu.Lock()
		for len(r.pending) == 0 && r.fetchers > 0 && !r.stopping {
			r.cond.Wait()
		}
		if len(r.pending) == 0 || r.abandoned {
			r.mu.Unlock()
			return
		}
		j := r.pending[0]
		r.pending = r.pending[1:]
		r.running++
		r.current[j] = struct{}{}
		if len(r.pending) == 0 {
			r.cond.Broadcast() // the fetcher waits for pending to empty
		}
		r.mu.Unlock()

		if r.lanes {
			r.runLane(j)
		} else {
			r.runBatch(j)
		}
		if prev != nil {
			r.retire(prev)
		}
		prev = j
		r.endLane(j)
		r.mu.Lock()
		r.running--
		r.lastActive = time.Now()
		r.cond.Broadcast()
		r.mu.Unlock()
	}
}

// endLane starts writing the acks lane j still has queued, now that its
// handling is over; once they are written, j is forgotten.
func (r *run) endLane(j *job) {
	r.mu.Lock()
	j.over = true
	if j.timer != nil {
		j.timer.Stop()
		j.timer = nil
	}
	switch {
	case j.flushing: // sendAcks takes the rest and forgets j
	case len(j.queued) > 0:
		go r.sendAcks(j, 0)
	default:
		r.forgetJob(j)
	}
	r.mu.Unlock()
}

// retire waits until lane j's acks are written, writing those still
// queued itself, and forgets j.
func (r *run) retire(j *job) {
	r.flushAcks(j)
	r.mu.Lock()
	r.forgetJob(j)
	r.mu.Unlock()
}

// forgetJob ends j: it is no longer current and its lease no longer
// renewed for it. Under r.mu; once per job.
func (r *run) forgetJob(j *job) {
	if j.forgotten {
		return
	}
	j.forgotten = true
	delete(r.current, j)
	r.leaseDone(j)
	r.cond.Broadcast()
}

// leaseDone forgets one job of j's lease for renewals. Under r.mu.
func (r *run) leaseDone(j *job) {
	r.h.untrack(j.leaseID)
	if n, ok := r.leases[j.leaseID]; ok {
		if n <= 1 {
			delete(r.leases, j.leaseID)
		} else {
			r.leases[j.leaseID] = n - 1
		}
	}
}

// runLane handles one partition's messages in order, stopping at the
// first one no longer leased to the loop (its failure gave the rest back,
// or the lane's lease was lost). The acks of what it accepted may still be
// queued or being written when it returns (see work).
func (r *run) runLane(j *job) {
	for {
		r.stopIfInterrupted()
		r.mu.Lock()
		if r.abandoned || j.next >= len(j.msgs) {
			r.mu.Unlock()
			return
		}
		if r.stopping {
			rest := j.msgs[j.next:]
			j.next = len(j.msgs)
			r.mu.Unlock()
			// What was accepted is acked before the rest is given back:
			// giving back releases the partition.
			r.flushAcks(j)
			r.giveBack(rest)
			return
		}
		msg := j.msgs[j.next]
		j.next++
		stale := !r.exact && (len(j.queued) > 0 || j.flushing) && r.h.clockNow().Sub(j.confirmed) >= laneConfirm
		r.mu.Unlock()
		if stale {
			r.flushAcks(j)
		}

		switch r.h.leaseState(msg) {
		case leaseSettled: // the handler settled it ahead
			r.letGo([]*Message{msg}, true)
			continue
		case leaseLost:
			r.mu.Lock()
			rest := j.msgs[j.next-1:]
			j.next = len(j.msgs)
			r.mu.Unlock()
			r.flushAcks(j) // reported before the rest, in the lane's order
			r.release(rest)
			return
		}
		r.mu.Lock()
		j.cur = []*Message{msg}
		rest := j.msgs[j.next:]
		r.mu.Unlock()
		var back bool
		if r.userSettles {
			back = r.handle(nil, j.cur, rest)
		} else {
			back = r.handleInLane(j, msg, rest)
		}
		r.mu.Lock()
		j.cur = nil
		if back {
			j.next = len(j.msgs)
		}
		r.mu.Unlock()
		if back { // the rest comes back behind msg
			r.unclaim(rest, false)
			r.reportReleased(rest)
			return
		}
	}
}

// handleInLane runs the handler on msg, one of lane j's, when the loop
// acks by itself. An accepted message joins the lane's next AckBatch and
// the lane goes on at once; any other result is acked now, in one AckBatch
// behind the lane's accepted messages not yet acked, so the lane's acks
// keep its order. It reports whether rest comes back (see handle).
func (r *run) handleInLane(j *job, msg *Message, rest []*Message) (back bool) {
	if _, err := msg.Decode(); err != nil { // parked before the handler runs
		r.settle(append(r.takeAcks(j), handled{m: msg, err: Park(&DecodeError{Type: "map[string]any", Err: err})}), nil)
		return false
	}
	start := time.Now()
	err := r.call(j.cur)
	d := time.Since(start)
	r.mu.Lock()
	abandoned := r.abandoned
	r.mu.Unlock()
	if abandoned {
		r.report(j.cur, decision{outcome: OutcomeDiscarded}, err, true, nil, nil, d)
		return false
	}
	if err == nil {
		r.accepted(j, handled{m: msg, ran: true, d: d})
		return false
	}
	if r.interrupted() {
		r.requestStop() // see handle
	}
	return r.settle(append(r.takeAcks(j), handled{m: msg, err: err, ran: true, d: d}), rest)
}

// accepted queues h, accepted, for lane j's next AckBatch: the one being
// written takes it when it is done, or else a timer sends it after
// ackLinger.
func (r *run) accepted(j *job, h handled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j.queued = append(j.queued, h)
	if j.flushing || j.timer != nil {
		return
	}
	j.armed++
	armed := j.armed
	j.timer = time.AfterFunc(ackLinger, func() { r.sendAcks(j, armed) })
}

// sendAcks writes lane j's queued acks, one AckBatch after another, until
// none is queued; armed numbers the timer that called it (0 if none).
func (r *run) sendAcks(j *job, armed int) {
	r.mu.Lock()
	if armed != 0 && armed == j.armed {
		j.timer = nil
	}
	if j.flushing {
		r.mu.Unlock()
		return
	}
	j.flushing = true
	for len(j.queued) > 0 {
		batch := j.queued
		j.queued = nil
		r.mu.Unlock()
		r.settleLane(j, batch)
		r.mu.Lock()
	}
	j.flushing = false
	if j.over {
		r.forgetJob(j)
	}
	r.cond.Broadcast()
	r.mu.Unlock()
}

// takeAcks waits for lane j's AckBatch being written, if any, and takes
// the acks queued, which the caller then writes itself.
func (r *run) takeAcks(j *job) []handled {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j.timer != nil {
		j.timer.Stop()
		j.timer = nil
	}
	for j.flushing {
		r.cond.Wait()
	}
	q := j.queued
	j.queued = nil
	return q
}

// flushAcks writes lane j's queued acks and returns once none is left
// being written.
func (r *run) flushAcks(j *job) {
	if q := r.takeAcks(j); len(q) > 0 {
		r.settleLane(j, q)
	}
}

// settleLane acks hs, accepted messages of lane j, and moves j.confirmed
// to the sending time when every ack was taken.
func (r *run) settleLane(j *job, hs []handled) {
	sent := r.h.clockNow()
	if _, refused := r.settleAll(hs, nil); refused == 0 {
		r.mu.Lock()
		j.confirmed = sent
		r.mu.Unlock()
	}
}

// runBatch hands a whole pop to the batch handler.
func (r *run) runBatch(j *job) {
	r.stopIfInterrupted()
	r.mu.Lock()
	if r.stopping {
		j.next = len(j.msgs)
		r.mu.Unlock()
		r.giveBack(j.msgs)
		return
	}
	j.next, j.cur = len(j.msgs), j.msgs
	r.mu.Unlock()
	var live, lost []*Message
	for _, m := range j.msgs {
		switch r.h.leaseState(m) {
		case leaseHeld:
			live = append(live, m)
		case leaseLost:
			lost = append(lost, m)
		}
	}
	r.mu.Lock()
	j.cur = live
	r.mu.Unlock()
	r.release(lost)
	if len(live) > 0 {
		r.handle(j, live, nil)
	}
	r.mu.Lock()
	j.cur = nil
	r.mu.Unlock()
}

// handle runs the handler on msgs and settles them. rest are the messages
// of the lane behind msgs; handle reports whether they come back (msgs
// were given back, not settled for good). With j, a batch job, accepted
// messages are queued on j for their AckBatch instead (see work).
func (r *run) handle(j *job, msgs, rest []*Message) (back bool) {
	ok := msgs[:0:0]
	for _, m := range msgs {
		if _, err := m.Decode(); err != nil { // parked before the handler runs
			r.settle([]handled{{m: m, err: Park(&DecodeError{Type: "map[string]any", Err: err})}}, nil)
			continue
		}
		ok = append(ok, m)
	}
	if len(ok) == 0 {
		return false
	}
	start := time.Now()
	err := r.call(ok)
	d := time.Since(start)
	r.mu.Lock()
	abandoned := r.abandoned
	r.mu.Unlock()
	if abandoned {
		r.report(ok, decision{outcome: OutcomeDiscarded}, err, true, nil, nil, d)
		return false
	}
	if err != nil && r.interrupted() {
		// The stop caused this failure, and its context may have ended
		// before the loop's own hook ran: stop taking messages before the
		// message is given back, so the loop does not pop it again.
		r.requestStop()
	}
	if r.userSettles {
		return r.userSettle(ok, err, d, rest)
	}
	hs := make([]handled, len(ok))
	for i, m := range ok {
		hs[i] = handled{m: m, err: err, ran: true, d: d}
	}
	if j != nil && err == nil {
		r.mu.Lock()
		j.queued = append(j.queued, hs...)
		r.mu.Unlock()
		return false
	}
	return r.settle(hs, rest)
}

// call runs the handler, turning a panic into a *PanicError.
func (r *run) call(msgs []*Message) (err error) {
	r.inflight.Add(1)
	r.h.observe(Event{Kind: EventInFlight, Queue: r.req.Queue, Group: r.group, Count: 1})
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p}
		}
		r.inflight.Add(-1)
		r.h.observe(Event{Kind: EventInFlight, Queue: r.req.Queue, Group: r.group, Count: -1})
	}()
	if r.each != nil {
		return r.each(r.hctx, msgs[0])
	}
	return r.batch(r.hctx, msgs)
}

// callback runs an OnSuccess or OnError callback, recovering a panic.
func callback(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p}
		}
	}()
	return fn()
}

// userSettle is what follows a handler under AutoAck(false) or with
// callbacks: the handler or callbacks settle, and the loop settles as a
// failure whatever a failure left unsettled.
func (r *run) userSettle(msgs []*Message, herr error, d time.Duration, rest []*Message) (back bool) {
	for _, m := range msgs {
		var err error
		switch {
		case herr == nil && r.onSuccess != nil:
			err = callback(func() error { return r.onSuccess(r.hctx, m) })
		case herr == nil:
		case r.interrupted(): // not a failure: the loop gives it back
			err = herr
		case r.onError != nil:
			err = callback(func() error { return r.onError(r.hctx, m, herr) })
		default:
			err = herr
		}
		if err != nil && r.h.leaseState(m) == leaseHeld {
			back = r.settle([]handled{{m: m, err: err, ran: true, d: d}}, rest) || back
			continue
		}
		r.letGo([]*Message{m}, false)
		r.report([]*Message{m}, decision{outcome: OutcomeHandled}, herr, true, nil, nil, d)
	}
	return back
}

// renewLoop renews the leases of unfinished jobs every r.renew.
func (r *run) renewLoop() {
	t := time.NewTicker(r.renew)
	defer t.Stop()
	for {
		select {
		case <-r.over:
			return
		case <-t.C:
		}
		r.mu.Lock()
		ids := make([]string, 0, len(r.leases))
		for id := range r.leases {
			ids = append(ids, id)
		}
		r.mu.Unlock()
		d := r.lease
		if d == 0 {
			d = r.h.leaseFor(r.ackCtx, r.req.Queue)
		}
		for _, id := range ids {
			_, err := r.h.RenewLease(r.ackCtx, id, d)
			switch {
			case err == nil:
			case errors.Is(err, ErrNotFound), errors.Is(err, ErrLeaseExpired):
				r.h.lost(id)
				r.mu.Lock()
				delete(r.leases, id)
				r.mu.Unlock()
			case errors.Is(err, ErrClosed):
				return
			}
		}
	}
}
