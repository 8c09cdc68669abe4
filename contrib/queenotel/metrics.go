package queenotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/queenlite/queen"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DefaultTimeout bounds the reads of queue and group statistics in one
// collection when [MetricsOptions.Timeout] is zero.
const DefaultTimeout = 5 * time.Second

// MetricsOptions configures [RegisterMetrics]. A nil *MetricsOptions and
// zero fields mean the defaults.
type MetricsOptions struct {
	// MeterProvider provides the meter. Defaults to otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// Timeout bounds reading the queue and group statistics of one
	// collection. Defaults to [DefaultTimeout]; negative is refused.
	Timeout time.Duration
}

// RegisterMetrics creates observable instruments that report b at each
// collection, and returns their registration: call its Unregister before
// closing the broker for good. The instruments:
//
// Counters, running totals since the broker opened (see [queen.Counters]):
//
//	queen.messages.pushed         {message}
//	queen.messages.popped         {message}
//	queen.messages.acked          {message}  by queen.ack.status
//	queen.messages.dead_lettered  {message}
//	queen.messages.parked         {message}
//	queen.lease.renewals          {renewal}
//	queen.lease.expirations       {lease}
//	queen.consume.messages        {message}  by queen.outcome
//
// Up-down counter: queen.consume.handlers.active {handler}, the consume
// handlers running now.
//
// Gauges, by queue (messaging.destination.name):
//
//	queen.queue.messages       {message}    retained messages
//	queen.queue.pending        {message}    not settled by the slowest group
//	queen.queue.inflight       {message}    under live leases
//	queen.queue.partitions     {partition}
//	queen.queue.leases.active  {lease}      partitions under a live lease, over all groups
//	queen.queue.dead_letters   {message}
//	queen.queue.parked         {message}
//
// and by queue and consumer group (messaging.consumer.group.name):
//
//	queen.consumer.lag         {message}    messages the group has yet to read
//	queen.consumer.lag.age     s            age of the oldest message it has not settled
//	queen.consumer.inflight    {message}    messages leased to it
//
// Through OpenTelemetry's Prometheus exporter the counters get the names
// github.com/queenlite/queen/httpapi serves on /metrics/prometheus
// (queen_messages_pushed_total, ...); attribute names differ.
//
// If reading the statistics fails (the broker is closed, or has stopped
// after a storage failure), the counters are still reported and the
// collection returns the error; the gauges are left out.
func RegisterMetrics(b *queen.Broker, opts *MetricsOptions) (metric.Registration, error) {
	if b == nil {
		return nil, errors.New("queenotel: RegisterMetrics: broker must not be nil")
	}
	var o MetricsOptions
	if opts != nil {
		o = *opts
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("queenotel: MetricsOptions.Timeout must not be negative, not %s", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	m := o.MeterProvider.Meter(ScopeName)

	var errs []error
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	var (
		pushed   = counter("queen.messages.pushed", "{message}", "Messages queued by pushes since the broker opened.")
		popped   = counter("queen.messages.popped", "{message}", "Messages delivered by pops since the broker opened.")
		acked    = counter("queen.messages.acked", "{message}", "Ack items accepted since the broker opened, by status.")
		dead     = counter("queen.messages.dead_lettered", "{message}", "Messages moved to the dead-letter store since the broker opened.")
		parked   = counter("queen.messages.parked", "{message}", "Messages moved to the parked store since the broker opened.")
		renewals = counter("queen.lease.renewals", "{renewal}", "Lease renewals since the broker opened.")
		expiries = counter("queen.lease.expirations", "{lease}", "Leases that ran out since the broker opened.")
		consumed = counter("queen.consume.messages", "{message}", "Messages consume loops finished since the broker opened, by outcome.")

		qMessages = gauge("queen.queue.messages", "{message}", "Retained messages of a queue.")
		qPending  = gauge("queen.queue.pending", "{message}", "Messages of a queue its slowest group has not settled.")
		qInFlight = gauge("queen.queue.inflight", "{message}", "Messages of a queue under live leases.")
		qParts    = gauge("queen.queue.partitions", "{partition}", "Partitions of a queue.")
		qLeases   = gauge("queen.queue.leases.active", "{lease}", "Partitions of a queue under a live lease, over all groups.")
		qDead     = gauge("queen.queue.dead_letters", "{message}", "Dead letters of a queue.")
		qParked   = gauge("queen.queue.parked", "{message}", "Parked messages of a queue.")
		gLag      = gauge("queen.consumer.lag", "{message}", "Messages a consumer group has yet to read on a queue.")
		gInFlight = gauge("queen.consumer.inflight", "{message}", "Messages leased to a consumer group on a queue.")
	)
	handlers, err := m.Int64ObservableUpDownCounter("queen.consume.handlers.active", metric.WithUnit("{handler}"),
		metric.WithDescription("Consume handlers running now."))
	errs = append(errs, err)
	lagAge, err := m.Float64ObservableGauge("queen.consumer.lag.age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest message a consumer group has not settled on a queue."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("queenotel: RegisterMetrics: %w", err)
	}

	timeout := o.Timeout
	return m.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		s := b.Counters()
		obs.ObserveInt64(pushed, s.Pushed)
		obs.ObserveInt64(popped, s.Popped)
		obs.ObserveInt64(dead, s.DeadLettered)
		obs.ObserveInt64(parked, s.Parked)
		obs.ObserveInt64(renewals, s.LeasesRenewed)
		obs.ObserveInt64(expiries, s.LeasesExpired)
		for st, n := range s.Acked {
			obs.ObserveInt64(acked, n, metric.WithAttributes(AttrAckStatus.String(string(st))))
		}
		for oc, n := range s.Consumed {
			obs.ObserveInt64(consumed, n, metric.WithAttributes(AttrOutcome.String(string(oc))))
		}
		obs.ObserveInt64(handlers, s.HandlersInFlight)

		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		queues, err := b.ListQueues(ctx)
		if err != nil {
			return fmt.Errorf("queenotel: list queues: %w", err)
		}
		groups, err := b.ListGroups(ctx, queen.GroupFilter{})
		if err != nil {
			return fmt.Errorf("queenotel: list groups: %w", err)
		}
		leases := make(map[string]int)
		for i := range groups {
			leases[groups[i].Queue] += groups[i].ActiveLeases
		}
		for i := range queues {
			q := &queues[i]
			at := metric.WithAttributeSet(attribute.NewSet(AttrQueue.String(q.Name)))
			obs.ObserveInt64(qMessages, q.Messages, at)
			obs.ObserveInt64(qPending, q.Pending, at)
			obs.ObserveInt64(qInFlight, q.InFlight, at)
			obs.ObserveInt64(qParts, int64(q.PartitionN), at)
			obs.ObserveInt64(qLeases, int64(leases[q.Name]), at)
			obs.ObserveInt64(qDead, q.DeadLetters, at)
			obs.ObserveInt64(qParked, q.Parked, at)
		}
		now := b.Now()
		for i := range groups {
			g := &groups[i]
			at := metric.WithAttributeSet(attribute.NewSet(AttrQueue.String(g.Queue), AttrGroup.String(g.Group)))
			obs.ObserveInt64(gLag, g.Lag, at)
			obs.ObserveInt64(gInFlight, g.InFlight, at)
			age := 0.0
			if !g.OldestPendingAt.IsZero() {
				age = max(0, now.Sub(g.OldestPendingAt).Seconds())
			}
			obs.ObserveFloat64(lagAge, age, at)
		}
		return nil
	}, pushed, popped, acked, dead, parked, renewals, expiries, consumed, handlers,
		qMessages, qPending, qInFlight, qParts, qLeases, qDead, qParked, gLag, gInFlight, lagAge)
}

