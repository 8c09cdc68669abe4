package queenprom_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/contrib/queenprom"
	"github.com/queenlite/queen/httpapi"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// samples flattens metric families into "name{l="v",...}" -> value, for
// counters, gauges and histogram counts (as name_count).
func samples(mfs []*dto.MetricFamily) map[string]float64 {
	out := make(map[string]float64)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+`="`+lp.GetValue()+`"`)
			}
			sort.Strings(ls)
			key := func(name string) string {
				if len(ls) == 0 {
					return name
				}
				return name + "{" + strings.Join(ls, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key(mf.GetName())] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key(mf.GetName())] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key(mf.GetName()+"_count")] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// gather registers c on a pedantic registry (which checks every metric
// against its descriptor) and returns its samples.
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	return samples(mfs)
}

// push queues one message per payload on queue/partition, with trace ids
// left empty.
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

// traffic pushes to two queues, pops and acks the messages of one
// partition of "orders" with every status that ends a message (parking
// two, so the dead-letter and park counts differ), and leaves one message
// leased.
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
	require.Len(t, res.Messages, 1) // left leased
}

func TestCollector_CountersMatchBroker(t *testing.T) {
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, err := queenprom.NewCollector(b, nil)
	require.NoError(t, err)

	got := gather(t, c)
	require.Zero(t, got["queen_messages_pushed_total"])
	require.Contains(t, got, "queen_messages_pushed_total", "counters are reported before any traffic")

	traffic(t, b)
	got = gather(t, c)
	s := b.Counters()
	want := map[string]int64{
		"queen_messages_pushed_total":        s.Pushed,
		"queen_messages_popped_total":        s.Popped,
		"queen_messages_dead_lettered_total": s.DeadLettered,
		"queen_messages_parked_total":        s.Parked,
		"queen_lease_renewals_total":         s.LeasesRenewed,
		"queen_lease_expirations_total":      s.LeasesExpired,
		"queen_consume_handlers_inflight":    s.HandlersInFlight,
	}
	for st, n := range s.Acked {
		want[`queen_messages_acked_total{status="`+string(st)+`"}`] = n
	}
	for o, n := range s.Consumed {
		want[`queen_consume_messages_total{outcome="`+string(o)+`"}`] = n
	}
	for k, v := range want {
		require.Contains(t, got, k)
		require.Equal(t, float64(v), got[k], k)
	}
	// And the broker counted what traffic did, so the comparison above is
	// not between two zeros.
	require.EqualValues(t, 7, got["queen_messages_pushed_total"])
	require.EqualValues(t, 5, got["queen_messages_popped_total"])
	require.EqualValues(t, 1, got[`queen_messages_acked_total{status="completed"}`])
	require.EqualValues(t, 1, got[`queen_messages_acked_total{status="dlq"}`])
	require.EqualValues(t, 2, got[`queen_messages_acked_total{status="park"}`])
	require.EqualValues(t, 0, got[`queen_messages_acked_total{status="failed"}`])
	require.EqualValues(t, 1, got["queen_messages_dead_lettered_total"])
	require.EqualValues(t, 2, got["queen_messages_parked_total"])

	// The leased message's lease runs out: the expiry is counted.
	clock.Advance(2 * time.Minute)
	require.Eventually(t, func() bool { return b.Counters().LeasesExpired > 0 }, 5*time.Second, 5*time.Millisecond)
	got = gather(t, c)
	require.Equal(t, float64(b.Counters().LeasesExpired), got["queen_lease_expirations_total"])
}

