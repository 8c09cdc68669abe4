package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/history"
	"github.com/queenlite/queen/internal/queentest"
	pub "github.com/queenlite/queen/queentest"
)

// The seeded broker every test starts from: a few queues with
// partitions, consumer groups with lag and messages in flight, dead
// letters and parked messages (one with a payload of HTML), traces, and a
// queue whose name is a script tag. The names and counts are the
// constants below, so the tests can look for them on the pages.

const (
	qOrders   = "orders"
	qPayments = "payments"
	qEvents   = "events" // an hour of traffic for the charts
	// qScript is a queue name a careless page would run.
	qScript = `<script>window.__xss="queue"</script>`

	gBilling = "billing" // reads orders: acked 2 of eu, lags on the rest
	gAudit   = "audit"   // reads orders: 1 message in flight
	gCharger = "charger" // reads payments: dead-letters 3, parks 2
	gIndexer = "indexer" // reads events as they come

	traceName = "checkout-42"

	// Orders' messages: 3 in eu and 2 in us at the start, 3 more in eu an
	// hour later (the seek-to-time test seeks between them).
	ordersEarlyEU, ordersEarlyUS, ordersLateEU = 3, 2, 3

	deadCount   = 3
	parkedCount = 2
)

// htmlPayload is a payload whose text is markup: a page that writes it as
// HTML creates an image whose error handler sets window.__xss and opens an
// alert.
const htmlPayload = `{"note":"<img src=x onerror=window.__xss=1;alert(1)>","amount":7}`

type seeded struct {
	b     *queen.Broker
	clock *pub.Clock
	start time.Time // the clock at the first push
	late  time.Time // the clock at orders' later pushes

	history *history.Recorder // sampled once a minute of the clock

	dead   []queen.DeadLetter // newest first, as the broker lists them
	parked []queen.DeadLetter
	traced *queen.Message // the orders message with traces
}

