package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/queenlite/queen"
)

// pushResult is one element of the push reply. Queen writes the
// transaction id in snake_case; Queen's Go client reads it in camelCase,
// so both are written.
type pushResult struct {
	Index         int        `json:"index"`
	TransactionID string     `json:"transaction_id"`
	TxID          string     `json:"transactionId"`
	Status        string     `json:"status"`
	MessageID     nullString `json:"message_id"`
	PartitionID   nullString `json:"partition_id"`
	TraceID       nullString `json:"trace_id"`
	QueueName     string     `json:"queueName"`
	Partition     string     `json:"partition"`
	Offset        *int64     `json:"offset,omitempty"`
	Error         string     `json:"error,omitempty"`
}

// parsePushItem reads one push item. In a transaction the payload
// defaults to {} and may be sent as "data". The names equal to those of
// like (the item before, or the zero item) are like's strings, not copies.
func parsePushItem(f *fields, inTx bool, like *queen.PushItem) queen.PushItem {
	var it queen.PushItem
	if !f.has("queue") {
		f.fail("%squeue is required", f.prefix())
	}
	it.Queue = f.strLike("queue", like.Queue)
	if f.present("partition") && !f.has("partition") {
		f.fail("%spartition must be a string", f.prefix())
	}
	it.Partition = f.strLike("partition", like.Partition)
	it.TransactionID = f.str("transactionId")
	it.TraceID = f.str("traceId")
	it.Namespace = f.strLike("namespace", like.Namespace)
	it.Task = f.strLike("task", like.Task)
	switch {
	case f.present("payload"):
		it.Payload = f.raw("payload")
	case inTx && f.present("data"):
		it.Payload = f.raw("data")
	case inTx:
		it.Payload = json.RawMessage("{}")
	}
	if f.err != nil {
		return it
	}
	for _, c := range [...]struct {
		field, v string
		req      bool
	}{
		{"queue", it.Queue, true}, {"partition", it.Partition, false}, {"transactionId", it.TransactionID, false},
		{"namespace", it.Namespace, false}, {"task", it.Task, false},
	} {
		check := checkLabel
		if c.req {
			check = checkName
		}
		if check("", c.v) != nil { // the field's name is made for the message only
			f.err = check(f.prefix()+c.field, c.v)
			return it
		}
	}
	if it.TraceID != "" && !isUUID(it.TraceID) {
		f.err = checkUUID(f.prefix()+"traceId", it.TraceID)
	}
	return it
}

// stampProducer sets the producerSub of the items, or of the push
// operations of ops, from Options.ProducerSub.
func (h *handler) stampProducer(r *http.Request, items []queen.PushItem, ops []queen.TxOp) {
	if h.producer == nil || len(items) == 0 && len(ops) == 0 {
		return
	}
	sub := h.producer(r)
	for i := range items {
		items[i].ProducerSub = sub
	}
	for _, op := range ops {
		if op.Push != nil {
			op.Push.ProducerSub = sub
		}
	}
}

