package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/httpapi/history"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

// chartEnv is a handler with a History of its broker, on a fake clock
// that starts on the hour, with a fake process that has 64 MiB resident
// and uses 1 s of system CPU between two reads, and n s of user CPU
// before its n-th read (1 s, then 2 s more, 3 s more...).
type chartEnv struct {
	*env
	rec    *history.Recorder
	start  time.Time
	levels map[string]string
}

func chartSetup(t *testing.T) *chartEnv {
	t.Helper()
	e := setup(t, nil, nil)
	start := itest.Epoch().Truncate(time.Hour)
	e.clock.Set(start)
	var proc history.Process
	reads := 0
	rec := history.New(e.b, &history.Options{Interval: 10 * time.Second, Process: func() history.Process {
		reads++
		proc.CPUUser += time.Duration(reads) * time.Second
		proc.CPUSystem += time.Second
		proc.RSS = 64 << 20
		return proc
	}})
	c := &chartEnv{env: e, rec: rec, start: start, levels: map[string]string{}}
	e.h = httpapi.New(e.b, &httpapi.Options{History: rec, Authorize: func(r *http.Request, level httpapi.Access) error {
		c.levels[r.URL.Path] = level.String()
		return nil
	}})
	return c
}

func (c *chartEnv) sample() {
	c.t.Helper()
	require.NoError(c.t, c.rec.Sample(bg))
}

// pushN pushes n messages to queue in one call.
func (c *chartEnv) pushN(queue, partition string, n int) {
	c.t.Helper()
	items := make([]queen.PushItem, n)
	for i := range items {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	_, err := c.b.Push(bg, items)
	require.NoError(c.t, err)
}

// at formats the instant d after the start as a query value.
func (c *chartEnv) at(d time.Duration) string { return c.start.Add(d).Format(time.RFC3339) }

// stamp is how the routes write the instant d after the start.
func (c *chartEnv) stamp(d time.Duration) string {
	return c.start.Add(d).UTC().Format("2006-01-02T15:04:05.000Z")
}

// traffic runs the story every analytics test reads: a baseline at 0 s;
// 100 pushes to orders in two calls, 30 at 0 s and 70 at 4 s; a sample
// at 10 s; 20 pushes to mail,
// 40 pops of orders (one call) acked 25 completed, 10 failed (no retries:
// dead-lettered), 5 parked, an empty pop of orders, and a long-poll
// parked on orders over the sample at 20 s, gone before the next;
// 7 pushes to mail and a sample at 120 s, whose interval's middle (70 s)
// is in the next minute.
func (c *chartEnv) traffic() {
	c.t.Helper()
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit = 0
	_, err := c.b.ConfigureQueue(bg, "orders", cfg)
	require.NoError(c.t, err)
	c.sample()
	c.pushN("orders", "p1", 30)
	c.clock.Advance(4 * time.Second)
	c.pushN("orders", "p1", 70)
	c.clock.Advance(6 * time.Second)
	c.sample()

	c.pushN("mail", "", 20)
	res, err := c.b.Pop(bg, queen.PopRequest{Queue: "orders", Partition: "p1", Batch: 40})
	require.NoError(c.t, err)
	require.Len(c.t, res.Messages, 40)
	var items []queen.AckItem
	for i, m := range res.Messages {
		st := queen.AckCompleted
		switch {
		case i >= 35:
			st = queen.AckPark
		case i >= 25:
			st = queen.AckFailed
		}
		items = append(items, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: st})
	}
	acks, err := c.b.AckBatch(bg, items)
	require.NoError(c.t, err)
	for _, a := range acks {
		require.True(c.t, a.Success, "%v", a.Err)
	}
	res, err = c.b.Pop(bg, queen.PopRequest{Queue: "orders", Partition: "empty"})
	require.NoError(c.t, err)
	require.Empty(c.t, res.Messages)
	ctx, cancel := context.WithCancel(bg)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		_, _ = c.b.Pop(ctx, queen.PopRequest{Queue: "orders", Partition: "empty", Wait: true, Timeout: time.Minute})
	}()
	itest.AwaitWaiting(c.t, c.b, 1)
	c.clock.Advance(10 * time.Second)
	c.sample()
	cancel()
	<-polled

	c.pushN("mail", "", 7)
	c.clock.Advance(100 * time.Second)
	c.sample()
}

