package httpapi

import (
	"math"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/queenlite/queen/httpapi/history"
)

// The analytics routes serve the time series Queen's dashboard charts,
// from [Options].History: GET /api/v1/analytics/worker-metrics,
// system-metrics, queue-ops, queue-lag, retention and
// queue-parked-replicas, each over from..to (ISO-8601, default the last
// hour), bucketed as Queen buckets them (see bucketMinutes). Fields that
// measure something this broker does not have (Node's event loop, a
// database pool, PostgreSQL errors, a job queue) are 0. With no History,
// every series is empty.

// analyticsWindow is the range and bucket width of an analytics request.
type analyticsWindow struct {
	from, to time.Time
	width    time.Duration
	minutes  int
}

// bucketMinutes is Queen's bucket width for a range: 1 minute up to an
// hour, 5 up to 6 hours, 15 up to a day, 60 up to a week, then 360.
func bucketMinutes(span time.Duration) int {
	switch {
	case span <= time.Hour:
		return 1
	case span <= 6*time.Hour:
		return 5
	case span <= 24*time.Hour:
		return 15
	case span <= 7*24*time.Hour:
		return 60
	}
	return 360
}

// window reads from and to, as GET /api/v1/status does: to defaults to
// now and from to an hour before to; from after to is refused. The bucket
// is never narrower than the History's sample interval.
func (h *handler) window(p *params) (analyticsWindow, error) {
	from, to := p.time("from"), p.time("to")
	if p.err != nil {
		return analyticsWindow{}, p.err
	}
	if to.IsZero() {
		to = h.b.Now()
	}
	if from.IsZero() {
		from = to.Add(-time.Hour)
	}
	if from.After(to) {
		return analyticsWindow{}, badRequest("from must not be after to")
	}
	m := bucketMinutes(to.Sub(from))
	if h.hist != nil {
		m = max(m, int((h.hist.Interval()+time.Minute-1)/time.Minute))
	}
	return analyticsWindow{from: from, to: to, width: time.Duration(m) * time.Minute, minutes: m}, nil
}

// series returns the History's buckets of w, oldest first (none without a
// History).
func (h *handler) series(w analyticsWindow) []history.Bucket {
	if h.hist == nil {
		return nil
	}
	return h.hist.Series(w.from, w.to, w.width)
}

// timeRange is the echo of the range every analytics answer carries.
func (w analyticsWindow) timeRange() map[string]any {
	return map[string]any{"from": msTime(w.from), "to": msTime(w.to)}
}

// ms renders a duration in milliseconds with two decimals.
func ms(d time.Duration) float64 { return round2(float64(d) / float64(time.Millisecond)) }

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// perSecond renders n over the bucket as a rate with two decimals.
func perSecond(b *history.Bucket, n int64) float64 { return round2(b.PerSecond(n)) }

// workerMetrics serves GET /api/v1/analytics/worker-metrics: the broker's
// throughput, lag and errors per bucket (timeSeries, oldest first), each
// queue's lag over the range (queues), this process as the one worker
// (workers, as in GET /api/v1/status) and the range's totals (summary).
// The event-loop, free-slot, job-queue, backoff, database-connection and
// database-error fields are 0 (no event loop, no database pool). The
// *Requests fields count the calls that moved a message (see
// [queen.QueueCounters].PushBatches).
func (h *handler) workerMetrics(w http.ResponseWriter, r *http.Request) {
	win, err := h.window(newParams(r))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	rows := []map[string]any{}
	var sum history.Figures
	lags := map[string]*history.Figures{}
	buckets := h.series(win)
	for _, b := range buckets {
		t := &b.Totals
		sum.Add(*t)
		for _, q := range b.Queues {
			if lags[q.Name] == nil {
				lags[q.Name] = &history.Figures{}
			}
			lags[q.Name].Add(q.Figures)
		}
		rows = append(rows, map[string]any{
			"timestamp":     msTime(b.Start),
			"pushPerSecond": perSecond(&b, t.Pushed), "popPerSecond": perSecond(&b, t.Popped), "ackPerSecond": perSecond(&b, t.Acked),
			"avgLagMs": ms(t.AvgLag()), "maxLagMs": ms(t.LagMax),
			"avgEventLoopLagMs": 0, "maxEventLoopLagMs": 0, "dbConnections": 0,
			"avgFreeSlots": 0, "avgJobQueueSize": 0, "maxJobQueueSize": 0, "dbErrors": 0,
			"ackFailed": t.AckFailed, "ackSuccess": t.Acked - t.AckFailed, "dlqCount": t.DeadLettered,
			"pushMessages": t.Pushed, "popMessages": t.Popped, "ackMessages": t.Acked,
			"pushRequests": t.PushBatches, "popRequests": t.PopBatches, "ackRequests": t.AckBatches,
			"lagCount": t.LagCount, "minFreeSlots": 0, "backoffSize": 0,
		})
	}
	queues := []map[string]any{}
	for _, name := range queueNames(buckets, "") {
		f := lags[name]
		queues = append(queues, map[string]any{"queueName": name, "popCount": f.Popped, "avgLagMs": ms(f.AvgLag()), "maxLagMs": ms(f.LagMax)})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"timeSeries": rows, "pointCount": len(rows), "queues": queues, "workers": h.statusSeries(win, nil).workers,
		"summary": map[string]int64{
			"totalPushMessages": sum.Pushed, "totalPopMessages": sum.Popped, "totalAckMessages": sum.Acked,
			"totalPushRequests": sum.PushBatches, "totalPopRequests": sum.PopBatches, "totalAckRequests": sum.AckBatches,
			"totalDbErrors": 0, "totalAckFailed": sum.AckFailed, "totalDlq": sum.DeadLettered,
			"pendingMessages": max(sum.Pushed-sum.Popped, 0),
		},
		"bucketMinutes": win.minutes, "timeRange": win.timeRange(),
	})
}

