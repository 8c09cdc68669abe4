package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/uuid"
	"github.com/queenlite/queen/internal/verbatim"
)

// pushItemJSON is a push item on the wire.
type pushItemJSON struct {
	Queue         string        `json:"queue"`
	Partition     string        `json:"partition,omitempty"`
	Payload       verbatim.JSON `json:"payload"` // sent byte for byte
	TransactionID string        `json:"transactionId"`
	TraceID       string        `json:"traceId,omitempty"`
	Namespace     string        `json:"namespace,omitempty"`
	Task          string        `json:"task,omitempty"`
}

// pushResultJSON is a push result: Queen writes its ids in snake_case,
// cmd/queen in both cases.
type pushResultJSON struct {
	Status         string  `json:"status"`
	TransactionID  string  `json:"transactionId"`
	TransactionID2 string  `json:"transaction_id"`
	MessageID      *string `json:"messageId"`
	MessageID2     *string `json:"message_id"`
	PartitionID    *string `json:"partitionId"`
	PartitionID2   *string `json:"partition_id"`
	TraceID        *string `json:"traceId"`
	TraceID2       *string `json:"trace_id"`
	QueueName      string  `json:"queueName"`
	Partition      string  `json:"partition"`
	Offset         *int64  `json:"offset"`
	Error          *string `json:"error"`
}

