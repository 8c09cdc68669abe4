package queenotel_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/contrib/queenotel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A consumer whose handler is wrapped by Handler: each message handled
// gets a span in the trace the producer pushed it with. The broker's
// counters and gauges are read at each collection.
func Example() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	obs, err := queenotel.NewObserver(&queenotel.ObserverOptions{MeterProvider: mp})
	if err != nil {
		log.Fatal(err)
	}
	b, err := queen.Open("", &queen.Options{InMemory: true, Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if _, err := queenotel.RegisterMetrics(b, &queenotel.MetricsOptions{MeterProvider: mp}); err != nil {
		log.Fatal(err)
	}

	// A producer would set TraceID to queenotel.TraceID(ctx).
	ctx := context.Background()
	_, err = b.Push(ctx, []queen.PushItem{
		{Queue: "orders", Payload: []byte(`{"sku":"A-1"}`), TraceID: "4bf92f35-77b3-4da6-a3ce-929d0e0e4736"},
		{Queue: "orders", Payload: []byte(`{"sku":"??"}`), TraceID: "0af76519-16cd-43dd-8448-eb211c80319c"},
	})
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, m *queen.Message) error {
		if m.Data["sku"] == "??" {
			return queen.Reject(errors.New("no such sku"))
		}
		return nil
	}
	err = b.Queue("orders").Group("billing").SubscriptionMode(queen.SubscriptionModeAll).Limit(2).
		Consume(ctx, queenotel.Handler(tp.Tracer("billing"), handle)).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}

	for _, s := range spans.GetSpans() {
		var outcome string
		for _, a := range s.Attributes {
			if a.Key == queenotel.AttrOutcome {
				outcome = a.Value.AsString()
			}
		}
		fmt.Println(s.Name, s.SpanContext.TraceID(), outcome)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "queen.messages.pushed", "queen.messages.dead_lettered":
				fmt.Println(m.Name, m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
			}
		}
	}
	// Output:
	// process orders 4bf92f3577b34da6a3ce929d0e0e4736 accepted
	// process orders 0af7651916cd43dd8448eb211c80319c dead_lettered
	// queen.messages.pushed 2
	// queen.messages.dead_lettered 1
}
