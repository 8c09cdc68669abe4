package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/compat"
	"github.com/queenlite/queen/internal/verbatim"
	"github.com/queenlite/queen/internal/wire"
)

// configureReply is the reply of POST /api/v1/configure.
type configureReply struct {
	Configured  bool              `json:"configured"`
	QueueID     string            `json:"queueId"`
	PartitionID string            `json:"partitionId"`
	Queue       string            `json:"queue"`
	Namespace   nullString        `json:"namespace"`
	Task        nullString        `json:"task"`
	Options     wire.QueueOptions `json:"options"`
}

// maxDurationUnits bounds the numbers of a configuration read from the
// wire (durations: about 30 years in seconds) so that none overflows; a
// larger one is refused with 400, naming the limit.
const maxDurationUnits = 1 << 30

// duration reads a non-negative duration in unit, at most limit units;
// absent keeps def.
func (f *fields) duration(name string, def, unit time.Duration, limit int64) time.Duration {
	if !f.has(name) {
		_ = f.num(name, 0, false) // reports a wrong type
		return def
	}
	n := f.num(name, 0, false)
	if n > limit {
		f.fail("%s%s must be at most %d", f.prefix(), name, limit)
		return def
	}
	return time.Duration(n) * unit
}

// count reads a number of at most maxDurationUnits in absolute value
// (negative only with neg); absent is def.
func (f *fields) count(name string, def int64, neg bool) int {
	n := f.num(name, def, neg)
	switch {
	case neg && (n > maxDurationUnits || n < -maxDurationUnits):
		f.fail("%s%s must be between %d and %d", f.prefix(), name, -maxDurationUnits, maxDurationUnits)
		return int(def)
	case n > maxDurationUnits:
		f.fail("%s%s must be at most %d", f.prefix(), name, maxDurationUnits)
		return int(def)
	}
	return int(n)
}

// configure serves POST /api/v1/configure: it replaces the whole
// configuration; options not sent return to their defaults.
func (h *handler) configure(w http.ResponseWriter, r *http.Request) {
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if kind(f.raw("queue")) != '"' {
		h.writeError(w, r, badRequest("queue is required"))
		return
	}
	name := f.str("queue")
	cfg := queen.DefaultQueueConfig()
	cfg.Namespace, cfg.Task = f.str("namespace"), f.str("task")
	if o := f.object("options"); o != nil {
		cfg.LeaseTime = o.duration("leaseTime", cfg.LeaseTime, time.Second, maxLeaseSeconds)
		cfg.RetryLimit = o.count("retryLimit", int64(cfg.RetryLimit), false)
		cfg.RetryDelay = o.duration("retryDelay", cfg.RetryDelay, time.Millisecond, maxDurationUnits)
		cfg.MaxSize = o.count("maxSize", 0, false)
		q := compat.Of(&cfg)
		q.TTL = o.duration("ttl", q.TTL, time.Second, maxDurationUnits)
		cfg.Priority = o.count("priority", 0, true)
		cfg.DelayedProcessing = o.duration("delayedProcessing", 0, time.Second, maxDurationUnits)
		cfg.WindowBuffer = o.duration("windowBuffer", 0, time.Second, maxDurationUnits)
		cfg.Retention = o.duration("retentionSeconds", 0, time.Second, maxDurationUnits)
		cfg.CompletedRetention = o.duration("completedRetentionSeconds", 0, time.Second, maxDurationUnits)
		cfg.MaxWaitTime = o.duration("maxWaitTimeSeconds", 0, time.Second, maxDurationUnits)
		q.RetentionEnabled = o.boolean("retentionEnabled", false)
		cfg.EncryptionEnabled = o.boolean("encryptionEnabled", false)
		q.DeadLetterQueue = o.boolean("deadLetterQueue", false)
		q.DLQAfterMaxRetries = o.boolean("dlqAfterMaxRetries", false)
		compat.Set(&cfg, q)
		if f.err == nil {
			f.err = o.err
		}
	}
	if f.err == nil {
		f.err = checkName("queue", name)
	}
	for field, v := range map[string]string{"namespace": cfg.Namespace, "task": cfg.Task} {
		if f.err == nil {
			f.err = checkLabel(field, v)
		}
	}
	if f.err != nil {
		h.writeError(w, r, f.err)
		return
	}
	info, err := h.b.ConfigureQueue(r.Context(), name, cfg)
	var arg *queen.ArgumentError
	if errors.As(err, &arg) && arg.Field == "QueueConfig.EncryptionEnabled" {
		err = badRequest("options.encryptionEnabled needs an encryption key (QUEEN_ENCRYPTION_KEY)")
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, configureReply{
		Configured: true, QueueID: info.ID, PartitionID: info.DefaultPartitionID, Queue: info.Name,
		Namespace: nullString(info.Config.Namespace), Task: nullString(info.Config.Task), Options: wire.OptionsOf(&info.Config),
	})
}

// deleteQueue serves DELETE /api/v1/resources/queues/{queue}.
func (h *handler) deleteQueue(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r, "queue")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	existed, err := h.b.DeleteQueue(r.Context(), name)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Deleted bool   `json:"deleted"`
		Queue   string `json:"queue"`
		Existed bool   `json:"existed"`
	}{true, name, existed})
}

// fetchRecord is one message read by offset.
type fetchRecord struct {
	Offset        int64         `json:"offset"`
	ID            string        `json:"id"`
	TransactionID string        `json:"transactionId"`
	Data          verbatim.JSON `json:"data"`
	CreatedAt     usTime        `json:"createdAt"`
	TraceID       nullString    `json:"traceId"`
}

