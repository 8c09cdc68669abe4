package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/verbatim"
)

// popReply is a pop that returned messages (or a conflating group's empty
// pop). The top-level partition fields are those of the first partition.
type popReply struct {
	Success           bool   `json:"success"`
	Queue             string `json:"queue"`
	Partition         string `json:"partition"`
	PartitionID       string `json:"partitionId"`
	LeaseID           string `json:"leaseId"`
	ConsumerGroup     string `json:"consumerGroup"`
	PartitionsClaimed int    `json:"partitionsClaimed"`
	Conflating        bool   `json:"conflating"` // ours: the group conflates; Queen 2.x's conflation too
	// ConflationConflict and Autopilot are Queen 2.x's echoes (see
	// appendPopReply): the pop's conflation differed from the group's,
	// and how an autopilot pop was sized.
	ConflationConflict bool                   `json:"conflationConflict,omitempty"`
	Autopilot          *queen.AutopilotAdvice `json:"-"`
	Messages           []popMessage           `json:"messages"`
}

// popMessage is a delivered message; every message carries its own
// partition and lease, which are authoritative in multi-partition pops.
type popMessage struct {
	ID              string        `json:"id"`
	TransactionID   string        `json:"transactionId"`
	PartitionID     string        `json:"partitionId"`
	Partition       string        `json:"partition"`
	Queue           string        `json:"queue"`
	LeaseID         string        `json:"leaseId"`
	ConsumerGroup   string        `json:"consumerGroup"`
	Data            verbatim.JSON `json:"data"`
	TraceID         nullString    `json:"traceId"`
	ProducerSub     nullString    `json:"producerSub"`
	CreatedAt       usTime        `json:"createdAt"`
	Offset          int64         `json:"offset"`
	DeliveryAttempt int           `json:"deliveryAttempt"`
}

// popParams reads the query of every pop route into req.
func (h *handler) popParams(r *http.Request, req *queen.PopRequest) error {
	p := newParams(r)
	req.Group = p.name("consumerGroup")
	req.Autopilot = p.boolean("autopilot", false)
	if _, ok := p.str("batch"); ok || !req.Autopilot {
		req.Batch = int(min(max(p.num("batch", int64(h.batch)), 1), maxBatch))
	}
	if _, ok := p.str("partitions"); ok || !req.Autopilot {
		req.Partitions = int(min(max(p.num("partitions", 1), 1), maxPartitions))
	}
	req.Wait = p.boolean("wait", false)
	timeout := time.Duration(min(p.num("timeout", h.timeout.Milliseconds()), maxTimeout.Milliseconds())) * time.Millisecond
	req.Timeout = timeout
	// commitOnDelivery is Queen 2.0.2's name; autoAck stays its alias.
	req.CommitOnDelivery = p.boolean("autoAck", false) || p.boolean("commitOnDelivery", false)
	if secs := p.num("leaseSeconds", 0); secs > maxLeaseSeconds {
		p.fail("leaseSeconds must be at most %d", maxLeaseSeconds)
	} else {
		req.Lease = time.Duration(secs) * time.Second
	}
	req.Conflation = p.boolean("conflation", false)
	// Any other mode means all, as on Queen's server: its JS client sends
	// "from_beginning". subscriptionFrom, when sent, wins.
	switch mode, _ := p.str("subscriptionMode"); mode {
	case "":
	case "new", "new-only":
		req.SubscriptionMode = queen.SubscriptionModeNew
	default:
		req.SubscriptionMode = queen.SubscriptionModeAll
	}
	if from, _ := p.str("subscriptionFrom"); from == "now" {
		req.SubscriptionMode = queen.SubscriptionModeNew
	} else if from != "" {
		req.SubscriptionFrom = p.time("subscriptionFrom")
	}
	if p.err != nil {
		return p.err
	}
	switch {
	case req.Conflation && (req.Group == "" || req.Group == queen.QueueModeGroup):
		return badRequest("conflation needs a consumerGroup")
	case req.Conflation && req.CommitOnDelivery:
		return badRequest("conflation cannot be combined with autoAck/commitOnDelivery")
	}
	if req.Wait && timeout == 0 {
		req.Wait = false
	}
	return nil
}

// popQueue serves GET /api/v1/pop/queue/{queue}.
func (h *handler) popQueue(w http.ResponseWriter, r *http.Request) {
	var req queen.PopRequest
	var err error
	if req.Queue, err = pathName(r, "queue"); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.pop(w, r, req)
}

// popPartition serves GET /api/v1/pop/queue/{queue}/partition/{partition}.
func (h *handler) popPartition(w http.ResponseWriter, r *http.Request) {
	var req queen.PopRequest
	var err error
	if req.Queue, err = pathName(r, "queue"); err != nil {
		h.writeError(w, r, err)
		return
	}
	if req.Partition, err = pathName(r, "partition"); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.pop(w, r, req)
}

// popDiscovery serves GET /api/v1/pop?namespace=&task=: a pop across the
// queues with those labels. It never waits.
func (h *handler) popDiscovery(w http.ResponseWriter, r *http.Request) {
	p := newParams(r)
	req := queen.PopRequest{Namespace: p.name("namespace"), Task: p.name("task")}
	if p.err != nil {
		h.writeError(w, r, p.err)
		return
	}
	if req.Namespace == "" && req.Task == "" {
		h.writeError(w, r, badRequest("namespace or task is required for a pop without a queue"))
		return
	}
	h.pop(w, r, req)
}

// pop runs a pop and answers 200 with messages, or 204 with no body.
func (h *handler) pop(w http.ResponseWriter, r *http.Request, req queen.PopRequest) {
	if err := h.popParams(r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if req.Queue == "" {
		req.Wait = false
	}
	ctx := r.Context()
	if req.Wait {
		if h.stopped.Err() != nil { // shutting down: no new waits
			req.Wait = false
		} else {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(h.stopped, cancel)()
		}
	}
	res, err := h.b.Pop(ctx, req)
	if err != nil {
		if ctx.Err() != nil { // the client left or the server is shutting down
			noContent(w)
			return
		}
		h.writeError(w, r, err)
		return
	}
	// An empty pop is 204, unless the group conflates or the pop's
	// conflation differed from it: Queen 2.x clients expect the echo then.
	if len(res.Messages) == 0 && !res.Conflating && !res.ConflationConflict {
		noContent(w)
		return
	}
	// The messages are encoded one by one from res, with no []popMessage
	// between: the reply's members are those of a popReply (appendPopReply).
	head := popReply{Success: true, Queue: res.Queue, Partition: res.Partition, PartitionID: res.PartitionID,
		LeaseID: res.LeaseID, ConsumerGroup: res.ConsumerGroup, PartitionsClaimed: res.PartitionsClaimed,
		Conflating: res.Conflating, ConflationConflict: res.ConflationConflict, Autopilot: res.Autopilot}
	buf := getBuf()
	b := append(appendPopHead(*buf, &head), '[')
	for i, m := range res.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		pm := popMessage{
			ID: m.ID, TransactionID: m.TransactionID, PartitionID: m.PartitionID, Partition: m.Partition, Queue: m.Queue,
			LeaseID: m.LeaseID, ConsumerGroup: m.ConsumerGroup, Data: payload(m.Payload), TraceID: nullString(m.TraceID),
			ProducerSub: nullString(m.ProducerSub), CreatedAt: usTime(m.CreatedAt), Offset: m.Offset, DeliveryAttempt: m.DeliveryAttempt,
		}
		b = appendPopMessage(b, &pm)
	}
	*buf = append(b, "]}"...)
	writeRaw(w, http.StatusOK, buf)
}
