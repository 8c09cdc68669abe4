package queen

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
)

// AckStatus is the outcome an ack gives a message.
type AckStatus string

// Ack statuses.
const (
	// AckCompleted settles the message.
	AckCompleted AckStatus = "completed"
	// AckFailed spends one unit of the (partition, group) retry budget: the
	// message and the rest of its partition's batch come back after the
	// queue's RetryDelay. With no budget left it is dead-lettered instead.
	AckFailed AckStatus = "failed"
	// AckRetry gives the batch back from this message on without spending
	// the retry budget.
	AckRetry AckStatus = "retry"
	// AckDLQ dead-letters the message at once, whatever budget is left.
	AckDLQ AckStatus = "dlq"
	// AckPark moves the message to the parked store (for messages nothing
	// could read), without consulting the retry budget.
	AckPark AckStatus = "park"
)

// AckItem settles one delivered message.
type AckItem struct {
	TransactionID string // required
	PartitionID   string // required
	// LeaseID fences the ack: it is refused with [ErrLeaseExpired] unless
	// that lease still holds the message (with [ErrWrongGroup] if it is
	// another group's lease). Empty means unfenced: any live lease of the
	// group may hold it.
	LeaseID string
	// Group is the consumer group that popped it; empty means queue mode.
	Group  string
	Status AckStatus // defaults to AckCompleted; "success" is an alias
	// Error is kept with the message if it is dead-lettered or parked.
	Error string
	// Delay, for failed and retry, holds the partition back from this group
	// for that long before the message is delivered again, instead of the
	// queue's RetryDelay (failed) or not at all (retry).
	Delay time.Duration
}

// AckResult reports one ack item, in request order.
type AckResult struct {
	TransactionID string
	Queue         string
	Partition     string
	Success       bool
	// Err says why the item was refused; a refused item has Success false
	// and changed nothing. In the order the broker checks them:
	//
	//   - [ErrNotFound]: no such partition or message;
	//   - [ErrGroupNotFound]: the group never popped the queue (it also
	//     matches ErrNotFound);
	//   - [ErrWrongGroup]: the item's lease belongs to another group;
	//   - [ErrAlreadySettled]: the group settled the message before (its
	//     cursor is past it); it is not delivered again;
	//   - [ErrLeaseExpired]: the lease no longer holds the message, which
	//     the group has not settled; it is delivered again;
	//   - an [*ArgumentError]: an unknown status, or a status other than
	//     the one an earlier item of the same call gave the message.
	//
	// Over HTTP each has its own per-item error text (see package
	// httpapi), which package remote maps back to the same error.
	Err error
	// LeaseReleased reports that this ack freed the partition's lease.
	LeaseReleased bool
	// DeadLettered reports that this ack moved the message to the
	// dead-letter store (a dlq ack, or a failed one with no retry budget
	// left).
	DeadLettered bool
	// Parked reports that this ack moved the message to the parked store.
	// Like DeadLettered it says what happened, not what was asked: it is
	// false for a refused item (a park of a message settled before is
	// [ErrAlreadySettled]), for a repeat of an earlier item of the same
	// call, and for a park behind a retry (or a failed ack with budget
	// left) of the same partition and group in the same call, which comes
	// back instead of being parked.
	//
	// Over package remote both are the server's answer (the ack's dlq and
	// parked fields). A server that does not send parked gives false, even
	// if it parked the message: Queen's own server never does (an ack of
	// status park is [ErrUnsupported] there), nor does an httpapi older
	// than the field.
	Parked bool

	unchanged bool // accepted but changed nothing: not counted
}

// AckOptions are the options of [Broker.Ack].
type AckOptions struct {
	// ConsumerGroup names the group the ack settles the message for.
	// Empty, the usual case, means the message's own
	// [Message.ConsumerGroup]: the group that popped it, or queue mode for
	// [QueueModeGroup]. Set it only for a message that does not carry its
	// group (one built by hand).
	ConsumerGroup string
	// Error text, kept if the message is dead-lettered.
	Error string
	// Status, when set, overrides the ok argument of Ack.
	Status AckStatus
	// LeaseID defaults to the message's own.
	LeaseID string
	// Delay is [AckItem.Delay].
	Delay time.Duration
}

