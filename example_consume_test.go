package queen_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/queenlite/queen"
)

func ExampleQueueBuilder_Consume() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	_, err = b.Queue("orders").Push(ctx,
		map[string]any{"id": 1, "total": 30},
		map[string]any{"id": 2, "total": 12},
	)
	if err != nil {
		log.Fatal(err)
	}

	// The loop long-polls, calls the handler for each message, and acks it
	// when the handler returns nil. A worker leaves Limit out and stops by
	// cancelling ctx.
	err = b.Queue("orders").
		Group("billing").
		SubscriptionMode(queen.SubscriptionModeAll).
		Each().
		Limit(2).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			fmt.Println("billing order", msg.Data["id"], "for", msg.Data["total"])
			return nil
		}).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// billing order 1 for 30
	// billing order 2 for 12
}

// A handler picks what happens to its message by what it returns.
func Example_outcomes() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	_, err = b.Queue("orders").Push(ctx,
		map[string]any{"sku": "A-1", "schema": 1},
		map[string]any{"sku": "Z-9", "schema": 1},
		map[string]any{"sku": "A-2", "schema": 9},
		map[string]any{"sku": "A-3", "schema": 1},
	)
	if err != nil {
		log.Fatal(err)
	}
	known := map[string]bool{"A-1": true, "A-2": true, "A-3": true}
	busy := map[string]bool{"A-3": true} // somebody else holds A-3, once

	err = b.Queue("orders").Each().Limit(5).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			sku := msg.Data["sku"].(string)
			switch {
			case msg.Data["schema"].(float64) != 1:
				return queen.Park(errors.New("unknown schema")) // never readable here
			case !known[sku]:
				return queen.Reject(fmt.Errorf("no such SKU %s", sku)) // never works
			case busy[sku]:
				delete(busy, sku)
				return queen.InProgress(0) // look again, no attempt spent
			}
			return nil
		}).
		OnSettled(func(s queen.Settlement) {
			fmt.Println(s.Message.Data["sku"], s.Outcome)
		}).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}

	dead, _ := b.DeadLetters(ctx, queen.LetterFilter{Queue: "orders"})
	parked, _ := b.ParkedMessages(ctx, queen.LetterFilter{Queue: "orders"})
	fmt.Println("dead letter:", dead.Letters[0].Error)
	fmt.Println("parked:", parked.Letters[0].Error)
	// Output:
	// A-1 accepted
	// Z-9 dead_lettered
	// A-2 parked
	// A-3 in_progress
	// A-3 accepted
	// dead letter: no such SKU Z-9
	// parked: unknown schema
}

func ExampleTyped() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	type Order struct {
		ID    int     `json:"id"`
		Total float64 `json:"total"`
	}
	_, err = b.Queue("orders").Push(ctx,
		Order{ID: 1, Total: 30},
		map[string]any{"id": "one", "total": 12}, // id is not a number
		Order{ID: 3, Total: 7.5},
	)
	if err != nil {
		log.Fatal(err)
	}

	// The payload is decoded before the handler runs; one that does not
	// decode is parked and the handler never sees it.
	err = b.Queue("orders").Each().Limit(3).
		Consume(ctx, queen.Typed(func(ctx context.Context, msg *queen.Message, o Order) error {
			fmt.Printf("order %d: %.2f\n", o.ID, o.Total)
			return nil
		})).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}

	parked, _ := b.ParkedMessages(ctx, queen.LetterFilter{Queue: "orders"})
	fmt.Println("parked:", string(parked.Letters[0].Payload))
	// Output:
	// order 1: 30.00
	// order 3: 7.50
	// parked: {"id":"one","total":12}
}

func ExampleQueueBuilder_RetryPolicy() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	if _, err := b.Queue("payments").Push(ctx, map[string]any{"card": "declined"}); err != nil {
		log.Fatal(err)
	}

	// Three attempts in all; the backoff between them holds back only the
	// message's partition, and spends none of the queue's retry budget.
	policy := queen.ExponentialRetry(3, 10*time.Millisecond, time.Second)
	err = b.Queue("payments").RetryPolicy(policy).Each().Limit(3).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			return fmt.Errorf("attempt %d: card declined", msg.DeliveryAttempt)
		}).
		OnSettled(func(s queen.Settlement) {
			fmt.Println(s.Outcome, s.Delay)
		}).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}
	dead, _ := b.DeadLetters(ctx, queen.LetterFilter{Queue: "payments"})
	fmt.Println("dead letter:", dead.Letters[0].Error)
	// Output:
	// retried 10ms
	// retried 20ms
	// dead_lettered 0s
	// dead letter: attempt 3: card declined
}

