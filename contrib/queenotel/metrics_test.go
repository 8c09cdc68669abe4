package queenotel_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/contrib/queenotel"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// points flattens collected metrics into "name{k=v,...}" -> value: sums
// and gauges by value, histograms by count (as name_count).
func points(rm *metricdata.ResourceMetrics) map[string]float64 {
	out := make(map[string]float64)
	key := func(name string, set attribute.Set) string {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.Emit())
		}
		sort.Strings(kv)
		if len(kv) == 0 {
			return name
		}
		return name + "{" + strings.Join(kv, ",") + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name+"_count", p.Attributes)] = float64(p.Count)
				}
			}
		}
	}
	return out
}

// collect reads r once; err is what the collection reported.
func collect(t *testing.T, r *sdkmetric.ManualReader) (map[string]float64, error) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	err := r.Collect(context.Background(), &rm)
	return points(&rm), err
}

func newReader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return r, mp
}

// push queues n messages on queue/partition.
func push(t *testing.T, b *queen.Broker, queue, partition string, n int) {
	t.Helper()
	items := make([]queen.PushItem, n)
	for i := range items {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: []byte(`{"n":1}`)}
	}
	res, err := b.Push(context.Background(), items)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, queen.PushQueued, r.Status)
	}
}

// traffic pushes to two queues, pops the messages of one partition of
// "orders" and acks them with every status that ends a message (parking
// two, so the dead-letter and park counts differ), and leaves one message
// leased by another group.
func traffic(t *testing.T, b *queen.Broker) {
	t.Helper()
	ctx := context.Background()
	push(t, b, "orders", "p1", 4)
	push(t, b, "orders", "p2", 1)
	push(t, b, "mail", "", 2)
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Partition: "p1", Group: "billing", Batch: 4, SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(t, err)
	require.Len(t, res.Messages, 4)
	// One ack call per status: a call that both dead-letters and parks
	// messages of one partition counts them all as the first kind.
	for i, st := range []queen.AckStatus{queen.AckCompleted, queen.AckDLQ, queen.AckPark, queen.AckPark} {
		m := res.Messages[i]
		acks, err := b.AckBatch(ctx, []queen.AckItem{{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: "billing", Status: st, Error: "boom"}})
		require.NoError(t, err)
		require.NoError(t, acks[0].Err)
	}
	res, err = b.Pop(ctx, queen.PopRequest{Queue: "orders", Partition: "p2", Group: "audit", SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
}

func TestRegisterMetrics_CountersMatchBroker(t *testing.T) {
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	r, mp := newReader(t)
	_, err := queenotel.RegisterMetrics(b, &queenotel.MetricsOptions{MeterProvider: mp})
	require.NoError(t, err)

	got, err := collect(t, r)
	require.NoError(t, err)
	require.Contains(t, got, "queen.messages.pushed", "counters are reported before any traffic")
	require.Zero(t, got["queen.messages.pushed"])

	traffic(t, b)
	got, err = collect(t, r)
	require.NoError(t, err)
	s := b.Counters()
	want := map[string]int64{
		"queen.messages.pushed":         s.Pushed,
		"queen.messages.popped":         s.Popped,
		"queen.messages.dead_lettered":  s.DeadLettered,
		"queen.messages.parked":         s.Parked,
		"queen.lease.renewals":          s.LeasesRenewed,
		"queen.lease.expirations":       s.LeasesExpired,
		"queen.consume.handlers.active": s.HandlersInFlight,
	}
	for st, n := range s.Acked {
		want["queen.messages.acked{queen.ack.status="+string(st)+"}"] = n
	}
	for o, n := range s.Consumed {
		want["queen.consume.messages{queen.outcome="+string(o)+"}"] = n
	}
	for k, v := range want {
		require.Contains(t, got, k)
		require.Equal(t, float64(v), got[k], k)
	}
	require.EqualValues(t, 7, got["queen.messages.pushed"])
	require.EqualValues(t, 5, got["queen.messages.popped"])
	require.EqualValues(t, 1, got["queen.messages.acked{queen.ack.status=completed}"])
	require.EqualValues(t, 1, got["queen.messages.acked{queen.ack.status=dlq}"])
	require.EqualValues(t, 2, got["queen.messages.acked{queen.ack.status=park}"])
	require.EqualValues(t, 1, got["queen.messages.dead_lettered"])
	require.EqualValues(t, 2, got["queen.messages.parked"])

	clock.Advance(2 * time.Minute) // the audit lease runs out
	require.Eventually(t, func() bool { return b.Counters().LeasesExpired > 0 }, 5*time.Second, 5*time.Millisecond)
	got, err = collect(t, r)
	require.NoError(t, err)
	require.Equal(t, float64(b.Counters().LeasesExpired), got["queen.lease.expirations"])
}

func TestRegisterMetrics_QueueAndGroupGauges(t *testing.T) {
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	traffic(t, b)
	clock.Advance(30 * time.Second) // inside the audit lease (60 s)
	r, mp := newReader(t)
	_, err := queenotel.RegisterMetrics(b, &queenotel.MetricsOptions{MeterProvider: mp})
	require.NoError(t, err)
	got, err := collect(t, r)
	require.NoError(t, err)

	const o, m = "{messaging.destination.name=orders}", "{messaging.destination.name=mail}"
	const billing = "{messaging.consumer.group.name=billing,messaging.destination.name=orders}"
	const audit = "{messaging.consumer.group.name=audit,messaging.destination.name=orders}"
	want := map[string]float64{
		"queen.queue.messages" + m: 2, "queen.queue.pending" + m: 2, "queen.queue.inflight" + m: 0,
		"queen.queue.partitions" + m: 1, "queen.queue.leases.active" + m: 0,
		"queen.queue.dead_letters" + m: 0, "queen.queue.parked" + m: 0,
		"queen.queue.inflight" + o: 1, "queen.queue.partitions" + o: 2, "queen.queue.leases.active" + o: 1,
		"queen.queue.dead_letters" + o: 1, "queen.queue.parked" + o: 2,
		"queen.consumer.lag" + billing: 1, "queen.consumer.lag" + audit: 5,
		"queen.consumer.inflight" + billing: 0, "queen.consumer.inflight" + audit: 1,
		"queen.consumer.lag.age" + billing: 30, "queen.consumer.lag.age" + audit: 30,
	}
	for k, v := range want {
		require.Contains(t, got, k)
		require.Equal(t, v, got[k], k)
	}
	queues, err := b.ListQueues(context.Background())
	require.NoError(t, err)
	for _, q := range queues {
		l := "{messaging.destination.name=" + q.Name + "}"
		require.Equal(t, float64(q.Messages), got["queen.queue.messages"+l], q.Name)
		require.Equal(t, float64(q.Pending), got["queen.queue.pending"+l], q.Name)
	}
}

// TestRegisterMetrics_ClosedBroker: the collection reports the error,
// keeps the counters and leaves the gauges out.
func TestRegisterMetrics_ClosedBroker(t *testing.T) {
	b := queentest.NewBroker(t, nil)
	push(t, b, "orders", "", 2)
	r, mp := newReader(t)
	_, err := queenotel.RegisterMetrics(b, &queenotel.MetricsOptions{MeterProvider: mp})
	require.NoError(t, err)
	require.NoError(t, b.Close())

	got, err := collect(t, r)
	require.ErrorIs(t, err, queen.ErrClosed)
	require.ErrorContains(t, err, "queenotel: list queues")
	require.EqualValues(t, 2, got["queen.messages.pushed"])
	require.NotContains(t, got, "queen.queue.messages{messaging.destination.name=orders}")
}

func TestRegisterMetrics_Unregister(t *testing.T) {
	b := queentest.NewBroker(t, nil)
	push(t, b, "orders", "", 1)
	r, mp := newReader(t)
	reg, err := queenotel.RegisterMetrics(b, &queenotel.MetricsOptions{MeterProvider: mp})
	require.NoError(t, err)
	require.NoError(t, reg.Unregister())
	got, err := collect(t, r)
	require.NoError(t, err)
	require.NotContains(t, got, "queen.messages.pushed")
}

func TestRegisterMetrics_RefusesBadInput(t *testing.T) {
	_, err := queenotel.RegisterMetrics(nil, nil)
	require.ErrorContains(t, err, "broker must not be nil")
	b := queentest.NewBroker(t, nil)
	_, err = queenotel.RegisterMetrics(b, &queenotel.MetricsOptions{Timeout: -time.Second})
	require.ErrorContains(t, err, "MetricsOptions.Timeout")
}

// TestObserver_Histograms runs a consume loop with one outcome per
// message and checks the handler histogram by queue, group and outcome,
// the outcome counters against b.Counters(), and the chained observer.
func TestObserver_Histograms(t *testing.T) {
	r, mp := newReader(t)
	var mu sync.Mutex
	chained := map[queen.EventKind]int{}
	obs, err := queenotel.NewObserver(&queenotel.ObserverOptions{MeterProvider: mp, Next: queen.ObserverFunc(func(e queen.Event) {
		mu.Lock()
		chained[e.Kind]++
		mu.Unlock()
	})})
	require.NoError(t, err)
	b := queentest.NewBroker(t, &queen.Options{Observer: obs})
	_, err = queenotel.RegisterMetrics(b, &queenotel.MetricsOptions{MeterProvider: mp})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = b.Queue("orders").Push(ctx, map[string]any{"do": "ok"}, map[string]any{"do": "park"}, map[string]any{"do": "reject"}, map[string]any{"do": "ok"})
	require.NoError(t, err)
	err = b.Queue("orders").Group("billing").SubscriptionMode(queen.SubscriptionModeAll).Each().Limit(4).
		Consume(ctx, func(ctx context.Context, m *queen.Message) error {
			switch m.Data["do"] {
			case "park":
				return queen.Park(errors.New("unknown schema"))
			case "reject":
				return queen.Reject(errors.New("no such sku"))
			}
			return nil
		}).Execute(ctx)
	require.NoError(t, err)

	got, err := collect(t, r)
	require.NoError(t, err)
	const at = "{messaging.consumer.group.name=billing,messaging.destination.name=orders,queen.outcome="
	require.EqualValues(t, 2, got["queen.consume.handler.duration_count"+at+"accepted}"])
	require.EqualValues(t, 1, got["queen.consume.handler.duration_count"+at+"parked}"])
	require.EqualValues(t, 1, got["queen.consume.handler.duration_count"+at+"dead_lettered}"])
	require.EqualValues(t, 1, got["queen.push.duration_count{messaging.destination.name=orders}"])
	require.Positive(t, got["queen.pop.duration_count{messaging.destination.name=orders}"])
	for o, n := range b.Counters().Consumed {
		require.Equal(t, float64(n), got["queen.consume.messages{queen.outcome="+string(o)+"}"], o)
	}
	require.EqualValues(t, 2, got["queen.consume.messages{queen.outcome=accepted}"])

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, chained[queen.EventPush])
	require.Equal(t, 4, chained[queen.EventConsume])
	require.Equal(t, 8, chained[queen.EventInFlight])
	require.Equal(t, 1, chained[queen.EventDeadLettered])
	require.Equal(t, 1, chained[queen.EventParked])
}

// TestObserver_OutboxEvents checks the outbox relay's events (package
// outbox reports them to the Observer it is given) against the
// instruments.
func TestObserver_OutboxEvents(t *testing.T) {
	r, mp := newReader(t)
	obs, err := queenotel.NewObserver(&queenotel.ObserverOptions{MeterProvider: mp})
	require.NoError(t, err)
	for _, e := range []queen.Event{
		{Kind: queen.EventOutboxBacklog, Count: 7, Duration: 3 * time.Second},
		{Kind: queen.EventOutboxRelayed, Queue: "orders", Count: 5, Duration: 20 * time.Millisecond},
		{Kind: queen.EventOutboxRelayed, Queue: "orders", Count: 2, Duration: 40 * time.Millisecond},
		{Kind: queen.EventOutboxRelayed, Queue: "mail", Count: 1},
		{Kind: queen.EventOutboxHeld, Queue: "orders", Count: 1},
		{Kind: queen.EventOutboxBacklog, Count: 1, Duration: 1500 * time.Millisecond},
	} {
		obs.Observe(e)
	}
	got, err := collect(t, r)
	require.NoError(t, err)
	require.EqualValues(t, 7, got["queen.outbox.relayed{messaging.destination.name=orders}"])
	require.EqualValues(t, 1, got["queen.outbox.relayed{messaging.destination.name=mail}"])
	require.EqualValues(t, 2, got["queen.outbox.relay.age_count{messaging.destination.name=orders}"])
	require.EqualValues(t, 1, got["queen.outbox.held{messaging.destination.name=orders}"])
	require.EqualValues(t, 1, got["queen.outbox.waiting"])
	require.EqualValues(t, 1.5, got["queen.outbox.oldest.age"])
}
