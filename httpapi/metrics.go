package httpapi

import (
	"fmt"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/queenlite/queen"
)

// health serves GET /health: 200 while the broker serves, 503 once it is
// closed or has stopped after a storage failure. Its version field is
// [queen.Version], the version of the module serving it; its storeId,
// the id of the store behind the broker ([queen.Facts].StoreID), which
// package remote compares across the servers of one URL list. It has none
// when the broker does not report [queen.Facts].
func (h *handler) health(w http.ResponseWriter, r *http.Request) {
	err := h.b.Ping(r.Context())
	status, db, code := "healthy", "connected", http.StatusOK
	if err != nil {
		status, db, code = "unhealthy", "disconnected", http.StatusServiceUnavailable
		if err != queen.ErrClosed {
			h.log.Warn("httpapi: health check failed", "err", err)
		}
	}
	ans := map[string]any{
		"status": status, "database": db, "server": "queen (Go, Badger)", "worker_id": 0, "version": queen.Version,
		"shared_state": map[string]bool{"enabled": false},
		"queen":        map[string]any{"worker_id": 0, "status": "active"},
	}
	if id := storeIDOf(h.b); id != "" {
		ans["storeId"] = id
	}
	writeJSON(w, code, ans)
}

// storeIDOf is the id of the store behind b ([queen.Facts].StoreID), or
// "" when b cannot tell (a client of another server mounted here).
func storeIDOf(b Broker) string {
	if f, ok := b.(interface{ Facts() queen.Facts }); ok {
		return f.Facts().StoreID
	}
	return ""
}

// metricsJSON serves GET /metrics: Queen's JSON summary, with this
// process's figures.
func (h *handler) metricsJSON(w http.ResponseWriter, r *http.Request) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	c := h.b.Counters()
	uptime := h.b.Now().Sub(h.started).Seconds()
	reqs := h.requests.Load()
	rate := func(n int64) float64 {
		if uptime <= 0 {
			return 0
		}
		return float64(int64(float64(n)/uptime*100)) / 100
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"uptime":   int64(uptime),
		"requests": map[string]any{"total": reqs, "rate": rate(reqs)},
		"messages": map[string]any{"total": c.Pushed, "rate": rate(c.Pushed)},
		"database": map[string]int{"poolSize": 0, "idleConnections": 0, "waitingRequests": 0},
		"memory": map[string]uint64{"rss": ms.Sys, "heapTotal": ms.HeapSys, "heapUsed": ms.HeapAlloc,
			"external": 0, "arrayBuffers": 0},
		"cpu": map[string]int{"user": 0, "system": 0},
	})
}

// promWriter writes the Prometheus text exposition format.
type promWriter struct {
	b strings.Builder
}

