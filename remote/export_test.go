package remote

import (
	"context"
	"time"
)

// SetSleep makes c's retries call f with the wait they would make, and go
// on at once (ctx still ends them), so tests see a Retry-After without
// waiting it.
func SetSleep(c *Client, f func(d time.Duration)) {
	c.sleep = func(_ context.Context, d time.Duration) { f(d) }
}
