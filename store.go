package queen

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/queenlite/queen/internal/uuid"
)

// This file and commands.go are the only places that write to Badger.
// Every write of the broker goes through one goroutine, the writer, which
// gathers what concurrent callers submitted into one transaction and one
// fsync (group commit). Because the writer is the only writer, offsets are
// assigned in commit order and transactions never conflict. Callers submit
// commands (see command) and pushes, which the writer applies in the order
// they were submitted. The writer never takes the broker's lock: it hands
// each commit to the publisher, which applies it to memory under b.mu
// (new messages become visible, reserved room comes back) and answers its
// callers, in commit order.

// pushReq is a push waiting for the writer. The broker's side prepares it
// under b.mu when it submits it (see Broker.preparePush): the queues and
// partitions its items go to, the records those need, the room they take
// under MaxSize. The writer then stores it without the broker's lock, and
// the publisher makes it visible (see publisher).
type pushReq struct {
	items   []PushItem
	results []PushResult
	done    chan error
	// txn marks the pushes of a transaction: their room under MaxSize was
	// reserved when it was admitted, and an item refused here aborts the
	// whole request. A plain push reserves its room item by item as it
	// is prepared. Either way the room is in reserved (and in the queue's
	// reserved count) until the write is published or failed, so that a
	// push or transaction admitted meanwhile sees it taken.
	txn      bool
	reserved map[*queue]int64

	// Set by preparePush, read by the writer.
	parts []*partition // item i's partition
	plans []itemPlan   // what item i needs
	// records are the writes that go before the messages: the records
	// of queues and partitions not stored yet, and arrival cursors.
	records []command
	// arrivals are the cursors the push stores (see arrivalCursors),
	// marked stored; a push that fails marks them unstored again, so a
	// later write stores them.
	arrivals []arrival

	// sizes are the bytes of the message records the write holds, a run
	// of items to one queue per entry (a push is mostly to one queue), for
	// the queues' size samples (see queue.sizeSum). The writer's.
	sizes []sizeSample
}

// itemPlan is what preparePush decided for one item of a push.
type itemPlan uint8

const (
	// planEncrypt: the item's queue encrypts payloads.
	planEncrypt itemPlan = 1 << iota
	// planNoRoom: the item's queue has a MaxSize and holds no room for
	// it (it was full, or the item was expected to be a duplicate, which
	// needs none). Unless it is a duplicate, it fails with ErrQueueFull.
	planNoRoom
)

// sizeSample is a sum of the sizes of n messages of queue q.
type sizeSample struct {
	q        *queue
	bytes, n int64
}

// errTxnPushRefused reports a transaction push item the writer could not
// store (its checks ran before the transaction's acks were applied, so
// this is a failure the checks could not foresee).
var errTxnPushRefused = errors.New("queen: push of a transaction refused")

// writeReq is a request waiting for the writer: commands, a push (ops
// first), or prefixes to drop.
type writeReq struct {
	ops  []command
	push *pushReq
	drop [][]byte // prefixes to drop with Badger's DropPrefix, alone
	done chan error
	// state marks a write of consumer positions only (see submitState):
	// under SyncPushes its commit is not fsynced before it returns.
	state bool
}

// badgerOptions are the options Open opens dir with (o has its defaults).
// Value-log files of 64 MiB (Badger's default is 1 GiB) let value-log GC
// give space back in reasonable steps. Under SyncEveryCommit Badger syncs
// the log a commit went into, inside the commit (see writer.afterCommit
// for caller-opened databases and for SyncPushes, where the writer syncs
// the commits that need it). The memory settings come from o.MemoryBudget
// (see sizeMemory).
func badgerOptions(dir string, o Options) (badger.Options, error) {
	var bo badger.Options
	if o.InMemory {
		if dir != "" {
			return bo, argErr("dir", "must be empty with Options.InMemory")
		}
		bo = badger.DefaultOptions("").WithInMemory(true)
	} else {
		if dir == "" {
			return bo, argErr("dir", "must not be empty")
		}
		bo = badger.DefaultOptions(dir)
	}
	bo = bo.WithLogger(nil).WithSyncWrites(o.Durability == SyncEveryCommit).WithNumVersionsToKeep(1).
		WithCompactL0OnClose(true).WithDetectConflicts(false).WithValueLogFileSize(64 << 20)
	return sizeMemory(bo, o.MemoryBudget), nil
}

