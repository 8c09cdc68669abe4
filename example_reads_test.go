package queen_test

import (
	"context"
	"fmt"
	"time"

	"github.com/queenlite/queen"
)

// Read two partitions by offset in one call: no group, no lease, no ack.
func ExampleBroker_FetchPartitions() {
	ctx := context.Background()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	for _, it := range []queen.PushItem{
		{Queue: "events", Partition: "customer-42", Payload: []byte(`"signed up"`)},
		{Queue: "events", Partition: "customer-42", Payload: []byte(`"ordered"`)},
		{Queue: "events", Partition: "customer-7", Payload: []byte(`"signed up"`)},
	} {
		if _, err := b.Push(ctx, []queen.PushItem{it}); err != nil {
			panic(err)
		}
	}
	reads, err := b.FetchPartitions(ctx, queen.FetchRequest{Partitions: []queen.FetchPartition{
		{Queue: "events", Partition: "customer-42", Offset: 1},
		{Queue: "events", Partition: "customer-7", Offset: 0},
	}})
	if err != nil {
		panic(err)
	}
	for _, r := range reads {
		for _, rec := range r.Records {
			fmt.Println(r.Partition, rec.Offset, string(rec.Payload))
		}
		fmt.Println(r.Partition, "next push gets offset", r.HighWatermark)
	}
	// Output:
	// customer-42 1 "ordered"
	// customer-42 next push gets offset 2
	// customer-7 0 "signed up"
	// customer-7 next push gets offset 1
}

// Find where a partition's messages of a time begin.
func ExampleBroker_OffsetForTime() {
	ctx := context.Background()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	start := b.Now()
	if _, err := b.Push(ctx, []queen.PushItem{{Queue: "audit", Payload: []byte(`1`)}, {Queue: "audit", Payload: []byte(`2`)}}); err != nil {
		panic(err)
	}
	found, err := b.OffsetForTime(ctx, "audit", "", start.Add(-time.Hour))
	if err != nil {
		panic(err)
	}
	fmt.Println(found.Found, found.Offset, found.HighWatermark)
	later, _ := b.OffsetForTime(ctx, "audit", "", start.Add(time.Hour))
	fmt.Println(later.Found, "start at", later.HighWatermark)
	// Output:
	// true 0 2
	// false start at 2
}

// Export a group's position with a note, and set it again.
func ExampleBroker_SetPosition() {
	ctx := context.Background()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	for i := range 5 {
		if _, err := b.Push(ctx, []queen.PushItem{{Queue: "orders", Payload: fmt.Appendf(nil, "%d", i)}}); err != nil {
			panic(err)
		}
	}
	// billing has settled offsets 0 to 2: it reads 3 next.
	err = b.SetPosition(ctx, queen.Position{Group: "billing", Queue: "orders", Offset: 3, Metadata: "imported from kafka"})
	if err != nil {
		panic(err)
	}
	pos, err := b.GroupPositions(ctx, "billing", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(pos[0].Partition, pos[0].Offset, pos[0].Metadata)
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Group: "billing", Batch: 10})
	if err != nil {
		panic(err)
	}
	fmt.Println("delivered from", res.Messages[0].Offset, "count", len(res.Messages))
	// Output:
	// Default 3 imported from kafka
	// delivered from 3 count 2
}

// Set a group's position in the same transaction as an ack and a push:
// all or nothing.
func ExampleTxOp_position() {
	ctx := context.Background()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if _, err := b.Push(ctx, []queen.PushItem{{Queue: "in", Payload: []byte(`1`)}}); err != nil {
		panic(err)
	}
	_, err = b.ExecTransaction(ctx, []queen.TxOp{
		{Push: &queen.PushItem{Queue: "out", Payload: []byte(`"done"`)}},
		{Position: &queen.Position{Group: "mirror", Queue: "in", Offset: 1, Metadata: "sink@1"}},
	})
	if err != nil {
		panic(err)
	}
	pos, _ := b.GroupPositions(ctx, "mirror", []queen.PartitionRef{{Queue: "in"}})
	fmt.Println(pos[0].Offset, pos[0].Metadata)
	_, err = b.ExecTransaction(ctx, []queen.TxOp{
		{Push: &queen.PushItem{Queue: "out", Payload: []byte(`"again"`)}},
		{Position: &queen.Position{Group: "mirror", Queue: "in", Offset: 9}}, // past the end: refused
	})
	fmt.Println(err != nil)
	out, _ := b.Fetch(ctx, "out", "", 0, 10)
	fmt.Println("out holds", len(out.Records))
	// Output:
	// 1 sink@1
	// true
	// out holds 1
}

// Renew a lease and see how many partitions it held.
func ExampleBroker_RenewLease() {
	ctx := context.Background()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	for _, p := range []string{"a", "b"} {
		if _, err := b.Push(ctx, []queen.PushItem{{Queue: "jobs", Partition: p, Payload: []byte(`1`)}}); err != nil {
			panic(err)
		}
	}
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "jobs", Partitions: 2, Batch: 10})
	if err != nil {
		panic(err)
	}
	r, err := b.RenewLease(ctx, res.LeaseID, 5*time.Minute)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Partitions, r.ExpiresAt.Sub(b.Now()) > 4*time.Minute)
	// Output:
	// 2 true
}
