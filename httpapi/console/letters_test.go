package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/console"
	"github.com/stretchr/testify/require"
)

func TestConsole_DeadLetters(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.deadLetters("orders", "billing", 3)
	body := e.ok("/deadletters")
	ids := rows(t, body, "deadletters")
	require.Len(t, ids, 3)
	require.Contains(t, body, `<td data-error-text>boom 2</td>`)
	require.Contains(t, body, `<pre data-payload>{
  &#34;n&#34;: 2
}</pre>`)
	require.Contains(t, body, "Replay all 3 matching")

	// Replay one: a copy is pushed; the letter stays.
	require.Equal(t, "replayed 1", e.act("/deadletters/replay", form("one", ids[0], "confirm", "1")))
	require.Equal(t, 1, e.replayed("orders"))
	require.Equal(t, 3, e.dlqTotal())
	// Again: no second copy, and the page says so.
	require.Equal(t, "replayed 1 (1 had been replayed before: no second copy)", e.act("/deadletters/replay", form("one", ids[0], "confirm", "1")))
	require.Equal(t, 1, e.replayed("orders"))

	// Selected ones.
	require.Equal(t, "replayed 2", e.act("/deadletters/replay", form("scope", "selected", "id", ids[1], "id", ids[2], "confirm", "1")))
	require.Equal(t, 3, e.replayed("orders"))
	require.Equal(t, "deleted 2", e.act("/deadletters/delete", form("scope", "selected", "id", ids[0], "id", ids[1], "confirm", "1")))
	require.Equal(t, []string{ids[2]}, rows(t, e.ok("/deadletters"), "deadletters"))
	require.Equal(t, http.StatusBadRequest, e.post("/deadletters/replay", form("scope", "selected")).status)
	require.Equal(t, http.StatusBadRequest, e.post("/deadletters/replay", nil).status)

	// An unknown id is counted as failed, not done.
	require.Equal(t, "deleted 0; 1 failed (not found)", e.act("/deadletters/delete", form("one", "01234567-89ab-cdef-0123-456789abcdef", "confirm", "1")))
	require.Equal(t, 1, e.dlqTotal())
}

func TestConsole_DeadLettersMatching(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.deadLetters("orders", "billing", 3)
	e.clock.Advance(time.Hour)
	e.deadLetters("orders", "shipping", 2)
	e.deadLetters("audit", "billing", 1)

	// Filters.
	require.Len(t, rows(t, e.ok("/deadletters?queue=orders"), "deadletters"), 5)
	require.Len(t, rows(t, e.ok("/deadletters?queue=orders&group=billing"), "deadletters"), 3)
	late := start.Add(30 * time.Minute).Format(time.RFC3339)
	require.Len(t, rows(t, e.ok("/deadletters?from_time="+late), "deadletters"), 3)
	require.Len(t, rows(t, e.ok("/deadletters?to_time="+late), "deadletters"), 3)
	require.Len(t, rows(t, e.ok("/deadletters?partition=Default&queue=audit"), "deadletters"), 1)
	require.Len(t, rows(t, e.ok("/deadletters?partition=nowhere"), "deadletters"), 0)
	require.Equal(t, http.StatusBadRequest, e.get("/deadletters?from_time=yesterday").status)
	require.Equal(t, http.StatusBadRequest, e.get("/deadletters?queue="+strings.Repeat("q", 256)).status)
	require.Equal(t, http.StatusBadRequest, e.get("/deadletters?from_time=2031-05-07&to_time=2031-05-06").status)

	// Paging.
	first := e.ok("/deadletters?limit=4")
	require.Len(t, rows(t, first, "deadletters"), 4)
	require.Contains(t, first, `<a href="?from=4&amp;limit=4" rel="next" data-page-link="next">`)
	require.Contains(t, first, "6 in all")
	last := e.ok("/deadletters?limit=4&from=4")
	require.Len(t, rows(t, last, "deadletters"), 2)
	require.NotContains(t, last, `rel="next"`, "the last page links to no next one")
	exact := e.ok("/deadletters?limit=3&from=3") // a last page ending exactly at the total
	require.Len(t, rows(t, exact, "deadletters"), 3)
	require.NotContains(t, exact, `rel="next"`, "no link to an empty page")

	// All matching a filter: a confirmation first, saying how many (the
	// entries listed two by two).
	defer console.SetMatchPage(2)()
	f := form("scope", "matching", "queue", "orders", "group", "billing")
	p := e.post("/deadletters/delete", f)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `data-page="confirm"`)
	require.Contains(t, p.body, `Delete 3 dead letters matching queue &#34;orders&#34;, group &#34;billing&#34;.`)
	require.Contains(t, p.body, `data-action="confirm"`)
	require.Contains(t, p.body, `data-action="cancel"`)
	require.Contains(t, p.body, `href="/deadletters?group=billing&amp;queue=orders"`)
	require.Equal(t, 6, e.dlqTotal(), "nothing deleted before the confirmation")
	f.Set("confirm", "1")
	require.Equal(t, "deleted 3", e.act("/deadletters/delete", f))
	require.Equal(t, 3, e.dlqTotal())
	left, err := e.b.DeadLetters(context.Background(), queen.LetterFilter{})
	require.NoError(t, err)
	for _, l := range left.Letters {
		require.False(t, l.Queue == "orders" && l.ConsumerGroup == "billing", "%+v", l)
	}

	// Replay of all matching, the filter by time.
	f = form("scope", "matching", "from_time", late, "confirm", "1")
	require.Equal(t, "replayed 3", e.act("/deadletters/replay", f))
	require.Equal(t, 2, e.replayed("orders"))
	require.Equal(t, 1, e.replayed("audit"))
}

func TestConsole_Parked(t *testing.T) {
	e := newEnv(t, "/", nil)
	for i := 0; i < 2; i++ {
		e.push("orders", "", fmt.Sprintf(`{"n":%d}`, i))
		e.settle("orders", "billing", queen.AckPark, "later")
	}
	body := e.ok("/parked")
	ids := rows(t, body, "parked")
	require.Len(t, ids, 2)
	require.Len(t, rows(t, e.ok("/deadletters"), "deadletters"), 0)
	require.Equal(t, "replayed 1", e.act("/parked/replay", form("one", ids[0], "confirm", "1")))
	res, err := e.b.Fetch(context.Background(), "orders", queen.DefaultPartition, 0, 100)
	require.NoError(t, err)
	require.Equal(t, "parked:"+ids[0], res.Records[len(res.Records)-1].TransactionID)
	f := form("scope", "matching")
	p := e.post("/parked/delete", f)
	require.Contains(t, p.body, "Delete 2 parked messages with no filter (every one).")
	f.Set("confirm", "1")
	require.Equal(t, "deleted 2", e.act("/parked/delete", f))
	page, err := e.b.ParkedMessages(context.Background(), queen.LetterFilter{})
	require.NoError(t, err)
	require.Zero(t, page.Total)
}
