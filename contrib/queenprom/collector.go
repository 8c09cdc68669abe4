// Package queenprom exports an embedded [queen.Broker] to Prometheus: its
// running totals ([queen.Broker.Counters]), gauges of every queue and
// consumer group, and, through an [Observer], latency histograms. It needs
// no HTTP API; register the collector on the registry the program already
// serves:
//
//	c, err := queenprom.NewCollector(b, nil)
//	if err != nil { ... }
//	prometheus.MustRegister(c)
//
// Metric names start with queen_. Where they overlap with what
// github.com/queenlite/queen/httpapi serves on /metrics/prometheus, names,
// types, labels and values are the same, so dashboards work with either.
//
// The collector reads the broker at scrape time and keeps nothing
// between scrapes. A broker that is closed, or has stopped after a
// storage failure, still reports its counters; its queue and group gauges
// are then reported as a collection error (an invalid metric), which the
// registry's Gather returns and promhttp reports per its ErrorHandling.
// Unregister the collector when closing the broker for good.
package queenprom

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/queenlite/queen"
)

// DefaultTimeout bounds the reads of queue and group statistics in one
// collection when [Options.Timeout] is zero.
const DefaultTimeout = 5 * time.Second

// Options configures a [Collector]. A nil *Options and zero fields mean
// the defaults.
type Options struct {
	// Timeout bounds reading the queue and group statistics of one
	// collection. Defaults to [DefaultTimeout]; negative is refused.
	Timeout time.Duration

	// ConstLabels are added to every metric of the collector, e.g. to tell
	// two brokers of one process apart. Invalid label names are reported
	// when the collector is registered. Defaults to none.
	ConstLabels prometheus.Labels

	// Observer, when set, is collected along with the collector: its
	// histograms then need no registration of their own (registering it
	// as well is refused by the registry as a duplicate). Defaults to none.
	Observer *Observer
}

// Collector is a [prometheus.Collector] for one broker. Build it with
// [NewCollector]. It is safe for concurrent use.
type Collector struct {
	b       *queen.Broker
	timeout time.Duration
	obs     *Observer

	counters []counterDesc
	acked    *prometheus.Desc
	consumed *prometheus.Desc
	handlers *prometheus.Desc
	waiting  *prometheus.Desc

	queues     *prometheus.Desc
	partitions *prometheus.Desc
	perQueue   []queueDesc
	perGroup   []groupDesc
}

// counterDesc is a running total read from [queen.Counters].
type counterDesc struct {
	desc *prometheus.Desc
	v    func(*queen.Counters) int64
}

// queueDesc is a gauge per queue; leases is the queue's active leases.
type queueDesc struct {
	desc *prometheus.Desc
	v    func(q *queen.QueueStats, leases int) float64
}

// groupDesc is a gauge per (queue, group); now is the broker's clock.
type groupDesc struct {
	desc *prometheus.Desc
	v    func(g *queen.GroupStats, now time.Time) float64
}