// stat is Queen's avg/max/min/last of a gauge over a bucket.
type stat struct {
	Avg  float64 `json:"avg"`
	Max  float64 `json:"max"`
	Min  float64 `json:"min"`
	Last float64 `json:"last"`
}

// statOf summarizes values, oldest first.
func statOf(v []float64) stat {
	if len(v) == 0 {
		return stat{}
	}
	s := stat{Min: v[0], Max: v[0], Last: v[len(v)-1]}
	var sum float64
	for _, x := range v {
		sum += x
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	s.Avg = round2(sum / float64(len(v)))
	return s
}

// hostname is this process's host, as the replica's name.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// systemMetrics serves GET /api/v1/analytics/system-metrics: this
// process as Queen's one replica, per bucket: CPU user and system time
// (cpu.user_us and cpu.system_us are the share of one core in hundredths
// of a percent, the scale Queen's dashboard divides by 100), resident
// memory in bytes, and 0 for the database pool and thread pools.
func (h *handler) systemMetrics(w http.ResponseWriter, r *http.Request) {
	win, err := h.window(newParams(r))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	zero := stat{}
	points := []map[string]any{}
	if h.hist != nil {
		samples := h.hist.Samples(win.from, win.to)
		for i := 0; i < len(samples); {
			start := samples[i].Span(win.width)
			var user, sys, rss []float64
			for ; i < len(samples) && samples[i].Span(win.width).Equal(start); i++ {
				s := &samples[i]
				if s.Elapsed > 0 {
					user = append(user, round2(1e4*s.CPUUser.Seconds()/s.Elapsed.Seconds()))
					sys = append(sys, round2(1e4*s.CPUSystem.Seconds()/s.Elapsed.Seconds()))
				}
				rss = append(rss, float64(s.RSS))
			}
			points = append(points, map[string]any{
				"timestamp": msTime(start), "sampleCount": len(rss),
				"metrics": map[string]any{
					"cpu":        map[string]stat{"user_us": statOf(user), "system_us": statOf(sys)},
					"memory":     map[string]stat{"rss_bytes": statOf(rss), "virtual_bytes": zero},
					"database":   map[string]stat{"pool_active": zero, "pool_idle": zero, "pool_size": zero},
					"threadpool": map[string]any{"db": map[string]stat{"pool_size": zero, "queue_size": zero}, "system": map[string]stat{"pool_size": zero, "queue_size": zero}},
				},
			})
		}
	}
	replicas := []map[string]any{}
	if len(points) > 0 {
		replicas = append(replicas, map[string]any{"hostname": hostname(), "port": 0, "workerId": 0, "timeSeries": points})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"replicas": replicas, "replicaCount": len(replicas), "pointCount": len(points),
		"bucketMinutes": win.minutes, "timeRange": win.timeRange(),
	})
}

// queueWindow reads the range and the optional queue of the per-queue
// routes; on a bad parameter it answers 400 and returns false.
func (h *handler) queueWindow(w http.ResponseWriter, r *http.Request) (analyticsWindow, string, bool) {
	p := newParams(r)
	only := p.name("queue")
	win, err := h.window(p)
	if err != nil {
		h.writeError(w, r, err)
		return analyticsWindow{}, "", false
	}
	return win, only, true
}

