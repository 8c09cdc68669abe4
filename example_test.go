package queen_test

import (
	"context"
	"fmt"

	"github.com/queenlite/queen"
)

// Push a message, pop it under a lease and ack it.
func Example() {
	ctx := context.Background()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	_, err = b.Push(ctx, []queen.PushItem{{Queue: "orders", Partition: "customer-42", Payload: []byte(`{"total":12}`)}})
	if err != nil {
		panic(err)
	}
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Batch: 10})
	if err != nil {
		panic(err)
	}
	for _, m := range res.Messages {
		fmt.Println(m.Partition, m.Offset, string(m.Payload), "attempt", m.DeliveryAttempt)
		if _, err := b.Ack(ctx, m, true, queen.AckOptions{}); err != nil {
			panic(err)
		}
	}
	res, _ = b.Pop(ctx, queen.PopRequest{Queue: "orders"})
	fmt.Println("left:", len(res.Messages))
	// Output:
	// customer-42 0 {"total":12} attempt 1
	// left: 0
}

// Two consumer groups read the same messages, each at its own pace.
func Example_consumerGroups() {
	ctx := context.Background()
	b, _ := queen.Open("", &queen.Options{InMemory: true})
	defer b.Close()

	for _, p := range []string{`"created"`, `"paid"`} {
		b.Push(ctx, []queen.PushItem{{Queue: "events", Payload: []byte(p)}})
	}
	for _, group := range []string{"billing", "analytics"} {
		res, _ := b.Pop(ctx, queen.PopRequest{Queue: "events", Group: group, SubscriptionMode: queen.SubscriptionModeAll, Batch: 10})
		for _, m := range res.Messages {
			fmt.Println(group, m.Offset, string(m.Payload))
		}
	}
	// Output:
	// billing 0 "created"
	// billing 1 "paid"
	// analytics 0 "created"
	// analytics 1 "paid"
}

// A message that keeps failing is dead-lettered, then replayed.
func Example_deadLetters() {
	ctx := context.Background()
	b, _ := queen.Open("", &queen.Options{InMemory: true})
	defer b.Close()

	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit, cfg.RetryDelay = 1, 0
	b.ConfigureQueue(ctx, "payments", cfg)
	b.Push(ctx, []queen.PushItem{{Queue: "payments", Payload: []byte(`{"amount":-1}`)}})

	for {
		res, _ := b.Pop(ctx, queen.PopRequest{Queue: "payments"})
		if len(res.Messages) == 0 {
			break
		}
		m := res.Messages[0]
		r, _ := b.Ack(ctx, m, false, queen.AckOptions{Error: "negative amount"})
		fmt.Println("attempt", m.DeliveryAttempt, "dead-lettered:", r.DeadLettered)
	}
	page, _ := b.DeadLetters(ctx, queen.LetterFilter{Queue: "payments"})
	dl := page.Letters[0]
	fmt.Println(dl.Error, string(dl.Payload), dl.RetryCount)

	replay, _ := b.ReplayDeadLetter(ctx, dl.ID)
	fmt.Println("replayed at offset", replay.Offset)
	// Output:
	// attempt 1 dead-lettered: false
	// attempt 2 dead-lettered: true
	// negative amount {"amount":-1} 1
	// replayed at offset 1
}