// seed opens an in-memory broker on a fake clock and fills it.
func seed(t *testing.T) *seeded {
	t.Helper()
	ctx := context.Background()
	clock := queentest.NewClock()
	b := pub.NewBroker(t, &queen.Options{Clock: clock})
	s := &seeded{b: b, clock: clock, start: clock.Now()}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	_, err := b.ConfigureQueue(ctx, qOrders, queen.QueueConfig{LeaseTime: 5 * time.Minute, RetryLimit: 3})
	must(err)
	_, err = b.ConfigureQueue(ctx, qPayments, queen.QueueConfig{LeaseTime: time.Minute, RetryLimit: 1})
	must(err)

	push := func(queue, part string, payloads ...string) {
		t.Helper()
		items := make([]queen.PushItem, len(payloads))
		for i, p := range payloads {
			items[i] = queen.PushItem{Queue: queue, Partition: part, Payload: json.RawMessage(p)}
		}
		res, err := b.Push(ctx, items)
		must(err)
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("push %s/%s: %v", queue, part, r.Err)
			}
		}
	}
	numbered := func(prefix string, from, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf(`{"order":"%s-%d"}`, prefix, from+i)
		}
		return out
	}

	push(qOrders, "eu", numbered("eu", 1, ordersEarlyEU)...)
	push(qOrders, "us", numbered("us", 1, ordersEarlyUS)...)
	push(qScript, "", `{"hello":"world"}`)
	push(qPayments, "cards", htmlPayload, `{"amount":1}`, `{"amount":2}`, `{"amount":3}`, `{"amount":4}`)

	// billing settles the first two of eu; its next pop is eu's third.
	res, err := b.Pop(ctx, queen.PopRequest{Queue: qOrders, Partition: "eu", Group: gBilling, Batch: 2, SubscriptionMode: queen.SubscriptionModeAll})
	must(err)
	if len(res.Messages) != 2 {
		t.Fatalf("billing popped %d messages, want 2", len(res.Messages))
	}
	for _, m := range res.Messages {
		_, err := b.Ack(ctx, m, true, queen.AckOptions{})
		must(err)
	}
	s.traced = res.Messages[0]
	for i, step := range []string{"reserved stock", "charged card"} {
		_, err := b.RecordTrace(ctx, queen.TraceEvent{
			PartitionID: s.traced.PartitionID, TransactionID: s.traced.TransactionID,
			ConsumerGroup: gBilling, EventType: "info", Names: []string{traceName},
			Data: json.RawMessage(fmt.Sprintf(`{"step":%q,"n":%d}`, step, i+1)), WorkerID: "worker-1",
		})
		must(err)
	}

	// charger gives up on the first three payments (the HTML one first)
	// and parks the next two.
	res, err = b.Pop(ctx, queen.PopRequest{Queue: qPayments, Group: gCharger, Batch: deadCount + parkedCount, SubscriptionMode: queen.SubscriptionModeAll})
	must(err)
	if len(res.Messages) != deadCount+parkedCount {
		t.Fatalf("charger popped %d messages, want %d", len(res.Messages), deadCount+parkedCount)
	}
	var items []queen.AckItem
	for i, m := range res.Messages {
		st, text := queen.AckDLQ, fmt.Sprintf("card declined #%d", i+1)
		if i >= deadCount {
			st, text = queen.AckPark, fmt.Sprintf("no handler for kind #%d", i+1)
		}
		items = append(items, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: gCharger, Status: st, Error: text})
	}
	acks, err := b.AckBatch(ctx, items)
	must(err)
	for _, a := range acks {
		if !a.Success {
			t.Fatalf("charger ack: %v", a.Err)
		}
	}

	// An hour of traffic on events, a minute at a time, sampled by the
	// history recorder the charts read.
	s.history = history.New(b, &history.Options{Interval: time.Minute, Window: 2 * time.Hour})
	must(s.history.Sample(ctx))
	for minute := 0; minute < 60; minute++ {
		clock.Advance(time.Minute)
		n := 5 + (minute*7)%23
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf(`{"event":%d}`, minute*100+i)
		}
		push(qEvents, fmt.Sprintf("p%d", minute%4), items...)
		// The indexer takes at most 15 a minute and acks all but one in
		// ten (which go back for a retry), so it lags behind the bursts.
		res, err := b.Pop(ctx, queen.PopRequest{Queue: qEvents, Group: gIndexer, Batch: 15, Partitions: 4, SubscriptionMode: queen.SubscriptionModeAll})
		must(err)
		var acks []queen.AckItem
		for i, m := range res.Messages {
			st := queen.AckCompleted
			if i%10 == 9 {
				st = queen.AckFailed
			}
			acks = append(acks, queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: gIndexer, Status: st})
		}
		if len(acks) > 0 {
			_, err = b.AckBatch(ctx, acks)
			must(err)
		}
		must(s.history.Sample(ctx))
	}
	s.late = clock.Now()
	push(qOrders, "eu", numbered("eu", ordersEarlyEU+1, ordersLateEU)...)
	clock.Advance(time.Minute)
	must(s.history.Sample(ctx)) // the later pushes in the charts' last minute

	// audit holds one message of us under a lease (taken after the clock
	// moved, so it is live).
	res, err = b.Pop(ctx, queen.PopRequest{Queue: qOrders, Partition: "us", Group: gAudit, Batch: 1, SubscriptionMode: queen.SubscriptionModeAll})
	must(err)
	if len(res.Messages) != 1 {
		t.Fatalf("audit popped %d messages, want 1", len(res.Messages))
	}

	page, err := b.DeadLetters(ctx, queen.LetterFilter{Queue: qPayments})
	must(err)
	s.dead = page.Letters
	page, err = b.ParkedMessages(ctx, queen.LetterFilter{Queue: qPayments})
	must(err)
	s.parked = page.Letters
	if len(s.dead) != deadCount || len(s.parked) != parkedCount {
		t.Fatalf("seeded %d dead letters and %d parked, want %d and %d", len(s.dead), len(s.parked), deadCount, parkedCount)
	}
	return s
}
