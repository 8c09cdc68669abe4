package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

func TestConsole_EveryPageRenders(t *testing.T) {
	for _, prefix := range []string{"/", "/ops/console/"} {
		t.Run(prefix, func(t *testing.T) {
			e := newEnv(t, prefix, nil)
			e.push("orders", "eu", `{"id":1}`, `{"id":2}`)
			e.deadLetters("orders", "billing", 1)
			body := e.ok("/")
			require.Contains(t, body, `data-page="overview"`)
			require.Equal(t, []string{"orders"}, rows(t, body, "queues"))
			require.Contains(t, body, `href="`+e.prefix+`/queues/orders"`)
			require.Contains(t, body, `href="`+e.prefix+`/static/console.css"`)
			for path, name := range map[string]string{
				"/queues/orders": "queue", "/groups": "groups", "/groups/orders/billing": "group",
				"/deadletters": "deadletters", "/parked": "parked", "/traces": "traces", "/login": "login",
			} {
				require.Contains(t, e.ok(path), `data-page="`+name+`"`, path)
			}
			require.Equal(t, http.StatusOK, e.get("/static/console.js").status)
		})
	}
}

func TestConsole_ReplayOneDeadLetter(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.deadLetters("orders", "billing", 2)
	body := e.ok("/deadletters")
	ids := rows(t, body, "deadletters")
	require.Len(t, ids, 2)
	res := e.act("/deadletters/replay", url.Values{"one": {ids[0]}})
	require.Equal(t, "replayed 1", res)
	_ = queen.AckDLQ
	_ = strings.Contains
}
