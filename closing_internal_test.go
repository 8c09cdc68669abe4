package queen

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClose_NeverClosesStorageUnderACall: a call still running when Close's
// wait for calls runs out keeps storage open; Close says so, refuses new
// calls, and storage is closed as soon as that call returns.
func TestClose_NeverClosesStorageUnderACall(t *testing.T) {
	t.Parallel()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	b.callWait = 20 * time.Millisecond
	require.NoError(t, b.enter()) // a call that outlasts the bound
	err = b.Close()
	require.ErrorContains(t, err, "1 call(s) still running")
	require.False(t, b.db.IsClosed(), "storage closed under a running call")
	require.ErrorIs(t, b.Ping(context.Background()), ErrClosed)
	b.leave()
	require.Eventually(t, b.db.IsClosed, 10*time.Second, time.Millisecond, "storage closed once the call returned")
	require.NoError(t, b.Close(), "Close is idempotent")
}
