package httpapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/compat"
	"github.com/queenlite/queen/internal/wire"
)

// counts are Queen's counters of a queue or partition, derived from the
// broker's counts by [wire.Counts.Queen].
type counts = wire.QueenCounts

// queueSummary is a queue in the listings. Counts, ours, are the broker's
// own counts, which Queen's counters in Messages cannot always be read
// back into (see package wire); DefaultPartitionID ("" before the Default
// partition exists) and Groups (by name, [] when none) are ours too.
type queueSummary struct {
	ID         string      `json:"id"`
	Name       string      `json:"name"`
	Namespace  string      `json:"namespace"`
	Task       string      `json:"task"`
	Priority   int         `json:"priority"`
	CreatedAt  msTime      `json:"createdAt"`
	Partitions int         `json:"partitions"`
	Messages   counts      `json:"messages"`
	Counts     wire.Counts `json:"counts"`
	// DefaultPartitionID is the id of the Default partition; ours.
	DefaultPartitionID string `json:"defaultPartitionId"`
	// Groups are the queue's consumer groups by name; ours.
	Groups []string `json:"groups"`
}

func summaryOf(qs *queen.QueueStats) queueSummary {
	c := wire.QueueCounts(qs)
	return queueSummary{ID: qs.ID, Name: qs.Name, Namespace: qs.Config.Namespace, Task: qs.Config.Task, Priority: qs.Config.Priority,
		CreatedAt: msTime(qs.CreatedAt), Partitions: qs.PartitionN, Messages: c.Queen(), Counts: c,
		DefaultPartitionID: qs.DefaultPartitionID, Groups: append([]string{}, qs.Groups...)}
}

// listedQueues lists queues newest first, filtered by the namespace and
// task parameters and paged by limit and offset when they are sent.
func (h *handler) listedQueues(r *http.Request, defLimit int64) ([]queueSummary, pagination, error) {
	p := newParams(r)
	ns, task := p.name("namespace"), p.name("task")
	limit, offset := min(p.num("limit", defLimit), math.MaxInt32), min(p.num("offset", 0), math.MaxInt32)
	_, _ = p.time("from"), p.time("to")
	if p.err != nil {
		return nil, pagination{}, p.err
	}
	all, err := h.b.ListQueues(r.Context())
	if err != nil {
		return nil, pagination{}, err
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].CreatedAt.After(all[j].CreatedAt) })
	out := []queueSummary{}
	for i := range all {
		if (ns == "" || all[i].Config.Namespace == ns) && (task == "" || all[i].Config.Task == task) {
			out = append(out, summaryOf(&all[i]))
		}
	}
	out = out[min(int(offset), len(out)):]
	if limit > 0 {
		out = out[:min(int(limit), len(out))]
	}
	return out, pagination{int(limit), int(offset)}, nil
}

// resourceQueues serves GET /api/v1/resources/queues.
func (h *handler) resourceQueues(w http.ResponseWriter, r *http.Request) {
	qs, _, err := h.listedQueues(r, 0)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": qs})
}

// statusQueues serves GET /api/v1/status/queues.
func (h *handler) statusQueues(w http.ResponseWriter, r *http.Request) {
	qs, page, err := h.listedQueues(r, 100)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": qs, "pagination": page})
}

// partitionDetail is a partition in the per-queue routes; Counts, ours,
// are the broker's own (see queueSummary).
type partitionDetail struct {
	ID            string      `json:"id"`
	Name          string      `json:"name"`
	CreatedAt     msTime      `json:"createdAt"`
	Messages      counts      `json:"messages"`
	Stats         counts      `json:"stats"`
	Counts        wire.Counts `json:"counts"`
	Cursor        any         `json:"cursor,omitempty"`
	LastActivity  msTime      `json:"lastActivity"`
	OldestMessage msTime      `json:"oldestMessage"`
	NewestMessage msTime      `json:"newestMessage"`
	FirstOffset   int64       `json:"firstOffset"`
	NextOffset    int64       `json:"nextOffset"`
}

