package history_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/history"
	"github.com/queenlite/queen/queentest"
)

// A Recorder samples a broker's counters; Series turns the samples into
// per-second rates. Here a fake clock stands in for the ticker: a program
// calls Start and Close instead of Sample.
func ExampleRecorder() {
	ctx := context.Background()
	clock := queentest.NewClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	b, err := queen.Open("", &queen.Options{InMemory: true, Clock: clock})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	rec := history.New(b, &history.Options{Interval: 10 * time.Second})
	defer rec.Close()
	_ = rec.Sample(ctx) // the baseline

	items := make([]queen.PushItem, 50)
	for i := range items {
		items[i] = queen.PushItem{Queue: "orders", Payload: json.RawMessage(`{}`)}
	}
	if _, err := b.Push(ctx, items); err != nil {
		panic(err)
	}
	clock.Advance(10 * time.Second)
	_ = rec.Sample(ctx)

	for _, bk := range rec.Series(time.Time{}, time.Time{}, time.Minute) {
		q, _ := bk.Queue("orders")
		fmt.Printf("%s: %.1f pushes/s, %d stored\n", bk.Start.Format("15:04"), bk.PerSecond(bk.Totals.Pushed), q.State.Messages)
	}
	// Output: 12:00: 5.0 pushes/s, 50 stored
}