func either(a, b *string) string {
	if a != nil && *a != "" {
		return *a
	}
	if b != nil {
		return *b
	}
	return ""
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// result turns a wire result for item it into a PushResult.
func (p *pushResultJSON) result(it *pushItemJSON) queen.PushResult {
	r := queen.PushResult{
		Status: queen.PushStatus(p.Status), Queue: firstOf(p.QueueName, it.Queue), Partition: firstOf(p.Partition, it.Partition),
		PartitionID: either(p.PartitionID, p.PartitionID2), MessageID: either(p.MessageID, p.MessageID2),
		TransactionID: firstOf(firstOf(p.TransactionID, p.TransactionID2), it.TransactionID), TraceID: either(p.TraceID, p.TraceID2),
	}
	if p.Offset != nil {
		r.Offset = *p.Offset
	}
	switch r.Status {
	case queen.PushQueued, queen.PushDuplicate:
	case "buffered": // Queen's server kept it in its write buffer: stored later
		r.Status = queen.PushQueued
	default:
		r.Status = queen.PushFailed
		r.Err = pushError(either(p.Error, nil))
		if r.TraceID == "" { // Queen's server names no trace for a failed item: the one sent
			r.TraceID = it.TraceID
		}
	}
	return r
}

// wireItems checks push items as the broker does and gives each one
// without a transactionId a fresh UUIDv7, so that the push can be
// repeated safely.
func wireItems(items []queen.PushItem, field func(i int) string) ([]pushItemJSON, error) {
	out := make([]pushItemJSON, len(items))
	for i := range items {
		it := &items[i]
		if it.Queue == "" {
			return nil, &queen.ArgumentError{Field: field(i) + ".Queue", Reason: "must not be empty"}
		}
		for _, f := range [...]struct{ name, v string }{{"Queue", it.Queue}, {"Partition", it.Partition}, {"TransactionID", it.TransactionID},
			{"TraceID", it.TraceID}, {"Namespace", it.Namespace}, {"Task", it.Task}} {
			if len(f.v) > queen.MaxNameLen {
				return nil, &queen.ArgumentError{Field: field(i) + "." + f.name, Reason: fmt.Sprintf("longer than %d bytes", queen.MaxNameLen)}
			}
		}
		p := it.Payload
		if len(p) == 0 {
			p = json.RawMessage("null")
		} else if !json.Valid(p) {
			return nil, &queen.ArgumentError{Field: field(i) + ".Payload", Reason: "not valid JSON"}
		}
		part := it.Partition
		if part == "" {
			part = queen.DefaultPartition
		}
		txid := it.TransactionID
		if txid == "" {
			txid = uuid.NewV7().String()
		}
		out[i] = pushItemJSON{Queue: it.Queue, Partition: part, Payload: verbatim.JSON(p), TransactionID: txid, TraceID: it.TraceID,
			Namespace: it.Namespace, Task: it.Task}
	}
	return out, nil
}

// Push stores messages, as [queen.Broker.Push]. Items without a
// TransactionID get one here (UUIDv7), so the push is safe to repeat. An
// item the server refused is reported in its result (PushFailed, with
// [queen.ErrQueueFull] for a full queue); against Queen's server, which
// does not name them, its PartitionID is empty and its TraceID the item's.
func (c *Client) Push(ctx context.Context, items []queen.PushItem) ([]queen.PushResult, error) {
	if len(items) > queen.MaxPushItems { // refused here: Queen's server has no such cap
		return nil, fmt.Errorf("%w: a push takes at most %d items (queen.MaxPushItems), not %d", queen.ErrTooLarge, queen.MaxPushItems, len(items))
	}
	wire, err := wireItems(items, func(i int) string { return "PushItem[" + strconv.Itoa(i) + "]" })
	if err != nil {
		return nil, err
	}
	results := make([]queen.PushResult, 0, len(items))
	if len(items) == 0 {
		return results, nil
	}
	var out []pushResultJSON
	a, err := c.send(ctx, &request{op: "push", method: http.MethodPost, path: "/api/v1/push", body: map[string]any{"items": wire}, safe: true,
		route: pushRoute(items)})
	if err != nil {
		return nil, err
	}
	req := &request{op: "push", method: http.MethodPost, path: "/api/v1/push"}
	if a.status < 200 || a.status > 299 {
		return nil, c.errorFor(req, a)
	}
	if err := json.Unmarshal(a.body, &out); err != nil {
		return nil, &TransportError{Op: "push", URL: c.redacted(req), Err: fmt.Errorf("answer is not a list of results: %w", err)}
	}
	if len(out) != len(items) {
		return nil, &TransportError{Op: "push", URL: c.redacted(req), Err: fmt.Errorf("%d results for %d items", len(out), len(items))}
	}
	for i := range out {
		results = append(results, out[i].result(&wire[i]))
	}
	return results, nil
}

// popReply is a pop's answer, in either server's form.
type popReply struct {
	Success           *bool   `json:"success"`
	Error             *string `json:"error"`
	Queue             string  `json:"queue"`
	Partition         string  `json:"partition"`
	PartitionID       *string `json:"partitionId"`
	LeaseID           *string `json:"leaseId"`
	ConsumerGroup     string  `json:"consumerGroup"`
	PartitionsClaimed int     `json:"partitionsClaimed"`
	Conflating        *bool   `json:"conflating"` // ours; absent from Queen's answers
	// Queen 2.x's echoes, each sent only when true (cmd/queen sends them
	// too): the group conflates; the pop's conflation differed from the
	// group's; how an autopilot pop was sized.
	Conflation         *bool           `json:"conflation"`
	ConflationConflict *bool           `json:"conflationConflict"`
	Autopilot          json.RawMessage `json:"autopilot"`
	Messages           []popMessageJS  `json:"messages"`
}

// autopilotJSON is a pop's autopilot echo.
type autopilotJSON struct {
	Partitions *int   `json:"partitions"`
	Batch      *int   `json:"batch"`
	WaitMs     *int64 `json:"waitMs"`
}

// advice reads an autopilot echo: nil when absent or malformed (a 2.x
// client takes either as no advice, never as an error).
func advice(raw json.RawMessage) *queen.AutopilotAdvice {
	if len(raw) == 0 {
		return nil
	}
	var a autopilotJSON
	if err := json.Unmarshal(raw, &a); err != nil || a.Partitions == nil || a.Batch == nil {
		return nil
	}
	out := &queen.AutopilotAdvice{Partitions: *a.Partitions, Batch: *a.Batch}
	if a.WaitMs != nil && *a.WaitMs > 0 {
		out.Wait = time.Duration(*a.WaitMs) * time.Millisecond
	}
	return out
}

type popMessageJS struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	PartitionID     string          `json:"partitionId"`
	Partition       string          `json:"partition"`
	Queue           string          `json:"queue"`
	LeaseID         *string         `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	Data            json.RawMessage `json:"data"`
	TraceID         *string         `json:"traceId"`
	ProducerSub     *string         `json:"producerSub"`
	CreatedAt       *string         `json:"createdAt"`
	Offset          *int64          `json:"offset"`
	DeliveryAttempt *int            `json:"deliveryAttempt"`
}

// emptyPops are the errors Queen's server gives an empty pop, with 200.
var emptyPops = map[string]bool{"no_available_partition": true, "lease_held": true, "partition_not_found": true,
	"window_buffer_active": true, "paused": true}

// popQuery checks req as the broker does and builds the pop's path and
// query.
func popQuery(req *queen.PopRequest) (string, url.Values, error) {
	bad := func(field, reason string) error {
		return &queen.ArgumentError{Field: "PopRequest." + field, Reason: reason}
	}
	for _, f := range [...]struct{ name, v string }{{"Queue", req.Queue}, {"Partition", req.Partition}, {"Group", req.Group},
		{"Namespace", req.Namespace}, {"Task", req.Task}} {
		if len(f.v) > queen.MaxNameLen {
			return "", nil, bad(f.name, fmt.Sprintf("longer than %d bytes", queen.MaxNameLen))
		}
	}
	switch {
	case req.Batch < 0:
		return "", nil, bad("Batch", "must not be negative")
	case req.Partitions < 0:
		return "", nil, bad("Partitions", "must not be negative")
	case req.Timeout < 0:
		return "", nil, bad("Timeout", "must not be negative")
	case req.Lease < 0:
		return "", nil, bad("Lease", "must not be negative")
	case req.Lease > 0 && req.Lease < time.Second:
		return "", nil, bad("Lease", fmt.Sprintf("must be at least 1s, not %v", req.Lease))
	case req.Batch > queen.MaxBatch:
		return "", nil, bad("Batch", fmt.Sprintf("must be at most %d, not %d", queen.MaxBatch, req.Batch))
	case req.Partitions > queen.MaxPartitions:
		return "", nil, bad("Partitions", fmt.Sprintf("must be at most %d, not %d", queen.MaxPartitions, req.Partitions))
	case req.Timeout > queen.MaxPopTimeout:
		return "", nil, bad("Timeout", fmt.Sprintf("must be at most %v, not %v", queen.MaxPopTimeout, req.Timeout))
	case req.Lease > queen.MaxLease:
		return "", nil, bad("Lease", fmt.Sprintf("must be at most %v, not %v", queen.MaxLease, req.Lease))
	}
	switch req.SubscriptionMode {
	case "", queen.SubscriptionModeNew, queen.SubscriptionModeAll, queen.SubscriptionModeNewOnly:
	default:
		return "", nil, bad("SubscriptionMode", fmt.Sprintf("must be %q or %q, not %q", queen.SubscriptionModeNew, queen.SubscriptionModeAll, req.SubscriptionMode))
	}
	group := req.Group
	if group == queen.QueueModeGroup {
		group = ""
	}
	if req.Conflation && group == "" {
		return "", nil, bad("Conflation", "needs a consumer group")
	}
	if req.Conflation && req.CommitOnDelivery {
		return "", nil, bad("Conflation", "cannot be combined with CommitOnDelivery")
	}
	q := url.Values{}
	path := "/api/v1/pop"
	switch {
	case req.Queue != "" && req.Partition != "":
		path = pathOf("/api/v1/pop/queue/", req.Queue, "/partition/", req.Partition)
	case req.Queue != "":
		path = pathOf("/api/v1/pop/queue/", req.Queue)
	case req.Namespace == "" && req.Task == "":
		return "", nil, bad("Queue", "needs a queue name, or Namespace/Task for a discovery pop")
	default:
		if req.Namespace != "" {
			q.Set("namespace", req.Namespace)
		}
		if req.Task != "" {
			q.Set("task", req.Task)
		}
	}
	if group != "" {
		q.Set("consumerGroup", group)
	}
	switch {
	case req.Batch > 0:
		q.Set("batch", strconv.Itoa(req.Batch))
	case !req.Autopilot:
		q.Set("batch", "1")
	}
	if req.Partitions > 0 {
		q.Set("partitions", strconv.Itoa(req.Partitions))
	}
	if req.Autopilot {
		q.Set("autopilot", "true")
	}
	if req.Wait && req.Queue != "" {
		q.Set("wait", "true")
		q.Set("timeout", strconv.FormatInt(waitOf(req).Milliseconds(), 10))
	}
	if req.CommitOnDelivery {
		q.Set("autoAck", "true")
	}
	if req.Lease > 0 {
		q.Set("leaseSeconds", strconv.FormatInt(int64((req.Lease+time.Second-1)/time.Second), 10))
	}
	if req.Conflation {
		q.Set("conflation", "true")
	}
	switch req.SubscriptionMode {
	case queen.SubscriptionModeNew, queen.SubscriptionModeNewOnly:
		q.Set("subscriptionMode", "new")
	case queen.SubscriptionModeAll:
		q.Set("subscriptionMode", "all")
	}
	if !req.SubscriptionFrom.IsZero() {
		q.Set("subscriptionFrom", req.SubscriptionFrom.UTC().Format(time.RFC3339Nano))
	}
	return path, q, nil
}

// waitOf is how long the server may hold a waiting pop.
func waitOf(req *queen.PopRequest) time.Duration {
	if req.Timeout == 0 {
		return queen.DefaultPopTimeout
	}
	return max(req.Timeout, time.Millisecond)
}

// Pop leases messages, as [queen.Broker.Pop]. A waiting pop holds its
// request for the wait plus Options.RequestTimeout. Nothing to deliver is
// a result with no messages, whichever way the server says it. Against
// Queen's server a conflating pop is [queen.ErrUnsupported], and messages
// carry no Offset nor DeliveryAttempt (zero). A Lease travels as Queen's
// leaseSeconds, whole seconds: one between two seconds is rounded up (a
// 1.5 s lease holds the messages 2 s); one under a second is refused with
// an [*queen.ArgumentError] before sending, as by a Broker. Queen's server
// ignores leaseSeconds and leases for the queue's LeaseTime, so there a
// pop with a Lease first reads that LeaseTime: a longer Lease is reached
// by extending the lease right after the pop, and a shorter one (which
// an extension cannot reach) is [queen.ErrUnsupported], as is a Lease on
// a discovery pop; the messages are never held longer than asked.
func (c *Client) Pop(ctx context.Context, req queen.PopRequest) (*queen.PopResult, error) {
	path, q, err := popQuery(&req)
	if err != nil {
		return nil, err
	}
	if req.Conflation {
		if err := c.unsupportedOn(ctx, "conflation"); err != nil {
			return nil, err
		}
	}
	var lease *leasePlan
	if req.Lease > 0 && !req.CommitOnDelivery && c.serverKind(ctx) == ServerQueen {
		if lease, err = c.planLease(ctx, &req); err != nil {
			return nil, err
		}
	}
	r := &request{op: "pop", method: http.MethodGet, path: path, query: q, safe: true, route: popRoute(&req)}
	if req.Wait && req.Queue != "" {
		r.extra = waitOf(&req)
	}
	group := req.Group
	if group == "" {
		group = queen.QueueModeGroup
	}
	empty := &queen.PopResult{Queue: req.Queue, ConsumerGroup: group, Messages: []*queen.Message{}}
	a, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	switch {
	case a.status == http.StatusNoContent:
		return empty, nil
	case a.status != http.StatusOK:
		return nil, c.errorFor(r, a)
	}
	var pr popReply
	if err := json.Unmarshal(a.body, &pr); err != nil {
		return nil, &TransportError{Op: "pop", URL: c.redacted(r), Err: fmt.Errorf("answer is not a pop result: %w", err)}
	}
	if pr.Success != nil && !*pr.Success {
		text := either(pr.Error, nil)
		if emptyPops[text] || text == "" {
			return empty, nil
		}
		return nil, &ServerError{Op: "pop", StatusCode: a.status, Message: text}
	}
	// The group conflates: as the server says, else as asked (an answer
	// without the field is Queen's, which never conflates, or older).
	// Queen 2.x says "conflation":true only when the group conflates, and
	// "conflationConflict":true (the stored policy wins) when the pop
	// asked otherwise: either key settles it.
	conflating := req.Conflation
	conflict := pr.ConflationConflict != nil && *pr.ConflationConflict
	switch {
	case pr.Conflating != nil || pr.Conflation != nil:
		conflating = (pr.Conflating != nil && *pr.Conflating) || (pr.Conflation != nil && *pr.Conflation)
	case conflict:
		conflating = !req.Conflation
	}
	autopilot := advice(pr.Autopilot)
	if len(pr.Messages) == 0 {
		// cmd/queen answers a conflating group's empty pop so; Queen's
		// server every empty pop.
		empty.Conflating, empty.ConflationConflict, empty.Autopilot = conflating, conflict, autopilot
		return empty, nil
	}
	res := &queen.PopResult{
		Queue: firstOf(pr.Queue, req.Queue), Partition: pr.Partition, PartitionID: either(pr.PartitionID, nil),
		LeaseID: either(pr.LeaseID, nil), ConsumerGroup: firstOf(pr.ConsumerGroup, group),
		PartitionsClaimed: pr.PartitionsClaimed, Conflating: conflating, ConflationConflict: conflict, Autopilot: autopilot,
		Messages: make([]*queen.Message, len(pr.Messages)),
	}
	for i := range pr.Messages {
		m := &pr.Messages[i]
		msg := &queen.Message{
			ID: m.ID, TransactionID: m.TransactionID, Queue: firstOf(m.Queue, res.Queue), Partition: m.Partition,
			PartitionID: m.PartitionID, ConsumerGroup: firstOf(m.ConsumerGroup, res.ConsumerGroup), LeaseID: either(m.LeaseID, nil),
			TraceID: either(m.TraceID, nil), ProducerSub: either(m.ProducerSub, nil), Payload: m.Data,
		}
		if msg.LeaseID == "" && !req.CommitOnDelivery {
			msg.LeaseID = res.LeaseID
		}
		if len(msg.Payload) == 0 {
			msg.Payload = json.RawMessage("null")
		}
		if m.CreatedAt != nil {
			msg.CreatedAt = parseTime(*m.CreatedAt)
		}
		if m.Offset != nil {
			msg.Offset = *m.Offset
		}
		if m.DeliveryAttempt != nil {
			msg.DeliveryAttempt = *m.DeliveryAttempt
		}
		res.Messages[i] = msg
	}
	if res.PartitionsClaimed == 0 {
		res.PartitionsClaimed = 1
	}
	if res.PartitionID == "" {
		res.PartitionID, res.Partition = res.Messages[0].PartitionID, res.Messages[0].Partition
	}
	if lease != nil {
		return c.fitLease(ctx, lease, res)
	}
	return res, nil
}

// parseTime reads a timestamp in any of the servers' forms; zero if
// unreadable.
func parseTime(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// ackJSON is an ack item on the wire.
type ackJSON struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId,omitempty"`
	ConsumerGroup string `json:"consumerGroup,omitempty"`
	Status        string `json:"status,omitempty"`
	Error         string `json:"error,omitempty"`
	DelayMs       int64  `json:"delayMs,omitempty"`
}

