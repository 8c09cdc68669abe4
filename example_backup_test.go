package queen_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/queenlite/queen"
)

// Back up a broker while it runs, with a full backup and an increment,
// restore both into a new directory and open the result.
func ExampleBroker_Backup() {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "queen-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)

	b, err := queen.Open(filepath.Join(tmp, "live"), nil)
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if _, err := b.Push(ctx, []queen.PushItem{{Queue: "orders", Payload: []byte(`{"id":1}`)}}); err != nil {
		panic(err)
	}
	var full, inc bytes.Buffer // files, in real life
	next, err := b.Backup(ctx, &full, 0)
	if err != nil {
		panic(err)
	}
	if _, err := b.Push(ctx, []queen.PushItem{{Queue: "orders", Payload: []byte(`{"id":2}`)}}); err != nil {
		panic(err)
	}
	if _, err := b.Backup(ctx, &inc, next); err != nil {
		panic(err)
	}

	dir := filepath.Join(tmp, "restored")
	if err := queen.Restore(ctx, dir, nil, &full, &inc); err != nil {
		panic(err)
	}
	r, err := queen.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	res, err := r.Fetch(ctx, "orders", "", 0, 10)
	if err != nil {
		panic(err)
	}
	for _, rec := range res.Records {
		fmt.Println(rec.Offset, string(rec.Payload))
	}
	// Output:
	// 0 {"id":1}
	// 1 {"id":2}
}

// Look at a closed store without changing it: its format and its queues.
func ExampleInspect() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "queen-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	b, err := queen.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	if _, err := b.Push(ctx, []queen.PushItem{{Queue: "orders", Partition: "eu", Payload: []byte(`{"id":1}`)}}); err != nil {
		panic(err)
	}
	if err := b.Close(); err != nil {
		panic(err)
	}

	rep, err := queen.Inspect(ctx, dir, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("format", rep.Format, "upgrade", rep.Upgrade)
	for _, q := range rep.Queues {
		fmt.Println(q.Name, q.Partitions, "partitions", q.Messages, "messages", q.ApproxBytes > 0)
	}
	// Output:
	// format 1 upgrade false
	// orders 1 partitions 1 messages true
}