// fetch serves GET /api/v1/fetch/queue/{queue}/partition/{partition}: a
// read by offset with no group, lease or ack.
func (h *handler) fetch(w http.ResponseWriter, r *http.Request) {
	queue, err := pathName(r, "queue")
	if err == nil {
		var part string
		part, err = pathName(r, "partition")
		p := newParams(r)
		from := p.num("fromOffset", 0)
		limit := min(p.num("limit", 100), 1000)
		if err == nil {
			err = p.err
		}
		if err == nil {
			var res *queen.FetchResult
			if res, err = h.b.Fetch(r.Context(), queue, part, from, int(limit)); err == nil {
				out := struct {
					Queue      string        `json:"queue"`
					Partition  string        `json:"partition"`
					Records    []fetchRecord `json:"records"`
					NextOffset int64         `json:"nextOffset"`
				}{res.Queue, res.Partition, make([]fetchRecord, len(res.Records)), res.NextOffset}
				for i, rec := range res.Records {
					out.Records[i] = fetchRecord{Offset: rec.Offset, ID: rec.MessageID, TransactionID: rec.TransactionID,
						Data: payload(rec.Payload), CreatedAt: usTime(rec.CreatedAt), TraceID: nullString(rec.TraceID)}
				}
				writeJSON(w, http.StatusOK, out)
				return
			}
			if errors.Is(err, queen.ErrNotFound) {
				err = notFoundErr("Queue or partition not found")
			}
		}
	}
	h.writeError(w, r, err)
}

// letter is a dead-letter or parked entry on the wire.
type letter struct {
	DeadLetterID  string        `json:"deadLetterId"`
	ParkedID      string        `json:"parkedId,omitempty"`
	ID            string        `json:"id"`
	TransactionID string        `json:"transactionId"`
	PartitionID   nullString    `json:"partitionId"`
	Queue         string        `json:"queue"`
	Partition     string        `json:"partition"`
	ConsumerGroup string        `json:"consumerGroup"`
	ErrorMessage  nullString    `json:"errorMessage"`
	RetryCount    int           `json:"retryCount"`
	Data          verbatim.JSON `json:"data"`
	TraceID       nullString    `json:"traceId"`
	ProducerSub   nullString    `json:"producerSub"`
	CreatedAt     msTime        `json:"createdAt"`
	FailedAt      msTime        `json:"failedAt"`
	Offset        int64         `json:"offset"`
}

// listLetters serves GET /api/v1/dlq and GET /api/v1/parked.
func (h *handler) listLetters(parked bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := newParams(r)
		f := queen.LetterFilter{
			Queue: p.name("queue"), ConsumerGroup: p.name("consumerGroup"), Partition: p.name("partition"),
			From: p.time("from"), To: p.time("to"),
			Limit: int(min(max(p.num("limit", 100), 1), 1000)), Offset: int(min(p.num("offset", 0), 1<<31)),
		}
		if p.err != nil {
			h.writeError(w, r, p.err)
			return
		}
		list := h.b.DeadLetters
		if parked {
			list = h.b.ParkedMessages
		}
		page, err := list(r.Context(), f)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		out := struct {
			Messages   []letter   `json:"messages"`
			Total      int        `json:"total"`
			Pagination pagination `json:"pagination"`
		}{make([]letter, len(page.Letters)), page.Total, pagination{f.Limit, f.Offset}}
		for i, l := range page.Letters {
			out.Messages[i] = letter{
				DeadLetterID: l.ID, ID: l.MessageID, TransactionID: l.TransactionID, PartitionID: nullString(l.PartitionID),
				Queue: l.Queue, Partition: l.Partition, ConsumerGroup: l.ConsumerGroup, ErrorMessage: nullString(l.Error),
				RetryCount: l.RetryCount, Data: payload(l.Payload), TraceID: nullString(l.TraceID),
				ProducerSub: nullString(l.ProducerSub), CreatedAt: msTime(l.CreatedAt), FailedAt: msTime(l.FailedAt), Offset: l.Offset,
			}
			if parked {
				out.Messages[i].ParkedID = l.ID
			}
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// letterID reads and checks the {id} of a dead-letter or parked route.
func letterID(r *http.Request, parked bool) (string, string, error) {
	id, field := r.PathValue("id"), "deadLetterId"
	if parked {
		field = "parkedId"
	}
	return id, field, checkUUID(field, id)
}

// replayLetter serves POST /api/v1/dlq/{id}/replay and its parked twin.
func (h *handler) replayLetter(parked bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, _, err := letterID(r, parked)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		replay, what := h.b.ReplayDeadLetter, "Dead letter not found"
		if parked {
			replay, what = h.b.ReplayParked, "Parked message not found"
		}
		res, err := replay(r.Context(), id)
		if errors.Is(err, queen.ErrNotFound) {
			err = notFoundErr(what)
		}
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		out := struct {
			Success       bool   `json:"success"`
			DeadLetterID  string `json:"deadLetterId"`
			ParkedID      string `json:"parkedId,omitempty"`
			MessageID     string `json:"messageId"`
			TransactionID string `json:"transactionId"`
			Offset        int64  `json:"offset"`
			Duplicate     bool   `json:"duplicate"`
		}{true, res.ID, "", res.MessageID, res.TransactionID, res.Offset, res.Duplicate}
		if parked {
			out.ParkedID = res.ID
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// deleteLetter serves DELETE /api/v1/dlq/{id} and its parked twin.
func (h *handler) deleteLetter(parked bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, field, err := letterID(r, parked)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		del, what := h.b.DeleteDeadLetter, "Dead letter not found"
		if parked {
			del, what = h.b.DeleteParked, "Parked message not found"
		}
		err = del(r.Context(), id)
		if errors.Is(err, queen.ErrNotFound) {
			err = notFoundErr(what)
		}
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "deleted": true, field: id})
	}
}
