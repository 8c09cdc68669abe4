package httpapi

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/compat"
	"github.com/queenlite/queen/internal/verbatim"
)

// busStatus says how many named groups consumed a message.
type busStatus struct {
	ConsumedBy  int `json:"consumedBy"`
	TotalGroups int `json:"totalGroups"`
}

// listedMessage is a message of GET /api/v1/messages (no payload).
type listedMessage struct {
	ID             string     `json:"id"`
	TransactionID  string     `json:"transactionId"`
	PartitionID    string     `json:"partitionId"`
	QueuePath      string     `json:"queuePath"`
	Queue          string     `json:"queue"`
	Partition      string     `json:"partition"`
	Namespace      string     `json:"namespace"`
	Task           string     `json:"task"`
	Status         string     `json:"status"`
	QueueStatus    string     `json:"queueStatus"`
	BusStatus      busStatus  `json:"busStatus"`
	TraceID        nullString `json:"traceId"`
	ProducerSub    nullString `json:"producerSub"`
	QueuePriority  int        `json:"queuePriority"`
	CreatedAt      msTime     `json:"createdAt"`
	LeaseExpiresAt msTime     `json:"leaseExpiresAt"`
	Offset         int64      `json:"offset"`
}

// mode describes how a queue is consumed: by queue mode, named groups, both
// or neither.
type mode struct {
	HasQueueMode     bool   `json:"hasQueueMode"`
	BusGroupsCount   int    `json:"busGroupsCount"`
	Type             string `json:"type"`
	ConsumedByGroups *int   `json:"consumedByGroups,omitempty"`
}

func modeOf(queueMode bool, bus int) mode {
	m := mode{HasQueueMode: queueMode, BusGroupsCount: bus, Type: "none"}
	switch {
	case queueMode && bus > 0:
		m.Type = "hybrid"
	case queueMode:
		m.Type = "queue"
	case bus > 0:
		m.Type = "bus"
	}
	return m
}

// busOf counts the named groups of a message and those that consumed it.
func busOf(m *queen.MessageInfo) (queueStatus string, bs busStatus, queueMode bool) {
	queueStatus = string(queen.MessagePending)
	for _, g := range m.Groups {
		if g.Group == queen.QueueModeGroup {
			queueMode = true
			switch {
			case g.Consumed:
				queueStatus = string(queen.MessageCompleted)
			case !g.LeaseExpiresAt.IsZero():
				queueStatus = string(queen.MessageProcessing)
			}
			continue
		}
		bs.TotalGroups++
		if g.Consumed {
			bs.ConsumedBy++
		}
	}
	return queueStatus, bs, queueMode
}

func listed(m *queen.MessageInfo) listedMessage {
	qst, bs, _ := busOf(m)
	return listedMessage{
		ID: m.ID, TransactionID: m.TransactionID, PartitionID: m.PartitionID, QueuePath: m.Queue + "/" + m.Partition,
		Queue: m.Queue, Partition: m.Partition, Namespace: m.Namespace, Task: m.Task, Status: string(m.Status),
		QueueStatus: qst, BusStatus: bs, TraceID: nullString(m.TraceID), ProducerSub: nullString(m.ProducerSub),
		QueuePriority: m.Priority, CreatedAt: msTime(m.CreatedAt), LeaseExpiresAt: msTime(m.LeaseExpiresAt), Offset: m.Offset,
	}
}

// listMessages serves GET /api/v1/messages. The time window defaults to
// the last hour; to is rounded up to the end of its minute.
func (h *handler) listMessages(w http.ResponseWriter, r *http.Request) {
	p := newParams(r)
	now := h.b.Now()
	f := queen.MessageFilter{
		Queue: p.name("queue"), Partition: p.name("partition"), Namespace: p.name("ns"), Task: p.name("task"),
		Limit: int(min(max(p.num("limit", 200), 1), 1000)), Offset: int(min(p.num("offset", 0), math.MaxInt32)),
	}
	_ = p.name("consumerGroup")
	switch st, _ := p.str("status"); st {
	case "":
	case "pending", "processing", "completed", "dead_letter", "parked":
		f.Status = queen.MessageStatus(st)
	default:
		p.fail("status must be pending, processing, completed, dead_letter or parked, not %q", st)
	}
	f.From, f.To = p.time("from"), p.time("to")
	if p.err != nil {
		h.writeError(w, r, p.err)
		return
	}
	if f.From.IsZero() {
		f.From = now.Add(-time.Hour)
	}
	if f.To.IsZero() {
		f.To = now
	}
	f.To = f.To.Truncate(time.Minute).Add(time.Minute - time.Microsecond)
	page, err := h.b.ListMessages(r.Context(), f)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := make([]listedMessage, len(page.Messages))
	for i := range page.Messages {
		out[i] = listed(&page.Messages[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out, "mode": modeOf(page.QueueMode, page.BusGroups),
		"pagination": pagination{f.Limit, f.Offset}})
}

// statusQueueMessages serves GET /api/v1/status/queues/{queue}/messages.
func (h *handler) statusQueueMessages(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r, "queue")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	p := newParams(r)
	f := queen.MessageFilter{Queue: name, Limit: int(min(max(p.num("limit", 50), 1), 1000)), Offset: int(min(p.num("offset", 0), math.MaxInt32))}
	if p.err != nil {
		h.writeError(w, r, p.err)
		return
	}
	if _, err := h.b.DescribeQueue(r.Context(), name); err != nil {
		if errors.Is(err, queen.ErrNotFound) {
			err = notFoundErr("Queue not found")
		}
		h.writeError(w, r, err)
		return
	}
	page, err := h.b.ListMessages(r.Context(), f)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type row struct {
		ID            string `json:"id"`
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
		QueuePath     string `json:"queuePath"`
		Queue         string `json:"queue"`
		Partition     string `json:"partition"`
		Status        string `json:"status"`
		CreatedAt     msTime `json:"createdAt"`
	}
	out := make([]row, len(page.Messages))
	for i, m := range page.Messages {
		out[i] = row{m.ID, m.TransactionID, m.PartitionID, m.Queue + "/" + m.Partition, m.Queue, m.Partition, string(m.Status), msTime(m.CreatedAt)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out, "pagination": pagination{f.Limit, f.Offset}})
}

