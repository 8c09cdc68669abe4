package queen

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenlite/queen/internal/clientrt"
)

func init() {
	clientrt.New = func(c any, o clientrt.Options) any { return newClientRuntime(c.(Client), o) }
}

// Client is the API an application and the consume loop use: pushes, pops,
// acks, lease renewals, transactions, queue configuration, seeks, reads by
// offset, the dead-letter and parked stores, and statistics. [*Broker]
// implements it in process; package remote implements it over HTTP,
// against cmd/queen, any server mounting package httpapi, or Queen's own
// server. Code written against Client runs on either by changing the one
// call that builds it:
//
//	var c queen.Client = broker              // in process: queen.Open(...)
//	c, err := remote.Dial(url, nil)          // over HTTP
//	err = c.Queue("orders").Group("billing").Consume(ctx, handle).Execute(ctx)
//
// The builder ([Client.Queue]), the consume loop ([QueueBuilder.Consume]),
// transactions ([Client.Transaction]) and [Admin] are written once, on top
// of these methods. A method a backend cannot serve answers
// [ErrUnsupported]. Every method is safe for concurrent use.
//
// Client is implemented by this module's types, [*Broker] and package
// remote's client.
type Client interface {
	// Push stores messages; see [Broker.Push].
	Push(ctx context.Context, items []PushItem) ([]PushResult, error)
	// Pop leases messages for a consumer group; see [Broker.Pop].
	Pop(ctx context.Context, req PopRequest) (*PopResult, error)
	// Ack settles one delivered message; see [Broker.Ack].
	Ack(ctx context.Context, msg *Message, ok bool, opts AckOptions) (*AckResult, error)
	// AckBatch settles many messages; see [Broker.AckBatch].
	AckBatch(ctx context.Context, items []AckItem) ([]AckResult, error)
	// Renew extends the lease msg was delivered under by the queue's
	// LeaseTime; see [Broker.Renew].
	Renew(ctx context.Context, msg *Message) (time.Time, error)
	// RenewLease extends a lease by d; see [Broker.RenewLease].
	RenewLease(ctx context.Context, leaseID string, d time.Duration) (LeaseRenewal, error)
	// ExecTransaction runs acks and pushes all or nothing; see
	// [Broker.ExecTransaction].
	ExecTransaction(ctx context.Context, ops []TxOp) (*TxResult, error)

	// ConfigureQueue creates or reconfigures a queue; see
	// [Broker.ConfigureQueue].
	ConfigureQueue(ctx context.Context, name string, cfg QueueConfig) (*QueueInfo, error)
	// DescribeQueue describes a queue; see [Broker.DescribeQueue].
	DescribeQueue(ctx context.Context, name string) (*QueueInfo, error)
	// DeleteQueue deletes a queue and everything in it; see
	// [Broker.DeleteQueue].
	DeleteQueue(ctx context.Context, name string) (existed bool, err error)
	// Fetch reads a partition by offset; see [Broker.Fetch].
	Fetch(ctx context.Context, queue, partition string, from int64, limit int) (*FetchResult, error)
	// FetchPartitions reads several partitions by offset at once; see
	// [Broker.FetchPartitions].
	FetchPartitions(ctx context.Context, req FetchRequest) ([]PartitionRead, error)
	// OffsetForTime finds the first offset at or after a time; see
	// [Broker.OffsetForTime].
	OffsetForTime(ctx context.Context, queue, partition string, t time.Time) (TimeOffset, error)
	// GroupPositions reads a group's position per partition; see
	// [Broker.GroupPositions].
	GroupPositions(ctx context.Context, group string, parts []PartitionRef) ([]Position, error)
	// SetPosition sets a group's position in a partition; see
	// [Broker.SetPosition].
	SetPosition(ctx context.Context, pos Position) error
	// SeekGroup moves a group's cursors on a queue; see [Broker.SeekGroup].
	SeekGroup(ctx context.Context, group, queue string, opts SeekOptions) (*SeekResult, error)
	// SeekPartition moves a group's cursor on one partition; see
	// [Broker.SeekPartition].
	SeekPartition(ctx context.Context, group, queue, partition string, opts SeekOptions) (*SeekResult, error)

	// DeadLetters lists dead letters; see [Broker.DeadLetters].
	DeadLetters(ctx context.Context, f LetterFilter) (*LetterPage, error)
	// ReplayDeadLetter pushes a copy of a dead letter back; see
	// [Broker.ReplayDeadLetter].
	ReplayDeadLetter(ctx context.Context, id string) (*ReplayResult, error)
	// DeleteDeadLetter removes a dead letter; see [Broker.DeleteDeadLetter].
	DeleteDeadLetter(ctx context.Context, id string) error
	// ParkedMessages lists parked messages; see [Broker.ParkedMessages].
	ParkedMessages(ctx context.Context, f LetterFilter) (*LetterPage, error)
	// ReplayParked pushes a copy of a parked message back; see
	// [Broker.ReplayParked].
	ReplayParked(ctx context.Context, id string) (*ReplayResult, error)
	// DeleteParked removes a parked message; see [Broker.DeleteParked].
	DeleteParked(ctx context.Context, id string) error

	// QueueStats describes a queue, its partitions and cursors; see
	// [Broker.QueueStats].
	QueueStats(ctx context.Context, name string) (*QueueStats, error)
	// ListQueues describes every queue; see [Broker.ListQueues].
	ListQueues(ctx context.Context) ([]QueueStats, error)
	// ListGroups describes the consumer groups f selects; see
	// [Broker.ListGroups].
	ListGroups(ctx context.Context, f GroupFilter) ([]GroupStats, error)
	// DeleteGroup removes a group's cursors; see [Broker.DeleteGroup].
	DeleteGroup(ctx context.Context, group, queue string, deleteMetadata bool) (int, error)
	// SetGroupSubscription moves a group's start point; see
	// [Broker.SetGroupSubscription].
	SetGroupSubscription(ctx context.Context, group string, from time.Time) (int, error)

	// Queue starts a builder on the named queue; see [Broker.Queue].
	Queue(name string) *QueueBuilder
	// Transaction starts a transaction builder; see [Broker.Transaction].
	Transaction() *Transaction
	// Admin returns the administrative calls under Queen's names; see
	// [Broker.Admin].
	Admin() *Admin

	// Ping reports whether the backend can serve; see [Broker.Ping].
	Ping(ctx context.Context) error
	// Close drains the consume loops started on the client (see
	// [Consumer.Stop]) and releases what the client holds. Later calls
	// return [ErrClosed]. Close is idempotent.
	Close() error
}

