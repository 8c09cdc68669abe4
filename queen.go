package queen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
)

// Durability selects what a successful write survives.
type Durability int

const (
	// SyncEveryCommit makes every write call (push, ack, transaction, ...)
	// return only after the storage transaction that holds it has been
	// fsynced. Survives a process crash and a power loss. Concurrent writes
	// share one transaction and one fsync (group commit). The default.
	SyncEveryCommit Durability = iota

	// SyncNever returns once the write is committed to Badger's memory-mapped
	// write-ahead log, without fsync. Survives a process crash (kill -9),
	// because the operating system still holds the pages; a power loss or
	// kernel crash can lose the writes of the last few seconds.
	SyncNever

	// SyncPushes fsyncs, before they return, the writes that create or
	// remove records (pushes, transactions, dead-lettering and parking,
	// group creation, queue and message administration), as
	// SyncEveryCommit does; writes of consumer positions only (acks that
	// settle messages without dead-lettering or parking them, and the
	// cursor moves of autoAck and conflating pops) return once committed to
	// Badger's write-ahead log, as under SyncNever, and are fsynced by a
	// background sync at most [Options.AckSyncDelay] later, by the next
	// fsynced write, or by Close, whichever comes first.
	//
	// A process crash (kill -9) loses nothing that returned. A power loss
	// or kernel crash loses no confirmed message, but can undo acks and
	// cursor moves of the last AckSyncDelay: their messages are delivered
	// again (at-least-once holds, as with a consumer that crashed before
	// acking). One more case can undo an older ack: when Badger switched to
	// a new memtable after the ack, the ack's log is synced when Badger
	// writes that memtable to a table file (in the background, normally
	// within a second), not by a later fsync, which covers only the current
	// log. Consumers that ack one message at a time then no longer wait
	// for an fsync per ack.
	//
	// A database given to [OpenDB] opened with Badger's SyncWrites syncs
	// every commit, so this mode then behaves as SyncEveryCommit.
	SyncPushes
)

