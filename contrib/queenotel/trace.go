// Package queenotel connects an embedded [queen.Broker] to OpenTelemetry,
// through the OpenTelemetry Go API only: the program chooses the SDK and
// exporters.
//
// Traces: [Handler] wraps a consume handler so that every message it
// handles gets a span, in the message's own trace. Queen's trace ids are
// UUIDs; their 16 bytes are an OpenTelemetry trace id, so a producer that
// pushes with [TraceID] of its context and a consumer that wraps its
// handler with [Handler] appear in one trace:
//
//	b.Push(ctx, []queen.PushItem{{Queue: "orders", Payload: p, TraceID: queenotel.TraceID(ctx)}})
//	...
//	b.Queue("orders").Group("billing").Consume(ctx, queenotel.Handler(tracer, handle))
//
// Metrics: [RegisterMetrics] reports the broker's running totals and the
// depth and lag of every queue and consumer group at each collection, and
// an [Observer], passed as the broker's queen.Options.Observer, records
// latency histograms.
package queenotel

import (
	"context"
	"encoding/hex"

	"github.com/queenlite/queen"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and meter used when
// none is given.
const ScopeName = "github.com/queenlite/queen/contrib/queenotel"

// Attribute keys set on the spans, and on metrics where they apply. The
// messaging.* keys are OpenTelemetry's messaging semantic conventions; the
// queen.* keys are Queen's own.
const (
	AttrSystem        = attribute.Key("messaging.system")                   // "queen"
	AttrOperationType = attribute.Key("messaging.operation.type")           // "process"
	AttrOperationName = attribute.Key("messaging.operation.name")           // "process"
	AttrQueue         = attribute.Key("messaging.destination.name")         // the queue
	AttrGroup         = attribute.Key("messaging.consumer.group.name")      // the consumer group
	AttrMessageID     = attribute.Key("messaging.message.id")               // the message's id
	AttrPartitionID   = attribute.Key("messaging.destination.partition.id") // the partition's UUID
	AttrBatchCount    = attribute.Key("messaging.batch.message_count")      // messages of a batch span
	AttrPartition     = attribute.Key("queen.partition")                    // the partition's name
	AttrOffset        = attribute.Key("queen.offset")                       // the message's offset in its partition
	AttrAttempt       = attribute.Key("queen.delivery_attempt")             // 1 on first delivery to the group
	AttrTransactionID = attribute.Key("queen.transaction_id")               // the message's transaction id
	AttrTraceID       = attribute.Key("queen.trace_id")                     // a trace id that is not a UUID, as given
	AttrOutcome       = attribute.Key("queen.outcome")                      // what the handler's result asks for
	AttrAckStatus     = attribute.Key("queen.ack.status")                   // ack status, on metrics
)

// OutcomeFailed is the queen.outcome of a handler that failed with a
// plain error (or panicked): the queue's retry budget, or the consumer's
// RetryPolicy, decides whether the message is retried or dead-lettered.
const OutcomeFailed = "failed"

// Outcome names what err, returned by a consume handler, asks the consume
// loop to do, the way the loop reads it: nil is [queen.OutcomeAccepted];
// the outermost of [queen.RetryError], [queen.RejectError],
// [queen.ParkError] and [queen.InProgressError] in err's chain picks
// retried, dead_lettered, parked or in_progress; any other error is
// [OutcomeFailed].
func Outcome(err error) string {
	if err == nil {
		return string(queen.OutcomeAccepted)
	}
	if o := outermost(err); o != "" {
		return o
	}
	return OutcomeFailed
}

// outermost walks err's tree as errors.As does (depth first, err first)
// and names the first outcome error it meets, as the consume loop does.
// (The loop's errors.As target is an unexported interface, which an As
// method of another package cannot match, so As methods are not asked.)
func outermost(err error) string {
	switch err.(type) {
	case *queen.RetryError:
		return string(queen.OutcomeRetried)
	case *queen.RejectError:
		return string(queen.OutcomeDeadLettered)
	case *queen.ParkError:
		return string(queen.OutcomeParked)
	case *queen.InProgressError:
		return string(queen.OutcomeInProgress)
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			return outermost(e)
		}
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if e == nil {
				continue
			}
			if o := outermost(e); o != "" {
				return o
			}
		}
	}
	return ""
}

// Handler wraps h so that each message it handles gets a span (see
// [StartSpan]), ended with what h returned (see [EndSpan]); h runs with
// the span in its context, so its own spans are children of it. A panic in
// h ends the span as a failure and goes on to the consume loop, which
// recovers it as usual. A nil tracer means otel.Tracer([ScopeName]) of the
// global provider; a nil h gives nil, which [queen.QueueBuilder.Consume]
// refuses as it refuses any nil handler.
func Handler(tracer trace.Tracer, h queen.Handler) queen.Handler {
	if h == nil {
		return nil
	}
	tracer = orGlobal(tracer)
	return func(ctx context.Context, m *queen.Message) (err error) {
		ctx, span := StartSpan(ctx, tracer, m)
		defer func() {
			if p := recover(); p != nil {
				EndSpan(span, &queen.PanicError{Value: p})
				panic(p)
			}
			EndSpan(span, err)
		}()
		return h(ctx, m)
	}
}

