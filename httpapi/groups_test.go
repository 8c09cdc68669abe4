package httpapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// systemClock is the real clock, for routes that measure lag against now.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// groupsEnv has queue "orders" with partitions a and b, read by group
// billing (one message in flight, one settled) and by queue mode.
func groupsEnv(t *testing.T, opts *queen.Options) *env {
	e := setup(t, opts, nil)
	e.push("orders", "a", "a1", 1)
	e.push("orders", "a", "a2", 2)
	e.push("orders", "b", "b1", 3)
	m := msgs(t, e.pop("/api/v1/pop/queue/orders/partition/a?consumerGroup=billing&subscriptionMode=all"))[0]
	body := ackBody(m, "completed")
	body["consumerGroup"] = "billing"
	e.arr("POST", "/api/v1/ack", body, http.StatusOK)
	e.pop("/api/v1/pop/queue/orders/partition/b?consumerGroup=billing")
	e.pop("/api/v1/pop/queue/orders/partition/a")
	return e
}

func TestConsumerGroups_List(t *testing.T) {
	t.Parallel()
	e := groupsEnv(t, nil)
	list := e.arr("GET", "/api/v1/consumer-groups", nil, http.StatusOK)
	require.Len(t, list, 2)
	qm := list[0].(map[string]any)
	require.Equal(t, queen.QueueModeGroup, qm["name"])
	billing := list[1].(map[string]any)
	require.Equal(t, "billing", billing["name"])
	require.Equal(t, []any{"orders"}, billing["topics"])
	require.Equal(t, "orders", billing["queueName"])
	require.EqualValues(t, 2, billing["members"])
	require.EqualValues(t, 2, billing["partitionsWithLag"])
	require.EqualValues(t, 2, billing["totalLag"])
	require.EqualValues(t, 1, billing["inFlight"])
	require.EqualValues(t, 1, billing["activeLeases"])
	require.Equal(t, "Stable", billing["state"])
	require.Equal(t, "all", billing["subscriptionMode"])
	require.Nil(t, billing["subscriptionTimestamp"])
	require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000Z"), billing["subscriptionCreatedAt"])
	require.Contains(t, billing, "maxTimeLag")
	require.Equal(t, false, billing["conflation"])

	e.pop("/api/v1/pop/queue/orders?consumerGroup=fresh")
	for _, g := range e.arr("GET", "/api/v1/consumer-groups", nil, http.StatusOK) {
		if g := g.(map[string]any); g["name"] == "fresh" {
			require.Equal(t, "Dead", g["state"])
			require.Equal(t, "new", g["subscriptionMode"])
			require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000Z"), g["subscriptionTimestamp"])
		}
	}
}

func TestConsumerGroups_Get(t *testing.T) {
	t.Parallel()
	e := groupsEnv(t, nil)
	res := e.obj("GET", "/api/v1/consumer-groups/billing", nil, http.StatusOK)
	parts := res["orders"].(map[string]any)["partitions"].([]any)
	require.Len(t, parts, 2)
	a, b := parts[0].(map[string]any), parts[1].(map[string]any)
	require.Equal(t, "a", a["partition"])
	require.Regexp(t, uuidRE, a["partitionId"])
	require.Nil(t, a["workerId"])
	require.Equal(t, false, a["leaseActive"])
	require.EqualValues(t, 1, a["totalConsumed"])
	require.EqualValues(t, 1, a["offsetLag"])
	require.EqualValues(t, 1, a["offset"])
	require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000Z"), a["lastConsumedAt"])
	require.Contains(t, a, "timeLagSeconds")
	require.Equal(t, "b", b["partition"])
	require.Equal(t, true, b["leaseActive"])
	require.Regexp(t, uuidRE, b["workerId"])
	require.Nil(t, b["lastConsumedAt"])
	require.EqualValues(t, 1, b["inFlight"])

	require.Empty(t, e.obj("GET", "/api/v1/consumer-groups/unknown", nil, http.StatusOK))
	e.fails("GET", "/api/v1/consumer-groups/"+strings.Repeat("g", 256), nil, http.StatusBadRequest, "group is longer than 255 bytes")
}

func TestConsumerGroups_Lagging(t *testing.T) {
	t.Parallel()
	e := groupsEnv(t, &queen.Options{Clock: systemClock{}})
	require.Empty(t, e.arr("GET", "/api/v1/consumer-groups/lagging", nil, http.StatusOK), "nothing has waited an hour")
	rows := e.arr("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", nil, http.StatusOK)
	require.Len(t, rows, 4) // both partitions for billing and for queue mode
	row := rows[0].(map[string]any)
	for _, k := range []string{"consumer_group", "queue_name", "partition_name", "partition_id", "worker_id", "offset_lag",
		"time_lag_seconds", "lag_hours", "oldest_unconsumed_at", "last_consumed_at"} {
		require.Contains(t, row, k)
	}
	require.Equal(t, "orders", row["queue_name"])
	require.NotNil(t, row["oldest_unconsumed_at"])
	leased := 0
	for _, g := range e.obj("GET", "/api/v1/consumer-groups/billing", nil, http.StatusOK)["orders"].(map[string]any)["partitions"].([]any) {
		if g.(map[string]any)["leaseActive"] == true {
			leased++
		}
	}
	require.Positive(t, leased, "a partition is under a lease")
	for _, r := range rows {
		require.Nil(t, r.(map[string]any)["worker_id"], "no lease id in worker_id")
	}
	e.fails("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=x", nil, http.StatusBadRequest, "minLagSeconds must be a number")
}

