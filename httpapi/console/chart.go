package console

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/queenlite/queen/httpapi/history"
)

// The throughput chart: the last hour in one-minute buckets, drawn as
// inline SVG polylines (no script, no external file).
const (
	chartSpan    = time.Hour
	chartBucket  = time.Minute
	chartWidth   = 1000
	chartHeight  = 200
	chartPadLeft = 40
)

// chart is a drawn series of push, pop and ack rates.
type chart struct {
	Enabled bool   // a recorder is configured
	Empty   bool   // it has no sample in the span yet
	Title   string // what the rates are of
	// Push, Pop and Ack are polyline points ("x,y x,y ...").
	Push, Pop, Ack string
	// Max is the rate at the top of the chart, per second.
	Max string
	// Last are the newest bucket's rates.
	LastPush, LastPop, LastAck string
	Width, Height, Left        int
	From, To                   string
}

// rates are one bucket's push, pop and ack rates per second.
type rates struct{ push, pop, ack float64 }

// throughput charts the broker's totals (queue "") or one queue's.
func (h *handler) throughput(queue string, now time.Time) chart {
	c := chart{Width: chartWidth, Height: chartHeight, Left: chartPadLeft, Title: "all queues"}
	if queue != "" {
		c.Title = "queue " + queue
	}
	rec := h.opts.History
	if rec == nil {
		return c
	}
	c.Enabled = true
	from := now.Add(-chartSpan)
	c.From, c.To = formatTime(from), formatTime(now)
	buckets := rec.Series(from, now, chartBucket)
	var pts []rates
	var at []time.Time
	for i := range buckets {
		b := &buckets[i]
		f := b.Totals
		if queue != "" {
			q, ok := b.Queue(queue)
			if !ok {
				continue
			}
			f = q.Figures
		}
		pts = append(pts, rates{b.PerSecond(f.Pushed), b.PerSecond(f.Popped), b.PerSecond(f.Acked)})
		at = append(at, b.Start)
	}
	if len(pts) == 0 {
		c.Empty = true
		return c
	}
	top := 0.0
	for _, p := range pts {
		top = max(top, p.push, p.pop, p.ack)
	}
	if top == 0 {
		top = 1
	}
	c.Max = formatRate(top)
	last := pts[len(pts)-1]
	c.LastPush, c.LastPop, c.LastAck = formatRate(last.push), formatRate(last.pop), formatRate(last.ack)
	line := func(get func(rates) float64) string {
		var sb strings.Builder
		for i, p := range pts {
			x := chartPadLeft + float64(chartWidth-chartPadLeft)*at[i].Sub(from).Seconds()/chartSpan.Seconds()
			y := chartHeight - 5 - float64(chartHeight-15)*get(p)/top
			if i > 0 {
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "%.1f,%.1f", max(x, chartPadLeft), y)
		}
		return sb.String()
	}
	c.Push = line(func(r rates) float64 { return r.push })
	c.Pop = line(func(r rates) float64 { return r.pop })
	c.Ack = line(func(r rates) float64 { return r.ack })
	return c
}

// queueRates are a queue's rates over the newest sample, for the
// overview's table.
type queueRates struct{ Push, Pop, Ack string }

// latestRates returns the per-queue rates of the recorder's newest
// sample; nil without a recorder or a sample.
func latestRates(rec *history.Recorder) map[string]queueRates {
	if rec == nil {
		return nil
	}
	s, ok := rec.Latest()
	if !ok || s.Elapsed <= 0 {
		return nil
	}
	sec := s.Elapsed.Seconds()
	out := make(map[string]queueRates, len(s.Queues))
	for _, q := range s.Queues {
		out[q.Name] = queueRates{formatRate(float64(q.Pushed) / sec), formatRate(float64(q.Popped) / sec), formatRate(float64(q.Acked) / sec)}
	}
	return out
}

func formatRate(r float64) string {
	switch {
	case r == 0:
		return "0"
	case r < 10:
		return strconv.FormatFloat(r, 'f', 2, 64)
	}
	return strconv.FormatFloat(r, 'f', 0, 64)
}