// String names the mode.
func (d Durability) String() string {
	switch d {
	case SyncEveryCommit:
		return "sync-every-commit"
	case SyncNever:
		return "sync-never"
	case SyncPushes:
		return "sync-pushes"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// SubscriptionMode says where a new consumer group starts reading.
type SubscriptionMode string

const (
	// SubscriptionModeNew starts a new group after the messages that exist at
	// its first pop: it reads only what is pushed from then on.
	SubscriptionModeNew SubscriptionMode = "new"
	// SubscriptionModeAll starts a new group at the oldest retained message.
	SubscriptionModeAll SubscriptionMode = "all"
	// SubscriptionModeNewOnly is an alias of [SubscriptionModeNew].
	SubscriptionModeNewOnly SubscriptionMode = "new-only"
)

// QueueModeGroup is the consumer group a pop or ack uses when it names
// none: a plain work queue where each message goes to one worker.
const QueueModeGroup = "__QUEUE_MODE__"

// DefaultPartition is the partition a push uses when it names none.
const DefaultPartition = "Default"

// Clock tells the broker the time: the "now" of leases, retry delays,
// delayed processing, window buffers, retention and message timestamps.
// Tests inject a fake one to move that time without sleeping; package
// [github.com/queenlite/queen/queentest] has one. A Clock that is not a
// [SignalingClock] is looked at again at least every second of real time,
// so a waiting pop sees a deadline it passed within a second.
type Clock interface {
	Now() time.Time
}

// SignalingClock is a [Clock] that tells when it moves, for clocks that do
// not follow real time (fakes in tests). The broker then wakes its timers
// (lease expiry, retry delays, delayed messages, window buffers) when the
// clock moves, so a pop waiting for such a deadline returns as soon as the
// clock passes it, and stops looking at real time: a SignalingClock whose
// Now changes without Changed firing leaves waiting pops asleep until
// something else wakes them (a push, their Timeout).
type SignalingClock interface {
	Clock
	// Changed returns a channel that is closed the next time the clock
	// moves, after Changed returned. It must be safe for concurrent use.
	// The broker calls Changed before it reads Now, so a move between the
	// two is not missed.
	Changed() <-chan struct{}
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Options configures a [Broker]. A nil *Options and zero fields mean the
// defaults.
type Options struct {
	// InMemory keeps everything in memory (Badger's in-memory mode); the dir
	// given to [Open] must be empty. Meant for tests.
	InMemory bool

	// Durability is what a successful write survives. Defaults to
	// [SyncEveryCommit].
	Durability Durability

	// AckSyncDelay is, under [SyncPushes], the longest an ack (or another
	// write of consumer positions only) stays committed without fsync:
	// the background sync runs at most this long after such a commit.
	// From 1 ms to 10 s; ignored under the other modes. Defaults to
	// 100 ms.
	AckSyncDelay time.Duration

	// DefaultSubscriptionMode is where a new named group starts when its
	// first pop says nothing. Defaults to [SubscriptionModeNew]: the group
	// skips what the queue holds when it joins, which the broker reports
	// ([EventGroupJoined], with the count) and logs at Info level.
	DefaultSubscriptionMode SubscriptionMode

	// EncryptionKey is the 32-byte AES-256 key used for queues configured
	// with EncryptionEnabled. Defaults to none: enabling encryption on a
	// queue is then refused.
	EncryptionKey []byte

	// Logger receives the broker's few log lines (storage trouble,
	// background job failures, at Info a group that joined past existing
	// messages). Defaults to discarding them.
	Logger *slog.Logger

	// Clock is the time source (see [Clock] and [SignalingClock]).
	// Defaults to the system clock.
	Clock Clock

	// MaintenanceInterval is how often retention, completed-retention and
	// max-wait eviction run. Defaults to 10 seconds.
	MaintenanceInterval time.Duration

	// GCInterval is how often Badger's value log is garbage collected so
	// disk space is given back. Defaults to 5 minutes; ignored in memory.
	GCInterval time.Duration

	// DrainTimeout bounds how long [Broker.Close] waits for running
	// consumers (see [Consumer]) to finish their handlers, in total: the
	// loops drain at once, side by side, each for no longer than its own
	// [QueueBuilder.DrainTimeout] (which defaults to this) nor than what is
	// left of this bound. What a loop leaves unsettled when its time is up
	// is reported by Close as a [*DrainError], as [Consumer.Stop] reports
	// it. Defaults to 20 seconds.
	DrainTimeout time.Duration

	// Observer receives counts and durations. Defaults to none.
	Observer Observer

	// MemoryBudget is roughly how many bytes the broker's storage may keep
	// in memory: Badger's memtables (write buffers, each allocated whole)
	// and its table sizes are derived from it (tables are uncompressed and
	// read from their mapped files: there is no block cache), and so are
	// the largest storage transaction and, in memory, the largest payload
	// (see [Broker.PayloadLimit]). It bounds the engine, not the process:
	// the broker's own state (queues, partitions, leases, waiting pops) and
	// the Go runtime's garbage-collection headroom (GOGC) come on top, so
	// with GOGC=100 a busy process may reach about twice the budget. On
	// disk, Badger's tables and logs are memory-mapped files: the pages it
	// touches count in RSS too, but the kernel can reclaim them. In memory
	// the stored data itself lives in the heap, beyond the budget.
	// docs/memory.md has a table of throughput and peak RSS per budget.
	// Defaults to [DefaultMemoryBudget] on disk and
	// [DefaultInMemoryBudget] with InMemory; must be between
	// [MinMemoryBudget] and [MaxMemoryBudget]. Ignored by [OpenDB], whose
	// caller sized the database.
	MemoryBudget int64

	// lockWait, when set, is what Open and Inspect do between their tries
	// of a directory whose lock is held, instead of sleeping (tests set it
	// with WithLockWaitForTest).
	lockWait func(attempt int)
}

func (o *Options) withDefaults() (Options, error) {
	var out Options
	if o != nil {
		out = *o
	}
	switch out.Durability {
	case SyncEveryCommit, SyncNever, SyncPushes:
	default:
		return out, argErr("Options.Durability", "unknown value %d", int(out.Durability))
	}
	switch d := out.AckSyncDelay; {
	case d == 0:
		out.AckSyncDelay = DefaultAckSyncDelay
	case d < MinAckSyncDelay || d > MaxAckSyncDelay:
		return out, argErr("Options.AckSyncDelay", "must be from %s to %s, not %s", MinAckSyncDelay, MaxAckSyncDelay, d)
	}
	switch out.DefaultSubscriptionMode {
	case "":
		out.DefaultSubscriptionMode = SubscriptionModeNew
	case SubscriptionModeNew, SubscriptionModeNewOnly:
		out.DefaultSubscriptionMode = SubscriptionModeNew
	case SubscriptionModeAll:
	default:
		return out, argErr("Options.DefaultSubscriptionMode", "must be %q or %q, not %q", SubscriptionModeNew, SubscriptionModeAll, out.DefaultSubscriptionMode)
	}
	if n := len(out.EncryptionKey); n != 0 && n != 32 {
		return out, argErr("Options.EncryptionKey", "must be 32 bytes, not %d", n)
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Clock == nil {
		out.Clock = systemClock{}
	}
	if out.MaintenanceInterval < 0 || out.GCInterval < 0 || out.DrainTimeout < 0 {
		return out, argErr("Options", "intervals must not be negative")
	}
	if out.MaintenanceInterval == 0 {
		out.MaintenanceInterval = 10 * time.Second
	}
	if out.GCInterval == 0 {
		out.GCInterval = 5 * time.Minute
	}
	if out.DrainTimeout == 0 {
		out.DrainTimeout = 20 * time.Second
	}
	if out.Observer == nil {
		out.Observer = nopObserver{}
	}
	switch mb := out.MemoryBudget; {
	case mb == 0 && out.InMemory:
		out.MemoryBudget = DefaultInMemoryBudget
	case mb == 0:
		out.MemoryBudget = DefaultMemoryBudget
	case mb < MinMemoryBudget || mb > MaxMemoryBudget:
		return out, argErr("Options.MemoryBudget", "must be between %d (8 MiB) and %d (1 TiB) bytes, not %d", int64(MinMemoryBudget), int64(MaxMemoryBudget), mb)
	}
	return out, nil
}

// Broker is an embedded message broker: partitioned queues stored in
// Badger, read by consumer groups under leases. All methods are safe for
// concurrent use, Close included: a call racing Close either completes or
// returns an error matching [ErrClosed] (see [Broker.Close]).
type Broker struct {
	db    *badger.DB
	ownDB bool
	opts  Options
	clock Clock
	log   *slog.Logger
	obs   Observer

	mu        sync.Mutex
	delMu     sync.Mutex // serialises message deletes and retention
	queues    map[string]*queue
	parts     []*partition // by internal id; nil for deleted
	leases    map[string]*lease
	expired   expiredLeases        // recently expired lease ids, for RenewLease
	queueWait map[string]*waitList // pops waiting for a queue to be created
	early     map[earlyPop]int64   // see notePopBeforeQueue
	closing   bool                 // Close has begun (consumers draining)
	closed    bool                 // Close refuses calls: calls counts callsShut
	failed    error                // a storage failure that left memory and disk apart

	// calls counts the exported calls in progress (see enter), plus
	// callsShut once Close refuses new ones. callsLeft is signalled when
	// the last call leaves after that; closeDone is closed when Close ends.
	calls     atomic.Int64
	callsLeft chan struct{}
	closeDone chan struct{}

	callWait time.Duration // closeCallWait; shorter in tests

	w        *writer
	timers   timerWheel
	stop     chan struct{}
	bg       sync.WaitGroup
	consumer consumerSet
	sweeps   []func() error // unfinished queue deletions found by load
	counters counters
	maint    atomic.Bool // maintenance mode: pops claim nothing (see SetMaintenanceMode)
	// fetchWatch is closed by the next publish of pushed messages (and by
	// Close); nil while no FetchPartitions call waits (see appendWatch).
	fetchWatch   chan struct{}
	fetchWaiting atomic.Int32 // FetchPartitions calls waiting now (tests read it, see waiting)

	qcounters queueTable // per-queue counters, for dashboards (see QueueCounters)

	opened     time.Time   // on the broker's clock, for Facts
	storeID    string      // the format record's id, for Facts (see storeIDOf)
	lim        storeLimits // sizes of storage transactions (see limitsOf)
	maxPayload int         // largest payload the database stores (see payloadLimit)
	payloadIn  string      // where it stores them, for errors: "on disk" or "in memory"
}

// Open opens (creating if needed) a broker stored in dir. With
// Options.InMemory, dir must be "" and nothing touches the disk. A
// directory already open, in this process or another, is [ErrLocked],
// after a quarter of a second of retries (a lock just let go can be held
// for milliseconds by a subprocess being started).
func Open(dir string, opts *Options) (*Broker, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	bo, err := badgerOptions(dir, o)
	if err != nil {
		return nil, err
	}
	db, err := openAfterKill(bo, o.lockWait, o.Logger)
	if errors.Is(err, errLockHeld) {
		return nil, fmt.Errorf("%w: %s is open in another broker", ErrLocked, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("queen: open %s: %w", dir, err)
	}
	b, err := newBroker(db, o)
	if err != nil {
		db.Close()
		return nil, err
	}
	b.ownDB = true
	return b, nil
}

// BadgerOptions returns the Badger options [Open] would open dir with,
// sized from opts.MemoryBudget: a starting point for a caller who tunes
// Badger further and opens the broker with [OpenDB]. It validates opts as
// Open does.
func BadgerOptions(dir string, opts *Options) (badger.Options, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return badger.Options{}, err
	}
	return badgerOptions(dir, o)
}

// OpenDB runs a broker on a Badger database the caller opened and tuned.
// The caller keeps ownership: [Broker.Close] does not close db. The broker
// owns every key it writes; sharing db with other writers is safe only if
// they stay out of the broker's key kinds (see internal/keys).
// Durability is still governed by Options.Durability.
func OpenDB(db *badger.DB, opts *Options) (*Broker, error) {
	if db == nil {
		return nil, argErr("db", "must not be nil")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return newBroker(db, o)
}

func newBroker(db *badger.DB, o Options) (*Broker, error) {
	b := &Broker{
		db:        db,
		opts:      o,
		clock:     o.Clock,
		log:       o.Logger,
		obs:       o.Observer,
		queues:    make(map[string]*queue),
		leases:    make(map[string]*lease),
		queueWait: make(map[string]*waitList),
		stop:      make(chan struct{}),
		callsLeft: make(chan struct{}, 1),
		closeDone: make(chan struct{}),
		callWait:  closeCallWait,
		opened:    o.Clock.Now(),

		lim:        limitsOf(db),
		maxPayload: payloadLimit(db), payloadIn: "on disk",
	}
	if db.Opts().InMemory {
		b.payloadIn = "in memory"
	}
	b.parts = make([]*partition, 1) // pid 0 is never used
	if err := prepareFormat(db, db.Opts().Dir); err != nil {
		return nil, err
	}
	b.storeID = storeIDOf(db)
	if err := b.load(); err != nil {
		return nil, err
	}
	b.w = newWriter(b)
	b.timers.init(b)
	b.bg.Add(4)
	go func() { defer b.bg.Done(); b.w.run() }()
	go func() { defer b.bg.Done(); b.w.publisher() }()
	if b.w.lazy {
		b.bg.Add(1)
		go func() { defer b.bg.Done(); b.w.syncLater() }()
	}
	go func() { defer b.bg.Done(); b.timers.run() }()
	go func() { defer b.bg.Done(); b.maintain() }()
	for _, sweep := range b.sweeps {
		b.bg.Add(1)
		go func() {
			defer b.bg.Done()
			if err := sweep(); err != nil && err != ErrClosed {
				b.log.Warn("queen: finishing a queue deletion", "err", err)
			}
		}()
	}
	b.sweeps = nil
	return b, nil
}

// closeCallWait bounds how long Close waits, once it refuses new calls,
// for the calls already running to return before it stops the writer and
// closes storage. Waiting pops are woken, so only a long read (a listing
// or scan of many messages) can take that long.
const closeCallWait = 10 * time.Second

// Close stops the broker, in this order:
//
//  1. It drains running consumers, all at once, each for at most its
//     own DrainTimeout and all within Options.DrainTimeout; what they
//     leave unsettled comes back joined in Close's error, as
//     [*DrainError] values (errors.As finds the first). Meanwhile
//     every call still works, so handlers can settle their messages and
//     the drain can give back, with acks of status retry, those not
//     started.
//  2. It refuses every later call with [ErrClosed] and ends waiting pops
//     with [ErrClosed].
//  3. It waits, up to 10 seconds, for the calls already running to
//     return; each of them completes or returns [ErrClosed].
//  4. It finishes the writes already accepted, fsyncs those not yet
//     synced (under [SyncPushes]), stops every background goroutine and,
//     when the broker opened Badger itself, closes it.
//
// If calls are still running after those 10 seconds, Close returns an
// error saying so and step 4 happens in the background when the last of
// them returns: storage is never closed under a running call (a caller of
// [OpenDB] must then not close its database before that).
// Close is idempotent: a later or concurrent call waits for the first to
// end and returns nil.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		<-b.closeDone
		return nil
	}
	b.closing = true
	b.mu.Unlock()
	defer close(b.closeDone)

	drainErr := b.consumer.closeAll(b.opts.DrainTimeout)

	b.mu.Lock()
	b.closed = true
	b.calls.Add(callsShut)
	for _, q := range b.queues {
		for _, g := range q.groups {
			g.wakeAll()
		}
	}
	for _, wl := range b.queueWait {
		wl.wakeAll()
	}
	b.appended()
	b.mu.Unlock()

	if n := b.awaitCalls(b.callWait); n > 0 {
		go func() {
			for b.awaitCalls(time.Hour) > 0 {
			}
			_ = b.stopStorage()
		}()
		return errors.Join(drainErr, fmt.Errorf("queen: close: %d call(s) still running after %s; storage closes when they return", n, b.callWait))
	}
	return errors.Join(drainErr, b.stopStorage())
}

// stopStorage stops the writer (which first commits what it holds) and
// the background goroutines, then closes Badger if the broker opened it.
// Only once no call is running.
func (b *Broker) stopStorage() error {
	close(b.stop)
	b.bg.Wait()
	err := b.w.closeErr // the final sync of SyncPushes
	if b.ownDB {
		if cerr := b.db.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("queen: close storage: %w", cerr))
		}
	}
	return err
}

// callsShut is added to Broker.calls when Close refuses new calls: one
// atomic add both counts a call and tells it whether it may run.
const callsShut = 1 << 62

// enter admits an exported call, or refuses it with [ErrClosed] once Close
// refuses calls. Every exported method that reaches storage or the
// broker's state starts with
//
//	if err := b.enter(); err != nil {
//		return ..., err
//	}
//	defer b.leave()
//
// so that Close never closes storage under it. Calls nest freely (Ack
// calls AckBatch): the count is not a lock.
func (b *Broker) enter() error {
	if b.calls.Add(1) >= callsShut {
		b.leave()
		return ErrClosed
	}
	return nil
}

// leave ends a call admitted by enter.
func (b *Broker) leave() {
	if b.calls.Add(-1) == callsShut {
		select {
		case b.callsLeft <- struct{}{}:
		default:
		}
	}
}

// awaitCalls waits up to d for the calls admitted before Close refused
// calls to leave, and returns how many are still running.
func (b *Broker) awaitCalls(d time.Duration) int64 {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		n := b.calls.Load() - callsShut
		if n <= 0 {
			return 0
		}
		select {
		case <-b.callsLeft:
		case <-t.C:
			return max(b.calls.Load()-callsShut, 0)
		}
	}
}

