package httpapi

import (
	"context"
	"errors"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/history"
)

// workerWindow is how far back GET /api/v1/status's workers count the
// messages processed, as Queen's "msg / 2 min".
const workerWindow = 2 * time.Minute

// statusSeries is the part of GET /api/v1/status read from the History.
type statusSeries struct {
	throughput []map[string]any // newest first
	workers    []map[string]any
	batch      map[string]float64 // messages per call: push, pop, ack
	requests   map[string]int64   // calls that moved a message: push, pop, ack
}

// figuresOf returns what a bucket counted for the queues named, or for the
// whole broker when names is nil.
func figuresOf(b *history.Bucket, names map[string]bool) history.Figures {
	if names == nil {
		return b.Totals
	}
	var f history.Figures
	for _, q := range b.Queues {
		if names[q.Name] {
			f.Add(q.Figures)
		}
	}
	return f
}

// ratio is n/d with two decimals, 0 when d is 0.
func ratio(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return round2(float64(n) / float64(d))
}

// statusSeries reads the throughput rows, the worker and the batch
// efficiency of win from the History, for the queues named (nil: all).
// Without a History, all are empty or zero.
func (h *handler) statusSeries(win analyticsWindow, names map[string]bool) statusSeries {
	out := statusSeries{throughput: []map[string]any{}, workers: []map[string]any{},
		batch: map[string]float64{"push": 0, "pop": 0, "ack": 0}, requests: map[string]int64{"push": 0, "pop": 0, "ack": 0}}
	if h.hist == nil {
		return out
	}
	var sum history.Figures
	buckets := h.hist.Series(win.from, win.to, win.width)
	for i := len(buckets) - 1; i >= 0; i-- {
		b := &buckets[i]
		f := figuresOf(b, names)
		sum.Add(f)
		out.throughput = append(out.throughput, map[string]any{
			"timestamp":         msTime(b.Start),
			"ingestedPerSecond": perSecond(b, f.Pushed), "popPerSecond": perSecond(b, f.Popped),
			"processedPerSecond": perSecond(b, f.Acked),
			"ingested":           f.Pushed, "popMessages": f.Popped, "processed": f.Acked,
			"avgLagMs": ms(f.AvgLag()), "maxLagMs": ms(f.LagMax),
			"dbErrors": 0, "ackFailed": f.AckFailed, "dlqCount": f.DeadLettered,
			"avgEventLoopLagMs": 0, "maxEventLoopLagMs": 0, "minFreeSlots": 0,
			"queenRssMb":      round2(float64(b.RSS) / (1 << 20)),
			"queenCpuUserPct": round2(b.CPUPercent(b.CPUUser)), "queenCpuSysPct": round2(b.CPUPercent(b.CPUSystem)),
			"dbPoolActive": 0, "dbPoolIdle": 0, "dbPoolSize": 0,
		})
	}
	out.requests = map[string]int64{"push": sum.PushBatches, "pop": sum.PopBatches, "ack": sum.AckBatches}
	out.batch = map[string]float64{
		"push": ratio(sum.Pushed, sum.PushBatches), "pop": ratio(sum.Popped, sum.PopBatches), "ack": ratio(sum.Acked, sum.AckBatches),
	}
	if last, ok := h.hist.Latest(); ok {
		var processed int64
		for _, s := range h.hist.Samples(last.At.Add(-workerWindow), last.At) {
			processed += s.Totals.Acked
		}
		out.workers = append(out.workers, map[string]any{
			"hostname": hostname(), "workerId": 0, "lastSeen": msTime(last.At),
			"avgEventLoopLagMs": 0, "maxEventLoopLagMs": 0, "messagesProcessed": processed,
			"freeSlots": 0, "dbConnections": 0, "jobQueueSize": 0, "backoffSize": 0,
		})
	}
	return out
}

// partitionsWithLeases counts the partitions of the queues named that a
// live lease holds, whatever the group; a partition two groups lease
// counts once. Only queues some group leases are described.
func (h *handler) partitionsWithLeases(ctx context.Context, groups []queen.GroupStats, names map[string]bool) (int, error) {
	leased := make(map[string]bool)
	for _, g := range groups {
		if names[g.Queue] && g.ActiveLeases > 0 {
			leased[g.Queue] = true
		}
	}
	now := h.b.Now()
	n := 0
	for q := range leased {
		qs, err := h.b.QueueStats(ctx, q)
		if err != nil {
			if errors.Is(err, queen.ErrNotFound) { // deleted meanwhile
				continue
			}
			return 0, err
		}
		for _, p := range qs.Partitions {
			for _, c := range p.Cursors {
				if c.LeaseID != "" && c.LeaseExpiresAt.After(now) {
					n++
					break
				}
			}
		}
	}
	return n, nil
}

// statusErrors is the errors object of GET /api/v1/status: failed acks
// and dead-lettered messages since the broker opened, and no database
// errors (there is no database server).
func (h *handler) statusErrors() map[string]int64 {
	c := h.b.Counters()
	return map[string]int64{"dbErrors": 0, "ackFailed": c.Acked[queen.AckFailed], "dlqMessages": c.DeadLettered}
}