// rows returns the objects of v[key].
func rows(t *testing.T, v any, key string) []map[string]any {
	t.Helper()
	if key != "" {
		v = v.(map[string]any)[key]
	}
	var out []map[string]any
	for _, r := range v.([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

// requireKeys fails unless row has every key.
func requireKeys(t *testing.T, row map[string]any, keys string) {
	t.Helper()
	for _, k := range strings.Fields(keys) {
		require.Contains(t, row, k)
	}
}

// TestAnalytics_WorkerMetrics: one bucket a minute; in the first, 120
// pushes, 40 pops and 40 acks over the 20 s sampled, 9 s of lag on
// average (30 popped after 10 s, 10 after 6 s) and 10 s at most, 10
// failed acks dead-lettered; what has no meaning here is 0.
func TestAnalytics_WorkerMetrics(t *testing.T) {
	t.Parallel()
	c := chartSetup(t)
	c.traffic()
	res := c.obj("GET", "/api/v1/analytics/worker-metrics?from="+c.at(0)+"&to="+c.at(2*time.Minute), nil, http.StatusOK)
	require.Equal(t, 1.0, res["bucketMinutes"])
	ts := rows(t, res, "timeSeries")
	require.Len(t, ts, 2)
	first := ts[0]
	requireKeys(t, first, "timestamp pushPerSecond popPerSecond ackPerSecond avgLagMs maxLagMs avgEventLoopLagMs "+
		"maxEventLoopLagMs dbConnections avgFreeSlots avgJobQueueSize maxJobQueueSize dbErrors ackFailed dlqCount")
	require.Equal(t, c.stamp(0), first["timestamp"])
	require.Equal(t, 6.0, first["pushPerSecond"], "120 pushes over 20 s")
	require.Equal(t, 2.0, first["popPerSecond"])
	require.Equal(t, 2.0, first["ackPerSecond"])
	require.Equal(t, 9000.0, first["avgLagMs"], "30 popped 10 s after their push, 10 after 6 s")
	require.Equal(t, 10000.0, first["maxLagMs"])
	require.Equal(t, 10.0, first["ackFailed"])
	require.Equal(t, 10.0, first["dlqCount"])
	for _, k := range strings.Fields("avgEventLoopLagMs maxEventLoopLagMs dbConnections avgFreeSlots avgJobQueueSize maxJobQueueSize dbErrors") {
		require.Equal(t, 0.0, first[k], k)
	}
	second := ts[1]
	require.Equal(t, c.stamp(time.Minute), second["timestamp"])
	require.Equal(t, 0.07, second["pushPerSecond"], "7 pushes over 100 s")
	require.Equal(t, 0.0, second["popPerSecond"])
	require.Equal(t, "read-only", c.levels["/api/v1/analytics/worker-metrics"])
	require.Equal(t, 2.0, res["pointCount"])
	require.Equal(t, []any{
		map[string]any{"queueName": "mail", "popCount": 0.0, "avgLagMs": 0.0, "maxLagMs": 0.0},
		map[string]any{"queueName": "orders", "popCount": 40.0, "avgLagMs": 9000.0, "maxLagMs": 10000.0},
	}, res["queues"], "each queue's lag over the range")
	sum := res["summary"].(map[string]any)
	require.Equal(t, 127.0, sum["totalPushMessages"])
	require.Equal(t, 40.0, sum["totalPopMessages"])
	require.Equal(t, 87.0, sum["pendingMessages"])
	require.Equal(t, 10.0, sum["totalAckFailed"])
	require.Len(t, res["workers"], 1)

	none := c.obj("GET", "/api/v1/analytics/worker-metrics?from="+c.at(time.Hour)+"&to="+c.at(2*time.Hour), nil, http.StatusOK)
	require.Equal(t, []any{}, none["timeSeries"], "no sample in range")
}

// TestAnalytics_SystemMetrics: this process as one replica, CPU as
// hundredths of a percent of a core (2 s of 10 s: 20 % → 2000; then 3 s
// of 10 s), summarized over the bucket's samples, RSS in bytes, and the
// pools 0.
func TestAnalytics_SystemMetrics(t *testing.T) {
	t.Parallel()
	c := chartSetup(t)
	c.traffic()
	res := c.obj("GET", "/api/v1/analytics/system-metrics?from="+c.at(0)+"&to="+c.at(2*time.Minute), nil, http.StatusOK)
	require.Equal(t, 1.0, res["replicaCount"])
	require.Equal(t, 2.0, res["pointCount"])
	reps := rows(t, res, "replicas")
	require.Len(t, reps, 1)
	requireKeys(t, reps[0], "hostname timeSeries")
	require.NotEmpty(t, reps[0]["hostname"])
	pts := rows(t, reps[0], "timeSeries")
	require.Len(t, pts, 2)
	require.Equal(t, c.stamp(0), pts[0]["timestamp"])
	m := pts[0]["metrics"].(map[string]any)
	cpu := m["cpu"].(map[string]any)
	require.Equal(t, map[string]any{"avg": 2500.0, "max": 3000.0, "min": 2000.0, "last": 3000.0}, cpu["user_us"])
	require.Equal(t, map[string]any{"avg": 1000.0, "max": 1000.0, "min": 1000.0, "last": 1000.0}, cpu["system_us"])
	require.Equal(t, 64.0*(1<<20), m["memory"].(map[string]any)["rss_bytes"].(map[string]any)["last"])
	zero := map[string]any{"avg": 0.0, "max": 0.0, "min": 0.0, "last": 0.0}
	db := m["database"].(map[string]any)
	require.Equal(t, zero, db["pool_active"])
	require.Equal(t, zero, db["pool_idle"])
	tp := m["threadpool"].(map[string]any)
	requireKeys(t, tp, "db system")
	second := pts[1]["metrics"].(map[string]any)["cpu"].(map[string]any)["user_us"].(map[string]any)
	require.Equal(t, 400.0, second["avg"], "4 s of 100 s: 4 %")
	require.Equal(t, "read-only", c.levels["/api/v1/analytics/system-metrics"])
}

// TestAnalytics_QueueOps: per bucket and queue, counts, rates, lag, the
// parked long-polls and the partitions made; queue= keeps one queue.
func TestAnalytics_QueueOps(t *testing.T) {
	t.Parallel()
	c := chartSetup(t)
	c.traffic()
	res := c.obj("GET", "/api/v1/analytics/queue-ops?from="+c.at(0)+"&to="+c.at(2*time.Minute), nil, http.StatusOK)
	require.Equal(t, []any{"mail", "orders"}, res["queues"])
	require.Equal(t, 1.0, res["bucketMinutes"])
	series := rows(t, res, "series")
	var orders map[string]any
	for _, r := range series {
		if r["queueName"] == "orders" && r["bucket"] == c.stamp(0) {
			orders = r
		}
	}
	require.NotNil(t, orders)
	requireKeys(t, orders, "bucket queueName pushMessages popMessages popEmpty pushPerSecond popPerSecond ackPerSecond "+
		"ackFailed avgLagMs maxLagMs parkedCount partitionsCreated partitionsDeleted")
	require.Equal(t, 100.0, orders["pushMessages"])
	require.Equal(t, 40.0, orders["popMessages"])
	require.Equal(t, 1.0, orders["popEmpty"])
	require.Equal(t, 5.0, orders["pushPerSecond"])
	require.Equal(t, 2.0, orders["popPerSecond"])
	require.Equal(t, 2.0, orders["ackPerSecond"])
	require.Equal(t, 10.0, orders["ackFailed"])
	require.Equal(t, 9000.0, orders["avgLagMs"])
	require.Equal(t, 10000.0, orders["maxLagMs"])
	require.Equal(t, 0.5, orders["parkedCount"], "one long-poll parked at one of the bucket's two samples")
	require.Equal(t, 1.0, orders["partitionsCreated"], "p1, made by the first push")
	require.Equal(t, 0.0, orders["partitionsDeleted"])

	only := c.obj("GET", "/api/v1/analytics/queue-ops?queue=mail&from="+c.at(0)+"&to="+c.at(2*time.Minute), nil, http.StatusOK)
	require.Equal(t, []any{"mail"}, only["queues"])
	mail := rows(t, only, "series")
	require.Len(t, mail, 2)
	require.Equal(t, 20.0, mail[0]["pushMessages"])
	require.Equal(t, 7.0, mail[1]["pushMessages"])
	require.Equal(t, "read-only", c.levels["/api/v1/analytics/queue-ops"])
}

// TestAnalytics_QueueLag lists, newest bucket first, each queue's lag:
// what it popped, or zeros.
func TestAnalytics_QueueLag(t *testing.T) {
	t.Parallel()
	c := chartSetup(t)
	c.traffic()
	got := rows(t, c.call("GET", "/api/v1/analytics/queue-lag?from="+c.at(0)+"&to="+c.at(2*time.Minute), nil, http.StatusOK), "")
	require.Len(t, got, 4, "two buckets, two queues")
	for _, r := range got {
		requireKeys(t, r, "bucketTime queueName avgLagMs maxLagMs popCount")
	}
	require.Equal(t, c.stamp(time.Minute), got[0]["bucketTime"], "newest first")
	orders := got[3]
	require.Equal(t, c.stamp(0), orders["bucketTime"])
	require.Equal(t, "orders", orders["queueName"])
	require.Equal(t, 9000.0, orders["avgLagMs"])
	require.Equal(t, 10000.0, orders["maxLagMs"])
	require.Equal(t, 40.0, orders["popCount"])
	require.Equal(t, map[string]any{"bucketTime": c.stamp(0), "queueName": "mail", "avgLagMs": 0.0, "maxLagMs": 0.0, "popCount": 0.0}, got[2])
	only := c.call("GET", "/api/v1/analytics/queue-lag?queue=orders&from="+c.at(0)+"&to="+c.at(2*time.Minute), nil, http.StatusOK)
	require.Len(t, only, 2)
	require.Equal(t, "read-only", c.levels["/api/v1/analytics/queue-lag"])
}

// TestAnalytics_QueueParkedReplicas: each queue's parked long-polls on
// the one replica.
func TestAnalytics_QueueParkedReplicas(t *testing.T) {
	t.Parallel()
	c := chartSetup(t)
	c.traffic()
	res := c.obj("GET", "/api/v1/analytics/queue-parked-replicas?queue=orders&from="+c.at(0)+"&to="+c.at(2*time.Minute), nil, http.StatusOK)
	series := rows(t, res, "series")
	require.Len(t, series, 2)
	require.Equal(t, "orders", series[0]["queueName"])
	require.Equal(t, 0.5, series[0]["parkedCount"])
	require.Equal(t, 0.0, series[1]["parkedCount"])
	reps := rows(t, res, "replicas")
	require.Len(t, reps, 1)
	require.Equal(t, series[0]["hostname"], reps[0]["hostname"])
	require.Equal(t, "read-only", c.levels["/api/v1/analytics/queue-parked-replicas"])
}

// TestAnalytics_Retention counts what Retention, CompletedRetention and
// MaxWaitTime removed, per bucket and in total.
func TestAnalytics_Retention(t *testing.T) {
	t.Parallel()
	c := chartSetup(t)
	for name, set := range map[string]func(*queen.QueueConfig){
		"old":  func(q *queen.QueueConfig) { q.Retention = 5 * time.Second },
		"done": func(q *queen.QueueConfig) { q.CompletedRetention = 5 * time.Second },
		"wait": func(q *queen.QueueConfig) { q.MaxWaitTime = 5 * time.Second },
	} {
		cfg := queen.DefaultQueueConfig()
		set(&cfg)
		_, err := c.b.ConfigureQueue(bg, name, cfg)
		require.NoError(t, err)
	}
	c.sample()
	c.pushN("old", "", 3)
	c.pushN("done", "", 2)
	c.pushN("wait", "", 4)
	res, err := c.b.Pop(bg, queen.PopRequest{Queue: "done", Batch: 10})
	require.NoError(t, err)
	for _, m := range res.Messages {
		_, err := c.b.Ack(bg, m, true, queen.AckOptions{})
		require.NoError(t, err)
	}
	c.clock.Advance(10 * time.Second)
	require.NoError(t, c.b.Maintain(bg))
	c.sample()

	got := c.obj("GET", "/api/v1/analytics/retention?from="+c.at(0)+"&to="+c.at(time.Minute), nil, http.StatusOK)
	series := rows(t, got, "series")
	require.Len(t, series, 1)
	require.Equal(t, map[string]any{"bucket": c.stamp(0), "retentionMsgs": 3.0, "completedRetentionMsgs": 2.0, "evictionMsgs": 4.0, "totalMsgs": 9.0}, series[0])
	require.Equal(t, map[string]any{"retentionMsgs": 3.0, "completedRetentionMsgs": 2.0, "evictionMsgs": 4.0, "totalMsgs": 9.0}, got["totals"])
	require.Equal(t, 1.0, got["bucketMinutes"])
	one := c.obj("GET", "/api/v1/analytics/retention?queue=old&from="+c.at(0)+"&to="+c.at(time.Minute), nil, http.StatusOK)
	require.Equal(t, map[string]any{"retentionMsgs": 3.0, "completedRetentionMsgs": 0.0, "evictionMsgs": 0.0, "totalMsgs": 3.0}, one["totals"])
	require.Equal(t, "read-only", c.levels["/api/v1/analytics/retention"])
}

// TestStatus_Series: GET /api/v1/status's throughput rows (newest first),
// its worker, batch efficiency and partitions with leases, from the
// History.
func TestStatus_Series(t *testing.T) {
	t.Parallel()
	c := chartSetup(t)
	c.traffic()
	_, err := c.b.Pop(bg, queen.PopRequest{Queue: "orders", Partition: "p1", Group: "other", SubscriptionMode: queen.SubscriptionModeAll}) // a second lease on p1
	require.NoError(t, err)
	_, err = c.b.Pop(bg, queen.PopRequest{Queue: "orders", Partition: "p1"})
	require.NoError(t, err)

	res := c.obj("GET", "/api/v1/status?from="+c.at(0)+"&to="+c.at(2*time.Minute), nil, http.StatusOK)
	tp := rows(t, res, "throughput")
	require.Len(t, tp, 2)
	require.Equal(t, c.stamp(time.Minute), tp[0]["timestamp"], "newest first")
	row := tp[1]
	requireKeys(t, row, "timestamp ingestedPerSecond popPerSecond processedPerSecond ingested processed avgLagMs maxLagMs "+
		"dbErrors ackFailed dlqCount avgEventLoopLagMs maxEventLoopLagMs queenCpuUserPct queenCpuSysPct dbPoolActive dbPoolIdle dbPoolSize")
	require.Equal(t, c.stamp(0), row["timestamp"])
	require.Equal(t, 6.0, row["ingestedPerSecond"])
	require.Equal(t, 2.0, row["popPerSecond"])
	require.Equal(t, 2.0, row["processedPerSecond"])
	require.Equal(t, 120.0, row["ingested"])
	require.Equal(t, 40.0, row["processed"])
	require.Equal(t, 9000.0, row["avgLagMs"])
	require.Equal(t, 10000.0, row["maxLagMs"])
	require.Equal(t, 10.0, row["ackFailed"])
	require.Equal(t, 10.0, row["dlqCount"])
	require.Equal(t, 25.0, row["queenCpuUserPct"], "5 s of 20 s")
	require.Equal(t, 10.0, row["queenCpuSysPct"])
	for _, k := range strings.Fields("dbErrors avgEventLoopLagMs maxEventLoopLagMs dbPoolActive dbPoolIdle dbPoolSize") {
		require.Equal(t, 0.0, row[k], k)
	}
	require.Equal(t, 2.0, res["timeRange"].(map[string]any)["pointCount"])

	workers := rows(t, res, "workers")
	require.Len(t, workers, 1)
	requireKeys(t, workers[0], "hostname avgEventLoopLagMs maxEventLoopLagMs messagesProcessed")
	require.Equal(t, 40.0, workers[0]["messagesProcessed"], "acked in the 2 minutes before the newest sample")

	msgs := res["messages"].(map[string]any)
	require.Equal(t, map[string]any{"push": 4.0, "pop": 1.0, "ack": 3.0}, msgs["requests"])
	require.Equal(t, map[string]any{"dbErrors": 0.0, "ackFailed": 10.0, "dlqMessages": 10.0}, res["errors"])
	require.Equal(t, map[string]any{"push": 31.75, "pop": 40.0, "ack": 13.33}, msgs["batchEfficiency"],
		"127 messages in 4 push calls; 40 in one pop; 40 acks in one call of 3 statuses")
	leases := res["leases"].(map[string]any)
	require.Equal(t, 2.0, leases["active"], "two groups lease p1")
	require.Equal(t, 1.0, leases["partitionsWithLeases"], "p1 once")

	mail := c.obj("GET", "/api/v1/status?queue=mail&from="+c.at(0)+"&to="+c.at(2*time.Minute), nil, http.StatusOK)
	tp = rows(t, mail, "throughput")
	require.Equal(t, 20.0, tp[1]["ingested"], "mail's own figures")
	require.Equal(t, 0.0, tp[1]["processed"])
	require.Equal(t, map[string]any{"push": 13.5, "pop": 0.0, "ack": 0.0}, mail["messages"].(map[string]any)["batchEfficiency"])
	require.Equal(t, 0.0, mail["leases"].(map[string]any)["partitionsWithLeases"])
}

// TestAnalytics_Validation refuses bad times on every route, and an
// inverted range.
func TestAnalytics_Validation(t *testing.T) {
	t.Parallel()
	c := chartSetup(t)
	for _, route := range []string{"worker-metrics", "system-metrics", "queue-ops", "queue-lag", "retention", "queue-parked-replicas"} {
		p := "/api/v1/analytics/" + route
		c.fails("GET", p+"?from=yesterday", nil, http.StatusBadRequest, "from must be an ISO-8601 timestamp")
		c.fails("GET", p+"?to=soon", nil, http.StatusBadRequest, "to must be an ISO-8601 timestamp")
		c.fails("GET", p+"?from="+c.at(time.Hour)+"&to="+c.at(0), nil, http.StatusBadRequest, "from must not be after to")
		if strings.HasPrefix(route, "queue") || route == "retention" {
			c.fails("GET", p+"?queue=%00", nil, http.StatusBadRequest, "queue contains a NUL byte")
		}
		c.fails("POST", p, nil, http.StatusNotFound, "not supported")
	}
	c.fails("GET", "/api/v1/status?from="+c.at(time.Hour)+"&to="+c.at(0), nil, http.StatusBadRequest, "from must not be after to")
}

// TestAnalytics_NoHistory: without a History every series is empty, in
// the shape that renders the dashboard's empty states.
func TestAnalytics_NoHistory(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("q", "", "a", 1)
	require.Equal(t, []any{}, e.obj("GET", "/api/v1/analytics/worker-metrics", nil, http.StatusOK)["timeSeries"])
	require.Equal(t, []any{}, e.obj("GET", "/api/v1/analytics/system-metrics", nil, http.StatusOK)["replicas"])
	ops := e.obj("GET", "/api/v1/analytics/queue-ops", nil, http.StatusOK)
	require.Equal(t, []any{}, ops["series"])
	require.Equal(t, []any{}, ops["queues"])
	require.Equal(t, []any{}, e.arr("GET", "/api/v1/analytics/queue-lag", nil, http.StatusOK))
	ret := e.obj("GET", "/api/v1/analytics/retention", nil, http.StatusOK)
	require.Equal(t, []any{}, ret["series"])
	require.Equal(t, map[string]any{"retentionMsgs": 0.0, "completedRetentionMsgs": 0.0, "evictionMsgs": 0.0, "totalMsgs": 0.0}, ret["totals"])
	park := e.obj("GET", "/api/v1/analytics/queue-parked-replicas", nil, http.StatusOK)
	require.Equal(t, []any{}, park["series"])
	require.Equal(t, []any{}, park["replicas"])
	st := e.obj("GET", "/api/v1/status", nil, http.StatusOK)
	require.Equal(t, []any{}, st["throughput"])
	require.Equal(t, []any{}, st["workers"])
}

// TestBucketMinutes follows Queen's widths for longer ranges, and never
// goes under the sampling interval.
func TestBucketMinutes(t *testing.T) {
	t.Parallel()
	c := chartSetup(t)
	for _, tc := range []struct {
		span time.Duration
		want float64
	}{{time.Hour, 1}, {61 * time.Minute, 5}, {6 * time.Hour, 5}, {7 * time.Hour, 15}, {24 * time.Hour, 15}, {48 * time.Hour, 60},
		{7 * 24 * time.Hour, 60}, {30 * 24 * time.Hour, 360}} {
		res := c.obj("GET", "/api/v1/analytics/worker-metrics?from="+c.at(0)+"&to="+c.at(tc.span), nil, http.StatusOK)
		require.Equal(t, tc.want, res["bucketMinutes"], tc.span.String())
	}
	e := setup(t, nil, nil)
	slow := history.New(e.b, &history.Options{Interval: 90 * time.Second})
	e.h = httpapi.New(e.b, &httpapi.Options{History: slow})
	require.Equal(t, 2.0, e.obj("GET", "/api/v1/analytics/queue-ops", nil, http.StatusOK)["bucketMinutes"], "90 s samples: 2-minute buckets")
}
