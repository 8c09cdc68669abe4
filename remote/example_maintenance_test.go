package remote_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/remote"
)

// Maintenance mode switched over HTTP, as queen ctl maintenance does.
func ExampleClient_SetMaintenanceMode() {
	b, _ := queen.Open("", &queen.Options{InMemory: true})
	defer b.Close()
	srv := httptest.NewServer(httpapi.New(b, nil))
	defer srv.Close()
	c, _ := remote.Dial(srv.URL, nil)
	defer c.Close()

	ctx := context.Background()
	if err := c.SetMaintenanceMode(ctx, true); err != nil {
		panic(err)
	}
	on, _ := c.MaintenanceMode(ctx)
	fmt.Println("maintenance:", on, "- the broker's:", b.MaintenanceMode())
	_ = c.SetMaintenanceMode(ctx, false)
	on, _ = c.MaintenanceMode(ctx)
	fmt.Println("maintenance:", on)
	// Output:
	// maintenance: true - the broker's: true
	// maintenance: false
}