var _ Client = (*Broker)(nil)

// host is what builders, consume loops and transactions need of their
// backend beyond the operations of [Client]. [*Broker] is its own host,
// with exact answers from its memory; a clientRuntime hosts any other
// Client.
type host interface {
	Client
	// clockNow is the time retry policies measure message ages against.
	clockNow() time.Time
	// defaultDrain is the drain timeout of a loop that sets none.
	defaultDrain() time.Duration
	// loops tracks running consumers and unused deliveries.
	loops() *consumerSet
	// leaseState tells whether msg is still leased to its delivery.
	leaseState(msg *Message) int
	// exactLeases reports that leaseState knows at once when a lease is
	// lost (its expiry included), not only once an ack or renewal was
	// refused.
	exactLeases() bool
	// leaseFor is the lease a renewal of queue's messages asks for.
	leaseFor(ctx context.Context, queue string) time.Duration
	// observe reports a loop event.
	observe(e Event)
	// logger receives the loop's warnings.
	logger() *slog.Logger
	// usableErr is ErrClosed once the backend is closed or closing: a
	// loop started then would not be drained.
	usableErr() error
	// track and untrack bracket a consume loop's interest in a lease;
	// lost records that a renewal found the lease gone.
	track(leaseID string)
	untrack(leaseID string)
	lost(leaseID string)
}