func ExampleConsumer_Stop() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	if _, err := b.Queue("tasks").Push(ctx, "resize", "compress", "upload"); err != nil {
		log.Fatal(err)
	}
	started := make(chan struct{})
	c := b.Queue("tasks").Autopilot(false).Batch(3).Each().
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			fmt.Println("working on", string(msg.Payload))
			close(started)
			<-queen.Stopping(ctx) // a long task notices the stop and wraps up
			return nil
		}).
		OnSettled(func(s queen.Settlement) {
			fmt.Println(string(s.Message.Payload), s.Outcome)
		})
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-started

	// Stop takes nothing new, waits for the running handler (up to the
	// drain timeout), and gives back what was not started: here the two
	// tasks queued behind it in its partition.
	if err := c.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// working on "resize"
	// "resize" accepted
	// "compress" released
	// "upload" released
}

// One context governs a consume loop's whole life: here a signal handler's
// ctx would be cancelled by a deploy. Its end stops the loop cleanly, and
// its values reach the handlers.
func ExampleQueueBuilder_Consume_oneContext() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	type tenantKey struct{}
	ctx, stop := context.WithCancel(context.WithValue(context.Background(), tenantKey{}, "acme"))
	defer stop()

	if _, err := b.Queue("tasks").Push(ctx, "resize", "compress", "upload"); err != nil {
		log.Fatal(err)
	}
	err = b.Queue("tasks").Each().
		Consume(ctx, func(hctx context.Context, msg *queen.Message) error {
			var task string
			if err := json.Unmarshal(msg.Payload, &task); err != nil {
				return queen.Reject(err)
			}
			fmt.Println(hctx.Value(tenantKey{}), task)
			if task == "compress" {
				stop() // as a SIGTERM would: no new message, this one finishes
			}
			return nil
		}).
		Execute(ctx) // the same ctx: it is all the loop needs
	fmt.Println("stopped:", err)
	// Output:
	// acme resize
	// acme compress
	// stopped: <nil>
}

// Durations take a time.Duration; the millisecond and second forms of
// Queen's clients (TimeoutMillis, LeaseSeconds, RenewLease(true, ms),
// IdleMillis) set the same options.
func ExampleQueueBuilder_RenewLeaseEvery() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Queue("reports").Push(ctx, map[string]any{"id": 1}, map[string]any{"id": 2}); err != nil {
		log.Fatal(err)
	}

	err = b.Queue("reports").
		Lease(30*time.Second).           // each pop leases its messages for 30 s...
		RenewLeaseEvery(10*time.Second). // ...renewed every 10 s while a handler runs
		Timeout(5*time.Second).          // one waiting pop waits at most 5 s
		Idle(20*time.Millisecond).       // stop once there is nothing to do
		Each().
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			fmt.Println("report", msg.Data["id"])
			return nil
		}).
		Execute(ctx)
	fmt.Println("idle, stopped:", err)
	// Output:
	// report 1
	// report 2
	// idle, stopped: <nil>
}

// A Payload gives a message its own transaction id, which makes the push
// idempotent, and a trace id.
func ExampleQueueBuilder_Push_payload() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	order := map[string]any{"id": 9137, "total": 30}
	for range 2 { // a retried request pushes the same order twice
		res, err := b.Queue("orders").Push(ctx, queen.Payload{
			Data:          order,
			TransactionID: "order-9137-created",
			TraceID:       "0190b5a4-7c1e-7d3a-9f00-000000000001",
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res[0].Status)
	}
	msgs, err := b.Queue("orders").Batch(10).Wait(false).Pop(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(msgs), msgs[0].TransactionID, msgs[0].TraceID)
	// Output:
	// queued
	// duplicate
	// 1 order-9137-created 0190b5a4-7c1e-7d3a-9f00-000000000001
}