// vlogThreshold is the value size from which Badger keeps a value in its
// value log on disk (see sizeMemory).
const vlogThreshold = 128

// sizeMemory derives Badger's memory settings from budget bytes.
//
// Badger allocates each memtable's arena whole (its size plus the 15 % it
// reserves for one batch and as much again for that batch's skiplist
// nodes: 1.3 × MemTableSize), and holds up to NumMemtables+2 of them at
// once: the one being written, NumMemtables queued for flushing (its
// flush channel's capacity) and the one being flushed. Half the budget
// goes to those arenas; the other half is left for the table builders of
// flushes and compactions, which hold a table's blocks in memory, and
// Badger's other buffers. Memtables grow to a budget of 512 MiB with one
// queued for flush (8 MiB at the default 64 MiB), then their number
// grows, up to Badger's defaults (five of 64 MiB) at 1 GiB.
//
// Tables are an eighth of a memtable, from 256 KiB to 2 MiB (1 MiB at the
// default budget), at every level: Badger's default doubles them at each
// level below the base one (TableSizeMultiplier 2), and what a table
// builder holds grows with them. A builder starts with twice its table's
// size, a compaction runs up to 8 of them and more at once, and Badger's
// allocator pool keeps the buffers of up to 8 between compactions, so
// the compactions that follow an Open held 120 MiB of heap with the
// 8 MiB tables of the deepest level of a 200 MiB tree
// (BenchmarkOpen_1MPartitions with 7 B payloads), and the memtable
// flushes' builders (which start at twice the table size and double to
// hold a whole memtable) most of Badger's heap beyond its arenas while
// pushes run. The cost is more files: about one per MiB of tree (keys
// and value pointers) at the default budget, each an open file and a
// memory map.
//
// Tables are not compressed, so there is no block cache: a compressing
// table builder keeps every uncompressed block of the table it builds
// until the table is done, and Badger cuts tables by their compressed
// size, so compressible messages made compactions hold many times a
// table's size (over 100 MiB of builders at the default budget with the
// bench's payloads, whatever the table size); uncompressed tables are
// read straight from their memory-mapped files (the kernel's page cache,
// which it can reclaim) with no decompression, at the cost of disk space.
// Index and filter blocks are read the same way (the index cache only
// serves Badger's own encryption; queen encrypts payloads itself).
//
// On disk, a value of vlogThreshold bytes or more (a message record with
// a payload over about 60 B) goes to the value log, written once, and
// the LSM tree keeps a pointer to it: the tree, which compactions
// rewrite level by level through in-memory table builders, stays small
// (scenario 9 in bench/NOTES.md: with 256 B messages, peak RSS 0.55× and
// push throughput 1.25× of inline values, whose tables and builders were
// the largest part of the process). The value log's head file is only
// collected once full, so up to 64 MiB of deleted payloads can hold disk
// space until then. In memory Badger keeps every value in the memtable
// whatever the threshold (it only has to be valid, at most one batch).
func sizeMemory(bo badger.Options, budget int64) badger.Options {
	mt := min(budget/8, 64<<20)
	arena := mt + 2*(15*mt/100)
	n := int(max(min(budget/2/arena-2, 5), 1))
	table := min(max(mt/8, 256<<10), 2<<20)
	batch := 15 * mt / 100 // Badger's largest batch
	threshold := min(vlogThreshold, batch/2)
	if bo.InMemory {
		threshold = min(1<<20, batch)
	}
	bo = bo.WithMemTableSize(mt).WithNumMemtables(n).
		WithBaseTableSize(table).WithBaseLevelSize(5 * table).
		WithCompression(options.None).WithBlockCacheSize(0).WithIndexCacheSize(0).
		WithValueThreshold(threshold)
	bo.TableSizeMultiplier = 1 // no With method in Badger v4.9.6
	return bo
}

