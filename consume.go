package queen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The consume loop, from pop to ack. One message's way through a loop
// that acks by itself (AutoAck, no callbacks), in the order of the calls:
//
//  1. Consumer.Start builds a run (newRun) and starts it (run.start): its
//     fetchers (run.fetch, consume_fetch.go), its workers (run.work,
//     lane.go) and, with RenewLease, run.renewLoop.
//  2. run.fetch waits until a handler is free, pops (Client.Pop), and
//     run.split cuts the pop into lanes, one per partition (run.newLane).
//     run.hold notes each message as held (drain.go); the lanes join
//     run.pending.
//  3. run.work takes a lane and run.runLane handles its messages in order:
//     it checks that the loop is not stopping and that the message is
//     still leased to it, then run.handleInLane calls the handler
//     (run.call, consume_settle.go).
//  4. The handler accepts the message: the lane's ackBatcher (lane_acks.go)
//     queues it (ackBatcher.accept), and the lane goes on with its next
//     message. ackLinger later, or as soon as the lane's AckBatch in
//     flight is written, ackBatcher.send writes it with the others queued
//     in one AckBatch through run.writeAcks (consume_settle.go), which
//     turns each result into an ack (run.decide), sends it
//     (Client.AckBatch), lets go of what landed (run.let) and reports the
//     outcome (run.reportOutcome, Consumer.OnSettled).
//  5. Any other result is acked at once: run.handleInLane takes what the
//     lane has queued (ackBatcher.take) and run.ackHandled writes it in one
//     AckBatch with the message's own ack behind it. A message that comes
//     back (failed, retried) brings the rest of its lane back behind it:
//     run.runLane releases them unhandled (run.unclaim,
//     run.reportReleased).
//  6. Once the lane is handled, run.work ends it (run.endLane: its
//     ackBatcher sends what is left and forgets the lane once that is
//     written) and frees its handler slot, so a fetcher may pop for it;
//     then it waits for the acks of the lane it handled before
//     (run.retire), forgets that one (run.forgetLane) and takes the next.
//
// A batch handler's pop is one lane (run.runBatch, run.handle). Stopping
// (drain.go): run.requestStop takes no new message and gives back those
// not started (run.giveBack); run.drain waits for the running handlers up
// to the drain timeout, then run.abandon gives up on them and lists in a
// DrainError the messages still held.

// Handler handles one message. What it returns decides what happens to
// the message: nil accepts it, an error fails it, and [Retry], [Reject],
// [Fatal], [Park] and [InProgress] choose other outcomes. A panic is
// recovered and counts as a failure ([*PanicError]).
type Handler func(ctx context.Context, msg *Message) error

// BatchHandler handles a whole pop at once: nil accepts every message, an
// error applies its outcome to every message.
type BatchHandler func(ctx context.Context, msgs []*Message) error

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
// loop reads its answer before going on. A worker sends a run's last acks
// as soon as it has handled the run, and its next run is popped and taken
// while they are written; it waits for them after that next run. So a
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
// such if fn left it unsettled. fn is not called for a handler that
// returns after a drain gave up on the loop (see [DrainError]). Set it
// before the loop runs.
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
// that message back (see [Stopping]), nor once a drain gave up on the
// loop (see [DrainError]). Set it before the loop runs.
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

// run is one execution of a Consumer. Its state is grouped by concern:
// loopConfig is fixed when it starts, loopContexts are the contexts it
// hands out, and under mu, schedule is what its fetchers and workers share
// (consume_fetch.go, lane.go) and stopState is how far it is from its end
// (drain.go). Each lane's acks are the lane's own (ackBatcher).
type run struct {
	loopConfig
	loopContexts

	mu sync.Mutex
	schedule
	stopState

	done     chan struct{} // every goroutine of the loop returned
	over     chan struct{} // done, or abandoned by a drain
	overOnce sync.Once
	inflight atomic.Int32 // handlers running, for Consumer.InFlight
}

// loopConfig is what a run was started with; it does not change.
type loopConfig struct {
	h            host
	req          PopRequest
	group        string // group name for events
	ackGroup     string // group for acks ("" in queue mode)
	each         Handler
	batch        BatchHandler
	byPartition  bool // split pops into a lane per partition, one message per call
	userSettles  bool // the handler or callbacks settle (AutoAck(false), OnSuccess, OnError)
	exact        bool // the host's leaseState is exact (see host.exactLeases)
	onSuccess    func(ctx context.Context, msg *Message) error
	onError      func(ctx context.Context, msg *Message, err error) error
	onSettled    func(Settlement)
	retry        *RetryPolicy
	n            int // handlers at once (Concurrency)
	limit        int
	idle         time.Duration
	renew        time.Duration
	lease        time.Duration
	drainTimeout time.Duration
}

// loopContexts are the contexts of a run.
type loopContexts struct {
	popCtx    context.Context // ends when the loop is asked to stop
	popCancel context.CancelFunc
	hctx      context.Context // handlers' ctx: ends if a drain runs out of time
	hcancel   context.CancelFunc
	ackCtx    context.Context // never ends: settling outlives a stop
	// ends are the contexts whose end stops the loop (the ctx given to
	// Start or Execute, and the one given to Consume); only their Err is
	// read, to tell a failure caused by the stop.
	ends [2]context.Context
}

func newRun(c *Consumer, ctx context.Context) *run {
	q := &c.q
	req, _ := q.popRequest() // validated by Consume
	r := &run{
		loopConfig: loopConfig{
			h: q.h, req: req, group: groupName(req.Group), ackGroup: req.Group,
			each: c.each, batch: c.batch, byPartition: c.each != nil || q.each,
			onSuccess: c.onSuccess, onError: c.onError, onSettled: c.onSettled,
			retry: q.retry, n: q.concurrency, limit: q.limit, idle: q.idle, renew: q.renew, lease: q.lease,
			drainTimeout: q.drainTimeout,
		},
		schedule: schedule{
			current:    make(map[*lane]struct{}),
			leases:     make(map[string]int),
			fetchers:   fetchersFor(q.concurrency, q.limit),
			lastActive: time.Now(),
		},
		stopState: stopState{
			held:     make(map[*Message]uint64),
			stopCh:   make(chan struct{}),
			gaveBack: make(chan struct{}),
			listed:   make(chan struct{}),
		},
		done: make(chan struct{}),
		over: make(chan struct{}),
	}
	if r.drainTimeout == 0 {
		r.drainTimeout = r.h.defaultDrain()
	}
	r.userSettles = !q.autoAck || r.onSuccess != nil || r.onError != nil
	r.exact = r.h.exactLeases()
	r.ends = [2]context.Context{ctx, c.parent}
	r.canPop.L, r.hasWork.L, r.acksLanded.L = &r.mu, &r.mu, &r.mu
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

// start runs the loop's goroutines: its fetchers, its workers and, with
// RenewLease, renewLoop.
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
		// A stop gives back the lanes no worker took on its own goroutine
		// (a ctx's AfterFunc, Stop, Close): the loop is done, and Execute
		// returns, once they are given back and reported.
		r.mu.Lock()
		stopping := r.stopping
		r.mu.Unlock()
		if stopping {
			<-r.gaveBack
		}
		close(r.done)
		r.finish()
	}()
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
