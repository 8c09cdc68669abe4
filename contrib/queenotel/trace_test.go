package queenotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/contrib/queenotel"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func newTracer(t *testing.T) (trace.Tracer, *tracetest.SpanRecorder) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("test"), sr
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func TestOutcome(t *testing.T) {
	plain := errors.New("boom")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "accepted"},
		{plain, queenotel.OutcomeFailed},
		{&queen.PanicError{Value: "x"}, queenotel.OutcomeFailed},
		{queen.Retry(plain), "retried"},
		{queen.Reject(plain), "dead_lettered"},
		{queen.Fatal(plain), "dead_lettered"},
		{queen.Park(plain), "parked"},
		{queen.InProgress(time.Second), "in_progress"},
		{fmt.Errorf("charge: %w", queen.Park(plain)), "parked"},
		{queen.Park(queen.Reject(plain)), "parked"}, // the outermost wins
		{fmt.Errorf("a: %w", queen.Retry(queen.Park(plain))), "retried"},
		{errors.Join(plain, queen.Reject(plain)), "dead_lettered"},
		{errors.Join(queen.Park(plain), queen.Reject(plain)), "parked"},
		{fmt.Errorf("%w and %w", plain, queen.InProgress(0)), "in_progress"},
		{&queen.PanicError{Value: queen.Park(plain)}, "parked"},
	} {
		require.Equal(t, tc.want, queenotel.Outcome(tc.err), "%v", tc.err)
	}
}

func TestParseTraceID(t *testing.T) {
	id, ok := queenotel.ParseTraceID("4bf92f35-77b3-4da6-a3ce-929d0e0e4736")
	require.True(t, ok)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", id.String())
	id, ok = queenotel.ParseTraceID("4BF92F3577B34DA6A3CE929D0E0E4736")
	require.True(t, ok)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", id.String())
	for _, bad := range []string{"", "order-42", "00000000-0000-0000-0000-000000000000",
		"4bf92f35-77b3-4da6-a3ce-929d0e0e473", "4bf92f35x77b3-4da6-a3ce-929d0e0e4736",
		"4bf92f35-77b3-4da6-a3ce-929d0e0e473g", "+bf92f3577b34da6a3ce929d0e0e4736", "4bf92f35-77b3-4da6-a3ce-929d0e0e4736\x00"} {
		_, ok := queenotel.ParseTraceID(bad)
		require.False(t, ok, "%q", bad)
	}

	// TraceID writes a context's trace id as a UUID that ParseTraceID reads back.
	tracer, _ := newTracer(t)
	ctx, span := tracer.Start(context.Background(), "produce")
	defer span.End()
	s := queenotel.TraceID(ctx)
	require.Len(t, s, 36)
	id, ok = queenotel.ParseTraceID(s)
	require.True(t, ok)
	require.Equal(t, span.SpanContext().TraceID(), id)
	require.Empty(t, queenotel.TraceID(context.Background()))
}

