package queen_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// An ack being written when the drain runs out of time lands,
// and its message never comes back; an accepted message whose ack was
// still queued then is not acked by the loop any more and does come back.
// The list is exactly what comes back.
func TestDrain_ListsExactlyWhatComesBack(t *testing.T) {
	t.Parallel()
	t.Run("accepted acks in flight and queued", func(t *testing.T) {
		t.Parallel()
		gate := newStatusGate(queen.AckCompleted)
		b, clock := clocked(t, &queen.Options{Observer: gate})
		pushTo(t, b, "dq", "p", numbered(4)...)
		abandoned, started := make(chan struct{}), make(chan struct{})
		var f faults
		col := newCollector()
		c := b.Queue("dq").Autopilot(false).Batch(4).Each().DrainTimeout(time.Millisecond).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				switch msg.Offset {
				case 1: // accepted while message 0's ack is being written
					f.check(await(gate.entered), "message 0's ack never written")
				case 2: // still running when the drain gives up
					close(started)
					<-ctx.Done()
					close(abandoned)
				}
				return nil
			}).OnSettled(col.add)
		go func() { <-abandoned; close(gate.release) }()
		require.NoError(t, c.Start(context.Background()))
		recv(t, started)

		err := c.Stop(context.Background())
		var de *queen.DrainError
		require.ErrorAs(t, err, &de)
		recv(t, c.Done())
		f.none(t)
		recv(t, gate.left)
		require.True(t, gate.held, "the ack of message 0 was held until the drain gave up")

		back := comeBack(t, b, clock.Advance, "dq")
		require.Equal(t, []int64{1, 2, 3}, offsets(back), "message 0's ack landed; 1's was never sent")
		require.Equal(t, sortedTxids(back), sortedTxids(de.Unsettled), "DrainError.Unsettled is exactly what came back")
		byOffset := map[int64]queen.Settlement{}
		for _, s := range col.list() {
			byOffset[s.Message.Offset] = s
		}
		require.Equal(t, queen.OutcomeAccepted, byOffset[0].Outcome)
		require.Equal(t, queen.OutcomeDiscarded, byOffset[1].Outcome, "its ack was not sent after the drain gave up")
		require.True(t, byOffset[1].Handled)
		require.Empty(t, byOffset[1].Status)
	})
	t.Run("failure ack in flight", func(t *testing.T) {
		t.Parallel()
		gate := newStatusGate(queen.AckDLQ)
		b, clock := clocked(t, &queen.Options{Observer: gate})
		pushTo(t, b, "dq", "a", numbered(1)...)
		pushTo(t, b, "dq", "b", numbered(2)...)
		abandoned, started := make(chan struct{}), make(chan struct{})
		c := b.Queue("dq").Autopilot(false).Batch(3).Partitions(2).Each().Concurrency(2).DrainTimeout(time.Millisecond).
			Consume(context.Background(), func(ctx context.Context, msg *queen.Message) error {
				if msg.Partition == "a" {
					return queen.Reject(errors.New("never"))
				}
				close(started)
				<-ctx.Done()
				close(abandoned)
				return nil
			})
		go func() { <-abandoned; close(gate.release) }()
		require.NoError(t, c.Start(context.Background()))
		recv(t, started)
		recv(t, gate.entered)

		err := c.Stop(context.Background())
		var de *queen.DrainError
		require.ErrorAs(t, err, &de)
		recv(t, c.Done())
		recv(t, gate.left)
		require.True(t, gate.held)

		back := comeBack(t, b, clock.Advance, "dq")
		require.Len(t, back, 2, "partition a's message was dead-lettered")
		for _, m := range back {
			require.Equal(t, "b", m.Partition)
		}
		require.Equal(t, sortedTxids(back), sortedTxids(de.Unsettled), "DrainError.Unsettled is exactly what came back")
	})
}
