package queen_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// joinLog records the EventGroupJoined events.
type joinLog struct {
	mu  sync.Mutex
	got []queen.Event
}

func (l *joinLog) Observe(e queen.Event) {
	if e.Kind != queen.EventGroupJoined {
		return
	}
	l.mu.Lock()
	l.got = append(l.got, e)
	l.mu.Unlock()
}

func (l *joinLog) take() []queen.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// A group's first pop is reported with how many retained messages its
// start point skips, and a join that skips some is logged at Info level:
// a group that starts in mode "new" (the default) past a backlog is no
// longer silent about it.
func TestJoin_ReportsSkippedMessages(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	var obs joinLog
	logs := &itest.LogBuffer{}
	// With a clock, the two backends run one after the other.
	itest.Run(t, &queen.Options{Clock: clock, Observer: &obs, Logger: slog.New(slog.NewTextHandler(logs, nil))}, func(t *testing.T, b *queen.Broker) {
		logged := strings.Count(logs.String(), "consumer group joined")
		pushN(t, b, "orders", "a", 3)
		pushN(t, b, "orders", "b", 2)
		clock.Advance(time.Minute)
		mid := clock.Now()
		pushN(t, b, "orders", "b", 1)
		require.NoError(t, b.DeleteMessage(bg, pushOne(t, b, "orders", "a", "gone", `{}`).PartitionID, "gone"))

		join := func(req queen.PopRequest, skipped int) {
			t.Helper()
			req.Queue, req.Batch, req.Partitions = "orders", 10, 2
			pop(t, b, req)
			require.Equal(t, []queen.Event{{Kind: queen.EventGroupJoined, Queue: "orders", Group: groupOr(req.Group), Count: skipped}}, obs.take(), "%+v", req)
			pop(t, b, req)
			require.Empty(t, obs.take(), "only the first pop joins")
		}
		join(queen.PopRequest{Group: "late"}, 6) // mode new, the default: all 6 retained (not the deleted one)
		require.Contains(t, logs.String(), "level=INFO")
		require.Contains(t, logs.String(), "consumer group joined past existing messages")
		require.Contains(t, logs.String(), "queue=orders group=late skipped=6")
		join(queen.PopRequest{Group: "mid", SubscriptionFrom: mid}, 5)
		require.Contains(t, logs.String(), "queue=orders group=mid skipped=5")
		join(queen.PopRequest{Group: "all", SubscriptionMode: queen.SubscriptionModeAll}, 0)
		join(queen.PopRequest{}, 0) // queue mode reads everything
		require.NotContains(t, logs.String(), "group=all")
		require.NotContains(t, logs.String(), "group="+queen.QueueModeGroup)

		// A group that popped before the queue existed skips nothing.
		pop(t, b, queen.PopRequest{Queue: "later", Group: "early"})
		require.Empty(t, obs.take(), "no queue, no join")
		pushN(t, b, "later", "", 2)
		pop(t, b, queen.PopRequest{Queue: "later", Group: "early"})
		require.Equal(t, []queen.Event{{Kind: queen.EventGroupJoined, Queue: "later", Group: "early"}}, obs.take())
		require.NotContains(t, logs.String(), "group=early")
		require.Equal(t, logged+2, strings.Count(logs.String(), "consumer group joined"), "late and mid, once each")
	})
}

func groupOr(g string) string {
	if g == "" {
		return queen.QueueModeGroup
	}
	return g
}