// family writes the HELP and TYPE lines of a metric family.
func (p *promWriter) family(name, typ, help string) {
	fmt.Fprintf(&p.b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// sample writes one sample; labels are name, value pairs.
func (p *promWriter) sample(name string, v float64, labels ...string) {
	p.b.WriteString(name)
	if len(labels) > 0 {
		p.b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				p.b.WriteByte(',')
			}
			p.b.WriteString(labels[i])
			p.b.WriteString(`="`)
			p.b.WriteString(escapeLabel(labels[i+1]))
			p.b.WriteByte('"')
		}
		p.b.WriteByte('}')
	}
	p.b.WriteByte(' ')
	p.b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	p.b.WriteByte('\n')
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

// waitingPopper is the method of [*queen.Broker] behind the
// queen_pops_waiting gauge.
type waitingPopper interface {
	WaitingPops() map[string]int
}

// prometheus serves GET /metrics/prometheus: counters since the broker
// opened and gauges of every queue and consumer group.
func (h *handler) prometheus(w http.ResponseWriter, r *http.Request) {
	queues, err := h.b.ListQueues(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	groups, err := h.b.ListGroups(r.Context(), queen.GroupFilter{})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	c := h.b.Counters()
	var p promWriter
	counter := func(name, help string, v int64) {
		p.family(name, "counter", help)
		p.sample(name, float64(v))
	}
	counter("queen_messages_pushed_total", "Messages queued by pushes since the broker opened.", c.Pushed)
	counter("queen_messages_popped_total", "Messages delivered by pops since the broker opened.", c.Popped)
	p.family("queen_messages_acked_total", "counter", "Ack items accepted since the broker opened, by status.")
	statuses := make([]string, 0, len(c.Acked))
	for st := range c.Acked {
		statuses = append(statuses, string(st))
	}
	sort.Strings(statuses)
	for _, st := range statuses {
		p.sample("queen_messages_acked_total", float64(c.Acked[queen.AckStatus(st)]), "status", st)
	}
	counter("queen_messages_dead_lettered_total", "Messages moved to the dead-letter store since the broker opened.", c.DeadLettered)
	counter("queen_messages_parked_total", "Messages moved to the parked store since the broker opened.", c.Parked)
	counter("queen_lease_renewals_total", "Lease renewals since the broker opened.", c.LeasesRenewed)
	counter("queen_lease_expirations_total", "Leases that ran out since the broker opened.", c.LeasesExpired)
	p.family("queen_consume_messages_total", "counter", "Messages consume loops finished since the broker opened, by outcome.")
	outcomes := make([]string, 0, len(c.Consumed))
	for o := range c.Consumed {
		outcomes = append(outcomes, string(o))
	}
	sort.Strings(outcomes)
	for _, o := range outcomes {
		p.sample("queen_consume_messages_total", float64(c.Consumed[queen.Outcome(o)]), "outcome", o)
	}
	p.family("queen_consume_handlers_inflight", "gauge", "Consume handlers running now.")
	p.sample("queen_consume_handlers_inflight", float64(c.HandlersInFlight))

	parts := 0
	for i := range queues {
		parts += queues[i].PartitionN
	}
	p.family("queen_queues", "gauge", "Queues.")
	p.sample("queen_queues", float64(len(queues)))
	p.family("queen_partitions", "gauge", "Partitions over all queues.")
	p.sample("queen_partitions", float64(parts))

	leases := make(map[string]int)
	for _, g := range groups {
		leases[g.Queue] += g.ActiveLeases
	}
	perQueue := []struct {
		name, help string
		v          func(*queen.QueueStats) float64
	}{
		{"queen_queue_messages", "Retained messages of a queue.", func(q *queen.QueueStats) float64 { return float64(q.Messages) }},
		{"queen_queue_pending_messages", "Messages of a queue its slowest group has not settled.", func(q *queen.QueueStats) float64 { return float64(q.Pending) }},
		{"queen_queue_inflight_messages", "Messages of a queue under live leases.", func(q *queen.QueueStats) float64 { return float64(q.InFlight) }},
		{"queen_queue_leases_active", "Partitions of a queue under a live lease, over all groups.", func(q *queen.QueueStats) float64 { return float64(leases[q.Name]) }},
		{"queen_queue_partitions", "Partitions of a queue.", func(q *queen.QueueStats) float64 { return float64(q.PartitionN) }},
		{"queen_dlq_depth", "Dead letters of a queue.", func(q *queen.QueueStats) float64 { return float64(q.DeadLetters) }},
		{"queen_parked_depth", "Parked messages of a queue.", func(q *queen.QueueStats) float64 { return float64(q.Parked) }},
	}
	for _, m := range perQueue {
		p.family(m.name, "gauge", m.help)
		for i := range queues {
			p.sample(m.name, m.v(&queues[i]), "queue", queues[i].Name)
		}
	}
	now := h.b.Now()
	p.family("queen_consumer_lag_messages", "gauge", "Messages a consumer group has yet to read on a queue.")
	for _, g := range groups {
		p.sample("queen_consumer_lag_messages", float64(g.Lag), "queue", g.Queue, "group", g.Group)
	}
	p.family("queen_consumer_lag_seconds", "gauge", "Age of the oldest message a consumer group has not settled on a queue.")
	for _, g := range groups {
		p.sample("queen_consumer_lag_seconds", float64(lagSeconds(g.OldestPendingAt, now)), "queue", g.Queue, "group", g.Group)
	}
	p.family("queen_consumer_inflight_messages", "gauge", "Messages leased to a consumer group on a queue.")
	for _, g := range groups {
		p.sample("queen_consumer_inflight_messages", float64(g.InFlight), "queue", g.Queue, "group", g.Group)
	}
	if pp, ok := h.b.(waitingPopper); ok {
		waiting := pp.WaitingPops()
		names := make([]string, 0, len(waiting))
		for q := range waiting {
			names = append(names, q)
		}
		sort.Strings(names)
		p.family("queen_pops_waiting", "gauge", "Long-poll pops of a queue waiting for a message now.")
		for _, q := range names {
			p.sample("queen_pops_waiting", float64(waiting[q]), "queue", q)
		}
	}
	p.family("queen_uptime_seconds", "gauge", "Seconds since the HTTP API started.")
	p.sample("queen_uptime_seconds", float64(int64(h.b.Now().Sub(h.started).Seconds())))

	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(p.b.String()))
}