// push serves POST /api/v1/push.
func (h *handler) push(w http.ResponseWriter, r *http.Request) {
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	elems, n, ok := f.arrayMax("items", queen.MaxPushItems)
	if !ok || f.err != nil {
		h.writeError(w, r, badRequest("items array is required"))
		return
	}
	if n > queen.MaxPushItems {
		h.writeError(w, r, tooLarge("a push takes at most %d items (queen.MaxPushItems), not %d", queen.MaxPushItems, n))
		return
	}
	items := make([]queen.PushItem, len(elems))
	var itf fields // reused: reading an item allocates only its strings
	for i, raw := range elems {
		it := f.elem(&itf, raw, "items", i)
		if f.err != nil {
			h.writeError(w, r, f.err)
			return
		}
		like := &queen.PushItem{}
		if i > 0 {
			like = &items[i-1]
		}
		items[i] = parsePushItem(it, false, like)
		if it.err != nil {
			h.writeError(w, r, it.err)
			return
		}
	}
	elems = nil
	h.stampProducer(r, items, nil)
	var res []queen.PushResult
	if len(items) > 0 {
		if res, err = h.b.Push(r.Context(), items); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	items = nil // no longer needed while the reply is written
	out := newReplyStream(w, http.StatusCreated)
	defer out.close()
	*out.buf = append(*out.buf, '[')
	for i := range res {
		if i > 0 {
			*out.buf = append(*out.buf, ',')
		}
		pr := h.pushResultJSON(r, i, &res[i])
		*out.buf = appendPushResult(*out.buf, &pr)
		out.flush(false)
	}
	*out.buf = append(*out.buf, ']')
}

func (h *handler) pushResultJSON(r *http.Request, i int, res *queen.PushResult) pushResult {
	pr := pushResult{Index: i, TransactionID: res.TransactionID, TxID: res.TransactionID, Status: string(res.Status),
		QueueName: res.Queue, Partition: res.Partition}
	switch res.Status {
	case queen.PushQueued, queen.PushDuplicate:
		pr.Offset = &res.Offset // not a copy: one allocation fewer per item
		pr.MessageID, pr.PartitionID, pr.TraceID = nullString(res.MessageID), nullString(res.PartitionID), nullString(res.TraceID)
	default:
		// Ours: a failed item still names its partition and trace (Queen's
		// server sends neither).
		pr.PartitionID, pr.TraceID = nullString(res.PartitionID), nullString(res.TraceID)
		pr.Error = "internal error"
		if errors.Is(res.Err, queen.ErrQueueFull) {
			pr.Error = "queue full"
		} else {
			h.log.Error("httpapi: push item failed", "path", r.URL.Path, "queue", res.Queue, "err", res.Err)
		}
	}
	return pr
}

// txResult is one operation of the transaction reply.
type txResult struct {
	Index         int        `json:"index"`
	Type          string     `json:"type"`
	Success       bool       `json:"success"`
	TransactionID string     `json:"transactionId"`
	Error         nullString `json:"error"`
	// ack; parked is ours (queen.AckResult.Parked), and so are, on acks,
	// queueName, partitionName and leaseReleased (named as in the ack
	// answers). An ack the broker gathered nothing for (an abort before
	// it) has none of dlq, parked, leaseReleased nor a transactionId.
	DLQ           *bool  `json:"dlq,omitempty"`
	Parked        *bool  `json:"parked,omitempty"`
	PartitionName string `json:"partitionName,omitempty"`
	LeaseReleased *bool  `json:"leaseReleased,omitempty"`
	// push (and ack, see above)
	Status      string `json:"status,omitempty"`
	MessageID   string `json:"messageId,omitempty"`
	PartitionID string `json:"partitionId,omitempty"`
	QueueName   string `json:"queueName,omitempty"`
	Offset      *int64 `json:"offset,omitempty"`
}

// ackOf fills the ack fields of tr from a.
func (tr *txResult) ackOf(a *queen.AckResult) {
	dlq, parked, released := a.DeadLettered, a.Parked, a.LeaseReleased
	tr.TransactionID, tr.DLQ, tr.Parked, tr.LeaseReleased = a.TransactionID, &dlq, &parked, &released
	tr.QueueName, tr.PartitionName = a.Queue, a.Partition
}

// txReply is the transaction reply; error is absent on success.
type txReply struct {
	TransactionID string `json:"transactionId"`
	Success       bool   `json:"success"`
	Error         string `json:"error,omitempty"`
	// Reason is Queen 2.x's code of a refused position (queue_not_found,
	// offset_out_of_range).
	Reason  string     `json:"reason,omitempty"`
	Results []txResult `json:"results"`
}

// parseAckFields reads an ack item (of /ack or a transaction) with the
// given messages for missing ids; "" stands for "<prefix>transactionId is
// required" and "<prefix>partitionId is required". In a transaction
// (inTx) a partitionId that is not a UUID is not refused: no broker hands
// one out, so it names no message, and the transaction is aborted with
// "ACK operation failed: Message not found" as a Broker answers
// (queen.TransactionError wrapping queen.ErrNotFound).
//
// like, when not nil, is the item read before this one in the same body:
// a value equal to its partitionId, status, consumerGroup or leaseId (one
// batch usually acks one lease's messages) is its string, not a new one.
func parseAckFields(f *fields, missingTx, missingPart string, inTx bool, like *queen.AckItem) queen.AckItem {
	if like == nil {
		like = &queen.AckItem{}
	}
	if missingTx == "" {
		missingTx = f.prefix() + "transactionId is required"
	}
	if missingPart == "" {
		missingPart = f.prefix() + "partitionId is required"
	}
	var it queen.AckItem
	if kind(f.raw("transactionId")) != '"' {
		f.fail("%s", missingTx)
		return it
	}
	if kind(f.raw("partitionId")) != '"' {
		f.fail("%s", missingPart)
		return it
	}
	it.TransactionID = f.str("transactionId")
	it.PartitionID = f.strLike("partitionId", like.PartitionID)
	it.Status = queen.AckStatus(f.strLike("status", string(like.Status)))
	it.Group = f.strLike("consumerGroup", like.Group)
	it.LeaseID = f.strLike("leaseId", like.LeaseID)
	it.Error = f.str("error")
	// delayMs, ours: a failed or retry ack holds the partition back this
	// long (queen.AckItem.Delay).
	it.Delay = f.duration("delayMs", 0, time.Millisecond, maxDurationUnits)
	if f.err != nil {
		return it
	}
	switch {
	case it.TransactionID == "":
		f.fail("%s", missingTx)
	case it.PartitionID == "":
		f.fail("%s", missingPart)
	}
	if f.err != nil {
		return it
	}
	// The field's name is made for the message only.
	switch {
	case checkLabel("", it.TransactionID) != nil:
		f.err = checkLabel(f.prefix()+"transactionId", it.TransactionID)
	case !inTx && !isUUID(it.PartitionID):
		f.err = checkUUID(f.prefix()+"partitionId", it.PartitionID)
	case checkLabel("", it.Group) != nil:
		f.err = checkLabel(f.prefix()+"consumerGroup", it.Group)
	case checkLabel("", string(it.Status)) != nil:
		f.err = checkLabel(f.prefix()+"status", string(it.Status))
	case it.LeaseID != "" && !isUUID(it.LeaseID):
		f.err = checkUUID(f.prefix()+"leaseId", it.LeaseID)
	}
	return it
}

// transaction serves POST /api/v1/transaction.
func (h *handler) transaction(w http.ResponseWriter, r *http.Request) {
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	// positions, Queen 2.x's rider, sets group positions with the
	// operations; a transaction of positions alone needs no operations.
	riders := f.has("positions")
	elems, n, ok := f.arrayMax("operations", queen.MaxTxOps)
	if (!ok && !riders) || f.err != nil {
		h.writeError(w, r, badRequest("operations array required"))
		return
	}
	if n > queen.MaxTxOps {
		h.writeError(w, r, tooLarge("a transaction takes at most %d operations (queen.MaxTxOps), not %d", queen.MaxTxOps, n))
		return
	}
	if len(elems) == 0 && !riders {
		h.writeError(w, r, badRequest("operations array cannot be empty"))
		return
	}
	ops := make([]queen.TxOp, 0, len(elems))
	types := make([]string, 0, len(elems))
	var opf, itf fields // reused, as in push
	like := &queen.PushItem{}
	for i, raw := range elems {
		op := f.elem(&opf, raw, "operations", i)
		typ := op.str("type")
		switch {
		case f.err != nil:
		case op.err != nil:
			f.err = op.err
		case typ == "ack":
			it := parseAckFields(op, "", "", true, nil)
			ops, types = append(ops, queen.TxOp{Ack: &it}), append(types, "ack")
		case typ == "push" && op.present("items"):
			// Each item is one operation.
			items, n, _ := op.arrayMax("items", queen.MaxTxOps-len(ops))
			if len(ops)+n > queen.MaxTxOps {
				f.err = errTooManyOps
				break
			}
			of := ""
			for j, raw := range items {
				if of == "" {
					of = op.prefix() + "items"
				}
				it := op.elem(&itf, raw, of, j)
				if op.err != nil {
					break
				}
				p := parsePushItem(it, true, like)
				if it.err != nil {
					op.err = it.err
					break
				}
				ops, types, like = append(ops, queen.TxOp{Push: &p}), append(types, "push"), &p
			}
		case typ == "push":
			p := parsePushItem(op, true, like)
			ops, types, like = append(ops, queen.TxOp{Push: &p}), append(types, "push"), &p
		case typ == "":
			op.fail("%stype is required", op.prefix())
		default:
			op.fail("Unknown operation type: %s", typ)
		}
		if f.err == nil && op.err != nil {
			f.err = op.err
		}
		if f.err == nil && len(ops) > queen.MaxTxOps {
			f.err = errTooManyOps
		}
		if f.err != nil {
			h.writeError(w, r, f.err)
			return
		}
	}
	pos, err := parsePositions(f, queen.MaxTxOps-len(ops))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	// Queen 2.x's kv and timers riders (a lock guard travels as a kv
	// check) are not served: refused rather than run without them.
	for _, rider := range []string{"kv", "timers"} {
		if f.has(rider) {
			h.writeError(w, r, badRequest("%s operations are not supported by this broker", rider))
			return
		}
	}
	// requiredLeases: as in Queen 2.x, a bundle naming a single lease
	// lends it to the acks that carry none (they are fenced by it);
	// Queen 1.x ignored the list.
	if lent, err := singleLease(f); err != nil {
		h.writeError(w, r, err)
		return
	} else if lent != "" {
		for _, o := range ops {
			if o.Ack != nil && o.Ack.LeaseID == "" {
				o.Ack.LeaseID = lent
			}
		}
	}
	for range pos {
		types = append(types, "position")
	}
	ops = append(ops, pos...)
	if len(ops) == 0 {
		h.writeError(w, r, badRequest("operations array cannot be empty"))
		return
	}
	h.stampProducer(r, nil, ops)
	res, err := h.b.ExecTransaction(r.Context(), ops)
	var te *queen.TransactionError
	switch {
	case errors.As(err, &te) && res != nil:
		reply := txReply{TransactionID: res.ID, Error: txErrorText(ops, te), Results: []txResult{}}
		if te.Op == "position" {
			reply.Reason = "queue_not_found"
			if errors.Is(te.Err, queen.ErrOffsetOutOfRange) {
				reply.Reason = "offset_out_of_range"
			}
		}
		for i := range res.Results {
			tr := txResult{Index: i, Type: types[i]}
			if a := res.Results[i].Ack; a != nil {
				tr.ackOf(a)
				tr.Error = nullString(ackErrorText(a.Err))
			} else if ops[i].Push != nil {
				tr.TransactionID = ops[i].Push.TransactionID
			} else if i == te.Index {
				tr.Error = nullString(positionErrorText(te.Err))
			}
			reply.Results = append(reply.Results, tr)
		}
		writeJSON(w, http.StatusOK, reply)
		return
	case err != nil:
		h.writeError(w, r, err)
		return
	}
	reply := txReply{TransactionID: res.ID, Success: true, Results: make([]txResult, 0, len(res.Results))}
	for i, or := range res.Results {
		tr := txResult{Index: i, Type: types[i], Success: true}
		switch {
		case or.Ack != nil:
			tr.ackOf(or.Ack)
		case or.Push != nil:
			p := h.pushResultJSON(r, i, or.Push)
			tr.TransactionID, tr.Status, tr.MessageID = p.TransactionID, p.Status, string(p.MessageID)
			tr.PartitionID, tr.QueueName, tr.Offset = string(p.PartitionID), p.QueueName, p.Offset
			if p.Error != "" {
				tr.Success, tr.Error = false, nullString(p.Error)
			}
		case or.Position != nil:
			off := or.Position.Offset
			tr.QueueName, tr.PartitionName, tr.Offset = or.Position.Queue, or.Position.Partition, &off
		}
		reply.Results = append(reply.Results, tr)
	}
	writeJSON(w, http.StatusOK, reply)
}

// singleLease reads a transaction's requiredLeases: an array of lease
// ids, taken as a set; it returns the lease when the set has exactly one.
func singleLease(f *fields) (string, error) {
	if !f.has("requiredLeases") {
		return "", f.err
	}
	elems, n, ok := f.arrayMax("requiredLeases", queen.MaxTxOps)
	if !ok || f.err != nil || n > queen.MaxTxOps {
		return "", badRequest("requiredLeases must be an array of lease ids")
	}
	lease := ""
	for i, raw := range elems {
		var id string
		if kind(raw) != '"' || json.Unmarshal(raw, &id) != nil {
			return "", badRequest("requiredLeases[%d] must be a string", i)
		}
		if lease != "" && id != lease {
			return "", nil // several leases: each ack is fenced by its own
		}
		lease = id
	}
	return lease, nil
}

// errTooManyOps refuses a transaction whose push items make it longer
// than queen.MaxTxOps.
var errTooManyOps = tooLarge("a transaction takes at most %d operations (queen.MaxTxOps), counting each push item as one", queen.MaxTxOps)

// txErrorText is Queen's reason for an aborted transaction.
func txErrorText(ops []queen.TxOp, te *queen.TransactionError) string {
	if te.Index >= 0 && te.Index < len(ops) && ops[te.Index].Ack != nil {
		return "ACK operation failed: " + ackErrorText(te.Err)
	}
	if te.Index >= 0 && te.Index < len(ops) && ops[te.Index].Push != nil {
		return "PUSH operation failed: " + pushErrorText(te.Err)
	}
	if te.Index >= 0 && te.Index < len(ops) && ops[te.Index].Position != nil {
		return "POSITION operation failed: " + positionErrorText(te.Err)
	}
	return "transaction aborted: " + ackErrorText(te.Err)
}