// queueDetail gathers a queue's partitions with their counters, oldest
// and newest messages and per-partition dead letters.
func (h *handler) queueDetail(ctx context.Context, name string) (*queen.QueueStats, []partitionDetail, counts, error) {
	qs, err := h.b.QueueStats(ctx, name)
	if errors.Is(err, queen.ErrNotFound) {
		return nil, nil, counts{}, notFoundErr("Queue not found")
	}
	if err != nil {
		return nil, nil, counts{}, err
	}
	dead, parked := make(map[string]int64), make(map[string]int64)
	for _, l := range []struct {
		n    int64
		list func(context.Context, queen.LetterFilter) (*queen.LetterPage, error)
		into map[string]int64
	}{{qs.DeadLetters, h.b.DeadLetters, dead}, {qs.Parked, h.b.ParkedMessages, parked}} {
		if l.n == 0 {
			continue
		}
		page, err := l.list(ctx, queen.LetterFilter{Queue: name, Limit: 1000})
		if err != nil {
			return nil, nil, counts{}, err
		}
		for _, e := range page.Letters {
			l.into[e.Partition]++
		}
	}
	// The queue's figures come from its totals, as in the listings and
	// the console (wire.Counts.Waiting and Completed), never summed from
	// the partitions'.
	totals := wire.QueueCounts(qs).Queen()
	parts := make([]partitionDetail, 0, len(qs.Partitions))
	for i := range qs.Partitions {
		p := &qs.Partitions[i]
		own := wire.PartitionCounts(p)
		withLetters := own
		withLetters.DeadLetters, withLetters.Parked = dead[p.Name], parked[p.Name]
		c := withLetters.Queen()
		pd := partitionDetail{ID: p.ID, Name: p.Name, CreatedAt: msTime(p.CreatedAt), Messages: c, Stats: c, Counts: own,
			NewestMessage: msTime(p.LastPushAt), LastActivity: msTime(p.LastPushAt), FirstOffset: p.FirstOffset, NextOffset: p.NextOffset}
		var consumed int64
		for _, cur := range p.Cursors {
			consumed += cur.Consumed
			if cur.LastAckAt.After(time.Time(pd.LastActivity)) {
				pd.LastActivity = msTime(cur.LastAckAt)
			}
		}
		pd.Cursor = map[string]int64{"totalConsumed": consumed, "batchesConsumed": 0}
		if p.Messages > 0 {
			res, err := h.b.Fetch(ctx, name, p.Name, p.FirstOffset, 1)
			if err != nil && !errors.Is(err, queen.ErrNotFound) {
				return nil, nil, counts{}, err
			}
			if err == nil && len(res.Records) > 0 {
				pd.OldestMessage = msTime(res.Records[0].CreatedAt)
			}
		}
		parts = append(parts, pd)
	}
	return qs, parts, totals, nil
}

// resourceQueue serves GET /api/v1/resources/queues/{queue}.
func (h *handler) resourceQueue(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r, "queue")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	qs, parts, totals, err := h.queueDetail(r.Context(), name)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	for i := range parts {
		parts[i].Cursor = nil
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": qs.ID, "name": qs.Name, "namespace": qs.Config.Namespace, "task": qs.Config.Task,
		"createdAt": msTime(qs.CreatedAt), "partitions": parts, "totals": totals, "counts": wire.QueueCounts(qs),
	})
}

// statusQueue serves GET /api/v1/status/queues/{queue}.
func (h *handler) statusQueue(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r, "queue")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	qs, parts, totals, err := h.queueDetail(r.Context(), name)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	c := &qs.Config
	queue := map[string]any{
		"id": qs.ID, "name": qs.Name, "namespace": c.Namespace, "task": c.Task, "priority": c.Priority,
		"createdAt": msTime(qs.CreatedAt),
		"config": map[string]any{"leaseTime": seconds(c.LeaseTime), "retryLimit": c.RetryLimit, "retryDelay": millis(c.RetryDelay),
			"ttl": seconds(compat.Of(c).TTL), "maxQueueSize": c.MaxSize, "deadLetterQueue": compat.Of(c).DeadLetterQueue},
		"options": wire.OptionsOf(c),
		"groups":  qs.Groups,
		"counts":  wire.QueueCounts(qs),
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"queue": queue, "partitions": parts,
		"totals": map[string]any{"messages": totals, "total": totals.Total, "pending": totals.Pending, "processing": totals.Processing,
			"completed": totals.Completed, "failed": totals.Failed, "deadLetter": totals.DeadLetter},
	})
}

