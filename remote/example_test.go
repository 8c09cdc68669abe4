package remote_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/remote"
)

// The same code in process and over HTTP: work takes a queen.Client.
func ExampleDial() {
	// A server, as cmd/queen runs one (here in memory, on a test server).
	b, _ := queen.Open("", &queen.Options{InMemory: true})
	defer b.Close()
	srv := httptest.NewServer(httpapi.New(b, nil))
	defer srv.Close()

	work := func(c queen.Client) {
		ctx := context.Background()
		_, _ = c.Queue("orders").Push(ctx, map[string]any{"id": 1})
		err := c.Queue("orders").Limit(1).Consume(ctx, func(ctx context.Context, m *queen.Message) error {
			fmt.Println("order", m.Data["id"])
			return nil
		}).Execute(ctx)
		fmt.Println("err:", err)
	}

	work(b) // in process

	c, err := remote.Dial(srv.URL, nil) // the one line that differs
	if err != nil {
		panic(err)
	}
	defer c.Close()
	work(c)

	// Output:
	// order 1
	// err: <nil>
	// order 1
	// err: <nil>
}
