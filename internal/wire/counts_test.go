package wire_test

import (
	"testing"

	"github.com/queenlite/queen/internal/wire"
	"github.com/stretchr/testify/require"
)

// Queen's counters read back give the broker's counts while no message is
// leased by several groups (InFlight ≤ Pending), and a Pending never above
// Messages otherwise.
func TestQueenCounts_RoundTrip(t *testing.T) {
	t.Parallel()
	for msgs := int64(0); msgs <= 4; msgs++ {
		for pending := int64(0); pending <= msgs; pending++ {
			for inFlight := int64(0); inFlight <= 3*msgs; inFlight++ {
				c := wire.Counts{Messages: msgs, Pending: pending, InFlight: inFlight, DeadLetters: 2, Parked: 1}
				q := c.Queen()
				require.Equal(t, max(0, msgs-pending-3), q.Completed, "settled, less the dead letters and parked")
				back := q.Counts()
				require.LessOrEqual(t, back.Pending, back.Messages, "%+v", c)
				if inFlight <= pending {
					require.Equal(t, c, back)
				} else {
					require.Equal(t, wire.Counts{Messages: msgs, Pending: min(msgs, inFlight), InFlight: inFlight, DeadLetters: 2, Parked: 1}, back)
				}
			}
		}
	}
}
