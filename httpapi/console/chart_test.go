package console_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/console"
	"github.com/queenlite/queen/httpapi/history"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestConsole_Charts samples a broker on a fake clock: 60 pushes in the
// first minute, 120 in the second (30 of them popped), and reads the
// rates back from the overview and the queue page.
func TestConsole_Charts(t *testing.T) {
	clock := queentest.NewClock(start)
	b := queentest.NewBroker(t, &queen.Options{Clock: clock, DefaultSubscriptionMode: queen.SubscriptionModeAll})
	rec := history.New(b, &history.Options{Interval: time.Minute, Process: func() history.Process { return history.Process{} }})
	e := newEnvOn(t, b, clock, "/", &console.Options{History: rec})
	ctx := context.Background()
	require.Contains(t, e.ok("/"), `data-chart="empty"`)

	require.NoError(t, rec.Sample(ctx)) // the first reading
	push := func(n int) {
		for i := 0; i < n; i++ {
			e.push("orders", "", `1`)
		}
	}
	clock.Advance(time.Minute)
	push(60)
	require.NoError(t, rec.Sample(ctx))
	clock.Advance(time.Minute)
	push(120)
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Group: "billing", Batch: 30})
	require.NoError(t, err)
	require.Len(t, res.Messages, 30)
	require.NoError(t, rec.Sample(ctx))

	for _, path := range []string{"/", "/queues/orders"} {
		body := e.ok(path)
		require.Contains(t, body, `data-chart="throughput"`, path)
		require.Contains(t, body, `<span class="push">push 2.00/s</span><span class="pop">pop 0.50/s</span><span class="ack">ack 0/s</span>`, path)
		require.Contains(t, body, `<text x="2" y="12">2.00/s</text>`, path)
		pts := regexp.MustCompile(`<polyline class="push" points="([^"]+)"`).FindStringSubmatch(body)
		require.NotNil(t, pts, path)
		// Two buckets: 1/s half way up (y 200-5-185/2), then 2/s at the
		// top (y 10).
		ys := []string{}
		for _, p := range strings.Fields(pts[1]) {
			ys = append(ys, p[strings.Index(p, ",")+1:])
		}
		require.Equal(t, []string{"102.5", "10.0"}, ys, path)
	}
	row := rowHTML(t, e.ok("/"), "queues", "orders")
	require.Equal(t, []string{"2.00", "0.50", "0"}, cells(row)[9:])
}
