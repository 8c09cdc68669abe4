package console_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// next pops one message of orders for billing and returns its payload,
// "" when none is delivered.
func (e *env) next(group string) string {
	e.t.Helper()
	res, err := e.b.Pop(context.Background(), queen.PopRequest{Queue: "orders", Group: group, Batch: 1})
	require.NoError(e.t, err)
	if len(res.Messages) == 0 {
		return ""
	}
	return string(res.Messages[0].Payload)
}

func TestConsole_Groups(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.push("orders", "", `"a"`, `"b"`)
	e.settle("orders", "billing", queen.AckCompleted, "")
	e.clock.Advance(time.Hour)
	e.push("orders", "", `"c"`, `"d"`)
	e.push("audit", "", `"x"`)
	e.settle("audit", "billing", queen.AckCompleted, "")

	list := e.ok("/groups")
	require.Equal(t, []string{"billing", "billing"}, rows(t, list, "groups"))
	require.Contains(t, list, `data-queue="audit"`)
	require.Equal(t, []string{"billing"}, rows(t, e.ok("/groups?queue=orders"), "groups"))
	g := e.ok("/groups/orders/billing")
	require.Contains(t, g, `data-fact="lag">3 messages in 1 of 1 partitions<`)
	require.Contains(t, g, `data-fact="consumed">1<`)
	require.Equal(t, []string{queen.DefaultPartition}, rows(t, g, "lag"))
	require.Equal(t, http.StatusNotFound, e.get("/groups/orders/nobody").status)
	require.Equal(t, http.StatusNotFound, e.get("/groups/nowhere/billing").status)

	// Seek to a time: confirmation, then the group reads from there.
	at := start.Add(30 * time.Minute).Format(time.RFC3339)
	p := e.post("/groups/orders/billing/seek", form("to", "time", "time", at))
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `data-page="confirm"`)
	require.Contains(t, p.body, "Move group billing on queue &#34;orders&#34;, in every partition, to the first message pushed at or after 2031-05-06 07:38:09Z")
	require.Equal(t, "moved 1 partitions", e.act("/groups/orders/billing/seek", form("to", "time", "time", at, "confirm", "1")))
	require.Equal(t, `"c"`, e.next("billing"))

	// Seek to the end: nothing left to read (the lease on c is released).
	p = e.post("/groups/orders/billing/seek", form("to", "end"))
	require.Contains(t, p.body, "Move group billing on queue &#34;orders&#34; to the end of every partition")
	require.Equal(t, "moved 1 partitions", e.act("/groups/orders/billing/seek", form("to", "end", "confirm", "1")))
	require.Equal(t, "", e.next("billing"))
	e.push("orders", "", `"e"`)
	require.Equal(t, `"e"`, e.next("billing"))
	require.Equal(t, http.StatusBadRequest, e.post("/groups/orders/billing/seek", form("to", "time", "time", "soon")).status)
	require.Equal(t, http.StatusBadRequest, e.post("/groups/orders/billing/seek", form("to", "sideways")).status)

	// Change the subscription.
	p = e.post("/groups/orders/billing/subscription", form("from", at))
	require.Contains(t, p.body, "Change the subscription of group billing to start at 2031-05-06 07:38:09Z, on every queue it reads")
	res := e.act("/groups/orders/billing/subscription", form("from", at, "confirm", "1"))
	require.Regexp(t, `^subscription changed: \d+ cursors moved$`, res)
	gs, err := e.b.ListGroups(context.Background(), queen.GroupFilter{Group: "billing"})
	require.NoError(t, err)
	for _, g := range gs {
		require.Equal(t, queen.SubscriptionMode("timestamp"), g.Mode, g.Queue)
		require.True(t, g.From.Equal(start.Add(30*time.Minute)), "%v", g.From)
	}
	require.Equal(t, http.StatusBadRequest, e.post("/groups/orders/billing/subscription", form("from", "")).status)

	// Delete, forgetting the group.
	p = e.post("/groups/orders/billing/delete", form("forget", "1"))
	require.Contains(t, p.body, "Delete group billing on queue &#34;orders&#34;: its cursors in every partition are removed")
	require.Contains(t, p.body, "The group is forgotten too")
	require.Contains(t, p.body, `name="forget" value="1"`)
	require.Equal(t, "deleted group billing on orders: 1 cursors removed", e.act("/groups/orders/billing/delete", form("forget", "1", "confirm", "1")))
	require.Equal(t, []string{"billing"}, rows(t, e.ok("/groups"), "groups"))
	require.Contains(t, e.ok("/groups"), `data-queue="audit"`)
	p = e.post("/groups/orders/billing/delete", form("confirm", "1"))
	require.Equal(t, http.StatusNotFound, p.status, p.body)
}

func TestConsole_QueueModeGroup(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.push("orders", "", `"a"`, `"b"`)
	e.settle("orders", "", queen.AckCompleted, "")
	list := e.ok("/groups")
	require.Contains(t, list, "(queue mode)")
	require.Contains(t, list, `href="/groups/orders/`+queen.QueueModeGroup+`"`)
	g := e.ok("/groups/orders/" + queen.QueueModeGroup)
	require.Contains(t, g, `data-fact="lag">1 messages`)
	require.Equal(t, "moved 1 partitions", e.act("/groups/orders/"+queen.QueueModeGroup+"/seek", form("to", "end", "confirm", "1")))
	require.Equal(t, "", e.next(""))
}

// laglessClient is a client whose groups carry lagging partitions but no
// lag, as remote's do against Queen's server.
type laglessClient struct{ queen.Client }

func (c laglessClient) ListGroups(ctx context.Context, f queen.GroupFilter) ([]queen.GroupStats, error) {
	gs, err := c.Client.ListGroups(ctx, f)
	for i := range gs {
		gs[i].Lag = 0
	}
	return gs, err
}

// TestConsole_UnknownLag: a group with lagging partitions and a lag of 0
// is a client that cannot tell the lag: "—", never "0 messages".
func TestConsole_UnknownLag(t *testing.T) {
	clock := queentest.NewClock(start)
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	e := newEnvOn(t, laglessClient{b}, clock, "/", nil)
	e.b = b
	e.push("orders", "", `1`, `2`)
	e.settle("orders", "billing", queen.AckCompleted, "")
	require.Contains(t, e.ok("/groups/orders/billing"), `data-fact="lag">— messages in 1 of 1 partitions<`)
	require.Equal(t, []string{"—", "1 of 1"}, cells(rowHTML(t, e.ok("/groups"), "groups", "billing"))[3:5])

	// A group that lags nowhere shows its 0.
	e.settle("orders", "billing", queen.AckCompleted, "")
	require.Contains(t, e.ok("/groups/orders/billing"), `data-fact="lag">0 messages in 0 of 1 partitions<`)
}