// The Broker hosts its own loops.

func (b *Broker) clockNow() time.Time                                { return b.clock.Now() }
func (b *Broker) defaultDrain() time.Duration                        { return b.opts.DrainTimeout }
func (b *Broker) loops() *consumerSet                                { return &b.consumer }
func (b *Broker) leaseFor(_ context.Context, q string) time.Duration { return b.leaseTimeOf(q) }
func (b *Broker) logger() *slog.Logger                               { return b.log }
func (b *Broker) track(string)                                       {}
func (b *Broker) untrack(string)                                     {}
func (b *Broker) lost(string)                                        {}
func (b *Broker) exactLeases() bool                                  { return true }

func (b *Broker) usableErr() error { return b.startErr() }

// clientRuntime is what the builders, consume loops and transactions of
// a [Client] other than [*Broker] share: the loops running (so closing the
// client drains them), the deliveries they gave back unhandled (so a
// [RetryPolicy] counts only real attempts), and the messages settled
// through the client (so a loop does not hand its handler a message the
// handler already settled). Package remote makes one through
// internal/clientrt, returns its Queue, Transaction and Admin from its
// own, reports every ack it sends with Settled, and calls Close from its
// Close.
type clientRuntime struct {
	c      Client
	drain  time.Duration
	log    *slog.Logger
	clock  Clock
	obs    Observer
	closed atomic.Bool
	set    consumerSet
	book   leaseBook
}

// newClientRuntime returns the runtime of c.
func newClientRuntime(c Client, o clientrt.Options) *clientRuntime {
	rt := &clientRuntime{c: c, drain: 20 * time.Second, log: slog.New(slog.DiscardHandler), clock: systemClock{}, obs: nopObserver{}}
	if o.DrainTimeout > 0 {
		rt.drain = o.DrainTimeout
	}
	if o.Logger != nil {
		rt.log = o.Logger
	}
	if o.Clock != nil {
		rt.clock = o.Clock
	}
	if o.Observer != nil {
		rt.obs = o.Observer.(Observer)
	}
	rt.book.leases = make(map[string]*leaseNotes)
	return rt
}

// Now returns the time on the runtime's clock (clientrt.Options.Clock).
func (rt *clientRuntime) Now() time.Time { return rt.clock.Now() }

// Queue starts a builder on the named queue of the runtime's client, with
// the defaults of [Broker.Queue].
func (rt *clientRuntime) Queue(name string) *QueueBuilder {
	return newQueueBuilder(runtimeHost{rt.c, rt}, name)
}

// Transaction starts a transaction builder on the runtime's client.
func (rt *clientRuntime) Transaction() *Transaction { return &Transaction{c: rt.c} }

// Admin returns the administrative calls of the runtime's client.
func (rt *clientRuntime) Admin() *Admin { return &Admin{c: rt.c} }

// Settled records acks the client sent and their results (nil results
// mean the call failed and nothing is recorded), so that consume loops see
// which of their messages a handler settled ahead of them, and which were
// given back by a failed or retried ack.
func (rt *clientRuntime) Settled(items []AckItem, results []AckResult) {
	if len(results) != len(items) {
		return
	}
	rt.book.settled(items, results)
}

// Close drains the consume loops running on the runtime, within
// clientrt.Options.DrainTimeout in total, and makes later loops refuse to
// start with [ErrClosed]. It returns what the drains left unsettled, as
// [*DrainError]s joined. Close is idempotent.
func (rt *clientRuntime) Close() error {
	rt.closed.Store(true)
	return rt.set.closeAll(rt.drain)
}

// runtimeHost is the host of a Client other than *Broker.
type runtimeHost struct {
	Client
	rt *clientRuntime
}