// Ack settles one message: completed when ok, failed otherwise (or
// opts.Status). A refused ack returns the item's error (see
// [AckResult].Err: [ErrAlreadySettled] for a second ack, [ErrLeaseExpired]
// after the lease ended, ...) along with the result.
func (b *Broker) Ack(ctx context.Context, msg *Message, ok bool, opts AckOptions) (*AckResult, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if msg == nil {
		return nil, argErr("msg", "must not be nil")
	}
	st := opts.Status
	if st == "" {
		st = AckCompleted
		if !ok {
			st = AckFailed
		}
	}
	group := opts.ConsumerGroup
	if group == "" && msg.ConsumerGroup != QueueModeGroup {
		group = msg.ConsumerGroup
	}
	leaseID := opts.LeaseID
	if leaseID == "" {
		leaseID = msg.LeaseID
	}
	res, err := b.AckBatch(ctx, []AckItem{{TransactionID: msg.TransactionID, PartitionID: msg.PartitionID, LeaseID: leaseID, Group: group, Status: st, Error: opts.Error, Delay: opts.Delay}})
	if err != nil {
		return nil, err
	}
	return &res[0], res[0].Err
}

// AckBatch settles many messages, possibly of several partitions. Within
// one (partition, group) items are applied in offset order and the cursor
// moves only through the leading run of settled messages: it stops before
// the first message that comes back (failed with budget left, or retry),
// and anything acked completed after it is delivered again. When several
// items name the same message, the first decides: a later one with the
// same status succeeds and changes nothing, one with another status (say
// completed, then dlq) is refused with an [*ArgumentError]. An item naming
// a message an earlier call settled is refused with [ErrAlreadySettled],
// whatever its status. Refused items change nothing and are reported in
// their result (see [AckResult].Err); the call's error is for invalid
// input and storage failures.
func (b *Broker) AckBatch(ctx context.Context, items []AckItem) ([]AckResult, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	start := time.Now()
	if len(items) > MaxAckItems {
		return nil, argErr("items", "at most %d per call, not %d", MaxAckItems, len(items))
	}
	for i := range items {
		if items[i].TransactionID == "" {
			return nil, argErr("AckItem["+strconv.Itoa(i)+"].TransactionID", "is required")
		}
		if items[i].PartitionID == "" {
			return nil, argErr("AckItem["+strconv.Itoa(i)+"].PartitionID", "is required")
		}
		if items[i].Delay < 0 {
			return nil, argErr("AckItem["+strconv.Itoa(i)+"].Delay", "must not be negative")
		}
	}
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	results, ops, err := b.applyAcks(items, b.now(), false)
	if err != nil {
		b.mu.Unlock()
		return nil, err
	}
	var done <-chan error
	if len(ops) > 0 {
		done = b.w.submitState(ops)
	}
	b.mu.Unlock()
	if done != nil {
		if err := waitCtx(ctx, done); err != nil {
			return nil, err
		}
	}
	b.observeAcks(items, results, time.Since(start))
	return results, nil
}

// observeAcks reports the items that settled or gave back a message, per
// queue, group and status. Refused items and items that changed nothing
// are not counted.
func (b *Broker) observeAcks(items []AckItem, results []AckResult, d time.Duration) {
	var one [1]ackCount // a call mostly acks for one queue and group
	counts := ackCounts{list: one[:0]}
	for i := range results {
		res := &results[i]
		if !res.Success || res.unchanged {
			continue
		}
		if k := statusIndex(items[i].Status); k >= 0 {
			counts.of(res.Queue, groupName(items[i].Group)).n[k]++
		}
	}
	for _, c := range counts.list {
		for k, n := range c.n {
			if n > 0 {
				b.observe(Event{Kind: EventAck, Queue: c.queue, Group: c.group, Status: ackStatuses[k], Count: n, Duration: d})
			}
		}
	}
}

