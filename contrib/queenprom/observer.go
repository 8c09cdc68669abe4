package queenprom

import (
	"fmt"
	"math"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/queenlite/queen"
)

// ObserverOptions configures an [Observer]. A nil *ObserverOptions and
// zero fields mean the defaults.
type ObserverOptions struct {
	// Next receives every event after the Observer has recorded it, to
	// chain another [queen.Observer]. Defaults to none.
	Next queen.Observer

	// Buckets are the upper bounds, in seconds, of the histograms'
	// buckets, in increasing order. Defaults to [prometheus.DefBuckets].
	Buckets []float64

	// ConstLabels are added to every histogram. Invalid label names are
	// reported when the Observer is registered. Defaults to none.
	ConstLabels prometheus.Labels
}

// Observer is a [queen.Observer] that records latencies in Prometheus
// histograms; pass it as queen.Options.Observer when opening the broker,
// and either register it or hand it to [NewCollector] in
// [Options.Observer]. It is a [prometheus.Collector] and is safe for
// concurrent use. Its histograms:
//
//	queen_push_duration_seconds{queue}                    one push call
//	queen_pop_duration_seconds{queue}                     one pop that delivered messages,
//	                                                      long-poll wait included
//	                                                      (discovery pops: queue="")
//	queen_consume_handler_duration_seconds{queue,group,outcome}
//	                                                      one observation per message a
//	                                                      consume loop finished, the handler's
//	                                                      duration, by outcome
//
// The handler histogram's _count is the number of messages consume loops
// finished by queue, group and outcome, a finer split of
// queen_consume_messages_total.
//
// Passed as the Observer of a github.com/queenlite/queen/outbox relay, it
// also records:
//
//	queen_outbox_relayed_total{queue}         counter: rows pushed and deleted
//	queen_outbox_relay_age_seconds{queue}     histogram: per relayed batch, the
//	                                          age of its oldest row, from its
//	                                          enqueue to the push
//	queen_outbox_held_total{queue}            counter: rows kept aside, refused
//	                                          for good by the broker
//	queen_outbox_waiting_rows                 gauge: rows waiting to be relayed
//	queen_outbox_oldest_age_seconds           gauge: age of the oldest of them
//
// The gauges are the last snapshot a relay reported (about once a
// second); to tell two outbox tables apart, give each its own Observer
// with ConstLabels.
type Observer struct {
	next    queen.Observer
	push    *prometheus.HistogramVec
	pop     *prometheus.HistogramVec
	handler *prometheus.HistogramVec

	relayed  *prometheus.CounterVec
	relayAge *prometheus.HistogramVec
	held     *prometheus.CounterVec
	waiting  prometheus.Gauge
	oldest   prometheus.Gauge
}

// NewObserver returns an Observer. It refuses buckets that are not
// increasing or that are NaN.
func NewObserver(opts *ObserverOptions) (*Observer, error) {
	var o ObserverOptions
	if opts != nil {
		o = *opts
	}
	if o.Buckets == nil {
		o.Buckets = prometheus.DefBuckets
	}
	for i, v := range o.Buckets {
		if math.IsNaN(v) || (i > 0 && v <= o.Buckets[i-1]) {
			return nil, fmt.Errorf("queenprom: ObserverOptions.Buckets must be increasing numbers, not %v", o.Buckets)
		}
	}
	hist := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: name, Help: help, Buckets: o.Buckets, ConstLabels: o.ConstLabels,
		}, labels)
	}
	return &Observer{
		next:    o.Next,
		push:    hist("queen_push_duration_seconds", "Latency of push calls.", "queue"),
		pop:     hist("queen_pop_duration_seconds", "Latency of pops that delivered messages.", "queue"),
		handler: hist("queen_consume_handler_duration_seconds", "Duration of the consume handler per message finished, by outcome.", "queue", "group", "outcome"),

		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "queen_outbox_relayed_total",
			Help: "Outbox rows pushed into the broker and deleted.", ConstLabels: o.ConstLabels}, []string{"queue"}),
		relayAge: hist("queen_outbox_relay_age_seconds", "Age of the oldest row of each relayed outbox batch, from its enqueue to the push.", "queue"),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "queen_outbox_held_total",
			Help: "Outbox rows kept aside, refused for good by the broker.", ConstLabels: o.ConstLabels}, []string{"queue"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "queen_outbox_waiting_rows",
			Help: "Outbox rows waiting to be relayed, as last reported.", ConstLabels: o.ConstLabels}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "queen_outbox_oldest_age_seconds",
			Help: "Age of the oldest outbox row waiting to be relayed, as last reported.", ConstLabels: o.ConstLabels}),
	}, nil
}

// Observe records e's duration in the matching histogram and passes e on
// to ObserverOptions.Next.
func (o *Observer) Observe(e queen.Event) {
	// GetMetricWithLabelValues, not WithLabelValues: a label value that is
	// not valid UTF-8 is skipped rather than a panic on the broker's path.
	switch e.Kind {
	case queen.EventPush:
		if h, err := o.push.GetMetricWithLabelValues(e.Queue); err == nil {
			h.Observe(e.Duration.Seconds())
		}
	case queen.EventPop:
		if h, err := o.pop.GetMetricWithLabelValues(e.Queue); err == nil {
			h.Observe(e.Duration.Seconds())
		}
	case queen.EventConsume:
		if h, err := o.handler.GetMetricWithLabelValues(e.Queue, e.Group, string(e.Outcome)); err == nil {
			for range e.Count {
				h.Observe(e.Duration.Seconds())
			}
		}
	case queen.EventOutboxRelayed:
		if c, err := o.relayed.GetMetricWithLabelValues(e.Queue); err == nil {
			c.Add(float64(e.Count))
		}
		if h, err := o.relayAge.GetMetricWithLabelValues(e.Queue); err == nil {
			h.Observe(e.Duration.Seconds())
		}
	case queen.EventOutboxHeld:
		if c, err := o.held.GetMetricWithLabelValues(e.Queue); err == nil {
			c.Add(float64(e.Count))
		}
	case queen.EventOutboxBacklog:
		o.waiting.Set(float64(e.Count))
		o.oldest.Set(e.Duration.Seconds())
	}
	if o.next != nil {
		o.next.Observe(e)
	}
}

// Describe sends the histograms' descriptors.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	o.push.Describe(ch)
	o.pop.Describe(ch)
	o.handler.Describe(ch)
	o.relayed.Describe(ch)
	o.relayAge.Describe(ch)
	o.held.Describe(ch)
	o.waiting.Describe(ch)
	o.oldest.Describe(ch)
}

// Collect sends the histograms.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	o.push.Collect(ch)
	o.pop.Collect(ch)
	o.handler.Collect(ch)
	o.relayed.Collect(ch)
	o.relayAge.Collect(ch)
	o.held.Collect(ch)
	o.waiting.Collect(ch)
	o.oldest.Collect(ch)
}
