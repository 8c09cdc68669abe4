package httpapi

import (
	"net/http"
	"sort"

	"github.com/queenlite/queen"
)

// statusLetterSample is how many of the newest dead letters GET
// /api/v1/status reads for its affected partitions and top errors.
const statusLetterSample = 1000

// errorCount is one of the most frequent dead-letter errors.
type errorCount struct {
	Error string `json:"error"`
	Count int    `json:"count"`
}

// statusMessages is the messages object of GET /api/v1/status: Queen's
// counters summed over the queues, the batch efficiency and the calls it
// is measured over.
type statusMessages struct {
	counts
	BatchEfficiency map[string]float64 `json:"batchEfficiency"`
	Requests        map[string]int64   `json:"requests"`
}

// status serves GET /api/v1/status, Queen's cluster overview, with the
// parts this broker has: queues[] (as in /status/queues, filtered by
// queue, namespace and task), the message counters summed over them,
// leases and dead letters. Leases count (group, partition) pairs under a
// live lease; totalBatchSize is the messages those leases still hold
// unsettled (settled ones leave the count, so totalAcked is 0). The dead
// letters' affected partitions and top errors come from the newest 1000
// letters. partitionsWithLeases counts the partitions under a live lease
// once, whatever the groups.
//
// throughput (newest first), workers and messages.batchEfficiency
// (messages per push, pop and ack call that moved any) come from
// [Options].History, over from..to, for the queues the filters keep
// (the whole broker without filters); without a History they are empty
// and 0. This process is the one worker; the event-loop and database pool
// fields are 0.
func (h *handler) status(w http.ResponseWriter, r *http.Request) {
	p := newParams(r)
	queue, ns, task := p.name("queue"), p.name("namespace"), p.name("task")
	win, err := h.window(p)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	from, to := win.from, win.to
	ctx := r.Context()
	all, err := h.b.ListQueues(ctx)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	queues := []queueSummary{}
	names := make(map[string]bool)
	var msgs counts
	var dead int64
	for i := range all {
		qs := &all[i]
		if (queue != "" && qs.Name != queue) || (ns != "" && qs.Config.Namespace != ns) || (task != "" && qs.Config.Task != task) {
			continue
		}
		s := summaryOf(qs)
		queues = append(queues, s)
		names[qs.Name] = true
		msgs.Add(s.Messages)
		dead += qs.DeadLetters
	}

	groups, err := h.b.ListGroups(ctx, queen.GroupFilter{})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var active int
	var held int64
	for _, g := range groups {
		if names[g.Queue] {
			active += g.ActiveLeases
			held += g.InFlight
		}
	}

	withLeases, err := h.partitionsWithLeases(ctx, groups, names)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var only map[string]bool // nil: the whole broker's figures
	if queue != "" || ns != "" || task != "" {
		only = names
	}
	series := h.statusSeries(win, only)

	affected, top := 0, []errorCount{}
	if dead > 0 {
		f := queen.LetterFilter{Limit: statusLetterSample}
		if queue != "" {
			f.Queue = queue
		}
		page, err := h.b.DeadLetters(ctx, f)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		parts := make(map[string]bool)
		byErr := make(map[string]int)
		for _, l := range page.Letters {
			if !names[l.Queue] {
				continue
			}
			parts[l.PartitionID] = true
			byErr[l.Error]++
		}
		affected = len(parts)
		for e, n := range byErr {
			top = append(top, errorCount{e, n})
		}
		sort.Slice(top, func(i, j int) bool {
			if top[i].Count != top[j].Count {
				return top[i].Count > top[j].Count
			}
			return top[i].Error < top[j].Error
		})
		top = top[:min(len(top), 5)]
	}

	body := map[string]any{
		"timeRange": map[string]any{"from": msTime(from), "to": msTime(to), "bucketMinutes": win.minutes,
			"pointCount": len(series.throughput)},
		"bucketMinutes": win.minutes, "pointCount": len(series.throughput),
		"throughput": series.throughput,
		"queues":     queues,
		"messages":   statusMessages{msgs, series.batch, series.requests},
		"leases": map[string]any{"active": active, "partitionsWithLeases": withLeases, "totalBatchSize": held,
			"totalAcked": 0},
		"deadLetterQueue": map[string]any{
			"totalMessages": dead, "affectedPartitions": affected, "topErrors": top,
		},
		"workers":  series.workers,
		"errors":   h.statusErrors(),
		"statsAge": 0,
	}
	if sr, ok := h.b.(storeReporter); ok {
		rep, err := sr.StoreReport(ctx)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		body["store"] = storeSummary(rep, names)
	}
	writeJSON(w, http.StatusOK, body)
}

// storeSummary is the "store" object of /api/v1/status (ours; Queen has
// none): the store's format and size on disk, and the approximate size of
// each queue the status covers (see queen.QueueReport.ApproxBytes).
func storeSummary(rep *queen.StoreReport, names map[string]bool) map[string]any {
	queues := []map[string]any{}
	for _, q := range rep.Queues {
		if names[q.Name] {
			queues = append(queues, map[string]any{"name": q.Name, "messages": q.Messages, "approxBytes": q.ApproxBytes})
		}
	}
	return map[string]any{
		"format": rep.Format, "diskBytes": rep.DiskBytes, "lsmBytes": rep.LSMBytes, "valueLogBytes": rep.ValueLogBytes,
		"queues": queues,
	}
}