// storeLimits bound what the writer puts in one storage transaction,
// derived from the database's largest batch (15 % of its memtable).
type storeLimits struct {
	// txnBytes and txnOps bound a transaction that groups requests
	// (estimated), well under Badger's limits, so estimates that run a
	// little short never fail; a single request may use up to maxBytes
	// and maxOps (a Transaction larger than those is ErrTooLarge).
	txnBytes, txnOps int
	maxBytes, maxOps int
	// valueThreshold is the size from which Badger keeps a value in its
	// value log (a pointer in the batch); in memory, none is.
	valueThreshold int
}

func limitsOf(db *badger.DB) storeLimits {
	size, count := int(db.MaxBatchSize()), int(db.MaxBatchCount())
	l := storeLimits{
		txnBytes: min(4<<20, size*2/5), txnOps: min(20000, count/5),
		maxBytes: size * 4 / 5, maxOps: count * 4 / 5,
		valueThreshold: int(db.Opts().ValueThreshold),
	}
	if db.Opts().InMemory {
		l.valueThreshold = math.MaxInt
	}
	return l
}

type writer struct {
	b      *Broker
	mu     sync.Mutex
	queue  []*writeReq
	exited bool
	signal chan struct{}
	lastTS int64
	// commits counts the storage transactions written (each one fsync
	// under SyncEveryCommit); beforeCommit, set by tests only, runs before
	// each. Tests use them to see what a call writes and what it shares.
	commits      atomic.Int64
	beforeCommit atomic.Pointer[func()]

	// lazy is set under SyncPushes when commits need an explicit fsync
	// (on disk, Badger not syncing each write): commits of state requests
	// only are then left to syncLater. unsynced counts those commits;
	// synced is the count the last fsync covered (each fsync covers every
	// commit before it in the log; written under syncMu). wake tells
	// syncLater one is waiting.
	lazy     bool
	unsynced atomic.Int64
	synced   atomic.Int64
	wake     chan struct{}
	// syncs counts the explicit fsyncs (db.Sync), which syncMu serialises;
	// beforeSync, set by tests only, runs before each. closeErr is the
	// final sync's failure.
	syncMu     sync.Mutex
	syncs      atomic.Int64
	beforeSync atomic.Pointer[func()]
	closeErr   error

	// pending are the writes the writer is done with, in commit order,
	// waiting to be published (see publishPending); under mu. kick wakes
	// the publisher for them; the writer closes it when it stops.
	pending []publication
	kick    chan struct{}
	// ahead holds, for each partition with committed messages the
	// publisher has not published yet, one past the newest: where the
	// writer hands out offsets there (elsewhere from the partition's
	// next, which only the publisher moves). Under mu; the publisher
	// removes a partition once it published its end (see tail).
	ahead map[*partition]int64
}

func newWriter(b *Broker) *writer {
	return &writer{b: b, signal: make(chan struct{}, 1), wake: make(chan struct{}, 1), kick: make(chan struct{}, 1),
		lazy: b.opts.Durability == SyncPushes && !b.opts.InMemory && !b.db.Opts().SyncWrites}
}

// submit queues ops for the next commit and returns the channel that
// reports it. Callers hold b.mu so that writes reach disk in the order
// their effects were applied in memory.
func (w *writer) submit(ops []command) <-chan error {
	done := make(chan error, 1)
	w.enqueue(&writeReq{ops: ops, done: done})
	return done
}

// submitState is submit for writes that only move consumer positions
// (acks, cursor saves of pops). Under SyncPushes their commit returns
// before it is fsynced, unless ops hold anything but cursor records (the
// dead letters and parked copies an ack creates are fsynced: they are new
// records, and the message they copy may be deleted by retention once the
// cursor passed it).
func (w *writer) submitState(ops []command) <-chan error {
	done := make(chan error, 1)
	w.enqueue(&writeReq{ops: ops, done: done, state: cursorsOnly(ops)})
	return done
}

func (w *writer) submitPush(r *pushReq) { w.enqueue(&writeReq{push: r, done: r.done}) }

func (w *writer) enqueue(r *writeReq) {
	w.mu.Lock()
	if w.exited {
		w.mu.Unlock()
		r.done <- ErrClosed
		return
	}
	w.queue = append(w.queue, r)
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *writer) run() {
	for {
		select {
		case <-w.signal:
		case <-w.b.stop:
			w.mu.Lock()
			w.exited = true
			rest := w.queue
			w.queue = nil
			w.mu.Unlock()
			w.commitAll(rest)
			if err := w.sync(true); err != nil {
				w.closeErr = storageErr("sync", err)
			}
			close(w.kick)
			return
		}
		for {
			w.mu.Lock()
			batch := w.queue
			w.queue = nil
			w.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			w.commitAll(batch)
		}
	}
}

