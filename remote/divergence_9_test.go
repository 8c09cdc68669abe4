package remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// Divergence 9, found by TestDifferential: remote.Client.ConfigureQueue
// sends durations in whole seconds (documented), so a QueueConfig.LeaseTime
// below one second goes out as leaseTime 0, which the server reads as "no
// lease time": the queue got the default 300 s. A Broker refuses that
// LeaseTime with an *ArgumentError (docs/limits.md: "QueueConfig.LeaseTime
// / leaseTime: 1 s..365 days, Go: refused"); remote.Client now refuses it
// too, before sending.
func TestDivergence9_ConfigureLeaseTimeBelowASecond(t *testing.T) {
	ctx := context.Background()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
	cfg := queen.QueueConfig{LeaseTime: 100 * time.Millisecond}
	_, berr := b.ConfigureQueue(ctx, "q", cfg)
	require.ErrorIs(t, berr, queen.ErrInvalidArgument, "Broker")
	info, err := c.ConfigureQueue(ctx, "q", cfg)
	if err == nil {
		t.Logf("remote.Client configured a lease of %v", info.Config.LeaseTime)
	}
	require.ErrorIs(t, err, queen.ErrInvalidArgument, "remote.Client")
	require.Equal(t, berr.Error(), err.Error())
}