// startErr refuses to start a consumer once Close has begun: Close would
// not drain it.
func (b *Broker) startErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return ErrClosed
	}
	return b.usable()
}

// lockUsable locks b.mu and reports why the broker cannot serve a call
// ([Broker.usable]). On an error it unlocks b.mu again: the caller holds
// the lock exactly when lockUsable returns nil.
func (b *Broker) lockUsable() error {
	b.mu.Lock()
	if err := b.usable(); err != nil {
		b.mu.Unlock()
		return err
	}
	return nil
}

// lockKnownQueue locks b.mu and returns the queue called name. On an
// error ([Broker.usable]'s, or [ErrNotFound] for no such queue) it unlocks
// b.mu again: the caller holds the lock exactly when the error is nil.
func (b *Broker) lockKnownQueue(name string) (*queue, error) {
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	q := b.queues[name]
	if q == nil {
		b.mu.Unlock()
		return nil, ErrNotFound
	}
	return q, nil
}

// usable reports why the broker cannot serve a call, under b.mu.
func (b *Broker) usable() error {
	if b.closed {
		return ErrClosed
	}
	if b.failed != nil {
		return fmt.Errorf("%w: storage failure: %v", ErrClosed, b.failed)
	}
	return nil
}

// fail records a storage failure that left memory ahead of disk: the broker
// refuses every later call rather than serve state it cannot keep.
func (b *Broker) fail(err error) {
	b.mu.Lock()
	if b.failed == nil {
		b.failed = err
		b.log.Error("queen: storage failure, broker stopped serving", "err", err)
	}
	b.mu.Unlock()
}

