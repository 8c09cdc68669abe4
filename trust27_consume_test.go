package queen_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// Issue 27: a drain's list of unsettled messages is exactly what comes
// back, the idle check reads the last activity under its lock, and the
// lane's acks, self-settled failures and lost leases behave as documented.

// Defect 4: a loop with Concurrency ≥ 2, Wait(false) and Idle read its
// last-activity time without its lock after an empty pop while another
// fetcher or a worker wrote it. The race detector (go test -race) reports
// it; without -race the test only checks that every message is handled.
func TestTrust27_IdleLoopReadsLastActivityUnderLock(t *testing.T) {
	t.Parallel()
	b, _ := clocked(t, nil)
	got := make(chan int64, 1)
	c := b.Queue("idle").Concurrency(2).Wait(false).Idle(time.Hour).
		Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
			got <- msg.Offset
			return nil
		})
	require.NoError(t, c.Start(context.Background()))
	// Each message is popped by one fetcher while the other sleeps
	// after an empty pop, having read the last activity.
	for i := range 12 {
		pushTo(t, b, "idle", fmt.Sprintf("p%d", i), numbered(1)...)
		require.EqualValues(t, 0, recv(t, got))
	}
	require.NoError(t, c.Stop(context.Background()))
}