// NewCollector returns a collector for b. It refuses a nil broker and a
// negative Options.Timeout.
func NewCollector(b *queen.Broker, opts *Options) (*Collector, error) {
	if b == nil {
		return nil, errors.New("queenprom: NewCollector: broker must not be nil")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("queenprom: Options.Timeout must not be negative, not %s", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	cl := o.ConstLabels
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	c := &Collector{b: b, timeout: o.Timeout, obs: o.Observer}
	c.counters = []counterDesc{
		{desc("queen_messages_pushed_total", "Messages queued by pushes since the broker opened."),
			func(s *queen.Counters) int64 { return s.Pushed }},
		{desc("queen_messages_popped_total", "Messages delivered by pops since the broker opened."),
			func(s *queen.Counters) int64 { return s.Popped }},
		{desc("queen_messages_dead_lettered_total", "Messages moved to the dead-letter store since the broker opened."),
			func(s *queen.Counters) int64 { return s.DeadLettered }},
		{desc("queen_messages_parked_total", "Messages moved to the parked store since the broker opened."),
			func(s *queen.Counters) int64 { return s.Parked }},
		{desc("queen_lease_renewals_total", "Lease renewals since the broker opened."),
			func(s *queen.Counters) int64 { return s.LeasesRenewed }},
		{desc("queen_lease_expirations_total", "Leases that ran out since the broker opened."),
			func(s *queen.Counters) int64 { return s.LeasesExpired }},
	}
	c.acked = desc("queen_messages_acked_total", "Ack items accepted since the broker opened, by status.", "status")
	c.consumed = desc("queen_consume_messages_total", "Messages consume loops finished since the broker opened, by outcome.", "outcome")
	c.handlers = desc("queen_consume_handlers_inflight", "Consume handlers running now.")
	c.waiting = desc("queen_pops_waiting", "Long-poll pops of a queue waiting for a message now.", "queue")
	c.queues = desc("queen_queues", "Queues.")
	c.partitions = desc("queen_partitions", "Partitions over all queues.")
	c.perQueue = []queueDesc{
		{desc("queen_queue_messages", "Retained messages of a queue.", "queue"),
			func(q *queen.QueueStats, _ int) float64 { return float64(q.Messages) }},
		{desc("queen_queue_pending_messages", "Messages of a queue its slowest group has not settled.", "queue"),
			func(q *queen.QueueStats, _ int) float64 { return float64(q.Pending) }},
		{desc("queen_queue_inflight_messages", "Messages of a queue under live leases.", "queue"),
			func(q *queen.QueueStats, _ int) float64 { return float64(q.InFlight) }},
		{desc("queen_queue_leases_active", "Partitions of a queue under a live lease, over all groups.", "queue"),
			func(_ *queen.QueueStats, leases int) float64 { return float64(leases) }},
		{desc("queen_queue_partitions", "Partitions of a queue.", "queue"),
			func(q *queen.QueueStats, _ int) float64 { return float64(q.PartitionN) }},
		{desc("queen_dlq_depth", "Dead letters of a queue.", "queue"),
			func(q *queen.QueueStats, _ int) float64 { return float64(q.DeadLetters) }},
		{desc("queen_parked_depth", "Parked messages of a queue.", "queue"),
			func(q *queen.QueueStats, _ int) float64 { return float64(q.Parked) }},
	}
	c.perGroup = []groupDesc{
		{desc("queen_consumer_lag_messages", "Messages a consumer group has yet to read on a queue.", "queue", "group"),
			func(g *queen.GroupStats, _ time.Time) float64 { return float64(g.Lag) }},
		{desc("queen_consumer_lag_seconds", "Age of the oldest message a consumer group has not settled on a queue.", "queue", "group"),
			func(g *queen.GroupStats, now time.Time) float64 { return lagSeconds(g.OldestPendingAt, now) }},
		{desc("queen_consumer_inflight_messages", "Messages leased to a consumer group on a queue.", "queue", "group"),
			func(g *queen.GroupStats, _ time.Time) float64 { return float64(g.InFlight) }},
	}
	return c, nil
}

// lagSeconds is the whole seconds from t to now, 0 for a zero t; the
// same figure as httpapi's.
func lagSeconds(t, now time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(max(0, int64(now.Sub(t)/time.Second)))
}

// Describe sends the descriptors of every metric the collector reports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.counters {
		ch <- m.desc
	}
	ch <- c.acked
	ch <- c.consumed
	ch <- c.handlers
	ch <- c.waiting
	ch <- c.queues
	ch <- c.partitions
	for _, m := range c.perQueue {
		ch <- m.desc
	}
	for _, m := range c.perGroup {
		ch <- m.desc
	}
	if c.obs != nil {
		c.obs.Describe(ch)
	}
}

// Collect reads the broker's counters and its queue and group statistics
// and sends them as metrics. A failure to read the statistics is sent as
// an invalid metric; the counters are sent regardless.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.b.Counters()
	for _, m := range c.counters {
		ch <- constMetric(m.desc, prometheus.CounterValue, float64(m.v(&s)))
	}
	for _, st := range sortedKeys(s.Acked) {
		ch <- constMetric(c.acked, prometheus.CounterValue, float64(s.Acked[st]), string(st))
	}
	for _, o := range sortedKeys(s.Consumed) {
		ch <- constMetric(c.consumed, prometheus.CounterValue, float64(s.Consumed[o]), string(o))
	}
	ch <- constMetric(c.handlers, prometheus.GaugeValue, float64(s.HandlersInFlight))
	waiting := c.b.WaitingPops()
	for _, q := range sortedKeys(waiting) {
		ch <- constMetric(c.waiting, prometheus.GaugeValue, float64(waiting[q]), q)
	}
	c.collectStats(ch)
	if c.obs != nil {
		c.obs.Collect(ch)
	}
}

// collectStats sends the queue and group gauges.
func (c *Collector) collectStats(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	queues, err := c.b.ListQueues(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.queues, fmt.Errorf("queenprom: list queues: %w", err))
		return
	}
	groups, err := c.b.ListGroups(ctx, queen.GroupFilter{})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.perGroup[0].desc, fmt.Errorf("queenprom: list groups: %w", err))
		return
	}
	now := c.b.Now()
	parts := 0
	for i := range queues {
		parts += queues[i].PartitionN
	}
	ch <- constMetric(c.queues, prometheus.GaugeValue, float64(len(queues)))
	ch <- constMetric(c.partitions, prometheus.GaugeValue, float64(parts))
	leases := make(map[string]int)
	for i := range groups {
		leases[groups[i].Queue] += groups[i].ActiveLeases
	}
	for _, m := range c.perQueue {
		for i := range queues {
			q := &queues[i]
			ch <- constMetric(m.desc, prometheus.GaugeValue, m.v(q, leases[q.Name]), q.Name)
		}
	}
	for _, m := range c.perGroup {
		for i := range groups {
			g := &groups[i]
			ch <- constMetric(m.desc, prometheus.GaugeValue, m.v(g, now), g.Queue, g.Group)
		}
	}
}

// constMetric is prometheus.NewConstMetric, with an error sent as an
// invalid metric rather than a panic.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// sortedKeys returns m's keys in order, so scrapes list labels stably.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
