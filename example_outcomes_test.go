package queen_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/queenlite/queen"
)

// Without a RetryPolicy, Retry is the queue's failed ack: each one spends
// one of RetryLimit (here 1) and waits RetryDelay (here none); then the
// message is dead-lettered.
func ExampleRetry() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit, cfg.RetryDelay = 1, 0
	if _, err := b.ConfigureQueue(ctx, "orders", cfg); err != nil {
		log.Fatal(err)
	}
	if _, err := b.Queue("orders").Push(ctx, map[string]any{"id": 1}); err != nil {
		log.Fatal(err)
	}
	err = b.Queue("orders").Each().Limit(2).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			return queen.Retry(errors.New("warehouse busy"))
		}).
		OnSettled(func(s queen.Settlement) {
			fmt.Printf("attempt %d: %s (ack %s)\n", s.Message.DeliveryAttempt, s.Outcome, s.Status)
		}).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// attempt 1: retried (ack failed)
	// attempt 2: dead_lettered (ack failed)
}

// Reject dead-letters the message at once, whatever budget is left.
func ExampleReject() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Queue("orders").Push(ctx, map[string]any{"sku": "X-0"}); err != nil {
		log.Fatal(err)
	}
	err = b.Queue("orders").Each().Limit(1).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			return queen.Reject(fmt.Errorf("no such SKU %v", msg.Data["sku"]))
		}).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}
	dl, err := b.DeadLetters(ctx, queen.LetterFilter{Queue: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(dl.Letters), "dead letter:", dl.Letters[0].Error, "- retries spent:", dl.Letters[0].RetryCount)
	// Output:
	// 1 dead letter: no such SKU X-0 - retries spent: 0
}

// Fatal is Reject under another name.
func ExampleFatal() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Queue("orders").Push(ctx, map[string]any{"id": 1}); err != nil {
		log.Fatal(err)
	}
	err = b.Queue("orders").Each().Limit(1).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			return queen.Fatal(errors.New("order belongs to a closed account"))
		}).
		OnSettled(func(s queen.Settlement) { fmt.Println(s.Outcome, "with ack", s.Status) }).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// dead_lettered with ack dlq
}

// Park keeps a message nothing here can read apart from the dead letters.
func ExamplePark() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Queue("orders").Push(ctx, map[string]any{"schema": 9}); err != nil {
		log.Fatal(err)
	}
	err = b.Queue("orders").Each().Limit(1).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			return queen.Park(fmt.Errorf("schema %v is unknown here", msg.Data["schema"]))
		}).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}
	pk, err := b.ParkedMessages(ctx, queen.LetterFilter{Queue: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(pk.Letters), "parked:", pk.Letters[0].Error)
	// Output:
	// 1 parked: schema 9 is unknown here
}

// InProgress puts the message back for later without spending the retry
// budget; its next delivery has the next DeliveryAttempt.
func ExampleInProgress() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Queue("orders").Push(ctx, map[string]any{"id": 1}); err != nil {
		log.Fatal(err)
	}
	err = b.Queue("orders").Each().Limit(2).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			if msg.DeliveryAttempt == 1 {
				return queen.InProgress(0) // another worker holds it: look again
			}
			return nil
		}).
		OnSettled(func(s queen.Settlement) { fmt.Printf("attempt %d: %s\n", s.Message.DeliveryAttempt, s.Outcome) }).
		Execute(ctx)
	if err != nil {
		log.Fatal(err)
	}
	st, err := b.QueueStats(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retries spent:", st.Partitions[0].Cursors[0].Retries)
	// Output:
	// attempt 1: in_progress
	// attempt 2: accepted
	// retries spent: 0
}
