package queenprom_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/contrib/queenprom"
)

// An embedded broker's metrics, served by promhttp next to the program's
// own. The Observer adds latency histograms; it must be in the broker's
// Options when it opens.
func Example() {
	obs, err := queenprom.NewObserver(nil)
	if err != nil {
		log.Fatal(err)
	}
	b, err := queen.Open("", &queen.Options{InMemory: true, Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	c, err := queenprom.NewCollector(b, &queenprom.Options{Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) // e.g. mux.Handle("/metrics", handler)

	ctx := context.Background()
	if _, err := b.Queue("orders").Push(ctx, map[string]any{"id": 1}, map[string]any{"id": 2}); err != nil {
		log.Fatal(err)
	}
	err = b.Queue("orders").Group("billing").SubscriptionMode(queen.SubscriptionModeAll).Limit(1).
		Consume(ctx, func(ctx context.Context, m *queen.Message) error { return nil }).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}

	// A scrape.
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, line := range strings.Split(string(body), "\n") {
		for _, want := range []string{
			"queen_messages_pushed_total ",
			`queen_messages_acked_total{status="completed"}`,
			`queen_consume_messages_total{outcome="accepted"}`,
			`queen_consume_handler_duration_seconds_count{group="billing",outcome="accepted",queue="orders"}`,
			`queen_queue_messages{queue="orders"}`,
			`queen_consumer_lag_messages{group="billing",queue="orders"}`,
		} {
			if strings.HasPrefix(line, want) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// queen_consume_handler_duration_seconds_count{group="billing",outcome="accepted",queue="orders"} 1
	// queen_consume_messages_total{outcome="accepted"} 1
	// queen_consumer_lag_messages{group="billing",queue="orders"} 1
	// queen_messages_acked_total{status="completed"} 1
	// queen_messages_pushed_total 2
	// queen_queue_messages{queue="orders"} 2
}