func ackOf(it *queen.AckItem) ackJSON {
	a := ackJSON{TransactionID: it.TransactionID, PartitionID: it.PartitionID, LeaseID: it.LeaseID, Status: string(it.Status),
		Error: it.Error, DelayMs: it.Delay.Milliseconds()}
	if it.Group != queen.QueueModeGroup {
		a.ConsumerGroup = it.Group
	}
	if it.Delay > 0 && a.DelayMs == 0 {
		a.DelayMs = 1
	}
	return a
}

// ackResultJSON is one ack result.
type ackResultJSON struct {
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	QueueName     *string `json:"queueName"`
	PartitionName *string `json:"partitionName"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Parked        bool    `json:"parked"` // ours; absent (false) on Queen's server
}

// Ack settles one message, as [queen.Broker.Ack]: completed when ok,
// failed otherwise, or opts.Status. A refused ack returns the item's error
// (see [queen.AckResult].Err) with its result. Queen's own server tells
// only [queen.ErrNotFound] and [queen.ErrLeaseExpired] apart.
func (c *Client) Ack(ctx context.Context, msg *queen.Message, ok bool, opts queen.AckOptions) (*queen.AckResult, error) {
	if msg == nil {
		return nil, &queen.ArgumentError{Field: "msg", Reason: "must not be nil"}
	}
	st := opts.Status
	if st == "" {
		st = queen.AckCompleted
		if !ok {
			st = queen.AckFailed
		}
	}
	group := opts.ConsumerGroup
	if group == "" && msg.ConsumerGroup != queen.QueueModeGroup {
		group = msg.ConsumerGroup
	}
	leaseID := opts.LeaseID
	if leaseID == "" {
		leaseID = msg.LeaseID
	}
	res, err := c.AckBatch(ctx, []queen.AckItem{{TransactionID: msg.TransactionID, PartitionID: msg.PartitionID, LeaseID: leaseID,
		Group: group, Status: st, Error: opts.Error, Delay: opts.Delay}})
	if err != nil {
		return nil, err
	}
	return &res[0], res[0].Err
}

// checkAcks checks ack items as the broker does.
func checkAcks(items []queen.AckItem) error {
	if len(items) > queen.MaxAckItems {
		return &queen.ArgumentError{Field: "items", Reason: fmt.Sprintf("at most %d per call, not %d", queen.MaxAckItems, len(items))}
	}
	for i := range items {
		f := "AckItem[" + strconv.Itoa(i) + "]."
		switch {
		case items[i].TransactionID == "":
			return &queen.ArgumentError{Field: f + "TransactionID", Reason: "is required"}
		case items[i].PartitionID == "":
			return &queen.ArgumentError{Field: f + "PartitionID", Reason: "is required"}
		case items[i].Delay < 0:
			return &queen.ArgumentError{Field: f + "Delay", Reason: "must not be negative"}
		}
	}
	return nil
}

// AckBatch settles many messages, as [queen.Broker.AckBatch]: refused
// items are reported in their results. DeadLettered and Parked are the
// server's answer (see [queen.AckResult].Parked). Against Queen's server
// an ack of status park is [queen.ErrUnsupported], and a batch that mixes
// failed or retry items with others is sent in parts (see the package
// doc), so that the retry budget and the dead-letter store behave as in
// process; the items of one partition are taken in the order given,
// which must be the order they were delivered in (a consume loop's is).
// It is not repeated after a failure past sending (see the package doc).
func (c *Client) AckBatch(ctx context.Context, items []queen.AckItem) ([]queen.AckResult, error) {
	if err := checkAcks(items); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return []queen.AckResult{}, nil
	}
	wire := make([]ackJSON, len(items))
	for i := range items {
		wire[i] = ackOf(&items[i])
		if items[i].Status == queen.AckPark {
			if err := c.unsupportedOn(ctx, "ack status park"); err != nil {
				return nil, err
			}
		}
	}
	var out []ackResultJSON
	var err error
	if len(items) > 1 && c.serverKind(ctx) == ServerQueen {
		out, err = c.queenAcks(ctx, wire)
	} else {
		out, err = c.postAcks(ctx, wire)
	}
	if err != nil {
		return nil, err
	}
	results := make([]queen.AckResult, len(items))
	for i := range out {
		o := &out[i]
		r := queen.AckResult{TransactionID: firstOf(o.TransactionID, items[i].TransactionID), Queue: either(o.QueueName, nil),
			Partition: either(o.PartitionName, nil), Success: o.Success, LeaseReleased: o.LeaseReleased, DeadLettered: o.DLQ,
			Parked: o.Parked}
		if !o.Success {
			r.Err = ackError(either(o.Error, nil))
		}
		results[i] = r
	}
	c.rt.Settled(items, results)
	return results, nil
}

// leaseResultJSON is a lease-extend result: the object cmd/queen and
// Queen 2.x answer (newExpiresAt), or the element of the one-element
// array Queen's 1.x server answers (expiresAt).
type leaseResultJSON struct {
	Success      bool    `json:"success"`
	Error        *string `json:"error"`
	ExpiresAt    *string `json:"expiresAt"`
	NewExpiresAt *string `json:"newExpiresAt"`
	Renewed      *int    `json:"renewed"` // partitions renewed (2.x)
}

// leaseAnswer reads either form of a lease-extend answer.
type leaseAnswer []leaseResultJSON

// UnmarshalJSON takes an object as a one-element list.
func (l *leaseAnswer) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		var one leaseResultJSON
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*l = leaseAnswer{one}
		return nil
	}
	return json.Unmarshal(b, (*[]leaseResultJSON)(l))
}

// RenewLease extends a lease to at least d from now (60 s when d is 0),
// as [queen.Broker.RenewLease], in whole seconds (rounded up). An expired
// lease is [queen.ErrLeaseExpired], an unknown or released one
// [queen.ErrNotFound], a d above [queen.MaxLease] an
// [*queen.ArgumentError]. The expiry has millisecond precision; the
// partitions renewed are the answer's renewed, 1 when it has none. Both
// answers are read: the object of cmd/queen and Queen 2.x, and the array
// of Queen's 1.x server.
func (c *Client) RenewLease(ctx context.Context, leaseID string, d time.Duration) (queen.LeaseRenewal, error) {
	if d < 0 {
		return queen.LeaseRenewal{}, &queen.ArgumentError{Field: "d", Reason: "must not be negative"}
	}
	if d > queen.MaxLease {
		return queen.LeaseRenewal{}, &queen.ArgumentError{Field: "d", Reason: fmt.Sprintf("must be at most %v, not %v", queen.MaxLease, d)}
	}
	if leaseID == "" {
		return queen.LeaseRenewal{}, queen.ErrNotFound
	}
	if d == 0 {
		d = queen.DefaultLeaseTime
	}
	secs := int64((d + time.Second - 1) / time.Second)
	var out leaseAnswer
	r := &request{op: "renew", method: http.MethodPost, path: pathOf("/api/v1/lease/", leaseID, "/extend"),
		body: map[string]int64{"seconds": secs}, safe: true,
		notFound: func(string) error { return queen.ErrNotFound }}
	if err := c.call(ctx, r, &out); err != nil {
		var ae *queen.ArgumentError
		if asArg(err, &ae) && ae.Field == "leaseId" { // not a lease id this server could have issued
			return queen.LeaseRenewal{}, queen.ErrNotFound
		}
		return queen.LeaseRenewal{}, err
	}
	if len(out) == 0 {
		return queen.LeaseRenewal{}, &TransportError{Op: "renew", URL: c.redacted(r), Err: fmt.Errorf("no result")}
	}
	if !out[0].Success {
		text := either(out[0].Error, nil)
		if text == "Lease not found" {
			return queen.LeaseRenewal{}, queen.ErrNotFound
		}
		return queen.LeaseRenewal{}, queen.ErrLeaseExpired
	}
	ren := queen.LeaseRenewal{Partitions: 1}
	if at := either(out[0].NewExpiresAt, out[0].ExpiresAt); at != "" {
		ren.ExpiresAt = parseTime(at)
	}
	if n := out[0].Renewed; n != nil && *n > 0 {
		ren.Partitions = *n
	}
	return ren, nil
}

// Renew extends the lease msg was delivered under by its queue's
// LeaseTime (asked of the server), as [queen.Broker.Renew].
func (c *Client) Renew(ctx context.Context, msg *queen.Message) (time.Time, error) {
	if msg == nil || msg.LeaseID == "" {
		return time.Time{}, &queen.ArgumentError{Field: "msg", Reason: "has no lease"}
	}
	d := queen.DefaultLeaseTime
	if info, err := c.DescribeQueue(ctx, msg.Queue); err == nil && info.Config.LeaseTime > 0 {
		d = info.Config.LeaseTime
	} else if err != nil && !isNotFound(err) {
		return time.Time{}, err
	}
	r, err := c.RenewLease(ctx, msg.LeaseID, d)
	return r.ExpiresAt, err
}

// txReply is a transaction's answer.
type txReply struct {
	TransactionID string `json:"transactionId"`
	Success       bool   `json:"success"`
	Error         string `json:"error"`
	Results       []struct {
		Type          string  `json:"type"`
		Success       bool    `json:"success"`
		TransactionID string  `json:"transactionId"`
		Error         *string `json:"error"`
		DLQ           *bool   `json:"dlq"`
		Parked        bool    `json:"parked"`
		PartitionName string  `json:"partitionName"` // ours on acks
		LeaseReleased bool    `json:"leaseReleased"` // ours on acks
		Status        string  `json:"status"`
		MessageID     string  `json:"messageId"`
		PartitionID   string  `json:"partitionId"`
		QueueName     string  `json:"queueName"` // on acks ours
		Offset        *int64  `json:"offset"`
	} `json:"results"`
}

// ExecTransaction runs acks and pushes all or nothing, as
// [queen.Broker.ExecTransaction]: a refused operation aborts it with a
// [*queen.TransactionError] naming the operation. Each ack's DeadLettered
// and Parked are the server's answer, as in [Client.AckBatch]; so are its
// Queue, Partition and LeaseReleased, which Queen's server does not send
// in a transaction's answer (they are empty and false there). It is not
// repeated after a failure past sending. More than [queen.MaxTxOps]
// operations is [queen.ErrTooLarge] before sending, on every server. A
// transaction that Queen's database stops at its statement timeout (30 s
// by default; 10,000 pushes took longer on a 2-core machine, 5,000 took
// 8 s) is a [*ServerError] that says so and matches
// [queen.ErrTransactionAborted]: nothing of it was applied. On Queen's
// server an ack of status failed or retry in a transaction is
// [queen.ErrUnsupported] before sending: that server dead-letters a
// failed one at once, whatever the retry budget, and aborts on a retry
// one; settle those with [Client.AckBatch]. Positions ([queen.TxOp].Position)
// travel in the body's "positions" rider beside the operations (Queen
// 2.x's), and are [queen.ErrUnsupported] on Queen's 1.x server, before
// sending; a refused one aborts the whole transaction with a
// [*queen.TransactionError] of Op "position".
func (c *Client) ExecTransaction(ctx context.Context, ops []queen.TxOp) (*queen.TxResult, error) {
	if len(ops) == 0 {
		return nil, &queen.ArgumentError{Field: "ops", Reason: "must not be empty"}
	}
	if len(ops) > queen.MaxTxOps { // refused here: Queen's server would run it into its database's statement timeout
		return nil, fmt.Errorf("%w: a transaction takes at most %d operations (queen.MaxTxOps), not %d", queen.ErrTooLarge, queen.MaxTxOps, len(ops))
	}
	// The operations travel in "operations", in order, and the positions
	// after them in "positions": the answer's results follow that order.
	wire := make([]map[string]any, 0, len(ops))
	var opAt []int // the index in ops of each wire operation
	var positions []positionJSON
	var setPos []queen.Position // as checked (partition defaulted)
	var posAt []int
	var acks []queen.AckItem
	var ackAt []int
	for i, o := range ops {
		switch {
		case o.Position != nil && o.Ack == nil && o.Push == nil:
			pos := *o.Position
			if err := checkPosition(i, &pos); err != nil {
				return nil, err
			}
			positions, setPos, posAt = append(positions, positionOf(&pos)), append(setPos, pos), append(posAt, i)
		case o.Ack != nil && o.Push == nil && o.Position == nil:
			if o.Ack.TransactionID == "" || o.Ack.PartitionID == "" {
				return nil, &queen.ArgumentError{Field: fmt.Sprintf("ops[%d].Ack", i), Reason: "needs TransactionID and PartitionID"}
			}
			if o.Ack.Status == queen.AckPark {
				if err := c.unsupportedOn(ctx, "ack status park"); err != nil {
					return nil, err
				}
			}
			a := ackOf(o.Ack)
			w := map[string]any{"type": "ack", "transactionId": a.TransactionID, "partitionId": a.PartitionID, "leaseId": a.LeaseID,
				"consumerGroup": a.ConsumerGroup, "status": a.Status, "error": a.Error, "delayMs": a.DelayMs}
			for _, k := range []string{"leaseId", "consumerGroup", "status", "error"} {
				if w[k] == "" {
					delete(w, k)
				}
			}
			if a.DelayMs == 0 {
				delete(w, "delayMs")
			}
			wire, opAt = append(wire, w), append(opAt, i)
			acks, ackAt = append(acks, *o.Ack), append(ackAt, i)
		case o.Push != nil && o.Ack == nil && o.Position == nil:
			p, err := wireItems([]queen.PushItem{*o.Push}, func(int) string { return fmt.Sprintf("ops[%d].Push", i) })
			if err != nil {
				return nil, err
			}
			wire, opAt = append(wire, map[string]any{"type": "push", "items": p}), append(opAt, i)
		default:
			return nil, &queen.ArgumentError{Field: fmt.Sprintf("ops[%d]", i), Reason: "must hold exactly one of Ack, Push and Position"}
		}
	}
	if len(positions) > 0 {
		if err := c.unsupportedOn(ctx, "a transaction with positions"); err != nil {
			return nil, err
		}
	}
	if err := failedInTx(ops); err != nil && c.serverKind(ctx) == ServerQueen { // asks the server only then
		return nil, err
	}
	body := map[string]any{"operations": wire}
	if len(positions) > 0 {
		body["positions"] = positions
	}
	var out txReply
	r := &request{op: "transaction", method: http.MethodPost, path: "/api/v1/transaction", body: body}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	// indexOf is the index in ops of the answer's k-th result.
	indexOf := func(k int) int {
		if k < len(opAt) {
			return opAt[k]
		}
		return posAt[k-len(opAt)]
	}
	n := min(len(out.Results), len(wire)+len(positions))
	failed := -1 // the index in ops of the refused operation
	posFailed := strings.HasPrefix(out.Error, positionFailed)
	if !out.Success {
		switch {
		case posFailed && n > len(wire):
			failed = indexOf(n - 1)
		case posFailed && len(posAt) > 0: // the answer names no position: the first
			failed = posAt[0]
		case n > 0:
			failed = indexOf(n - 1)
		}
	}
	res := &queen.TxResult{ID: out.TransactionID, Results: make([]queen.TxOpResult, len(ops))}
	if !out.Success {
		res.Results = res.Results[:failed+1] // as a Broker's: up to the refused operation
	}
	for k := range n {
		i := indexOf(k)
		if i >= len(res.Results) {
			continue
		}
		o := &out.Results[k]
		switch {
		case ops[i].Position != nil:
			if !out.Success {
				continue // nothing was set
			}
			pos := setPos[k-len(opAt)]
			if o.Offset != nil {
				pos.Offset = *o.Offset
			}
			if pos.Forget {
				pos.Metadata = ""
			}
			res.Results[i].Position = &pos
		case ops[i].Ack != nil:
			if !out.Success && o.TransactionID == "" && o.DLQ == nil {
				continue // aborted before this ack was looked at: no result, as a Broker's
			}
			ar := &queen.AckResult{TransactionID: firstOf(o.TransactionID, ops[i].Ack.TransactionID), Queue: o.QueueName,
				Partition: o.PartitionName, Success: o.Success && out.Success, LeaseReleased: o.LeaseReleased && out.Success,
				DeadLettered: o.DLQ != nil && *o.DLQ && out.Success, Parked: o.Parked && out.Success} // an aborted one changed nothing
			if text := either(o.Error, nil); text != "" {
				ar.Success, ar.Err = false, ackError(text)
			}
			res.Results[i].Ack = ar
		case out.Success:
			pr := queen.PushResult{Status: queen.PushStatus(o.Status), Queue: firstOf(o.QueueName, ops[i].Push.Queue),
				Partition: firstOf(ops[i].Push.Partition, queen.DefaultPartition), PartitionID: o.PartitionID, MessageID: o.MessageID,
				TransactionID: o.TransactionID}
			if o.Offset != nil {
				pr.Offset = *o.Offset
			}
			if pr.Status == "" {
				pr.Status = queen.PushQueued
			}
			res.Results[i].Push = &pr
		}
	}
	if out.Success && n < len(ops) {
		res.Results = res.Results[:n] // an answer short of results (Queen's): as many as it gave
	}
	if !out.Success {
		if msg, timedOut := statementTimeout(out.Error); timedOut { // no one operation was refused
			return nil, &ServerError{Op: "transaction", StatusCode: http.StatusOK, Message: msg, Err: queen.ErrTransactionAborted}
		}
		return res, txError(ops, max(failed, 0), out.Error)
	}
	items := make([]queen.AckItem, 0, len(acks))
	results := make([]queen.AckResult, 0, len(acks))
	for j, i := range ackAt {
		if i < len(res.Results) {
			if a := res.Results[i].Ack; a != nil {
				items, results = append(items, acks[j]), append(results, *a)
			}
		}
	}
	c.rt.Settled(items, results)
	return res, nil
}

// positionFailed starts the reason of a transaction a position aborted.
const positionFailed = "POSITION operation failed: "

// txError rebuilds the TransactionError of an aborted transaction from
// the server's reason ("ACK operation failed: ..."); i is the refused
// operation's index in ops.
func txError(ops []queen.TxOp, i int, reason string) error {
	te := &queen.TransactionError{Index: i}
	switch {
	case len(reason) > len("ACK operation failed: ") && reason[:len("ACK operation failed: ")] == "ACK operation failed: ":
		te.Op, te.Err = "ack", ackError(reason[len("ACK operation failed: "):])
	case len(reason) > len("PUSH operation failed: ") && reason[:len("PUSH operation failed: ")] == "PUSH operation failed: ":
		te.Op, te.Err = "push", pushError(reason[len("PUSH operation failed: "):])
	case len(reason) > len(positionFailed) && reason[:len(positionFailed)] == positionFailed:
		te.Op, te.Err = "position", positionError(reason[len(positionFailed):])
	default:
		te.Err = &ServerError{Op: "transaction", StatusCode: http.StatusOK, Message: reason}
	}
	if te.Op == "" && i < len(ops) {
		switch {
		case ops[i].Ack != nil:
			te.Op = "ack"
		case ops[i].Push != nil:
			te.Op = "push"
		default:
			te.Op = "position"
		}
	}
	return te
}
