package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/console"
	"github.com/queenlite/queen/internal/compat"
	"github.com/stretchr/testify/require"
)

// configForm is the configuration form of queue as the page fills it.
func configForm(t *testing.T, body string) map[string]string {
	t.Helper()
	i := strings.Index(body, `data-form="config"`)
	require.GreaterOrEqual(t, i, 0)
	out := map[string]string{}
	for _, m := range inputRE.FindAllStringSubmatch(body[i:strings.Index(body[i:], "</form>")+i], -1) {
		out[m[1]] = m[2]
	}
	return out
}

func TestConsole_QueueConfig(t *testing.T) {
	e := newEnv(t, "/", nil)
	ctx := context.Background()
	_, err := e.b.ConfigureQueue(ctx, "orders", queen.QueueConfig{LeaseTime: 30 * time.Second, RetryLimit: 2})
	require.NoError(t, err)
	body := e.ok("/queues/orders")
	f := configForm(t, body)
	require.Equal(t, "30s", f["LeaseTime"])
	require.Equal(t, "2", f["RetryLimit"])

	ok := form("LeaseTime", "2m", "RetryLimit", "5", "RetryDelay", "1500ms", "MaxSize", "1000", "Priority", "3",
		"Namespace", "shop", "DeadLetterQueue", "true", "Retention", "24h", "confirm", "1")
	require.Equal(t, "saved the configuration of orders", e.act("/queues/orders/config", ok))
	info, err := e.b.DescribeQueue(ctx, "orders")
	require.NoError(t, err)
	want := queen.QueueConfig{LeaseTime: 2 * time.Minute, RetryLimit: 5, RetryDelay: 1500 * time.Millisecond, MaxSize: 1000,
		Priority: 3, Namespace: "shop", Retention: 24 * time.Hour}
	compat.Set(&want, compat.QueueFields{DeadLetterQueue: true})
	require.Equal(t, want, info.Config)

	// The broker's validation refuses, the form comes back with what was
	// typed, and nothing changes.
	for _, tc := range []struct{ field, value, want string }{
		{"LeaseTime", "500ms", "LeaseTime: must be at least 1s"},
		{"RetryLimit", "-1", "RetryLimit: must not be negative"},
		{"MaxSize", "many", `MaxSize: &#34;many&#34; is not a whole number`},
		{"Retention", "1 day", `Retention: &#34;1 day&#34; is not a duration`},
		{"EncryptionEnabled", "true", "EncryptionEnabled: needs Options.EncryptionKey"},
	} {
		bad := form("LeaseTime", "2m", tc.field, tc.value, "confirm", "1")
		bad.Set(tc.field, tc.value)
		p := e.post("/queues/orders/config", bad)
		require.Equal(t, http.StatusBadRequest, p.status, tc.field)
		require.Contains(t, p.body, tc.want, tc.field)
		if tc.field != "EncryptionEnabled" {
			require.Equal(t, tc.value, configForm(t, p.body)[tc.field], "typed value kept")
		}
		after, err := e.b.DescribeQueue(ctx, "orders")
		require.NoError(t, err)
		require.Equal(t, info.Config, after.Config, tc.field)
	}
	// An edit never creates a queue.
	require.Equal(t, http.StatusNotFound, e.post("/queues/nowhere/config", ok).status)
	_, err = e.b.DescribeQueue(ctx, "nowhere")
	require.ErrorIs(t, err, queen.ErrNotFound)
	require.Equal(t, http.StatusNotFound, e.get("/queues/nowhere").status)
}

func TestConsole_QueuePartitions(t *testing.T) {
	e := newEnv(t, "/", nil)
	for i := 0; i < 250; i++ {
		e.push("orders", fmt.Sprintf("p%03d", i), `1`)
	}
	e.settle("orders", "zeta", queen.AckCompleted, "")
	e.settle("orders", "zeta", queen.AckCompleted, "")
	e.settle("orders", "alpha", queen.AckCompleted, "")
	body := e.ok("/queues/orders")
	require.Contains(t, body, `data-fact="partitions">250<`)
	parts := rows(t, body, "partitions")
	require.Len(t, parts, 100)
	require.Equal(t, "p000", parts[0])
	require.Contains(t, body, `href="?from=100"`)
	require.Contains(t, body, "250 in all")
	require.Equal(t, parts, rows(t, body, "lag"))
	// The lag table has a column per group, by name, each cell its group's.
	require.Contains(t, body, "<th>Partition</th><th>alpha</th><th>zeta</th>")
	row := rowHTML(t, body, "lag", "p000")
	require.Contains(t, row, `<td data-group="alpha">0</td><td data-group="zeta">0</td>`)
	row = rowHTML(t, body, "lag", "p001")
	require.Contains(t, row, `<td data-group="alpha">1</td><td data-group="zeta">0</td>`)

	last := e.ok("/queues/orders?from=200")
	require.Len(t, rows(t, last, "partitions"), 50)
	require.NotContains(t, last, `data-page-link="next"`)
	require.Contains(t, last, `data-page-link="prev"`)
	found := e.ok("/queues/orders?q=p12")
	require.Equal(t, []string{"p120", "p121", "p122", "p123", "p124", "p125", "p126", "p127", "p128", "p129"}, rows(t, found, "partitions"))
	require.Empty(t, rows(t, e.ok("/queues/orders?q=nothing"), "partitions"))
	// A searched page goes on where its scan stopped.
	found = e.ok("/queues/orders?q=p12&limit=4")
	require.Equal(t, []string{"p120", "p121", "p122", "p123"}, rows(t, found, "partitions"))
	require.Contains(t, found, `href="?from=124&amp;limit=4&amp;q=p12"`)
	found = e.ok("/queues/orders?q=p12&limit=4&from=124")
	require.Equal(t, []string{"p124", "p125", "p126", "p127"}, rows(t, found, "partitions"))
	require.Contains(t, found, `href="?from=0&amp;limit=4&amp;q=p12"`, "back to the first page")
}