// durationBuckets are the histograms' bucket bounds, in seconds.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// ObserverOptions configures an [Observer]. A nil *ObserverOptions and
// zero fields mean the defaults.
type ObserverOptions struct {
	// MeterProvider provides the meter. Defaults to otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// Next receives every event after the Observer has recorded it, to
	// chain another [queen.Observer]. Defaults to none.
	Next queen.Observer
}

// Observer is a [queen.Observer] that records latencies in OpenTelemetry
// histograms; pass it as queen.Options.Observer when opening the broker.
// It is safe for concurrent use. Its histograms, in seconds, with bucket
// bounds from 0.5 ms to 60 s advised to the SDK:
//
//	queen.push.duration              one push call, by queue
//	queen.pop.duration               one pop that delivered messages, long-poll
//	                                 wait included, by queue ("" for discovery pops)
//	queen.consume.handler.duration   one value per message a consume loop
//	                                 finished: the handler's duration, by
//	                                 queue, group and queen.outcome
//
// Passed as the Observer of a github.com/queenlite/queen/outbox relay, it
// also records:
//
//	queen.outbox.relayed      counter {row}: rows pushed and deleted, by queue
//	queen.outbox.relay.age    histogram s: per relayed batch, the age of its
//	                          oldest row from its enqueue to the push, by queue
//	queen.outbox.held         counter {row}: rows kept aside, refused for good
//	                          by the broker, by queue
//	queen.outbox.waiting      gauge {row}: rows waiting to be relayed
//	queen.outbox.oldest.age   gauge s: age of the oldest of them
//
// The gauges are the last snapshot a relay reported (about once a
// second).
type Observer struct {
	next    queen.Observer
	push    metric.Float64Histogram
	pop     metric.Float64Histogram
	handler metric.Float64Histogram

	relayed  metric.Int64Counter
	relayAge metric.Float64Histogram
	held     metric.Int64Counter
	waiting  metric.Int64Gauge
	oldest   metric.Float64Gauge
}