// ackCount is what one ack call did to one (queue, group), by status.
type ackCount struct {
	queue, group string
	n            [len(ackStatuses)]int
}

// ackCounts are the ackCounts of one call, in order of first appearance.
type ackCounts struct {
	list  []ackCount
	last  int
	index map[[2]string]int // built once list is long
}

// of returns the count of (queue, group), adding it if new.
func (a *ackCounts) of(queue, group string) *ackCount {
	if a.last < len(a.list) && a.list[a.last].queue == queue && a.list[a.last].group == group {
		return &a.list[a.last]
	}
	if a.index != nil {
		if j, ok := a.index[[2]string{queue, group}]; ok {
			a.last = j
			return &a.list[j]
		}
	} else {
		for j := range a.list {
			if a.list[j].queue == queue && a.list[j].group == group {
				a.last = j
				return &a.list[j]
			}
		}
	}
	a.last = len(a.list)
	a.list = append(a.list, ackCount{queue: queue, group: group})
	switch {
	case a.index != nil:
		a.index[[2]string{queue, group}] = a.last
	case len(a.list) > 8:
		a.index = make(map[[2]string]int, 2*len(a.list))
		for j := range a.list {
			a.index[[2]string{a.list[j].queue, a.list[j].group}] = j
		}
	}
	return &a.list[a.last]
}

// statusIndex is the index of s in ackStatuses, or -1.
func statusIndex(s AckStatus) int {
	s = normStatus(s)
	for k, st := range ackStatuses {
		if st == s {
			return k
		}
	}
	return -1
}

func normStatus(s AckStatus) AckStatus {
	switch s {
	case "", "success":
		return AckCompleted
	}
	return s
}

// flightRef names a delivered message: its cursor and place in c.fl.msgs.
type flightRef struct {
	c  *cursor
	fi int
}

// ackTarget is an item resolved to a delivered message.
type ackTarget struct {
	item int // index in the request
	c    *cursor
	fi   int // index in c.fl.msgs
}

// applyAcks applies items in memory and returns the writes that make them
// durable. Under b.mu. With all, the first refused item aborts everything
// and nothing changes (transactions).
func (b *Broker) applyAcks(items []AckItem, now int64, all bool) ([]AckResult, []command, error) {
	results := make([]AckResult, len(items))
	var targets []ackTarget
	var seen map[flightRef]int // first item naming each delivered message
	for i := range items {
		it := &items[i]
		res := &results[i]
		res.TransactionID = it.TransactionID
		switch normStatus(it.Status) {
		case AckCompleted, AckFailed, AckRetry, AckDLQ, AckPark:
		default:
			res.Err = &ArgumentError{Field: "Status", Reason: "invalid status: " + string(it.Status)}
			if all {
				return results, nil, &TransactionError{Index: i, Err: res.Err}
			}
			continue
		}
		t, err := b.resolveAck(it, res, now)
		if err != nil {
			res.Err = err
			if all {
				return results, nil, &TransactionError{Index: i, Err: err}
			}
			continue
		}
		// The first item naming a message decides its fate; a later one
		// asking for another outcome is refused (a repeat is a no-op).
		if first, ok := seen[flightRef{t.c, t.fi}]; ok && normStatus(items[first].Status) != normStatus(it.Status) {
			res.Err = &ArgumentError{Field: "AckItem[" + strconv.Itoa(i) + "]", Reason: "message already acked " + string(normStatus(items[first].Status)) + " by item " + strconv.Itoa(first) + " of this call"}
			if all {
				return results, nil, &TransactionError{Index: i, Err: res.Err}
			}
			continue
		} else if !ok {
			if seen == nil {
				seen = make(map[flightRef]int)
			}
			seen[flightRef{t.c, t.fi}] = i
		}
		t.item = i
		targets = append(targets, t)
	}
	// Apply per cursor, in offset order.
	sort.SliceStable(targets, func(i, j int) bool {
		if targets[i].c != targets[j].c {
			return targets[i].c.p.pid < targets[j].c.p.pid || (targets[i].c.p.pid == targets[j].c.p.pid && targets[i].c.g.slot < targets[j].c.g.slot)
		}
		return targets[i].fi < targets[j].fi
	})
	var ops []command
	for lo := 0; lo < len(targets); {
		hi := lo + 1
		for hi < len(targets) && targets[hi].c == targets[lo].c {
			hi++
		}
		var err error
		ops, err = b.settle(targets[lo:hi], items, results, now, ops)
		if err != nil {
			return nil, nil, err
		}
		lo = hi
	}
	return results, ops, nil
}