func TestConsole_MessageBrowser(t *testing.T) {
	e := newEnv(t, "/", nil)
	for i := 0; i < 25; i++ {
		e.push("orders", "eu", fmt.Sprintf(`{"n":%d,"tags":["a","b"]}`, i))
	}
	_, err := e.b.Pop(context.Background(), queen.PopRequest{Queue: "orders", Group: "billing", Batch: 0, SubscriptionMode: queen.SubscriptionModeAll, Partition: "nowhere-yet"})
	require.NoError(t, err)
	popped := e.b.Counters().Popped

	body := e.ok("/queues/orders?partition=eu")
	ids := rows(t, body, "messages")
	require.Len(t, ids, 20)
	require.Contains(t, body, "<pre data-payload>{\n  &#34;n&#34;: 0,\n  &#34;tags&#34;: [\n    &#34;a&#34;,\n    &#34;b&#34;\n  ]\n}</pre>")
	require.Contains(t, body, `href="?partition=eu&amp;offset=20#browser"`)
	next := e.ok("/queues/orders?partition=eu&offset=20")
	require.Len(t, rows(t, next, "messages"), 5)
	require.NotContains(t, next, `data-page-link="next-messages"`)
	require.Contains(t, next, `&#34;n&#34;: 24`)

	// No lease taken, no retry spent: the group's first pop gets message 0
	// on its first delivery.
	require.Equal(t, popped, e.b.Counters().Popped)
	res, err := e.b.Pop(context.Background(), queen.PopRequest{Queue: "orders", Group: "billing", Batch: 1, SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	require.Equal(t, ids[0], res.Messages[0].ID)
	require.Equal(t, 1, res.Messages[0].DeliveryAttempt)

	// Traces of a message, linked from the browser.
	m := res.Messages[0]
	_, err = e.b.RecordTrace(context.Background(), queen.TraceEvent{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Names: []string{"checkout"}, EventType: "step", Data: []byte(`{"ok":true}`)})
	require.NoError(t, err)
	body = e.ok("/queues/orders?partition=eu")
	link := "/traces?partition_id=" + m.PartitionID + "&amp;transaction_id=" + m.TransactionID
	require.Contains(t, body, `href="`+link+`"`)
	tr := e.ok(htmlUnescape(link))
	require.Len(t, rows(t, tr, "traces"), 1)
	require.Contains(t, tr, "<td>step</td>")
	names := e.ok("/traces")
	require.Equal(t, []string{"checkout"}, rows(t, names, "traces"))
	require.Len(t, rows(t, e.ok("/traces?name=checkout"), "traces"), 1)
	require.Empty(t, rows(t, e.ok("/traces?name=other"), "traces"))
	require.Equal(t, http.StatusBadRequest, e.get("/traces?partition_id="+m.PartitionID).status)

	require.Contains(t, e.ok("/queues/orders?partition=nowhere"), `no partition &#34;nowhere&#34; in this queue`)
	require.Contains(t, e.ok("/queues/orders?partition=eu&offset=-3"), "offset must be a number, 0 or more")
}

func TestConsole_LiveRefresh(t *testing.T) {
	e := newEnv(t, "/", &console.Options{Refresh: 2 * time.Second})
	e.push("orders", "", `1`)
	body := e.ok("/")
	require.Contains(t, body, `<body data-refresh="2000">`)
	for _, region := range []string{"facts", "queues", "throughput"} {
		require.Contains(t, body, `data-live="`+region+`"`)
	}
	require.Contains(t, e.ok("/queues/orders"), `data-live="partitions"`)
	off := newEnv(t, "/", &console.Options{Refresh: -1})
	require.Contains(t, off.ok("/"), `<body data-refresh="0">`)
}