// BatchHandler wraps h with one span per call, as OpenTelemetry's
// messaging conventions do for batches: a new trace, linked to the trace
// of every message of the batch whose trace id is a UUID, with the queue,
// group and number of messages. Use [Handler] for a span in each message's
// own trace. A nil tracer and a nil h are taken as by Handler.
func BatchHandler(tracer trace.Tracer, h queen.BatchHandler) queen.BatchHandler {
	if h == nil {
		return nil
	}
	tracer = orGlobal(tracer)
	return func(ctx context.Context, msgs []*queen.Message) (err error) {
		var links []trace.Link
		queue, group := "", ""
		for _, m := range msgs {
			queue, group = m.Queue, m.ConsumerGroup
			if sc, ok := remoteParent(m.TraceID); ok {
				links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrMessageID.String(m.ID)}})
			}
		}
		ctx, span := tracer.Start(ctx, "process "+queue, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithLinks(links...), trace.WithAttributes(
				AttrSystem.String("queen"), AttrOperationType.String("process"), AttrOperationName.String("process"),
				AttrQueue.String(queue), AttrGroup.String(group), AttrBatchCount.Int(len(msgs))))
		defer func() {
			if p := recover(); p != nil {
				EndSpan(span, &queen.PanicError{Value: p})
				panic(p)
			}
			EndSpan(span, err)
		}()
		return h(ctx, msgs)
	}
}

// StartSpan starts the consumer span of handling m, named "process
// <queue>", for code that pops and acks by itself; [Handler] calls it.
// When m.TraceID is a UUID the span joins that trace: its parent is a
// remote span context with that trace id, sampled, whose span id is taken
// from the trace id's last 8 bytes (Queen keeps no span id with a
// message). Otherwise the span starts a new trace and, if m.TraceID is not
// empty, keeps it as the queen.trace_id attribute. A nil tracer means
// otel.Tracer([ScopeName]); a nil m gives a span without message
// attributes.
func StartSpan(ctx context.Context, tracer trace.Tracer, m *queen.Message) (context.Context, trace.Span) {
	tracer = orGlobal(tracer)
	if m == nil {
		return tracer.Start(ctx, "process", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer))
	}
	attrs := []attribute.KeyValue{
		AttrSystem.String("queen"), AttrOperationType.String("process"), AttrOperationName.String("process"),
		AttrQueue.String(m.Queue), AttrGroup.String(m.ConsumerGroup), AttrMessageID.String(m.ID),
		AttrPartitionID.String(m.PartitionID), AttrPartition.String(m.Partition),
		AttrOffset.Int64(m.Offset), AttrAttempt.Int(m.DeliveryAttempt), AttrTransactionID.String(m.TransactionID),
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if sc, ok := remoteParent(m.TraceID); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else {
		opts = append(opts, trace.WithNewRoot())
		if m.TraceID != "" {
			attrs = append(attrs, AttrTraceID.String(m.TraceID))
		}
	}
	opts = append(opts, trace.WithAttributes(attrs...))
	return tracer.Start(ctx, "process "+m.Queue, opts...)
}

// EndSpan sets the queen.outcome attribute from err (see [Outcome]),
// records err and marks the span failed unless err is nil or an
// in-progress answer, and ends the span.
func EndSpan(span trace.Span, err error) {
	outcome := Outcome(err)
	span.SetAttributes(AttrOutcome.String(outcome))
	if err != nil && outcome != string(queen.OutcomeInProgress) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// TraceID returns the trace id of ctx's span as a UUID string, to push
// with a message (queen.PushItem.TraceID) so its consumers' spans join
// the trace; "" when ctx carries no valid span context.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.TraceID().IsValid() {
		return ""
	}
	h := sc.TraceID().String()
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ParseTraceID reads a Queen trace id, a UUID with or without hyphens in
// either case, as an OpenTelemetry trace id. It reports false for anything
// else and for the all-zero id.
func ParseTraceID(s string) (trace.TraceID, bool) {
	var id trace.TraceID
	switch len(s) {
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return id, false
		}
		s = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	case 32:
	default:
		return id, false
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return trace.TraceID{}, false
	}
	return id, id.IsValid()
}

// remoteParent is the span context a message with trace id s is handled
// under, if s is a UUID.
func remoteParent(s string) (trace.SpanContext, bool) {
	tid, ok := ParseTraceID(s)
	if !ok {
		return trace.SpanContext{}, false
	}
	var sid trace.SpanID
	copy(sid[:], tid[8:])
	if !sid.IsValid() {
		sid[7] = 1
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}), true
}

func orGlobal(t trace.Tracer) trace.Tracer {
	if t == nil {
		return otel.Tracer(ScopeName)
	}
	return t
}