func TestConsumerGroups_Delete(t *testing.T) {
	t.Parallel()
	e := groupsEnv(t, nil)
	e.push("other", "", "o", 1)
	e.pop("/api/v1/pop/queue/other?consumerGroup=billing&subscriptionMode=all")

	res := e.obj("DELETE", "/api/v1/consumer-groups/billing/queues/orders?deleteMetadata=false", nil, http.StatusOK)
	require.Equal(t, map[string]any{"success": true, "consumerGroup": "billing", "queueName": "orders", "deletedPartitions": 2.0, "metadataDeleted": false}, res)
	res = e.obj("DELETE", "/api/v1/consumer-groups/billing", nil, http.StatusOK)
	require.Equal(t, map[string]any{"success": true, "consumerGroup": "billing", "deletedPartitions": 3.0, "metadataDeleted": true}, res)
	require.Empty(t, e.obj("GET", "/api/v1/consumer-groups/billing", nil, http.StatusOK))
	// Gone, or never there: a typo is not a delete of 0 partitions.
	e.fails("DELETE", "/api/v1/consumer-groups/billing", nil, http.StatusNotFound, "Consumer group not found")
	e.fails("DELETE", "/api/v1/consumer-groups/billing/queues/orders", nil, http.StatusNotFound, "Consumer group not found")
	e.fails("DELETE", "/api/v1/consumer-groups/billing/queues/nowhere", nil, http.StatusNotFound, "Queue not found")
	e.fails("DELETE", "/api/v1/consumer-groups/billing?deleteMetadata=perhaps", nil, http.StatusBadRequest, "deleteMetadata must be true or false")
	e.fails("DELETE", "/api/v1/consumer-groups/billing/queues/"+strings.Repeat("q", 256), nil, http.StatusBadRequest, "queue is longer than 255 bytes")
}

func TestConsumerGroups_Subscription(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("sub", "", "m0", 0)
	require.Nil(t, e.pop("/api/v1/pop/queue/sub?consumerGroup=late")) // joins in mode new
	e.push("sub", "p", "m", 1)                                        // after the group joined, in a new partition
	res := e.obj("POST", "/api/v1/consumer-groups/late/subscription", `{"subscriptionTimestamp":"`+itest.Stamp("2026-11-30T12:00:00Z")+`"}`, http.StatusOK)
	require.Equal(t, true, res["success"])
	require.Equal(t, "late", res["consumerGroup"])
	require.Equal(t, itest.Stamp("2026-11-30T12:00:00.000Z"), res["newTimestamp"])
	require.EqualValues(t, 2, res["rowsUpdated"], "both partitions: the group settled nothing yet")
	e.fails("POST", "/api/v1/consumer-groups/lat/subscription", `{"subscriptionTimestamp":"2026-11-30T12:00:00Z"}`, http.StatusNotFound,
		"Consumer group not found")
	e.fails("POST", "/api/v1/consumer-groups/late/subscription", `{}`, http.StatusBadRequest, "Missing subscriptionTimestamp in request body")
	e.fails("POST", "/api/v1/consumer-groups/late/subscription", `{"subscriptionTimestamp":5}`, http.StatusBadRequest, "Missing subscriptionTimestamp")
	e.fails("POST", "/api/v1/consumer-groups/late/subscription", `{"subscriptionTimestamp":"later"}`, http.StatusBadRequest,
		`subscriptionTimestamp must be an ISO-8601 timestamp, not "later"`)
}