// commitAll commits batch in transactions that fit the limits.
func (w *writer) commitAll(batch []*writeReq) {
	for len(batch) > 0 {
		if r := batch[0]; r.drop != nil {
			// DropPrefix refuses other writes while it runs; here there are none.
			w.hand(publication{batch: batch[:1], err: storageErr("delete", w.b.db.DropPrefix(r.drop...))})
			batch = batch[1:]
			continue
		}
		n, size, count := 0, 0, 0
		lim := &w.b.lim
		for n < len(batch) && batch[n].drop == nil {
			s, c := batch[n].estimate(lim.valueThreshold)
			if n > 0 && (size+s > lim.txnBytes || count+c > lim.txnOps) {
				break
			}
			size, count = size+s, count+c
			n++
		}
		w.commit(batch[:n])
		batch = batch[n:]
	}
}

// estimate returns the bytes and writes r adds to a storage transaction;
// values of threshold bytes or more count as the value-log pointer that
// Badger puts in their place.
func (r *writeReq) estimate(threshold int) (bytes, ops int) {
	if r.push != nil {
		for i := range r.push.items {
			it := &r.push.items[i]
			v := len(it.Payload)
			if v >= threshold { // Badger keeps large values in the value log
				v = 16
			}
			bytes += v + 2*len(it.TransactionID) + len(it.TraceID) + len(it.ProducerSub) + 120
		}
		ops = 2*len(r.push.items) + 4
	}
	for _, c := range r.ops {
		b, n := c.cost(threshold)
		bytes, ops = bytes+b, ops+n
	}
	return bytes, ops
}

// commit writes batch in one transaction and hands it to the publisher,
// which answers its requests. If Badger refuses it for its size (our
// estimate ran short, or a value is over Badger's limit) or a
// transaction's push is refused, the requests are written one by one, so
// one caller's request never fails the others'; a single request too big
// for one transaction is split (see commitSplit).
func (w *writer) commit(batch []*writeReq) {
	if f := w.beforeCommit.Load(); f != nil {
		(*f)()
	}
	pub, err := w.write(batch)
	switch {
	case err == nil:
		w.hand(pub)
	case !pub.committed && len(batch) > 1 && (isTooBig(err) || errors.Is(err, errTxnPushRefused)):
		w.b.log.Warn("queen: a write batch was refused, writing its requests one by one", "requests", len(batch), "err", storageErr("write", err))
		for _, r := range batch {
			w.commit([]*writeReq{r})
		}
	case !pub.committed && errors.Is(err, badger.ErrTxnTooBig):
		w.commitSplit(batch[0])
	default:
		pub.err = storageErr("write", err)
		w.hand(pub)
	}
}

// write applies batch to one Badger transaction and commits it (with fsync
// as Options.Durability says, see afterCommit). It returns the batch's
// publication: committed, with the partitions' new ends, once Badger
// committed it (even if the fsync after failed: what Badger holds is
// read back); if not, nothing was written and the offsets it handed out
// are free again.
func (w *writer) write(batch []*writeReq) (publication, error) {
	b := w.b
	ts := max(b.now(), w.lastTS)
	w.lastTS = ts
	pub := publication{batch: batch, ts: ts}

	txn := b.db.NewTransaction(true)
	defer txn.Discard()
	var ends map[*partition]int64 // one past the messages written, by partition
	err := func() error {
		for _, r := range batch {
			if err := applyAll(txn, r.ops); err != nil {
				return err
			}
			if r.push != nil {
				if ends == nil {
					ends = make(map[*partition]int64)
				}
				if err := w.applyPush(txn, r.push, ts, ends); err != nil {
					return err
				}
			}
		}
		if err := txn.Commit(); err != nil {
			return err
		}
		pub.committed = true
		w.commits.Add(1)
		if len(ends) > 0 {
			pub.ends = ends
			w.mu.Lock()
			if w.ahead == nil {
				w.ahead = make(map[*partition]int64)
			}
			maps.Copy(w.ahead, ends)
			w.mu.Unlock()
		}
		return w.afterCommit(batch)
	}()
	return pub, err
}