// TestHandler_SpanPerMessage runs a consume loop whose handler is wrapped
// by Handler over messages with every kind of trace id, and checks one
// span per handled message: in the message's trace, with its attributes
// and the outcome the loop settled it with.
func TestHandler_SpanPerMessage(t *testing.T) {
	tracer, sr := newTracer(t)
	b := queentest.NewBroker(t, nil)
	ctx := context.Background()

	pctx, producer := tracer.Start(ctx, "produce")
	producer.End()
	const upper = "4BF92F3577B34DA6A3CE929D0E0E4736"
	items := []queen.PushItem{
		{Queue: "orders", Partition: "eu", Payload: []byte(`{"do":"ok"}`), TraceID: queenotel.TraceID(pctx)},
		{Queue: "orders", Partition: "eu", Payload: []byte(`{"do":"park"}`), TraceID: upper},
		{Queue: "orders", Partition: "eu", Payload: []byte(`{"do":"reject"}`), TraceID: "order-42"},
		{Queue: "orders", Partition: "eu", Payload: []byte(`{"do":"retry"}`)},
	}
	pushed, err := b.Push(ctx, items)
	require.NoError(t, err)

	var mu sync.Mutex
	seen := map[string]trace.SpanContext{} // message id + attempt -> span context in the handler
	settled := map[string]queen.Outcome{}
	h := func(ctx context.Context, m *queen.Message) error {
		mu.Lock()
		seen[fmt.Sprint(m.ID, "/", m.DeliveryAttempt)] = trace.SpanContextFromContext(ctx)
		mu.Unlock()
		switch m.Data["do"] {
		case "park":
			return queen.Park(errors.New("unknown schema"))
		case "reject":
			return fmt.Errorf("sku: %w", queen.Reject(errors.New("no such sku")))
		case "retry":
			if m.DeliveryAttempt == 1 {
				return queen.Retry(errors.New("busy"))
			}
		}
		return nil
	}
	c := b.Queue("orders").Group("billing").SubscriptionMode(queen.SubscriptionModeAll).Each().
		Consume(ctx, queenotel.Handler(tracer, h)).
		OnSettled(func(s queen.Settlement) {
			if s.Handled {
				mu.Lock()
				settled[fmt.Sprint(s.Message.ID, "/", s.Message.DeliveryAttempt)] = s.Outcome
				mu.Unlock()
			}
		})
	require.NoError(t, c.Start(ctx))
	spanCount := func() int {
		n := 0
		for _, s := range sr.Ended() {
			if s.Name() == "process orders" {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return spanCount() == 5 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, c.Stop(ctx))
	require.Equal(t, 5, spanCount(), "one span per handled message, retry included")

	upperID, _ := queenotel.ParseTraceID(upper)
	byKey := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		if s.Name() != "process orders" {
			continue
		}
		a := attrs(s)
		byKey[fmt.Sprint(a[queenotel.AttrMessageID].AsString(), "/", a[queenotel.AttrAttempt].AsInt64())] = s
	}
	mu.Lock()
	defer mu.Unlock()
	for i, p := range pushed {
		attempts := 1
		if i == 3 {
			attempts = 2
		}
		for attempt := 1; attempt <= attempts; attempt++ {
			key := fmt.Sprint(p.MessageID, "/", attempt)
			s, ok := byKey[key]
			require.True(t, ok, "no span for %s", key)
			a := attrs(s)
			require.Equal(t, trace.SpanKindConsumer, s.SpanKind())
			require.Equal(t, "queen", a[queenotel.AttrSystem].AsString())
			require.Equal(t, "process", a[queenotel.AttrOperationType].AsString())
			require.Equal(t, "orders", a[queenotel.AttrQueue].AsString())
			require.Equal(t, "billing", a[queenotel.AttrGroup].AsString())
			require.Equal(t, "eu", a[queenotel.AttrPartition].AsString())
			require.Equal(t, p.PartitionID, a[queenotel.AttrPartitionID].AsString())
			require.Equal(t, p.Offset, a[queenotel.AttrOffset].AsInt64())
			require.Equal(t, p.TransactionID, a[queenotel.AttrTransactionID].AsString())
			// The outcome on the span is the one the loop settled with.
			require.Equal(t, string(settled[key]), a[queenotel.AttrOutcome].AsString(), key)
			// The handler ran inside the span.
			require.Equal(t, s.SpanContext(), seen[key], key)

			switch i {
			case 0: // pushed with the producer's trace id: same trace
				require.Equal(t, producer.SpanContext().TraceID(), s.SpanContext().TraceID())
				require.True(t, s.Parent().IsRemote())
				require.Equal(t, codes.Unset, s.Status().Code)
				require.Equal(t, "accepted", a[queenotel.AttrOutcome].AsString())
			case 1: // a UUID without hyphens, upper case
				require.Equal(t, upperID, s.SpanContext().TraceID())
				require.Equal(t, codes.Error, s.Status().Code)
				require.Equal(t, "unknown schema", s.Status().Description)
				require.Equal(t, "parked", a[queenotel.AttrOutcome].AsString())
			case 2: // not a UUID: a new trace, the id kept as an attribute
				require.False(t, s.Parent().IsValid())
				require.Equal(t, "order-42", a[queenotel.AttrTraceID].AsString())
				require.Equal(t, "dead_lettered", a[queenotel.AttrOutcome].AsString())
				require.Len(t, s.Events(), 1, "the error is recorded")
			case 3: // no trace id
				require.False(t, s.Parent().IsValid())
				require.NotContains(t, a, queenotel.AttrTraceID)
				require.Equal(t, map[int]string{1: "retried", 2: "accepted"}[attempt], a[queenotel.AttrOutcome].AsString())
			}
		}
	}
}

// TestHandler_Panic: a panicking handler's span ends as a failure and the
// consume loop still recovers the panic.
func TestHandler_Panic(t *testing.T) {
	tracer, sr := newTracer(t)
	b := queentest.NewBroker(t, nil)
	ctx := context.Background()
	_, err := b.Queue("orders").Push(ctx, map[string]any{"n": 1})
	require.NoError(t, err)
	var got queen.Settlement
	err = b.Queue("orders").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Limit(1).
		Consume(ctx, queenotel.Handler(tracer, func(context.Context, *queen.Message) error { panic("kaput") })).
		OnSettled(func(s queen.Settlement) { got = s }).
		Execute(ctx)
	require.NoError(t, err)
	var pe *queen.PanicError
	require.ErrorAs(t, got.Err, &pe)
	require.Equal(t, "kaput", pe.Value)

	spans := sr.Ended()
	require.Len(t, spans, 1)
	require.Equal(t, codes.Error, spans[0].Status().Code)
	require.Equal(t, "panic: kaput", spans[0].Status().Description)
	require.Equal(t, queenotel.OutcomeFailed, attrs(spans[0])[queenotel.AttrOutcome].AsString())
}

func TestHandler_Nil(t *testing.T) {
	require.Nil(t, queenotel.Handler(nil, nil))
	require.Nil(t, queenotel.BatchHandler(nil, nil))
	b := queentest.NewBroker(t, nil)
	err := b.Queue("orders").Consume(context.Background(), queenotel.Handler(nil, nil)).Execute(context.Background())
	require.ErrorContains(t, err, "must not be nil")

	// StartSpan takes a nil message and a nil tracer without panicking.
	_, span := queenotel.StartSpan(context.Background(), nil, nil)
	queenotel.EndSpan(span, nil)
}

// TestBatchHandler_OneSpanLinkingMessages: a batch gets one span in a new
// trace, linked to the trace of each message with a UUID trace id.
func TestBatchHandler_OneSpanLinkingMessages(t *testing.T) {
	tracer, sr := newTracer(t)
	b := queentest.NewBroker(t, nil)
	ctx := context.Background()
	ids := []string{"4bf92f35-77b3-4da6-a3ce-929d0e0e4736", "not-a-uuid", "0af7651916cd43dd8448eb211c80319c"}
	var items []queen.PushItem
	for _, id := range ids {
		items = append(items, queen.PushItem{Queue: "orders", Payload: []byte(`{}`), TraceID: id})
	}
	_, err := b.Push(ctx, items)
	require.NoError(t, err)
	err = b.Queue("orders").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Batch(3).Limit(3).
		ConsumeBatch(ctx, queenotel.BatchHandler(tracer, func(ctx context.Context, msgs []*queen.Message) error {
			require.Len(t, msgs, 3)
			return queen.Reject(errors.New("bad batch"))
		})).Execute(ctx)
	require.NoError(t, err)

	spans := sr.Ended()
	require.Len(t, spans, 1)
	s := spans[0]
	a := attrs(s)
	require.Equal(t, "process orders", s.Name())
	require.False(t, s.Parent().IsValid())
	require.EqualValues(t, 3, a[queenotel.AttrBatchCount].AsInt64())
	require.Equal(t, "dead_lettered", a[queenotel.AttrOutcome].AsString())
	require.Len(t, s.Links(), 2)
	t0, _ := queenotel.ParseTraceID(ids[0])
	t2, _ := queenotel.ParseTraceID(ids[2])
	require.Equal(t, t0, s.Links()[0].SpanContext.TraceID())
	require.Equal(t, t2, s.Links()[1].SpanContext.TraceID())
}

// TestEndSpan: an in-progress answer is not a failure; other errors are.
func TestEndSpan(t *testing.T) {
	tracer, sr := newTracer(t)
	_, span := queenotel.StartSpan(context.Background(), tracer, &queen.Message{Queue: "q"})
	queenotel.EndSpan(span, queen.InProgress(time.Second))
	_, span = queenotel.StartSpan(context.Background(), tracer, &queen.Message{Queue: "q"})
	queenotel.EndSpan(span, errors.New("boom"))
	spans := sr.Ended()
	require.Len(t, spans, 2)
	require.Equal(t, codes.Unset, spans[0].Status().Code)
	require.Empty(t, spans[0].Events())
	require.Equal(t, "in_progress", attrs(spans[0])[queenotel.AttrOutcome].AsString())
	require.Equal(t, codes.Error, spans[1].Status().Code)
	require.Equal(t, "boom", spans[1].Status().Description)
	require.Len(t, spans[1].Events(), 1)
}