func TestCollector_QueueAndGroupGauges(t *testing.T) {
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	traffic(t, b)
	clock.Advance(30 * time.Second) // inside the audit lease (60 s)
	c, err := queenprom.NewCollector(b, nil)
	require.NoError(t, err)

	const want = `
# HELP queen_queues Queues.
# TYPE queen_queues gauge
queen_queues 2
# HELP queen_partitions Partitions over all queues.
# TYPE queen_partitions gauge
queen_partitions 3
# HELP queen_queue_partitions Partitions of a queue.
# TYPE queen_queue_partitions gauge
queen_queue_partitions{queue="mail"} 1
queen_queue_partitions{queue="orders"} 2
# HELP queen_queue_inflight_messages Messages of a queue under live leases.
# TYPE queen_queue_inflight_messages gauge
queen_queue_inflight_messages{queue="mail"} 0
queen_queue_inflight_messages{queue="orders"} 1
# HELP queen_queue_leases_active Partitions of a queue under a live lease, over all groups.
# TYPE queen_queue_leases_active gauge
queen_queue_leases_active{queue="mail"} 0
queen_queue_leases_active{queue="orders"} 1
# HELP queen_dlq_depth Dead letters of a queue.
# TYPE queen_dlq_depth gauge
queen_dlq_depth{queue="mail"} 0
queen_dlq_depth{queue="orders"} 1
# HELP queen_parked_depth Parked messages of a queue.
# TYPE queen_parked_depth gauge
queen_parked_depth{queue="mail"} 0
queen_parked_depth{queue="orders"} 2
# HELP queen_consumer_lag_messages Messages a consumer group has yet to read on a queue.
# TYPE queen_consumer_lag_messages gauge
queen_consumer_lag_messages{group="audit",queue="orders"} 5
queen_consumer_lag_messages{group="billing",queue="orders"} 1
# HELP queen_consumer_lag_seconds Age of the oldest message a consumer group has not settled on a queue.
# TYPE queen_consumer_lag_seconds gauge
queen_consumer_lag_seconds{group="audit",queue="orders"} 30
queen_consumer_lag_seconds{group="billing",queue="orders"} 30
# HELP queen_consumer_inflight_messages Messages leased to a consumer group on a queue.
# TYPE queen_consumer_inflight_messages gauge
queen_consumer_inflight_messages{group="audit",queue="orders"} 1
queen_consumer_inflight_messages{group="billing",queue="orders"} 0
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"queen_queues", "queen_partitions", "queen_queue_partitions", "queen_queue_inflight_messages",
		"queen_queue_leases_active", "queen_dlq_depth", "queen_parked_depth",
		"queen_consumer_lag_messages", "queen_consumer_lag_seconds", "queen_consumer_inflight_messages"))

	// The per-queue figures the expected text leaves out agree with the
	// broker's own statistics.
	queues, err := b.ListQueues(context.Background())
	require.NoError(t, err)
	got := gather(t, c)
	for _, q := range queues {
		l := `{queue="` + q.Name + `"}`
		require.Equal(t, float64(q.Messages), got["queen_queue_messages"+l], q.Name)
		require.Equal(t, float64(q.Pending), got["queen_queue_pending_messages"+l], q.Name)
	}
	require.EqualValues(t, 2, got[`queen_queue_messages{queue="mail"}`])
	require.EqualValues(t, 2, got[`queen_queue_pending_messages{queue="mail"}`], "no group: everything is pending")
}

// TestCollector_AgreesWithHTTPAPI checks that every family httpapi serves
// on /metrics/prometheus (but its uptime) is reported by the collector
// with the same type, help, labels and values.
func TestCollector_AgreesWithHTTPAPI(t *testing.T) {
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	traffic(t, b)
	clock.Advance(7 * time.Second)
	// A long-poll waiting on a queue, for queen_pops_waiting.
	ctx, cancel := context.WithCancel(context.Background())
	popped := make(chan error, 1)
	go func() {
		_, err := b.Pop(ctx, queen.PopRequest{Queue: "idle", Wait: true, Timeout: time.Minute})
		popped <- err
	}()
	defer func() {
		cancel()
		require.ErrorIs(t, <-popped, context.Canceled)
	}()
	require.Eventually(t, func() bool { return b.WaitingPops()["idle"] == 1 }, 10*time.Second, time.Millisecond)

	rec := httptest.NewRecorder()
	httpapi.New(b, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/prometheus", nil))
	require.Equal(t, 200, rec.Code)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	served, err := parser.TextToMetricFamilies(rec.Body)
	require.NoError(t, err)
	delete(served, "queen_uptime_seconds") // the HTTP API's own

	c, err := queenprom.NewCollector(b, nil)
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	ours := make(map[string]*dto.MetricFamily)
	for _, mf := range mfs {
		ours[mf.GetName()] = mf
	}
	require.NotEmpty(t, served)
	require.Contains(t, served, "queen_pops_waiting")
	require.Len(t, served["queen_pops_waiting"].GetMetric(), 1)
	for name, mf := range served {
		o, ok := ours[name]
		require.True(t, ok, "collector lacks %s", name)
		require.Equal(t, mf.GetType(), o.GetType(), name)
		require.Equal(t, mf.GetHelp(), o.GetHelp(), name)
		want := samples([]*dto.MetricFamily{mf})
		require.Equal(t, want, samples([]*dto.MetricFamily{o}), name)
	}
}

func TestCollector_Lint(t *testing.T) {
	obs, err := queenprom.NewObserver(nil)
	require.NoError(t, err)
	b := queentest.NewBroker(t, &queen.Options{Observer: obs})
	traffic(t, b)
	c, err := queenprom.NewCollector(b, &queenprom.Options{Observer: obs})
	require.NoError(t, err)
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestCollector_ClosedBroker: a closed broker's gauges are a collection
// error, its counters are still reported, and nothing panics.
func TestCollector_ClosedBroker(t *testing.T) {
	b := queentest.NewBroker(t, nil)
	push(t, b, "orders", "", 2)
	c, err := queenprom.NewCollector(b, nil)
	require.NoError(t, err)
	require.NoError(t, b.Close())

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.Error(t, err)
	require.ErrorContains(t, err, "queenprom: list queues")
	require.ErrorContains(t, err, queen.ErrClosed.Error())
	got := samples(mfs)
	require.EqualValues(t, 2, got["queen_messages_pushed_total"])
	require.NotContains(t, got, "queen_queues")
}

func TestNewCollector_RefusesBadInput(t *testing.T) {
	_, err := queenprom.NewCollector(nil, nil)
	require.ErrorContains(t, err, "broker must not be nil")

	b := queentest.NewBroker(t, nil)
	_, err = queenprom.NewCollector(b, &queenprom.Options{Timeout: -time.Second})
	require.ErrorContains(t, err, "Options.Timeout")

	// Bad const labels are refused by the registry, not with a panic.
	for _, l := range []prometheus.Labels{{"queue": "x"}, {"broker": "\xff"}, {"": "x"}} {
		c, err := queenprom.NewCollector(b, &queenprom.Options{ConstLabels: l})
		require.NoError(t, err)
		require.Error(t, prometheus.NewRegistry().Register(c), "%q", l)
	}

	_, err = queenprom.NewObserver(&queenprom.ObserverOptions{Buckets: []float64{1, 0.5}})
	require.ErrorContains(t, err, "Buckets")
	o, err := queenprom.NewObserver(&queenprom.ObserverOptions{ConstLabels: prometheus.Labels{"queue": "x"}})
	require.NoError(t, err)
	require.Error(t, prometheus.NewRegistry().Register(o), "a const label clashing with a variable one")
}

func TestCollector_ConstLabels(t *testing.T) {
	b := queentest.NewBroker(t, nil)
	push(t, b, "orders", "", 1)
	c, err := queenprom.NewCollector(b, &queenprom.Options{ConstLabels: prometheus.Labels{"broker": "eu"}})
	require.NoError(t, err)
	got := gather(t, c)
	require.EqualValues(t, 1, got[`queen_messages_pushed_total{broker="eu"}`])
	require.EqualValues(t, 1, got[`queen_queue_messages{broker="eu",queue="orders"}`])
}

// TestObserver_ConsumeOutcomes runs a consume loop whose handler picks a
// different outcome per message and checks the outcome counters against
// b.Counters() and the handler histogram by queue, group and outcome.
func TestObserver_ConsumeOutcomes(t *testing.T) {
	var mu sync.Mutex
	var chained []queen.EventKind
	obs, err := queenprom.NewObserver(&queenprom.ObserverOptions{
		Next: queen.ObserverFunc(func(e queen.Event) {
			mu.Lock()
			chained = append(chained, e.Kind)
			mu.Unlock()
		}),
	})
	require.NoError(t, err)
	b := queentest.NewBroker(t, &queen.Options{Observer: obs})
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

	c, err := queenprom.NewCollector(b, &queenprom.Options{Observer: obs})
	require.NoError(t, err)
	got := gather(t, c)
	s := b.Counters()
	for o, n := range s.Consumed {
		require.Equal(t, float64(n), got[`queen_consume_messages_total{outcome="`+string(o)+`"}`], o)
	}
	require.EqualValues(t, 2, got[`queen_consume_messages_total{outcome="accepted"}`])
	require.EqualValues(t, 1, got[`queen_consume_messages_total{outcome="parked"}`])
	require.EqualValues(t, 1, got[`queen_consume_messages_total{outcome="dead_lettered"}`])
	require.EqualValues(t, 2, got[`queen_consume_handler_duration_seconds_count{group="billing",outcome="accepted",queue="orders"}`])
	require.EqualValues(t, 1, got[`queen_consume_handler_duration_seconds_count{group="billing",outcome="parked",queue="orders"}`])
	require.EqualValues(t, 1, got[`queen_consume_handler_duration_seconds_count{group="billing",outcome="dead_lettered",queue="orders"}`])
	require.EqualValues(t, 1, got[`queen_push_duration_seconds_count{queue="orders"}`])
	require.Equal(t, float64(s.Popped), got[`queen_messages_popped_total`])
	require.Positive(t, got[`queen_pop_duration_seconds_count{queue="orders"}`])

	// Every event went on to the chained observer.
	mu.Lock()
	defer mu.Unlock()
	count := map[queen.EventKind]int{}
	for _, k := range chained {
		count[k]++
	}
	require.Equal(t, 1, count[queen.EventPush])
	require.Equal(t, 4, count[queen.EventConsume])
	require.Equal(t, 8, count[queen.EventInFlight]) // +1 and -1 per handler call
	require.Equal(t, 1, count[queen.EventDeadLettered])
	require.Equal(t, 1, count[queen.EventParked])
}

// TestObserver_OutboxEvents checks the outbox relay's events (package
// outbox reports them to the Observer it is given) against the metrics.
func TestObserver_OutboxEvents(t *testing.T) {
	obs, err := queenprom.NewObserver(nil)
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
	got := gather(t, obs)
	require.EqualValues(t, 7, got[`queen_outbox_relayed_total{queue="orders"}`])
	require.EqualValues(t, 1, got[`queen_outbox_relayed_total{queue="mail"}`])
	require.EqualValues(t, 2, got[`queen_outbox_relay_age_seconds_count{queue="orders"}`])
	require.EqualValues(t, 1, got[`queen_outbox_held_total{queue="orders"}`])
	require.EqualValues(t, 1, got[`queen_outbox_waiting_rows`])
	require.EqualValues(t, 1.5, got[`queen_outbox_oldest_age_seconds`])
}