func (h runtimeHost) clockNow() time.Time         { return h.rt.clock.Now() }
func (h runtimeHost) defaultDrain() time.Duration { return h.rt.drain }
func (h runtimeHost) loops() *consumerSet         { return &h.rt.set }
func (h runtimeHost) leaseState(m *Message) int   { return h.rt.book.state(m) }
func (h runtimeHost) exactLeases() bool           { return false }
func (h runtimeHost) logger() *slog.Logger        { return h.rt.log }
func (h runtimeHost) track(id string)             { h.rt.book.track(id) }
func (h runtimeHost) untrack(id string)           { h.rt.book.untrack(id) }
func (h runtimeHost) lost(id string)              { h.rt.book.lose(id) }

func (h runtimeHost) observe(e Event) {
	if e.Kind == EventInFlight || e.Kind == EventConsume {
		h.rt.obs.Observe(e)
	}
}

func (h runtimeHost) usableErr() error {
	if h.rt.closed.Load() {
		return ErrClosed
	}
	return nil
}

// leaseFor asks the backend for the queue's LeaseTime: 60 s when it
// cannot tell.
func (h runtimeHost) leaseFor(ctx context.Context, queue string) time.Duration {
	info, err := h.DescribeQueue(ctx, queue)
	if err != nil || info.Config.LeaseTime <= 0 {
		return DefaultLeaseTime
	}
	return info.Config.LeaseTime
}

// leaseBook follows, for a clientRuntime, the leases its consume loops hold:
// which of their messages were settled through the client, which
// partitions a failed or retried ack gave back, and which leases a
// renewal found gone. Leases no loop tracks are not recorded.
type leaseBook struct {
	mu     sync.Mutex
	leases map[string]*leaseNotes
}

type leaseNotes struct {
	refs     int
	gone     bool
	settled  map[deliveryKey]bool
	gaveBack map[string]bool // partition ids
}

func (lb *leaseBook) track(id string) {
	if id == "" {
		return
	}
	lb.mu.Lock()
	n := lb.leases[id]
	if n == nil {
		n = &leaseNotes{settled: make(map[deliveryKey]bool), gaveBack: make(map[string]bool)}
		lb.leases[id] = n
	}
	n.refs++
	lb.mu.Unlock()
}

func (lb *leaseBook) untrack(id string) {
	lb.mu.Lock()
	if n := lb.leases[id]; n != nil {
		if n.refs--; n.refs <= 0 {
			delete(lb.leases, id)
		}
	}
	lb.mu.Unlock()
}

func (lb *leaseBook) lose(id string) {
	lb.mu.Lock()
	if n := lb.leases[id]; n != nil {
		n.gone = true
	}
	lb.mu.Unlock()
}

func (lb *leaseBook) settled(items []AckItem, results []AckResult) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for i := range items {
		it, res := &items[i], &results[i]
		n := lb.leases[it.LeaseID]
		if n == nil || !res.Success {
			switch {
			case n == nil:
			case errors.Is(res.Err, ErrAlreadySettled): // settled before, by anyone
				n.settled[deliveryKey{it.PartitionID, "", it.TransactionID}] = true
			case errors.Is(res.Err, ErrLeaseExpired):
				n.gone = true
			}
			continue
		}
		st := it.Status
		switch {
		case res.DeadLettered, res.Parked, st == AckDLQ, st == AckPark, st == AckCompleted, st == "", st == "success":
			n.settled[deliveryKey{it.PartitionID, "", it.TransactionID}] = true
		default: // failed with budget left, retry: the rest of the partition comes back
			n.gaveBack[it.PartitionID] = true
		}
	}
}

// state is leaseState for a clientRuntime: lost once the lease is known gone or
// its partition was given back, settled once acked through the client,
// held otherwise (the backend refuses a late ack; the loop then reports
// the message released).
func (lb *leaseBook) state(m *Message) int {
	if m.LeaseID == "" {
		return leaseLost
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	n := lb.leases[m.LeaseID]
	switch {
	case n == nil:
		return leaseHeld
	case n.settled[deliveryKey{m.PartitionID, "", m.TransactionID}]:
		return leaseSettled
	case n.gone, n.gaveBack[m.PartitionID]:
		return leaseLost
	}
	return leaseHeld
}
