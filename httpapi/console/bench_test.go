package console_test

import (
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/console"
)

var benchParts = flag.Int("console.parts", 1_000_000, "partitions of BenchmarkConsole_Queue1MPartitions")

// serve renders path b.N times on h and reports the server time per
// page in ms (the goal: at most 200).
func serve(b *testing.B, h http.Handler, path, want string) {
	b.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
		b.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
}

// openBench opens a broker on disk without fsync, for a large fixture.
func openBench(b *testing.B) *queen.Broker {
	b.Helper()
	br, err := queen.Open(b.TempDir(), &queen.Options{Durability: queen.SyncNever, DefaultSubscriptionMode: queen.SubscriptionModeAll})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Close() })
	return br
}

func benchPush(b *testing.B, br *queen.Broker, items []queen.PushItem) {
	b.Helper()
	if _, err := br.Push(context.Background(), items); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkConsole_Overview1000Queues renders the overview of 1,000
// queues, each with 3 partitions, a consumer group with lag and a dead
// letter.
func BenchmarkConsole_Overview1000Queues(b *testing.B) {
	br := openBench(b)
	ctx := context.Background()
	for lo := 0; lo < 1000; lo += 100 {
		var items []queen.PushItem
		for q := lo; q < lo+100; q++ {
			for p := 0; p < 3; p++ {
				items = append(items, queen.PushItem{Queue: "queue-" + strconv.Itoa(q), Partition: "p" + strconv.Itoa(p), Payload: []byte(`{"n":1}`)},
					queen.PushItem{Queue: "queue-" + strconv.Itoa(q), Partition: "p" + strconv.Itoa(p), Payload: []byte(`{"n":2}`)})
			}
		}
		benchPush(b, br, items)
	}
	for q := 0; q < 1000; q++ {
		res, err := br.Pop(ctx, queen.PopRequest{Queue: "queue-" + strconv.Itoa(q), Group: "billing", Batch: 1})
		if err != nil || len(res.Messages) != 1 {
			b.Fatal(err)
		}
		m := res.Messages[0]
		if _, err := br.AckBatch(ctx, []queen.AckItem{{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: "billing", Status: queen.AckDLQ}}); err != nil {
			b.Fatal(err)
		}
	}
	h := console.New(br, nil)
	b.Run("first", func(b *testing.B) { serve(b, h, "/", `1,000 in all`) })
	b.Run("last", func(b *testing.B) { serve(b, h, "/?from=900", `data-row="queue-999"`) })
}

// BenchmarkConsole_Queue1MPartitions renders the page of a queue of
// 1,000,000 partitions (-console.parts) with two consumer groups, one
// holding a lease: its first page of partitions, and a page deep in it.
func BenchmarkConsole_Queue1MPartitions(b *testing.B) {
	br := openBench(b)
	ctx := context.Background()
	n := *benchParts
	items := make([]queen.PushItem, 0, 1000)
	for lo := 0; lo < n; lo += 1000 {
		items = items[:0]
		for i := lo; i < min(lo+1000, n); i++ {
			items = append(items, queen.PushItem{Queue: "big", Partition: "c" + strconv.Itoa(i), Payload: []byte(`{"x":1}`)})
		}
		benchPush(b, br, items)
	}
	for _, g := range []string{"billing", "audit"} {
		if _, err := br.Pop(ctx, queen.PopRequest{Queue: "big", Group: g, Batch: 10, Partitions: 10}); err != nil {
			b.Fatal(err)
		}
	}
	h := console.New(br, nil)
	b.Run("first", func(b *testing.B) { serve(b, h, "/queues/big", `data-row="c99"`) })
	b.Run("deep", func(b *testing.B) {
		from := strconv.Itoa(n - 100)
		serve(b, h, "/queues/big?from="+from, `data-row="c`+strconv.Itoa(n-1)+`"`)
	})
	b.Run("search", func(b *testing.B) { serve(b, h, "/queues/big?q=c99999", `data-row="c99999"`) })
	// Not bounded by the goal: the overview and the group page count every
	// partition of the queue (ListQueues and ListGroups do).
	b.Run("overview", func(b *testing.B) { serve(b, h, "/", `data-row="big"`) })
	b.Run("group", func(b *testing.B) { serve(b, h, "/groups/big/billing", `data-page="group"`) })
}
