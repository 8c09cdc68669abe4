// Command mkfixture writes the deterministic store of queen's format
// fixtures (testdata/stores) with the release of the tree it runs in:
// copied into cmd/mkfixture of a worktree of an earlier commit and run
// there with "go run ./cmd/mkfixture DIR", then DIR archived with tar czf.
// The go tool ignores it here (testdata).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
)

type fixed struct{}

func (fixed) Now() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func main() {
	ctx := context.Background()
	dir := os.Args[1]
	o := &queen.Options{Clock: fixed{}, MaintenanceInterval: time.Hour}
	bo, err := queen.BadgerOptions(dir, o)
	must(err)
	db, err := badger.Open(bo.WithValueLogFileSize(1 << 20).WithMemTableSize(1 << 20).WithNumMemtables(1))
	must(err)
	b, err := queen.OpenDB(db, o)
	must(err)
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit, cfg.LeaseTime, cfg.Priority, cfg.DeadLetterQueue = 3, 40*time.Second, 2, true
	_, err = b.ConfigureQueue(ctx, "orders", cfg)
	must(err)
	cfg = queen.DefaultQueueConfig()
	cfg.MaxSize, cfg.Retention = 100, 72*time.Hour
	_, err = b.ConfigureQueue(ctx, "events", cfg)
	must(err)
	var items []queen.PushItem
	for i := range 5 {
		for _, p := range []string{"eu", "us"} {
			items = append(items, queen.PushItem{Queue: "orders", Partition: p, TransactionID: fmt.Sprintf("o-%s-%d", p, i), Payload: json.RawMessage(fmt.Sprintf(`{"order":%d,"region":%q}`, i, p))})
		}
	}
	for i := range 3 {
		items = append(items, queen.PushItem{Queue: "events", TransactionID: fmt.Sprintf("e-%d", i), Payload: json.RawMessage(fmt.Sprintf(`{"event":%d}`, i))})
	}
	_, err = b.Push(ctx, items)
	must(err)
	ack := func(req queen.PopRequest, st queen.AckStatus) {
		r, err := b.Pop(ctx, req)
		must(err)
		if len(r.Messages) == 0 {
			log.Fatalf("pop %+v: nothing", req)
		}
		for _, m := range r.Messages {
			g := m.ConsumerGroup
			if g == queen.QueueModeGroup {
				g = ""
			}
			_, err := b.AckBatch(ctx, []queen.AckItem{{TransactionID: m.TransactionID, PartitionID: m.PartitionID, Group: g, Status: st, Error: "fixture " + string(st)}})
			must(err)
		}
	}
	ack(queen.PopRequest{Queue: "orders", Partition: "eu", Group: "billing", Batch: 2, SubscriptionMode: queen.SubscriptionModeAll}, queen.AckCompleted)
	ack(queen.PopRequest{Queue: "orders", Partition: "us", Batch: 1}, queen.AckDLQ)
	ack(queen.PopRequest{Queue: "orders", Partition: "us", Batch: 1}, queen.AckPark)
	must(b.Close())
	must(db.Close())
}