// labelCount is a namespace or task in the label listings.
type labelCount struct {
	Name       string
	Queues     int
	Partitions int
	Messages   struct {
		Total   int64 `json:"total"`
		Pending int64 `json:"pending"`
	}
}

// byLabel groups the queues by namespace (task false) or task.
func (h *handler) byLabel(w http.ResponseWriter, r *http.Request, task bool) {
	all, err := h.b.ListQueues(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	key, list := "namespace", "namespaces"
	if task {
		key, list = "task", "tasks"
	}
	agg := make(map[string]*labelCount)
	var names []string
	for i := range all {
		label := all[i].Config.Namespace
		if task {
			label = all[i].Config.Task
		}
		if label == "" {
			continue
		}
		lc := agg[label]
		if lc == nil {
			lc = &labelCount{Name: label}
			agg[label] = lc
			names = append(names, label)
		}
		c := wire.QueueCounts(&all[i]).Queen()
		lc.Queues++
		lc.Partitions += all[i].PartitionN
		lc.Messages.Total += c.Total
		lc.Messages.Pending += c.Pending
	}
	sort.Strings(names)
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		lc := agg[n]
		out = append(out, map[string]any{key: n, "queues": lc.Queues, "partitions": lc.Partitions, "messages": lc.Messages})
	}
	writeJSON(w, http.StatusOK, map[string]any{list: out})
}

// namespaces serves GET /api/v1/resources/namespaces.
func (h *handler) namespaces(w http.ResponseWriter, r *http.Request) { h.byLabel(w, r, false) }

// tasks serves GET /api/v1/resources/tasks.
func (h *handler) tasks(w http.ResponseWriter, r *http.Request) { h.byLabel(w, r, true) }

// spread is the avg/median/min/max of a set of lags.
type spread struct {
	Avg    float64 `json:"avg"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	sort.Float64s(v)
	var sum float64
	for _, x := range v {
		sum += x
	}
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return spread{Avg: sum / float64(len(v)), Median: med, Min: v[0], Max: v[len(v)-1]}
}

// rateMeter turns the broker's running counters into per-second rates,
// measured between successive reads at least a second apart.
type rateMeter struct {
	mu                 sync.Mutex
	at                 time.Time
	pushed, settled    int64
	inRate, outRate    float64
	haveSample, primed bool
}

func (m *rateMeter) rates(now time.Time, pushed, settled int64, since time.Time) (in, out float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.haveSample {
		m.at, m.pushed, m.settled, m.haveSample = since, 0, 0, true
	}
	if dt := now.Sub(m.at).Seconds(); dt >= 1 || !m.primed {
		if dt > 0 {
			m.inRate, m.outRate = float64(pushed-m.pushed)/dt, float64(settled-m.settled)/dt
		}
		m.at, m.pushed, m.settled, m.primed = now, pushed, settled, true
	}
	return m.inRate, m.outRate
}

// overview serves GET /api/v1/resources/overview.
func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	all, err := h.b.ListQueues(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	groups, err := h.b.ListGroups(r.Context(), queen.GroupFilter{})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var msgs counts
	parts := 0
	nss, tasks := map[string]bool{}, map[string]bool{}
	for i := range all {
		msgs.Add(wire.QueueCounts(&all[i]).Queen())
		parts += all[i].PartitionN
		if ns := all[i].Config.Namespace; ns != "" {
			nss[ns] = true
		}
		if t := all[i].Config.Task; t != "" {
			tasks[t] = true
		}
	}
	now := h.b.Now()
	var timeLags, offLags []float64
	for _, g := range groups {
		timeLags = append(timeLags, float64(lagSeconds(g.OldestPendingAt, now)))
		offLags = append(offLags, float64(g.Lag))
	}
	c := h.b.Counters()
	var settled int64
	for _, n := range c.Acked {
		settled += n
	}
	in, out := h.rates.rates(now, c.Pushed, settled, h.started)
	writeJSON(w, http.StatusOK, map[string]any{
		"queues": len(all), "partitions": parts, "namespaces": len(nss), "tasks": len(tasks),
		"messages":   msgs,
		"lag":        map[string]spread{"time": spreadOf(timeLags), "offset": spreadOf(offLags)},
		"throughput": map[string]float64{"ingestedPerSecond": math.Round(in*100) / 100, "processedPerSecond": math.Round(out*100) / 100},
		"timestamp":  msTime(now), "statsAge": 0,
	})
}
