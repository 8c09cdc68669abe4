package queen_test

import (
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// guard bounds how long a test waits for an event that must come; it is a
// failure guard, never a measure.
const guard = 30 * time.Second

// openSyncPushes opens a broker on disk under SyncPushes with the given
// AckSyncDelay and a fake clock (no timer-driven maintenance writes).
func openSyncPushes(t *testing.T, delay time.Duration) *queen.Broker {
	t.Helper()
	return itest.OpenDir(t, t.TempDir(), &queen.Options{Durability: queen.SyncPushes, AckSyncDelay: delay, Clock: itest.NewClock()})
}

// popOne pushes one message to q and pops it for group g (the group's
// first pop writes its start point, fsynced).
func popOne(t *testing.T, b *queen.Broker, q string) *queen.Message {
	t.Helper()
	_, err := b.Push(bg, []queen.PushItem{{Queue: q, Payload: []byte(`1`)}})
	require.NoError(t, err)
	res, err := b.Pop(bg, queen.PopRequest{Queue: q, Group: "g", SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	return res.Messages[0]
}

// returnsBeforeSync runs call while every fsync is held and reports
// whether it returned before any fsync was attempted (true) or an fsync
// was reached first (false). The held fsync is released before it
// returns, and call's error checked.
func returnsBeforeSync(t *testing.T, b *queen.Broker, call func() error) bool {
	t.Helper()
	held, release := queen.HoldSyncsForTest(b)
	defer release()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		require.NoError(t, err)
		return true
	case <-held:
		select {
		case err := <-done:
			t.Fatalf("the call returned (err %v) while its fsync was held", err)
		default:
		}
		release()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(guard):
			t.Fatal("the call did not return after its fsync was released")
		}
		return false
	case <-time.After(guard):
		t.Fatal("the call neither returned nor reached an fsync")
		return false
	}
}

// TestSyncPushes_AcksDoNotWaitForFsyncPushesDo: under SyncPushes an ack
// returns once committed, with no fsync on its way, while a push (and an
// ack that dead-letters, which creates a record) returns only after its
// fsync.
func TestSyncPushes_AcksDoNotWaitForFsyncPushesDo(t *testing.T) {
	b := openSyncPushes(t, queen.MaxAckSyncDelay) // no background sync during the test
	m := popOne(t, b, "q")
	commits := queen.CommitsForTest(b)
	require.True(t, returnsBeforeSync(t, b, func() error {
		_, err := b.Ack(bg, m, true, queen.AckOptions{})
		return err
	}), "an ack waited for an fsync")
	require.Equal(t, commits+1, queen.CommitsForTest(b), "the ack was committed")

	syncs := queen.SyncsForTest(b)
	require.False(t, returnsBeforeSync(t, b, func() error {
		_, err := b.Push(bg, []queen.PushItem{{Queue: "q", Payload: []byte(`2`)}})
		return err
	}), "a push returned before its fsync")
	require.Equal(t, syncs+1, queen.SyncsForTest(b))

	_, err := b.ConfigureQueue(bg, "dlq", queen.QueueConfig{RetryLimit: 0})
	require.NoError(t, err)
	d := popOne(t, b, "dlq")
	require.False(t, returnsBeforeSync(t, b, func() error {
		_, err := b.Ack(bg, d, false, queen.AckOptions{Error: "boom"})
		return err
	}), "an ack that dead-letters returned before its fsync")
	letters, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "dlq"})
	require.NoError(t, err)
	require.Len(t, letters.Letters, 1)
}

// TestSyncPushes_DefaultAckWaitsForFsync: the same ack under the default
// durability waits for its fsync (the contrast the test above relies on).
func TestSyncPushes_DefaultAckWaitsForFsync(t *testing.T) {
	b := openDurable(t)
	m := popOne(t, b, "q")
	// The default opens Badger with SyncWrites: the fsync is inside the
	// commit, so the commit hook is what waits.
	held, _, release := queen.HoldCommitsForTest(b)
	defer release()
	done := make(chan error, 1)
	go func() { _, err := b.Ack(bg, m, true, queen.AckOptions{}); done <- err }()
	<-held
	select {
	case <-done:
		t.Fatal("the ack returned before its commit")
	default:
	}
	release()
	require.NoError(t, <-done)
}

// TestSyncPushes_BackgroundSyncAfterAck: an ack left unsynced is fsynced
// by the background sync, with no other write to carry it.
func TestSyncPushes_BackgroundSyncAfterAck(t *testing.T) {
	b := openSyncPushes(t, queen.MinAckSyncDelay)
	m := popOne(t, b, "q")
	syncs := queen.SyncsForTest(b)
	held, release := queen.HoldSyncsForTest(b)
	defer release()
	done := make(chan error, 1)
	go func() { _, err := b.Ack(bg, m, true, queen.AckOptions{}); done <- err }()
	select {
	case <-held:
	case <-time.After(guard):
		t.Fatal("no background fsync after an ack")
	}
	release()
	require.NoError(t, <-done)
	require.NoError(t, b.Close()) // the background sync ends before Close returns
	require.Equal(t, syncs+1, queen.SyncsForTest(b), "one background fsync, and nothing left for Close")
}

// TestSyncPushes_CloseSyncsWhatIsPending: Close fsyncs acks not yet
// synced, and syncs nothing when a push's fsync already covered them.
func TestSyncPushes_CloseSyncsWhatIsPending(t *testing.T) {
	t.Run("pending ack", func(t *testing.T) {
		b := openSyncPushes(t, queen.MaxAckSyncDelay)
		m := popOne(t, b, "q")
		_, err := b.Ack(bg, m, true, queen.AckOptions{})
		require.NoError(t, err)
		syncs := queen.SyncsForTest(b)
		require.NoError(t, b.Close())
		require.Equal(t, syncs+1, queen.SyncsForTest(b))
	})
	t.Run("covered by a push", func(t *testing.T) {
		b := openSyncPushes(t, queen.MaxAckSyncDelay)
		m := popOne(t, b, "q")
		_, err := b.Ack(bg, m, true, queen.AckOptions{})
		require.NoError(t, err)
		_, err = b.Push(bg, []queen.PushItem{{Queue: "q", Payload: []byte(`2`)}})
		require.NoError(t, err)
		syncs := queen.SyncsForTest(b)
		require.NoError(t, b.Close())
		require.Equal(t, syncs, queen.SyncsForTest(b))
	})
}

// TestSyncPushes_Options: the mode's name, and AckSyncDelay's range.
func TestSyncPushes_Options(t *testing.T) {
	require.Equal(t, "sync-pushes", queen.SyncPushes.String())
	for _, d := range []time.Duration{-time.Second, time.Microsecond, queen.MaxAckSyncDelay + 1} {
		_, err := queen.Open(t.TempDir(), &queen.Options{Durability: queen.SyncPushes, AckSyncDelay: d})
		require.ErrorIs(t, err, queen.ErrInvalidArgument, "%s", d)
	}
	for _, d := range []time.Duration{0, queen.MinAckSyncDelay, queen.MaxAckSyncDelay} {
		b, err := queen.Open(t.TempDir(), &queen.Options{Durability: queen.SyncPushes, AckSyncDelay: d})
		require.NoError(t, err, "%s", d)
		require.NoError(t, b.Close())
	}
}