func (b *Broker) now() int64 { return b.clock.Now().UnixMicro() }

// Now returns the time on the broker's clock ([Options.Clock], the system
// clock by default): the "now" that leases, retry delays, retention, lag and
// message ages are measured against. Code that reports on a broker, such
// as package httpapi, uses it instead of [time.Now] so that a broker on an
// injected clock reports consistently.
func (b *Broker) Now() time.Time { return b.clock.Now() }

// storageErr wraps a Badger error so callers never see the engine's types.
func storageErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, badger.ErrDBClosed):
		return ErrClosed
	case errors.Is(err, badger.ErrKeyNotFound):
		return ErrNotFound
	case errors.Is(err, badger.ErrTxnTooBig):
		return fmt.Errorf("%w: %s", ErrTooLarge, op)
	case isValueTooLarge(err):
		// Badger's text goes on with a hex dump of the value: keep the sizes.
		var what string
		var n, limit int64
		msg := err.Error()
		if _, serr := fmt.Sscanf(msg[sizeRefusal(msg):], "%s with size %d exceeded %d limit", &what, &n, &limit); serr == nil {
			return fmt.Errorf("%w: %s: a %d-byte %s is over the storage limit of %d", ErrTooLarge, op, n, strings.ToLower(what), limit)
		}
		return fmt.Errorf("%w: %s: a value is over the storage limit", ErrTooLarge, op)
	}
	msg := err.Error() // Badger's text may carry a dump of the value: keep the head
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return fmt.Errorf("queen: %s: storage: %s", op, msg)
}

// isValueTooLarge reports Badger's refusal of a key or value over its size
// limits, which it reports with fmt.Errorf, not a sentinel.
func isValueTooLarge(err error) bool {
	if err == nil {
		return false
	}
	return sizeRefusal(err.Error()) >= 0
}

// sizeRefusal finds Badger's size refusal in msg: its index, or -1.
func sizeRefusal(msg string) int {
	for _, what := range []string{"Value with size ", "Key with size "} {
		if i := strings.Index(msg, what); i >= 0 && strings.Contains(msg[i:], " limit") {
			return i
		}
	}
	return -1
}

// isTooBig reports a write Badger refused for its size.
func isTooBig(err error) bool {
	return errors.Is(err, badger.ErrTxnTooBig) || isValueTooLarge(err)
}

// waitCtx waits for ch or ctx.
func waitCtx(ctx context.Context, ch <-chan error) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ping reports whether the broker can serve: [ErrClosed] after Close or a
// storage failure, or the error of a read from storage.
func (b *Broker) Ping(ctx context.Context) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if err := b.closedErr(); err != nil {
		return err
	}
	err := b.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(keys.QueueKey(""))
		if err == badger.ErrKeyNotFound {
			return nil
		}
		return err
	})
	return storageErr("ping", err)
}
