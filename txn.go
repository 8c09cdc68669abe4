package queen

import (
	"context"
	"fmt"

	"github.com/queenlite/queen/internal/uuid"
)

// TxOp is one operation of a transaction: exactly one of Ack and Push.
type TxOp struct {
	Ack  *AckItem
	Push *PushItem
}

// TxOpResult reports one operation, in order.
type TxOpResult struct {
	Ack  *AckResult  // for an ack operation
	Push *PushResult // for a push operation
}

// TxResult reports a transaction.
type TxResult struct {
	ID      string // correlation id of this call
	Results []TxOpResult
}

// ExecTransaction runs acks and pushes all or nothing: either every
// operation takes effect, durably and in one storage transaction, or none
// does. Each operation means what it means alone (a failed ack spends the
// retry budget; retry and park are allowed; a push whose transactionId
// already exists is reported duplicate and does not abort). A refused ack
// (unknown message, wrong or expired lease, bad status) aborts the whole
// transaction with a [*TransactionError]; the result then holds what was
// gathered up to the refused operation.
func (b *Broker) ExecTransaction(ctx context.Context, ops []TxOp) (*TxResult, error) {
	if len(ops) == 0 {
		return nil, argErr("ops", "must not be empty")
	}
	res := &TxResult{ID: uuid.NewV4().String(), Results: make([]TxOpResult, len(ops))}
	var acks []AckItem
	var ackAt []int
	var pushes []PushItem
	var pushAt []int
	for i, o := range ops {
		switch {
		case o.Ack != nil && o.Push == nil:
			if o.Ack.TransactionID == "" || o.Ack.PartitionID == "" {
				return nil, argErr(fmt.Sprintf("ops[%d].Ack", i), "needs TransactionID and PartitionID")
			}
			acks = append(acks, *o.Ack)
			ackAt = append(ackAt, i)
		case o.Push != nil && o.Ack == nil:
			it := *o.Push
			if err := it.normalize(i); err != nil {
				return nil, err
			}
			pushes = append(pushes, it)
			pushAt = append(pushAt, i)
		default:
			return nil, argErr(fmt.Sprintf("ops[%d]", i), "must hold exactly one of Ack and Push")
		}
	}
	pushResults := make([]PushResult, len(pushes))
	pr := &pushReq{items: pushes, results: pushResults}
	size, count := (&writeReq{push: pr}).estimate()
	if size > txnMaxBytes || count > txnMaxOps {
		return nil, fmt.Errorf("%w: transaction of %d operations", ErrTooLarge, len(ops))
	}

	b.mu.Lock()
	if err := b.usable(); err != nil {
		b.mu.Unlock()
		return nil, err
	}
	ackResults, writes, err := b.applyAcks(acks, b.now(), true)
	for j := range ackResults {
		r := ackResults[j]
		res.Results[ackAt[j]].Ack = &r
	}
	if err != nil {
		b.mu.Unlock()
		if te, ok := err.(*TransactionError); ok {
			te.Index = ackAt[te.Index]
			res.Results = res.Results[:te.Index+1]
		}
		return res, err
	}
	done := make(chan error, 1)
	pr.done = done
	b.w.enqueue(&writeReq{ops: writes, push: pr, done: done})
	b.mu.Unlock()
	if err := waitCtx(ctx, done); err != nil {
		return nil, err
	}
	for j := range pushResults {
		res.Results[pushAt[j]].Push = &pushResults[j]
	}
	return res, nil
}

// Transaction starts a transaction builder:
//
//	_, err := b.Transaction().Ack(msg, queen.AckCompleted, opts).Push(next).Commit(ctx)
func (b *Broker) Transaction() *Transaction { return &Transaction{b: b} }

// Transaction gathers operations for [Broker.ExecTransaction].
type Transaction struct {
	b   *Broker
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

// Commit runs the gathered operations with [Broker.ExecTransaction].
func (t *Transaction) Commit(ctx context.Context) (*TxResult, error) {
	return t.b.ExecTransaction(ctx, t.ops)
}
