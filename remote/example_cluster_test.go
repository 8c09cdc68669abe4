package remote_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/remote"
)

// Several servers over one storage, as a Queen deployment is: here three
// httpapi fronts of one broker, given to Dial as a QUEEN_URL would be.
func ExampleDial_severalServers() {
	b, _ := queen.Open("", &queen.Options{InMemory: true})
	defer b.Close()
	var urls []string
	for range 3 {
		srv := httptest.NewServer(httpapi.New(b, nil))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}

	c, err := remote.Dial(strings.Join(urls, ","), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	for i := range 3 {
		_, _ = c.Queue("orders").Push(ctx, map[string]any{"id": i})
	}
	err = c.Queue("orders").Limit(3).Consume(ctx, func(ctx context.Context, m *queen.Message) error {
		fmt.Println("order", m.Data["id"])
		return nil
	}).Execute(ctx)
	fmt.Println("err:", err)
	fmt.Println("servers:", len(c.Servers()), "healthy:", c.Servers()[0].Healthy)

	// Output:
	// order 0
	// order 1
	// order 2
	// err: <nil>
	// servers: 3 healthy: true
}

// Where pops of a queue, partition and group go, as Queen's other SDKs
// compute it: the same servers give the same answers in any of them.
func ExampleClient_ServerFor() {
	c, err := remote.Dial("http://queen-1:6632,http://queen-2:6632,http://queen-3:6632", nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	for _, key := range []string{"orders:*:__QUEUE_MODE__", "orders:*:billing", "emails:*:__QUEUE_MODE__"} {
		fmt.Println(key, "→", c.ServerFor(key))
	}

	// Output:
	// orders:*:__QUEUE_MODE__ → http://queen-3:6632
	// orders:*:billing → http://queen-2:6632
	// emails:*:__QUEUE_MODE__ → http://queen-1:6632
}