// resolveAck finds the delivered message an item names, or says why the
// item is refused. The answers are checked in this order:
//
//   - no such partition or message: [ErrNotFound];
//   - the group has never popped the queue: [ErrGroupNotFound];
//   - the item's lease is a live lease of another group of the queue:
//     [ErrWrongGroup];
//   - the group's cursor is past the message, or an earlier call settled
//     it in the batch still leased: [ErrAlreadySettled];
//   - the item's lease does not hold the message (expired, released,
//     taken over), or, unfenced, no lease of the group holds it:
//     [ErrLeaseExpired].
func (b *Broker) resolveAck(it *AckItem, res *AckResult, now int64) (ackTarget, error) {
	p := b.partitionByID(it.PartitionID)
	if p == nil {
		return ackTarget{}, ErrNotFound
	}
	res.Queue, res.Partition = p.q.name, p.name
	g := p.q.groups[groupName(it.Group)]
	if g == nil {
		if _, found, err := b.offsetOf(p, it.TransactionID); err != nil || !found {
			return ackTarget{}, errors.Join(ErrNotFound, err)
		}
		return ackTarget{}, ErrGroupNotFound
	}
	if it.LeaseID != "" {
		// Only a live lease counts: an expired one leaves b.leases
		// lazily, and the answer must not depend on when.
		if l := b.leases[it.LeaseID]; l != nil && l.g != g && l.g.q == g.q && l.expires > now {
			return ackTarget{}, ErrWrongGroup
		}
	}
	c := startCursor(g, p)
	if c.fl != nil && c.fl.lease != nil && c.fl.lease.expires <= now {
		b.expireLease(c.fl.lease, now)
	}
	if c.fl != nil && c.fl.lease != nil && len(c.fl.msgs) > 0 {
		if fi := c.fl.find(it.TransactionID); fi >= 0 {
			switch {
			case c.fl.msgs[fi].settled:
				return ackTarget{}, ErrAlreadySettled
			case it.LeaseID != "" && c.fl.lease.id != it.LeaseID:
				return ackTarget{}, ErrLeaseExpired
			}
			return ackTarget{c: c, fi: fi}, nil
		}
	}
	off, found, err := b.offsetOf(p, it.TransactionID)
	if err != nil {
		return ackTarget{}, err
	}
	if !found {
		return ackTarget{}, ErrNotFound
	}
	if off < c.offset {
		return ackTarget{}, ErrAlreadySettled
	}
	return ackTarget{}, ErrLeaseExpired
}

// offsetOf looks a message up in the dedup index.
func (b *Broker) offsetOf(p *partition, txid string) (int64, bool, error) {
	var off int64
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keys.TxIDKey(p.pid, txid))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) (err error) { off, err = record.DecodeOffset(v); return })
	})
	if err == badger.ErrKeyNotFound {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, storageErr("ack", err)
	}
	return off, true, nil
}

// find returns the index of the flight carrying txid, or -1.
func (fl *inflight) find(txid string) int {
	// Acks mostly come in delivery order: look after the last hit first.
	n := len(fl.msgs)
	for k := 0; k < n; k++ {
		i := fl.hint + k
		if i >= n {
			i -= n
		}
		if fl.msgs[i].txid == txid {
			fl.hint = i + 1
			return i
		}
	}
	return -1
}

