package queen

import (
	"context"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/uuid"
)

// TxOp is one operation of a transaction: exactly one of Ack, Push and
// Position.
type TxOp struct {
	Ack  *AckItem
	Push *PushItem
	// Position sets (or forgets) a group's position in a partition, as
	// [Broker.SetPosition] does. Positions apply after the transaction's
	// acks, in order.
	Position *Position
}

// TxOpResult reports one operation, in order.
type TxOpResult struct {
	Ack      *AckResult  // for an ack operation
	Push     *PushResult // for a push operation
	Position *Position   // for a position: as set (a forgotten one at the group's start point)
}

// TxResult reports a transaction.
type TxResult struct {
	ID      string // correlation id of this call
	Results []TxOpResult
}

// ExecTransaction runs acks and pushes all or nothing: either every
// operation takes effect, durably and in one storage transaction, or none
// does. A transaction of more than [MaxTxOps] operations is refused with
// [ErrTooLarge]. Each operation means what it means alone (a failed ack
// spends the retry budget; retry and park are allowed; a push whose
// transactionId already exists is reported duplicate and does not abort). Push items are
// validated as [Broker.Push] validates them: an invalid item is an
// [*ArgumentError] and a payload over the limit [ErrTooLarge], and nothing
// runs. A refused operation aborts the whole transaction with a
// [*TransactionError] naming it: an ack (unknown message, wrong or expired
// lease, bad status), or a push the queue refuses ([ErrQueueFull], or an
// [*ArgumentError] for a queue with EncryptionEnabled on a broker without
// Options.EncryptionKey). Then nothing is written, no ack is applied and
// leases stay as they were; the result holds what was gathered up to the
// refused operation.
func (b *Broker) ExecTransaction(ctx context.Context, ops []TxOp) (*TxResult, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if len(ops) == 0 {
		return nil, argErr("ops", "must not be empty")
	}
	if len(ops) > MaxTxOps {
		return nil, fmt.Errorf("%w: a transaction takes at most %d operations (queen.MaxTxOps), not %d", ErrTooLarge, MaxTxOps, len(ops))
	}
	start := time.Now()
	res := &TxResult{ID: uuid.NewV4().String(), Results: make([]TxOpResult, len(ops))}
	var acks []AckItem
	var ackAt []int
	var pushes []PushItem
	var pushAt []int
	var positions []Position
	var posAt []int
	for i, o := range ops {
		switch {
		case o.Position != nil && o.Ack == nil && o.Push == nil:
			pos := *o.Position
			if err := checkPosition(i, &pos); err != nil {
				return nil, err
			}
			positions = append(positions, pos)
			posAt = append(posAt, i)
		case o.Ack != nil && o.Push == nil && o.Position == nil:
			if o.Ack.TransactionID == "" || o.Ack.PartitionID == "" {
				return nil, argErr(fmt.Sprintf("ops[%d].Ack", i), "needs TransactionID and PartitionID")
			}
			acks = append(acks, *o.Ack)
			ackAt = append(ackAt, i)
		case o.Push != nil && o.Ack == nil && o.Position == nil:
			it := *o.Push
			if err := b.checkPushItem(i, &it); err != nil {
				return nil, err
			}
			pushes = append(pushes, it)
			pushAt = append(pushAt, i)
		default:
			return nil, argErr(fmt.Sprintf("ops[%d]", i), "must hold exactly one of Ack, Push and Position")
		}
	}
	pushResults := make([]PushResult, len(pushes))
	pr := &pushReq{items: pushes, results: pushResults, txn: true}
	size, count := (&writeReq{push: pr}).estimate(b.lim.valueThreshold)
	if size > b.lim.maxBytes || count > b.lim.maxOps {
		return nil, fmt.Errorf("%w: transaction of %d operations", ErrTooLarge, len(ops))
	}
	dups, err := b.existingTxIDs(pushes)
	if err != nil {
		return nil, err
	}

	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	// Pushes are decided before any ack is applied: a refused one aborts
	// with nothing changed. Room under MaxSize is reserved until the writer
	// has written (or failed) the transaction.
	if j, err := b.reservePushes(pr, dups); err != nil {
		b.mu.Unlock()
		i := pushAt[j]
		res.Results = res.Results[:i+1]
		return res, &TransactionError{Index: i, Op: "push", Err: err}
	}
	// Positions are resolved before any ack is applied, so that a refused
	// one aborts with nothing changed.
	type posTarget struct {
		q *queue
		p *partition
	}
	targets := make([]posTarget, len(positions))
	for j := range positions {
		q, p, err := b.resolvePosition(&positions[j])
		if err != nil {
			b.unreserve(pr)
			b.mu.Unlock()
			i := posAt[j]
			res.Results = res.Results[:i+1]
			return res, &TransactionError{Index: i, Op: "position", Err: err}
		}
		targets[j] = posTarget{q, p}
	}
	now := b.now()
	ackResults, writes, err := b.applyAcks(acks, now, true)
	for j := range ackResults {
		r := ackResults[j]
		res.Results[ackAt[j]].Ack = &r
	}
	if err != nil {
		b.unreserve(pr)
		b.mu.Unlock()
		if te, ok := err.(*TransactionError); ok {
			te.Index, te.Op = ackAt[te.Index], "ack"
			res.Results = res.Results[:te.Index+1]
		}
		return res, err
	}
	var joins []Event
	for j := range positions {
		ops, joinEv := b.applyPosition(&positions[j], targets[j].q, targets[j].p, now)
		writes = append(writes, ops...)
		if joinEv != nil {
			joins = append(joins, *joinEv)
		}
		res.Results[posAt[j]].Position = &positions[j]
	}
	done := make(chan error, 1)
	pr.done = done
	b.preparePush(pr, nil)
	b.w.enqueue(&writeReq{ops: writes, push: pr, done: done})
	b.mu.Unlock()
	for _, e := range joins {
		b.reportJoin(e)
	}
	err = waitCtx(ctx, done)
	b.w.publishPending() // what it wrote is visible when it returns
	if err != nil {
		return nil, err
	}
	for j := range pushResults {
		res.Results[pushAt[j]].Push = &pushResults[j]
	}
	d := time.Since(start)
	b.observeAcks(acks, ackResults, d)
	if len(pushes) > 0 {
		b.observePushes(pushes, pushResults, d)
	}
	return res, nil
}

