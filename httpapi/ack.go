package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/queenlite/queen"
)

// ackResult is one element of an ack reply.
type ackResult struct {
	Index         int        `json:"index"`
	TransactionID string     `json:"transactionId"`
	Success       bool       `json:"success"`
	Error         nullString `json:"error"`
	QueueName     nullString `json:"queueName"`
	PartitionName nullString `json:"partitionName"`
	LeaseReleased bool       `json:"leaseReleased"`
	DLQ           bool       `json:"dlq"`
	// Parked, ours, is dlq's counterpart for the parked store: this ack
	// parked the message (queen.AckResult.Parked).
	Parked bool `json:"parked"`
}

// ack serves POST /api/v1/ack: one message, answered with a one-element
// array.
func (h *handler) ack(w http.ResponseWriter, r *http.Request) {
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	it := parseAckFields(f, "transactionId is required", "partitionId is required to ensure message uniqueness", false, nil)
	if f.err != nil {
		h.writeError(w, r, f.err)
		return
	}
	h.settle(w, r, []queen.AckItem{it})
}

// ackBatch serves POST /api/v1/ack/batch.
func (h *handler) ackBatch(w http.ResponseWriter, r *http.Request) {
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	elems, n, ok := f.arrayMax("acknowledgments", queen.MaxAckItems)
	if !ok || f.err != nil {
		h.writeError(w, r, badRequest("acknowledgments array is required"))
		return
	}
	if n > queen.MaxAckItems { // Broker.AckBatch's refusal, before reading the items
		h.writeError(w, r, &queen.ArgumentError{Field: "items", Reason: "at most " + strconv.Itoa(queen.MaxAckItems) + " per call, not " + strconv.Itoa(n)})
		return
	}
	group := f.str("consumerGroup")
	if f.err == nil {
		f.err = checkLabel("consumerGroup", group)
	}
	items := make([]queen.AckItem, len(elems))
	var reuse fields // reading an item allocates only its strings
	for i, raw := range elems {
		itf := f.elem(&reuse, raw, "acknowledgments", i)
		if f.err != nil {
			break
		}
		var like *queen.AckItem
		if i > 0 {
			like = &items[i-1]
		}
		items[i] = parseAckFields(itf, "Each acknowledgment must have a valid transactionId string",
			"Each acknowledgment must have a valid partitionId string to ensure message uniqueness", false, like)
		if itf.err != nil {
			f.err = itf.err
			break
		}
		if f.has("consumerGroup") {
			items[i].Group = group
		}
	}
	if f.err != nil {
		h.writeError(w, r, f.err)
		return
	}
	h.settle(w, r, items)
}

// settle applies acks and answers 200 with one result per item.
func (h *handler) settle(w http.ResponseWriter, r *http.Request, items []queen.AckItem) {
	var res []queen.AckResult
	if len(items) > 0 {
		var err error
		if res, err = h.b.AckBatch(r.Context(), items); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	// The results are encoded one by one, with no []ackResult between:
	// the reply is what appendAckResults writes for them.
	buf := getBuf()
	b := append(*buf, '[')
	for i := range res {
		a := &res[i]
		msg := ackErrorText(a.Err)
		if msg == "internal error" {
			h.log.Error("httpapi: ack item failed", "path", r.URL.Path, "err", a.Err)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAckResult(b, &ackResult{
			Index: i, TransactionID: a.TransactionID, Success: a.Success, Error: nullString(msg),
			QueueName: nullString(a.Queue), PartitionName: nullString(a.Partition),
			LeaseReleased: a.LeaseReleased, DLQ: a.DeadLettered, Parked: a.Parked,
		})
	}
	*buf = append(b, ']')
	writeRaw(w, http.StatusOK, buf)
}

// leaseReply answers a lease extension: one object, read by both client
// generations. Queen 2.x clients take success (a body without it reads
// as failed) and newExpiresAt; 1.x clients newExpiresAt or
// lease_expires_at. Queen's 1.x server answered a one-element array of
// {index, leaseId, success, error, expiresAt}; those keys stay.
type leaseReply struct {
	LeaseID        string     `json:"leaseId"`
	Success        bool       `json:"success"`
	Renewed        int        `json:"renewed"` // partitions renewed (2.x)
	Error          nullString `json:"error"`
	NewExpiresAt   msTime     `json:"newExpiresAt"`
	ExpiresAt      msTime     `json:"expiresAt"`
	LeaseExpiresAt msTime     `json:"lease_expires_at"`
}

// extendLease serves POST /api/v1/lease/{leaseId}/extend. A refusal is
// success:false with HTTP 200, as in Queen.
func (h *handler) extendLease(w http.ResponseWriter, r *http.Request) {
	leaseID := r.PathValue("leaseId")
	if err := checkUUID("leaseId", leaseID); err != nil {
		h.writeError(w, r, err)
		return
	}
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	secs := f.num("seconds", 60, false)
	if f.err != nil {
		h.writeError(w, r, f.err)
		return
	}
	if secs > maxLeaseSeconds {
		h.writeError(w, r, badRequest("seconds must be at most %d", maxLeaseSeconds))
		return
	}
	d := time.Duration(secs) * time.Second
	ren, err := h.b.RenewLease(r.Context(), leaseID, d)
	res := leaseReply{LeaseID: leaseID}
	switch {
	case errors.Is(err, queen.ErrNotFound):
		res.Error = "Lease not found"
	case errors.Is(err, queen.ErrLeaseExpired):
		res.Error = "Lease already expired"
	case err != nil:
		h.writeError(w, r, err)
		return
	default:
		res.Success, res.Renewed = true, ren.Partitions
		res.NewExpiresAt, res.ExpiresAt, res.LeaseExpiresAt = msTime(ren.ExpiresAt), msTime(ren.ExpiresAt), msTime(ren.ExpiresAt)
	}
	writeJSON(w, http.StatusOK, res)
}

// maxLeaseSeconds is the longest lease, in the seconds of the wire
// (queen.MaxLease): leaseSeconds, extend seconds and leaseTime above it are
// refused with 400.
const maxLeaseSeconds = int64(queen.MaxLease / time.Second)