// settle applies the acks of one cursor, sorted by offset. Under b.mu.
func (b *Broker) settle(ts []ackTarget, items []AckItem, results []AckResult, now int64, ops []command) ([]command, error) {
	c := ts[0].c
	fl := c.fl
	q := c.p.q
	comeback := false
	settledNow := 0
	var letters []letterSpec
	for _, t := range ts {
		it, res := &items[t.item], &results[t.item]
		res.Success = true
		f := &fl.msgs[t.fi]
		if comeback || f.settled { // above a message that comes back (delivered again), or settled before
			res.unchanged = true
			continue
		}
		switch normStatus(it.Status) {
		case AckCompleted:
			f.settled = true
		case AckDLQ:
			f.settled = true
			res.DeadLettered = true
			letters = append(letters, letterSpec{kind: keys.DeadLetter, off: f.off, txid: f.txid, errText: orDefault(it.Error, "Unknown error"), retries: c.retries})
		case AckPark:
			f.settled = true
			res.Parked = true
			letters = append(letters, letterSpec{kind: keys.Parked, off: f.off, txid: f.txid, errText: it.Error, retries: c.retries})
		case AckFailed:
			if int(c.retries) < q.cfg.RetryLimit {
				c.retries++
				comeback = true
				d := q.cfg.RetryDelay
				if it.Delay > 0 {
					d = it.Delay
				}
				if d > 0 {
					c.notBefore, c.held = now+d.Microseconds(), false
				}
			} else {
				f.settled = true
				res.DeadLettered = true
				letters = append(letters, letterSpec{kind: keys.DeadLetter, off: f.off, txid: f.txid, errText: orDefault(it.Error, "Retries exhausted"), retries: c.retries})
			}
		case AckRetry:
			comeback = true
			if it.Delay > 0 {
				c.notBefore, c.held = now+it.Delay.Microseconds(), false
			}
		}
		if f.settled {
			settledNow++
		}
	}
	// The cursor moves through the leading run of settled messages.
	prefix := c.offset
	allDone := true
	for i := range fl.msgs {
		if !fl.msgs[i].settled {
			allDone = false
			break
		}
		prefix = fl.msgs[i].off + 1
	}
	if allDone && !comeback {
		prefix = fl.end
		c.retries = 0 // a batch completed: the budget starts over
		if c.att != nil && c.att.end <= prefix {
			c.att = nil // every delivered offset is settled: no count to keep
		}
	}
	moved := prefix != c.offset
	if moved {
		// Drop the settled flights below the cursor so later scans stay short.
		k := 0
		for k < len(fl.msgs) && fl.msgs[k].off < prefix {
			k++
		}
		fl.msgs = fl.msgs[k:]
		fl.hint = max(0, fl.hint-k)
	}
	c.offset = prefix
	if moved {
		b.repend(c.p)
	}
	c.consumed += int64(settledNow)
	if settledNow > 0 {
		c.lastAckAt = now
		b.noteAckRate(c.g, settledNow, now)
	}
	released := comeback || (allDone && !comeback)
	if released {
		b.release(c)
		for _, t := range ts {
			results[t.item].LeaseReleased = true
		}
	}
	if len(letters) > 0 {
		lops, err := b.letterOps(c, letters, now)
		if err != nil {
			return nil, err
		}
		ops = append(ops, lops...)
	}
	if moved || comeback || settledNow > 0 {
		ops = append(ops, c.save())
	}
	if released {
		b.check(c, now)
	}
	return ops, nil
}

// noteAckRate feeds the autopilot's estimate of how fast g settles.
func (b *Broker) noteAckRate(g *group, n int, now int64) {
	if g.rateAt == 0 {
		g.rateAt = now
		return
	}
	dt := float64(now-g.rateAt) / 1e6
	if dt <= 0 {
		dt = 1e-3
	}
	inst := float64(n) / dt
	g.ackRate = 0.8*g.ackRate + 0.2*inst
	g.rateAt = now
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