// messageKey reads and checks {partitionId} and {transactionId}.
func messageKey(r *http.Request) (string, string, error) {
	pid, txid := r.PathValue("partitionId"), r.PathValue("transactionId")
	if err := checkUUID("partitionId", pid); err != nil {
		return "", "", err
	}
	return pid, txid, checkName("transactionId", txid)
}

// groupState is a consumer group's position on one message.
type groupState struct {
	Name           string `json:"name"`
	Consumed       bool   `json:"consumed"`
	LeaseExpiresAt msTime `json:"leaseExpiresAt"`
}

// messageDetail is the reply of GET /api/v1/messages/{p}/{t}.
type messageDetail struct {
	listedMessage
	Payload        verbatim.JSON  `json:"payload"`
	IsEncrypted    bool           `json:"isEncrypted"`
	ErrorMessage   nullString     `json:"errorMessage"`
	RetryCount     *int           `json:"retryCount"`
	QueueConfig    map[string]any `json:"queueConfig"`
	Mode           mode           `json:"mode"`
	ConsumerGroups []groupState   `json:"consumerGroups"`
}

// getMessage serves GET /api/v1/messages/{partitionId}/{transactionId}.
func (h *handler) getMessage(w http.ResponseWriter, r *http.Request) {
	pid, txid, err := messageKey(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	m, err := h.b.GetMessage(r.Context(), pid, txid)
	if errors.Is(err, queen.ErrNotFound) {
		err = notFoundErr("Message not found")
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	d := messageDetail{listedMessage: listed(m), Payload: payload(m.Payload), IsEncrypted: m.Encrypted, ConsumerGroups: []groupState{}}
	if m.Status == queen.MessageDeadLetter || m.Status == queen.MessageParked {
		rc := m.RetryCount
		d.ErrorMessage, d.RetryCount = nullString(m.Error), &rc
	}
	if info, err := h.b.DescribeQueue(r.Context(), m.Queue); err == nil {
		c := &info.Config
		d.QueueConfig = map[string]any{"leaseTime": seconds(c.LeaseTime), "retryLimit": c.RetryLimit,
			"retryDelay": millis(c.RetryDelay), "ttl": seconds(compat.Of(c).TTL), "priority": c.Priority}
	}
	_, bs, qm := busOf(m)
	d.Mode = modeOf(qm, bs.TotalGroups)
	consumed := 0
	for _, g := range m.Groups {
		if g.Consumed {
			consumed++
		}
		d.ConsumerGroups = append(d.ConsumerGroups, groupState{Name: g.Group, Consumed: g.Consumed, LeaseExpiresAt: msTime(g.LeaseExpiresAt)})
	}
	d.Mode.ConsumedByGroups = &consumed
	writeJSON(w, http.StatusOK, d)
}

// deleteMessage serves DELETE /api/v1/messages/{partitionId}/{transactionId};
// an unknown message answers 200 with success false, as in Queen.
func (h *handler) deleteMessage(w http.ResponseWriter, r *http.Request) {
	pid, txid, err := messageKey(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	err = h.b.DeleteMessage(r.Context(), pid, txid)
	success, msg := err == nil, "Message deleted successfully"
	switch {
	case errors.Is(err, queen.ErrNotFound):
		msg = "Message not found"
	case err != nil:
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": success, "partitionId": pid, "transactionId": txid, "message": msg})
}

// recordTrace serves POST /api/v1/traces.
func (h *handler) recordTrace(w http.ResponseWriter, r *http.Request) {
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if kind(f.raw("transactionId")) != '"' || kind(f.raw("partitionId")) != '"' {
		h.writeError(w, r, badRequest("transactionId and partitionId are required"))
		return
	}
	ev := queen.TraceEvent{
		TransactionID: f.str("transactionId"), PartitionID: f.str("partitionId"),
		ConsumerGroup: f.str("consumerGroup"), EventType: f.str("eventType"), WorkerID: f.str("workerId"),
	}
	if !f.has("data") {
		h.writeError(w, r, badRequest("data is required"))
		return
	}
	if kind(f.raw("data")) != '{' {
		f.fail("data must be an object")
	}
	ev.Data = f.raw("data")
	switch raw := f.raw("traceNames"); kind(raw) {
	case 'n':
	case '"':
		ev.Names = []string{f.str("traceNames")}
	case '[':
		if err := json.Unmarshal(raw, &ev.Names); err != nil {
			f.fail("traceNames must be a string or an array of strings")
		}
	default:
		f.fail("traceNames must be a string or an array of strings")
	}
	if f.err == nil {
		f.err = checkName("transactionId", ev.TransactionID)
	}
	if f.err == nil {
		f.err = checkUUID("partitionId", ev.PartitionID)
	}
	for field, v := range map[string]string{"consumerGroup": ev.ConsumerGroup, "eventType": ev.EventType, "workerId": ev.WorkerID} {
		if f.err == nil {
			f.err = checkLabel(field, v)
		}
	}
	for _, n := range ev.Names {
		if f.err == nil {
			f.err = checkName("traceNames[]", n)
		}
	}
	if f.err != nil {
		h.writeError(w, r, f.err)
		return
	}
	rec, err := h.b.RecordTrace(r.Context(), ev)
	if errors.Is(err, queen.ErrNotFound) {
		err = notFoundErr("Message not found")
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"success": true, "traceId": rec.ID})
}

// traceEvent is a trace on the read routes, in snake_case as in Queen.
type traceEvent struct {
	ID             string        `json:"id"`
	TransactionID  string        `json:"transaction_id,omitempty"`
	PartitionID    string        `json:"partition_id,omitempty"`
	EventType      string        `json:"event_type"`
	Data           verbatim.JSON `json:"data"`
	ConsumerGroup  string        `json:"consumer_group"`
	WorkerID       nullString    `json:"worker_id"`
	CreatedAt      msTime        `json:"created_at"`
	TraceNames     []string      `json:"trace_names"`
	QueueName      string        `json:"queue_name,omitempty"`
	PartitionName  string        `json:"partition_name,omitempty"`
	MessagePayload verbatim.JSON `json:"message_payload,omitempty"`
}

func traceOf(ev *queen.TraceEvent) traceEvent {
	names := ev.Names
	if names == nil {
		names = []string{}
	}
	return traceEvent{ID: ev.ID, EventType: ev.EventType, Data: payload(ev.Data), ConsumerGroup: ev.ConsumerGroup,
		WorkerID: nullString(ev.WorkerID), CreatedAt: msTime(ev.CreatedAt), TraceNames: names}
}

// messageTraces serves GET /api/v1/traces/{partitionId}/{transactionId}.
func (h *handler) messageTraces(w http.ResponseWriter, r *http.Request) {
	pid, txid, err := messageKey(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	evs, err := h.b.Traces(r.Context(), pid, txid)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := make([]traceEvent, len(evs))
	for i := range evs {
		out[i] = traceOf(&evs[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"traces": out})
}

// tracesByName serves GET /api/v1/traces/by-name/{name}.
func (h *handler) tracesByName(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r, "name")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	p := newParams(r)
	limit, offset := int(min(max(p.num("limit", 100), 1), 1000)), int(min(p.num("offset", 0), math.MaxInt32))
	if p.err != nil {
		h.writeError(w, r, p.err)
		return
	}
	page, err := h.b.TracesByName(r.Context(), name, limit, offset)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := make([]traceEvent, len(page.Traces))
	for i := range page.Traces {
		ev := &page.Traces[i]
		out[i] = traceOf(ev)
		out[i].TransactionID, out[i].PartitionID = ev.TransactionID, ev.PartitionID
		out[i].QueueName, out[i].PartitionName = ev.Queue, ev.Partition
		out[i].MessagePayload = payload(ev.MessagePayload)
	}
	writeJSON(w, http.StatusOK, map[string]any{"traces": out, "total": page.Total, "pagination": pagination{limit, offset}})
}

// traceNames serves GET /api/v1/traces/names.
func (h *handler) traceNames(w http.ResponseWriter, r *http.Request) {
	p := newParams(r)
	limit, offset := int(min(max(p.num("limit", 50), 1), 1000)), int(min(p.num("offset", 0), math.MaxInt32))
	if p.err != nil {
		h.writeError(w, r, p.err)
		return
	}
	page, err := h.b.TraceNames(r.Context(), limit, offset)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type nameRow struct {
		TraceName    string `json:"trace_name"`
		TraceCount   int    `json:"trace_count"`
		MessageCount int    `json:"message_count"`
		LastSeen     msTime `json:"last_seen"`
	}
	out := make([]nameRow, len(page.Names))
	for i, n := range page.Names {
		out[i] = nameRow{n.Name, n.Events, n.Messages, msTime(n.LastSeen)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"trace_names": out, "total": page.Total, "pagination": pagination{limit, offset}})
}