// NewObserver returns an Observer. It fails only if the meter refuses an
// instrument.
func NewObserver(opts *ObserverOptions) (*Observer, error) {
	var o ObserverOptions
	if opts != nil {
		o = *opts
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	m := o.MeterProvider.Meter(ScopeName)
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	obs := &Observer{
		next:    o.Next,
		push:    hist("queen.push.duration", "Latency of push calls."),
		pop:     hist("queen.pop.duration", "Latency of pops that delivered messages."),
		handler: hist("queen.consume.handler.duration", "Duration of the consume handler per message finished, by outcome."),

		relayAge: hist("queen.outbox.relay.age", "Age of the oldest row of each relayed outbox batch, from its enqueue to the push."),
	}
	var err error
	obs.relayed, err = m.Int64Counter("queen.outbox.relayed", metric.WithUnit("{row}"), metric.WithDescription("Outbox rows pushed into the broker and deleted."))
	errs = append(errs, err)
	obs.held, err = m.Int64Counter("queen.outbox.held", metric.WithUnit("{row}"), metric.WithDescription("Outbox rows kept aside, refused for good by the broker."))
	errs = append(errs, err)
	obs.waiting, err = m.Int64Gauge("queen.outbox.waiting", metric.WithUnit("{row}"), metric.WithDescription("Outbox rows waiting to be relayed, as last reported."))
	errs = append(errs, err)
	obs.oldest, err = m.Float64Gauge("queen.outbox.oldest.age", metric.WithUnit("s"), metric.WithDescription("Age of the oldest outbox row waiting to be relayed, as last reported."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("queenotel: NewObserver: %w", err)
	}
	return obs, nil
}

// Observe records e's duration in the matching histogram and passes e on
// to ObserverOptions.Next.
func (o *Observer) Observe(e queen.Event) {
	ctx := context.Background()
	switch e.Kind {
	case queen.EventPush:
		o.push.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(AttrQueue.String(e.Queue)))
	case queen.EventPop:
		o.pop.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(AttrQueue.String(e.Queue)))
	case queen.EventConsume:
		at := metric.WithAttributes(AttrQueue.String(e.Queue), AttrGroup.String(e.Group), AttrOutcome.String(string(e.Outcome)))
		for range e.Count {
			o.handler.Record(ctx, e.Duration.Seconds(), at)
		}
	case queen.EventOutboxRelayed:
		at := metric.WithAttributes(AttrQueue.String(e.Queue))
		o.relayed.Add(ctx, int64(e.Count), at)
		o.relayAge.Record(ctx, e.Duration.Seconds(), at)
	case queen.EventOutboxHeld:
		o.held.Add(ctx, int64(e.Count), metric.WithAttributes(AttrQueue.String(e.Queue)))
	case queen.EventOutboxBacklog:
		o.waiting.Record(ctx, int64(e.Count))
		o.oldest.Record(ctx, e.Duration.Seconds())
	}
	if o.next != nil {
		o.next.Observe(e)
	}
}