// queueNames returns the names of the queues the buckets hold, sorted.
func queueNames(buckets []history.Bucket, only string) []string {
	names := []string{}
	for _, b := range buckets {
		for _, q := range b.Queues {
			if (only == "" || q.Name == only) && !slices.Contains(names, q.Name) {
				names = append(names, q.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// queueOps serves GET /api/v1/analytics/queue-ops: per bucket and queue
// (only the one named by queue, if given), pushes, pops, empty pops, acks
// and their rates, failed acks, lag, the long-polls waiting on the queue
// (parkedCount, the mean of the bucket's samples, as Queen's gauge), and
// partitions created and deleted.
func (h *handler) queueOps(w http.ResponseWriter, r *http.Request) {
	win, only, ok := h.queueWindow(w, r)
	if !ok {
		return
	}
	buckets := h.series(win)
	rows := []map[string]any{}
	for _, b := range buckets {
		for _, q := range b.Queues {
			if only != "" && q.Name != only {
				continue
			}
			rows = append(rows, map[string]any{
				"bucket": msTime(b.Start), "queueName": q.Name,
				"pushMessages": q.Pushed, "popMessages": q.Popped, "popEmpty": q.EmptyPops, "ackMessages": q.Acked,
				"pushRequests": q.PushBatches, "ackRequests": q.AckBatches, "ackSuccess": q.Acked - q.AckFailed,
				"emptyPerSecond": perSecond(&b, q.EmptyPops), "partitionCount": q.State.Partitions,
				"pushPerSecond": perSecond(&b, q.Pushed), "popPerSecond": perSecond(&b, q.Popped), "ackPerSecond": perSecond(&b, q.Acked),
				"ackFailed": q.AckFailed, "avgLagMs": ms(q.AvgLag()), "maxLagMs": ms(q.LagMax),
				"parkedCount": round2(q.WaitingPops), "partitionsCreated": q.PartitionsCreated, "partitionsDeleted": q.PartitionsDeleted,
			})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"series": rows, "queues": queueNames(buckets, only), "bucketMinutes": win.minutes, "timeRange": win.timeRange(),
	})
}

// queueLag serves GET /api/v1/analytics/queue-lag: per bucket (newest
// first, as Queen) and queue, the mean and longest wait of what it popped
// (0 in a bucket where it popped nothing).
func (h *handler) queueLag(w http.ResponseWriter, r *http.Request) {
	win, only, ok := h.queueWindow(w, r)
	if !ok {
		return
	}
	rows := []map[string]any{}
	buckets := h.series(win)
	for i := len(buckets) - 1; i >= 0; i-- {
		b := &buckets[i]
		for _, q := range b.Queues {
			if only != "" && q.Name != only {
				continue
			}
			rows = append(rows, map[string]any{
				"bucketTime": msTime(b.Start), "queueName": q.Name,
				"avgLagMs": ms(q.AvgLag()), "maxLagMs": ms(q.LagMax), "popCount": q.Popped,
			})
		}
	}
	writeJSON(w, http.StatusOK, rows)
}

// retention serves GET /api/v1/analytics/retention: per bucket, the
// messages Retention (retentionMsgs), CompletedRetention
// (completedRetentionMsgs) and MaxWaitTime (evictionMsgs) removed, of
// every queue or of the one named by queue, and their totals.
func (h *handler) retention(w http.ResponseWriter, r *http.Request) {
	win, only, ok := h.queueWindow(w, r)
	if !ok {
		return
	}
	rows := []map[string]any{}
	var total history.Figures
	for _, b := range h.series(win) {
		f := b.Totals
		if only != "" {
			q, _ := b.Queue(only)
			f = q.Figures
		}
		total.Retained += f.Retained
		total.CompletedRetained += f.CompletedRetained
		total.Evicted += f.Evicted
		rows = append(rows, map[string]any{
			"bucket": msTime(b.Start), "retentionMsgs": f.Retained,
			"completedRetentionMsgs": f.CompletedRetained, "evictionMsgs": f.Evicted,
			"totalMsgs": f.Retained + f.CompletedRetained + f.Evicted,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"series": rows,
		"totals": map[string]int64{
			"retentionMsgs": total.Retained, "completedRetentionMsgs": total.CompletedRetained, "evictionMsgs": total.Evicted,
			"totalMsgs": total.Retained + total.CompletedRetained + total.Evicted,
		},
		"bucketMinutes": win.minutes, "timeRange": win.timeRange(),
	})
}

// queueParkedReplicas serves GET /api/v1/analytics/queue-parked-replicas:
// the long-polls waiting on each queue per bucket (as queue-ops'
// parkedCount), all on this process, Queen's one replica.
func (h *handler) queueParkedReplicas(w http.ResponseWriter, r *http.Request) {
	win, only, ok := h.queueWindow(w, r)
	if !ok {
		return
	}
	host := hostname()
	rows := []map[string]any{}
	for _, b := range h.series(win) {
		for _, q := range b.Queues {
			if only != "" && q.Name != only {
				continue
			}
			rows = append(rows, map[string]any{
				"bucket": msTime(b.Start), "queueName": q.Name, "hostname": host, "workerId": 0, "parkedCount": round2(q.WaitingPops),
			})
		}
	}
	replicas := []map[string]any{}
	if len(rows) > 0 {
		replicas = append(replicas, map[string]any{"hostname": host, "port": 0, "workerId": 0})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"series": rows, "replicas": replicas, "bucketMinutes": win.minutes, "timeRange": win.timeRange(),
	})
}

// postgresOnly answers the routes that read PostgreSQL internals or move
// a PostgreSQL database: 404 with a body that says why.
func postgresOnly(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, map[string]any{
		"error":  "not supported: this route reads or migrates Queen's PostgreSQL database, and this server stores messages in Badger",
		"reason": "postgresql-only",
	})
}