func TestConsumerGroups_Seek(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("s", "a", "a1", 1)
	e.push("s", "b", "b1", 2)
	e.pop("/api/v1/pop/queue/s?consumerGroup=g&subscriptionMode=all&batch=2&partitions=2")

	res := e.obj("POST", "/api/v1/consumer-groups/g/queues/s/seek", `{"timestamp":"2000-01-01T00:00:00Z"}`, http.StatusOK)
	require.Equal(t, map[string]any{"success": true, "consumerGroup": "g", "queueName": "s", "seekToEnd": false,
		"targetTimestamp": "2000-01-01T00:00:00.000Z", "partitionsUpdated": 2.0}, res)
	require.Len(t, msgs(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g&batch=2&partitions=2")), 2, "the seek released the leases")

	res = e.obj("POST", "/api/v1/consumer-groups/g/queues/s/seek", `{"toEnd":true}`, http.StatusOK)
	require.Equal(t, true, res["seekToEnd"])
	require.Nil(t, res["targetTimestamp"])
	require.Nil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g"))

	e.fails("POST", "/api/v1/consumer-groups/g/queues/nowhere/seek", `{"toEnd":true}`, http.StatusNotFound, "Queue not found")
	e.fails("POST", "/api/v1/consumer-groups/typo/queues/s/seek", `{"toEnd":true}`, http.StatusNotFound, "Consumer group not found")
	for _, c := range []struct{ body, want string }{
		{`{}`, "Must specify either 'toEnd': true or 'timestamp'"},
		{`{"toEnd":false}`, "Must specify either 'toEnd': true or 'timestamp'"},
		{`{"toEnd":"yes"}`, "toEnd must be a boolean"},
		{`{"timestamp":12}`, "timestamp must be a string"},
		{`{"timestamp":"noon"}`, `timestamp must be an ISO-8601 timestamp, not "noon"`},
	} {
		e.fails("POST", "/api/v1/consumer-groups/g/queues/s/seek", c.body, http.StatusBadRequest, c.want)
	}

	e.push("s", "a", "a2", 3)
	part := e.obj("POST", "/api/v1/consumer-groups/g/queues/s/partitions/a/seek", `{}`, http.StatusOK)
	require.Equal(t, map[string]any{"success": true, "consumerGroup": "g", "queueName": "s", "partitionName": "a",
		"updated": true, "cursorMovedTo": 2.0}, part)
	require.Nil(t, e.pop("/api/v1/pop/queue/s?consumerGroup=g"))
	e.fails("POST", "/api/v1/consumer-groups/nobody/queues/s/partitions/a/seek", nil, http.StatusNotFound, "Consumer group not found")
	e.fails("POST", "/api/v1/consumer-groups/g/queues/s/partitions/zz/seek", nil, http.StatusNotFound, "Partition not found")
	e.fails("POST", "/api/v1/consumer-groups/g/queues/none/partitions/a/seek", nil, http.StatusNotFound, "Partition not found")
}

func TestStatsRefresh(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	res := e.obj("POST", "/api/v1/stats/refresh", nil, http.StatusOK)
	require.Equal(t, true, res["skipped"])
}

// TestLag_MeasuredOnBrokerClock: every lag and age the API reports is
// measured against the broker's clock, so a broker on a fake clock reports
// exact values whatever today's date is (and the suite passes with
// QUEENTEST_EPOCH years ahead or behind).
func TestLag_MeasuredOnBrokerClock(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	e.push("orders", "a", "a1", 1)
	e.pop("/api/v1/pop/queue/orders/partition/a?consumerGroup=billing&subscriptionMode=all&autoAck=true")
	e.push("orders", "a", "a2", 2)
	e.clock.Advance(90 * time.Second)

	var billing map[string]any
	for _, g := range e.arr("GET", "/api/v1/consumer-groups", nil, http.StatusOK) {
		if g := g.(map[string]any); g["name"] == "billing" {
			billing = g
		}
	}
	require.NotNil(t, billing)
	require.EqualValues(t, 90, billing["maxTimeLag"], "a2 waited 90 s on the broker's clock")
	require.Equal(t, "Stable", billing["state"])

	a := e.obj("GET", "/api/v1/consumer-groups/billing", nil, http.StatusOK)["orders"].(map[string]any)["partitions"].([]any)[0].(map[string]any)
	require.EqualValues(t, 90, a["timeLagSeconds"])

	require.Empty(t, e.arr("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=91", nil, http.StatusOK))
	require.Len(t, e.arr("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=90", nil, http.StatusOK), 1)

	prom := e.do("GET", "/metrics/prometheus", nil).Body.String()
	require.Contains(t, prom, `queen_consumer_lag_seconds{queue="orders",group="billing"} 90`)
	require.Contains(t, prom, "queen_uptime_seconds 90\n")

	e.clock.Advance(10 * time.Minute)
	for _, g := range e.arr("GET", "/api/v1/consumer-groups", nil, http.StatusOK) {
		if g := g.(map[string]any); g["name"] == "billing" {
			require.EqualValues(t, 690, g["maxTimeLag"])
			require.Equal(t, "Lagging", g["state"])
		}
	}
}

// TestNoWallClock: the handler (and package remote, whose clients it may
// front, and the console and history packages beside it) takes every
// "now" from the broker. A call
// to time.Now or time.Since in httpapi's code would measure against the
// machine's clock while the broker may run on another one.
func TestNoWallClock(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	remote, err := filepath.Glob("../remote/*.go") // a client fronted by httpapi reports on its own clock too
	require.NoError(t, err)
	require.NotEmpty(t, remote)
	files = append(files, remote...)
	for _, dir := range []string{"console", "history"} { // the pages and the series it serves
		more, err := filepath.Glob(dir + "/*.go")
		require.NoError(t, err)
		require.NotEmpty(t, more)
		files = append(files, more...)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, banned := range []string{"time.Now(", "time.Since(", "time.Until("} {
			require.NotContains(t, string(src), banned, "%s: use the broker's clock (Broker.Now)", f)
		}
	}
}
