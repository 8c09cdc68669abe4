package queen_test

import (
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// stillClock is a fake clock that does not tell when it moves (it is not
// a queen.SignalingClock): the broker's timers then look at it only once
// a second of real time, so what a test calls right after moving it is
// what meets the new instant first, not the broker's expiry timer.
type stillClock struct{ c *queentest.Clock }

func (s stillClock) Now() time.Time { return s.c.Now() }

// A lease holds until, not through, its expiry instant: renewed one
// microsecond before it, it runs d from then; at the very instant it
// expires, RenewLease and ExtendLease answer ErrLeaseExpired, and the
// message is delivered again (issue 27).
func TestTrust27_LeaseIsNotRenewedAtItsExpiryInstant(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: stillClock{clock}})
	pushOne(t, b, "q", "p", "", `1`)
	const lease = 10 * time.Second
	pr := pop(t, b, queen.PopRequest{Queue: "q", Partition: "p", Lease: lease})
	require.Len(t, pr.Messages, 1)
	id := pr.Messages[0].LeaseID
	require.NotEmpty(t, id)

	clock.Advance(lease - time.Microsecond)
	r, err := b.ExtendLease(bg, id, lease)
	require.NoError(t, err, "one microsecond before its expiry a lease is renewed")
	require.Equal(t, clock.Now().Add(lease), r.ExpiresAt, "renewed to d from now")

	clock.Advance(lease) // exactly the renewed expiry
	_, err = b.RenewLease(bg, id, lease)
	require.ErrorIs(t, err, queen.ErrLeaseExpired, "at its expiry instant a lease is not renewed")
	_, err = b.ExtendLease(bg, id, lease)
	require.ErrorIs(t, err, queen.ErrLeaseExpired)
	again := pop(t, b, queen.PopRequest{Queue: "q", Partition: "p", Lease: lease})
	require.Len(t, again.Messages, 1, "the expired lease's message is delivered again")
	require.Equal(t, pr.Messages[0].TransactionID, again.Messages[0].TransactionID)

	// The same instant, met first by ExtendLease.
	clock.Advance(lease)
	_, err = b.ExtendLease(bg, again.Messages[0].LeaseID, lease)
	require.ErrorIs(t, err, queen.ErrLeaseExpired, "ExtendLease at the expiry instant")
}

// An ack at the very instant its lease expires is refused as the renewal
// is: the message is the next lease's.
func TestTrust27_AckAtTheExpiryInstantIsRefused(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: stillClock{clock}})
	pushOne(t, b, "q", "p", "", `1`)
	const lease = 10 * time.Second
	pr := pop(t, b, queen.PopRequest{Queue: "q", Partition: "p", Lease: lease})
	require.Len(t, pr.Messages, 1)
	clock.Advance(lease)
	res, err := b.AckBatch(bg, ackItems(pr.Messages, queen.AckCompleted))
	require.NoError(t, err)
	require.False(t, res[0].Success)
	require.ErrorIs(t, res[0].Err, queen.ErrLeaseExpired)
	require.Len(t, pop(t, b, queen.PopRequest{Queue: "q", Partition: "p"}).Messages, 1, "not settled: delivered again")
}