// afterCommit fsyncs a commit that must be durable before it returns.
func (w *writer) afterCommit(batch []*writeReq) error {
	b := w.b
	// A database opened with SyncWrites synced inside Commit; one the
	// caller opened without it is synced here.
	if b.opts.Durability == SyncNever || b.opts.InMemory || b.db.Opts().SyncWrites {
		return nil
	}
	if w.lazy && stateOnly(batch) {
		w.unsynced.Add(1)
		select {
		case w.wake <- struct{}{}:
		default:
		}
		return nil
	}
	return w.sync(false)
}

func stateOnly(batch []*writeReq) bool {
	for _, r := range batch {
		if !r.state {
			return false
		}
	}
	return true
}

// sync fsyncs Badger's logs: every commit written before it is durable.
// With pendingOnly it does so only if a commit was left unsynced since the
// last fsync. Called by the writer and by syncLater, one at a time.
func (w *writer) sync(pendingOnly bool) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	n := w.unsynced.Load() // commits counted here are in the log already
	if pendingOnly && n <= w.synced.Load() {
		return nil
	}
	if f := w.beforeSync.Load(); f != nil {
		(*f)()
	}
	if err := w.b.db.Sync(); err != nil {
		return err
	}
	w.syncs.Add(1)
	w.synced.Store(n)
	return nil
}

// syncLater is the background sync of SyncPushes: it fsyncs the commits
// left unsynced at most Options.AckSyncDelay after the first of them, unless
// an fsync of the writer covered them meanwhile. Close syncs what is left
// (see run).
func (w *writer) syncLater() {
	b := w.b
	t := time.NewTimer(b.opts.AckSyncDelay)
	t.Stop()
	for {
		select {
		case <-w.wake:
		case <-b.stop:
			return
		}
		t.Reset(b.opts.AckSyncDelay)
		select {
		case <-t.C:
		case <-b.stop:
			t.Stop()
			return
		}
		if err := w.sync(true); err != nil {
			b.fail(storageErr("sync", err))
		}
	}
}

// commitSplit writes a request too big for one Badger transaction in
// several: its writes in chunks, in order, then its push. Memory already
// holds the request's effect, so this keeps disk complete at the cost of
// atomicity across the chunks (a crash in between leaves an earlier chunk
// only: at worst a message is delivered, or dead-lettered, again).
func (w *writer) commitSplit(r *writeReq) {
	w.b.log.Warn("queen: write larger than one storage transaction, split", "ops", len(r.ops))
	ops := r.ops
	for len(ops) > 0 {
		n, size, count := 0, 0, 0
		for n < len(ops) {
			s, c := ops[n].cost(w.b.lim.valueThreshold)
			if n > 0 && (count+c > w.b.lim.txnOps/2 || size+s >= w.b.lim.txnBytes/2) {
				break
			}
			size, count = size+s, count+c
			n++
		}
		if _, err := w.write([]*writeReq{{ops: ops[:n], state: r.state}}); err != nil {
			w.hand(publication{batch: []*writeReq{r}, err: storageErr("write", err)})
			return
		}
		ops = ops[n:]
	}
	if r.push == nil {
		w.hand(publication{batch: []*writeReq{r}, committed: true})
		return
	}
	pub, err := w.write([]*writeReq{{push: r.push}})
	pub.batch = []*writeReq{r}
	if err != nil {
		// The request's writes are stored: only its push failed.
		pub.batch = []*writeReq{{push: r.push, done: r.done}}
		pub.err = storageErr("write", err)
	}
	w.hand(pub)
}

// applyAll applies cmds to txn, in order.
func applyAll(txn *badger.Txn, cmds []command) error {
	for _, c := range cmds {
		if err := c.apply(txn); err != nil {
			return err
		}
	}
	return nil
}

// publication is a write the writer is done with, on its way to the
// publisher: what it committed, or why it failed.
type publication struct {
	batch     []*writeReq
	committed bool                 // Badger committed the batch
	ends      map[*partition]int64 // the partitions it wrote messages to: their new ends
	ts        int64                // the messages' creation time, µs
	err       error                // what its requests are answered (nil: done)
}

