package queen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
)

// QueueCounters counts each queue apart, with the lag of what its pops
// delivered: here three messages wait 2 s on a fake clock before a pop.
func ExampleBroker_QueueCounters() {
	ctx := context.Background()
	clock := queentest.NewClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	b, err := queen.Open("", &queen.Options{InMemory: true, Clock: clock})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	items := []queen.PushItem{
		{Queue: "orders", Payload: json.RawMessage(`{"n":1}`)},
		{Queue: "orders", Payload: json.RawMessage(`{"n":2}`)},
		{Queue: "orders", Payload: json.RawMessage(`{"n":3}`)},
	}
	if _, err := b.Push(ctx, items); err != nil {
		panic(err)
	}
	clock.Advance(2 * time.Second)
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Batch: 10})
	if err != nil {
		panic(err)
	}
	if _, err := b.Ack(ctx, res.Messages[0], true, queen.AckOptions{}); err != nil {
		panic(err)
	}

	c := b.QueueCounters()["orders"]
	fmt.Println("pushed", c.Pushed, "in", c.PushBatches, "call; popped", c.Popped)
	fmt.Println("completed", c.Acked[queen.AckCompleted])
	fmt.Println("mean lag", c.Lag.Total/time.Duration(c.Lag.Count), "longest", c.Lag.Max)
	// Output:
	// pushed 3 in 1 call; popped 3
	// completed 1
	// mean lag 2s longest 2s
}

// WaitingPops tells how many long-polls wait on each queue.
func ExampleBroker_WaitingPops() {
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = b.Pop(ctx, queen.PopRequest{Queue: "jobs", Wait: true, Timeout: time.Minute})
	}()
	for b.WaitingPops()["jobs"] == 0 { // the pop parks at once; poll for it in an example only
		time.Sleep(time.Millisecond)
	}
	fmt.Println(b.WaitingPops())
	cancel()
	<-done
	fmt.Println(len(b.WaitingPops()))
	// Output:
	// map[jobs:1]
	// 0
}