// roomChecked returns the queue of it if it goes to a queue with a MaxSize
// under a transactionId of the caller's: the item needs room unless it is
// a duplicate, which existingTxIDs looks for. Under b.mu.
func (b *Broker) roomChecked(it *PushItem) *queue {
	if it.generatedID {
		return nil
	}
	if q := b.queues[it.Queue]; q != nil && q.cfg.MaxSize > 0 {
		return q
	}
	return nil
}

// existingTxIDs reports which items to queues with a MaxSize name a
// transactionId already stored in their partition, or repeat an earlier
// item of the same call: duplicates, which take no room. Nil when no item
// goes to such a queue under a transactionId of the caller's.
func (b *Broker) existingTxIDs(items []PushItem) ([]bool, error) {
	var dups []bool
	type ref struct {
		i   int
		pid uint64
	}
	var refs []ref
	var seen map[[3]string]bool
	b.mu.Lock()
	for i := range items {
		it := &items[i]
		q := b.roomChecked(it)
		if q == nil {
			continue
		}
		if dups == nil {
			dups = make([]bool, len(items))
		}
		if len(items) > 1 {
			if seen == nil {
				seen = make(map[[3]string]bool, len(items))
			}
			k := [3]string{it.Queue, it.Partition, it.TransactionID}
			if dups[i] = seen[k]; dups[i] {
				continue
			}
			seen[k] = true
		}
		if p := q.parts[it.Partition]; p != nil {
			refs = append(refs, ref{i, p.pid})
		}
	}
	b.mu.Unlock()
	if len(refs) == 0 {
		return dups, nil
	}
	err := b.db.View(func(txn *badger.Txn) error {
		for _, r := range refs {
			_, err := txn.Get(keys.TxIDKey(r.pid, items[r.i].TransactionID))
			switch {
			case err == nil:
				dups[r.i] = true
			case err != badger.ErrKeyNotFound:
				return err
			}
		}
		return nil
	})
	return dups, storageErr("transaction", err)
}

// reservePushes checks that the queues of a transaction's push items take
// them (room under MaxSize, encryption available) and reserves the room;
// on refusal it returns the index of the refused item. Items in dups are
// duplicates and need no room. Under b.mu.
func (b *Broker) reservePushes(pr *pushReq, dups []bool) (int, error) {
	need := make(map[*queue]int64)
	for j := range pr.items {
		q := b.queues[pr.items[j].Queue]
		if q == nil {
			continue // created by preparePush, unlimited and unencrypted
		}
		if q.cfg.EncryptionEnabled && len(b.opts.EncryptionKey) == 0 {
			return j, argErr("PushItem.Queue", "queue %q is encrypted and Options.EncryptionKey is not set", q.name)
		}
		if q.cfg.MaxSize == 0 || dups != nil && dups[j] {
			continue
		}
		need[q]++
		if q.pending+q.reserved+need[q] > int64(q.cfg.MaxSize) {
			return j, ErrQueueFull
		}
	}
	for q, n := range need {
		q.reserved += n
	}
	pr.reserved = need
	return 0, nil
}

// unreserve gives back the room reservePushes took. Under b.mu.
func (b *Broker) unreserve(pr *pushReq) {
	for q, n := range pr.reserved {
		q.reserved -= n
	}
	pr.reserved = nil
}

// Transaction starts a transaction builder:
//
//	_, err := b.Transaction().Ack(msg, queen.AckCompleted, opts).Push(next).Commit(ctx)
func (b *Broker) Transaction() *Transaction { return &Transaction{c: b} }

// Transaction gathers operations for the ExecTransaction of the [Client]
// that started it ([Broker.ExecTransaction] in process).
type Transaction struct {
	c   Client
	ops []TxOp
}

// Ack adds an ack of msg with status (completed, failed, retry, dlq, park).
func (t *Transaction) Ack(msg *Message, status AckStatus, opts AckOptions) *Transaction {
	it := &AckItem{Status: status, Error: opts.Error, Group: opts.ConsumerGroup, LeaseID: opts.LeaseID, Delay: opts.Delay}
	if opts.Status != "" {
		it.Status = opts.Status
	}
	if msg != nil {
		it.TransactionID, it.PartitionID = msg.TransactionID, msg.PartitionID
		if it.Group == "" && msg.ConsumerGroup != QueueModeGroup {
			it.Group = msg.ConsumerGroup
		}
		if it.LeaseID == "" {
			it.LeaseID = msg.LeaseID
		}
	}
	t.ops = append(t.ops, TxOp{Ack: it})
	return t
}

// Push adds pushes.
func (t *Transaction) Push(items ...PushItem) *Transaction {
	for i := range items {
		t.ops = append(t.ops, TxOp{Push: &items[i]})
	}
	return t
}

// Commit runs the gathered operations with the client's ExecTransaction
// ([Broker.ExecTransaction] in process).
func (t *Transaction) Commit(ctx context.Context) (*TxResult, error) {
	return t.c.ExecTransaction(ctx, t.ops)
}