// hand passes pub on to be published. A push's caller is answered at once
// (it publishes what is pending itself before it returns, see
// publishPending); the publisher answers other requests once pub is
// published.
func (w *writer) hand(pub publication) {
	w.mu.Lock()
	w.pending = append(w.pending, pub)
	w.mu.Unlock()
	for _, r := range pub.batch {
		if r.push != nil {
			r.done <- pub.err
		}
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// publisher publishes what the writer hands on (see publishPending) and
// returns once the writer has stopped.
func (w *writer) publisher() {
	for range w.kick {
		w.publishPending()
	}
	w.publishPending()
}

// publishPending applies the writes the writer is done with to the
// broker's memory, in the order the writer committed them: committed
// messages become visible to pops, the room pushes reserved comes back,
// and a failed write whose effect memory already holds stops the broker.
// Then it answers their requests, pushes' callers excepted (the writer
// answered those, see hand). The publisher runs it for every write, and a
// pusher before it returns, so that it need not wait for the publisher:
// whichever comes first publishes, under b.mu, and the other finds it
// done. The writer itself never takes b.mu.
func (w *writer) publishPending() {
	b := w.b
	b.mu.Lock()
	w.mu.Lock()
	pubs := w.pending
	w.pending = nil
	w.mu.Unlock()
	for _, pub := range pubs {
		b.publish(pub)
	}
	b.mu.Unlock()
	for _, pub := range pubs {
		if len(pub.ends) > 0 {
			w.mu.Lock()
			for p, end := range pub.ends {
				if w.ahead[p] == end { // no later write of p on its way
					delete(w.ahead, p)
				}
			}
			w.mu.Unlock()
		}
		for _, r := range pub.batch {
			if pub.err != nil && len(r.ops) > 0 { // memory already holds the effect: stop serving
				b.fail(pub.err)
			}
			if r.push == nil {
				r.done <- pub.err
			}
		}
	}
}

// publish applies pub to memory: a committed write's messages become
// visible (p.next moves to its end) and count in their queue; the room
// its pushes reserved goes back (their messages now count in pending, so
// the room is never counted twice nor free twice); a push that was not
// written leaves its arrival cursors to be stored by a later write. Under
// b.mu.
func (b *Broker) publish(pub publication) {
	for _, r := range pub.batch {
		pr := r.push
		if pr == nil {
			continue
		}
		b.unreserve(pr)
		if pub.committed {
			for _, s := range pr.sizes {
				s.q.sizeSum += s.bytes
				s.q.sizeN += s.n
			}
		}
		b.arrived(pr, pub.committed)
	}
	for p, end := range pub.ends {
		p.persisted = true
		p.q.persisted = true
		if end <= p.next {
			continue
		}
		n := end - p.next
		p.next = end
		if p.deleted {
			continue
		}
		p.q.count += n
		p.lastPushAt, p.pushUnread = pub.ts, false
		b.messagesArrived(p)
		b.repend(p)
	}
	if len(pub.ends) > 0 {
		b.appended()
	}
}

// tail returns one past the newest offset the writer handed out in p in
// committed writes: the end of its newest write the publisher has not
// published, or p's next. Reading next here is safe: the publisher moves it
// only for a partition in ahead, and removes it from ahead after.
func (w *writer) tail(p *partition) int64 {
	w.mu.Lock()
	end, ok := w.ahead[p]
	w.mu.Unlock()
	if !ok {
		end = p.next
	}
	return end
}

// applyPush adds a push to txn: the records preparePush made, then each
// item's dedup check, offset and message record. ends holds, for the
// partitions the write in progress added messages to, one past the newest.
func (w *writer) applyPush(txn *badger.Txn, r *pushReq, ts int64, ends map[*partition]int64) error {
	b := w.b
	r.sizes = r.sizes[:0] // of an earlier attempt that was rolled back
	// No check of b.closed here: a push accepted before Close refused calls
	// is committed (Close stops the writer only after such calls return).
	if err := applyAll(txn, r.records); err != nil {
		return err
	}
	for i := range r.arrivals {
		a := &r.arrivals[i]
		if a.key == nil {
			continue // its write is in records
		}
		// The group stands at the end of a.p, past every push submitted
		// before it joined; this push is the first after, so that end is
		// where its messages start.
		p := a.c.p
		start, ok := ends[p]
		if !ok {
			start = w.tail(p)
		}
		a.start = start
		if err := txn.Set(a.key, record.AppendCursor(nil, record.Cursor{Offset: start})); err != nil {
			return err
		}
	}
	var val []byte
	var idOf *partition // partition whose public id is in pidStr
	var pidStr string
	for i := range r.items {
		it := &r.items[i]
		p := r.parts[i]
		res := &r.results[i]
		if p != idOf {
			idOf, pidStr = p, p.uuid()
		}
		*res = PushResult{Queue: it.Queue, Partition: it.Partition, PartitionID: pidStr, TransactionID: it.TransactionID, TraceID: it.TraceID}
		tk := keys.TxIDKey(p.pid, it.TransactionID)
		item, err := w.lookupTxID(txn, tk, it.generatedID)
		switch {
		case err == nil:
			var off int64
			err = item.Value(func(v []byte) (err error) { off, err = record.DecodeOffset(v); return })
			if err != nil {
				return err
			}
			res.Status, res.Offset = PushDuplicate, off
			if mi, err := txn.Get(keys.MessageKey(p.pid, off)); err == nil {
				_ = mi.Value(func(v []byte) error {
					if len(v) >= 26 {
						res.MessageID = uuid.UUID(v[10:26]).String()
					}
					return nil
				})
			}
			continue
		case err != badger.ErrKeyNotFound:
			return err
		}
		if r.plans[i]&planNoRoom != 0 {
			res.Status, res.Err = PushFailed, ErrQueueFull
			continue
		}
		id := uuid.NewV7At(b.clock.Now())
		m := record.Message{CreatedAt: ts, ID: id, TxID: it.TransactionID, TraceID: it.TraceID, ProducerSub: it.ProducerSub, Payload: it.Payload}
		if r.plans[i]&planEncrypt != 0 {
			if m.Payload, err = b.seal(it.Payload); err != nil {
				if r.txn {
					return fmt.Errorf("%w: %w", errTxnPushRefused, err)
				}
				// This item only: the others of the batch are written. Its
				// room goes back with the rest when the push is published.
				res.Status, res.Err = PushFailed, err
				continue
			}
			m.Flags |= record.FlagEncrypted
		}
		off, ok := ends[p]
		if !ok {
			off = w.tail(p)
		}
		val = record.AppendMessage(make([]byte, 0, record.MessageSize(&m)), &m)
		if err := txn.Set(keys.MessageKey(p.pid, off), val); err != nil {
			return err
		}
		if err := txn.Set(tk, record.Offset(off)); err != nil {
			return err
		}
		ends[p] = off + 1
		size := int64(17 + len(val) + len(tk) + 8)
		if k := len(r.sizes) - 1; k >= 0 && r.sizes[k].q == p.q {
			r.sizes[k].bytes += size
			r.sizes[k].n++
		} else {
			r.sizes = append(r.sizes, sizeSample{q: p.q, bytes: size, n: 1})
		}
		res.Status, res.Offset, res.MessageID = PushQueued, off, id.String()
	}
	return nil
}

// repend recomputes p's share of its queue's pending count: the messages
// of p the slowest group has not settled (all of them while the queue has
// no group), as QueueStats.Pending counts them (see cursorOf). O(groups); called wherever
// p's offsets, one of its cursors or the queue's groups change. Under b.mu.
func (b *Broker) repend(p *partition) {
	n := int64(0)
	switch {
	case p.deleted:
	case len(p.q.groups) == 0:
		n = p.stored()
	default:
		for _, g := range p.q.slots {
			if g != nil {
				n = max(n, p.storedFrom(max(g.offsetIn(p), p.first))) // deleted messages do not count
			}
		}
	}
	p.q.pending += n - p.q.pend[p.idx]
	p.q.pend[p.idx] = n
}

// lookupTxID finds an existing message with the same transaction id. A
// UUIDv7 generated by this process cannot collide, so it is not looked up.
func (w *writer) lookupTxID(txn *badger.Txn, key []byte, generated bool) (*badger.Item, error) {
	if generated {
		return nil, badger.ErrKeyNotFound
	}
	return txn.Get(key)
}
