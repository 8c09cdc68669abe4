package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/httpapi/console"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

func TestNew_PanicsOnNilClient(t *testing.T) {
	require.Panics(t, func() { console.New(nil, nil) })
}

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
			require.Contains(t, body, `action="`+e.prefix+`/maintenance"`)
			for path, name := range map[string]string{
				"/queues/orders": "queue", "/groups": "groups", "/groups/orders/billing": "group",
				"/deadletters": "deadletters", "/parked": "parked", "/traces": "traces", "/login": "login",
			} {
				require.Contains(t, e.ok(path), `data-page="`+name+`"`, path)
			}
			js := e.get("/static/console.js")
			require.Equal(t, http.StatusOK, js.status)
			// A name with a slash, a space and a question mark links to its page.
			e.push("a/b c?", "p/1", `1`)
			require.Contains(t, e.ok("/"), `href="`+e.prefix+`/queues/a%2Fb%20c%3F"`)
			require.Len(t, rows(t, e.ok("/queues/a%2Fb%20c%3F?partition=p%2F1"), "messages"), 1)
			require.Contains(t, js.body, "data-live")
			require.Equal(t, http.StatusNotFound, e.get("/static/nothing.css").status)
			require.Equal(t, http.StatusNotFound, e.get("/nowhere").status)
		})
	}
}

// TestConsole_PrefixOption mounts the console with Options.Prefix on a mux
// that passes the whole path on, as chi's Mount does.
func TestConsole_PrefixOption(t *testing.T) {
	b := queentest.NewBroker(t, nil)
	h := console.New(b, &console.Options{Prefix: "/ops/console/"})
	for path, want := range map[string]int{"/ops/console/": http.StatusOK, "/ops/console/groups": http.StatusOK, "/elsewhere/": http.StatusNotFound} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		require.Equal(t, want, rec.Code, path)
		if want == http.StatusOK {
			require.Contains(t, rec.Body.String(), `href="/ops/console/static/console.css"`)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ops/console", nil))
	require.Equal(t, http.StatusMovedPermanently, rec.Code)
	require.Equal(t, "/ops/console/", rec.Header().Get("Location"))
}

func TestConsole_Overview(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.push("orders", "eu", `1`, `2`, `3`)
	e.push("orders", "us", `4`)
	e.push("audit", "", `5`)
	e.deadLetters("orders", "billing", 1) // pushes one more to Default, then dead-letters the oldest
	e.clock.Advance(90 * 1e9)
	body := e.ok("/")
	require.Equal(t, []string{"audit", "orders"}, rows(t, body, "queues"))
	row := rowHTML(t, body, "queues", "orders")
	// Partitions 3 (eu, us, Default), messages 5, pending 4 (billing read
	// one of 5), dead letters 1, groups 1, oldest pending 1m30s ago.
	require.Equal(t, []string{"orders", "3", "5", "4", "0", "1", "0", "1", "1m30s ago", "—", "—", "—"}, cells(row))
	require.Contains(t, body, `data-fact="version">`+queen.Version+`<`)
	require.Contains(t, body, `data-fact="durability">none (in memory)<`)
	require.Contains(t, body, `data-fact="uptime">1m30s<`)
	require.Contains(t, body, `data-fact="store">in memory<`)
	require.Contains(t, body, `data-fact="pushed">6<`)
	require.Contains(t, body, `data-fact="maintenance">off<`)
	require.Contains(t, body, `data-chart="none"`)

	// Searching and paging the queues.
	require.Equal(t, []string{"orders"}, rows(t, e.ok("/?q=ord"), "queues"))
	for i := 0; i < 5; i++ {
		e.push("q"+string(rune('a'+i)), "", `1`)
	}
	first := e.ok("/?limit=3")
	require.Equal(t, []string{"audit", "orders", "qa"}, rows(t, first, "queues"))
	require.Contains(t, first, `href="?from=3&amp;limit=3"`)
	require.Equal(t, []string{"qb", "qc", "qd"}, rows(t, e.ok("/?limit=3&from=3"), "queues"))
	require.Equal(t, http.StatusBadRequest, e.get("/?from=-1").status)
	require.Equal(t, http.StatusBadRequest, e.get("/?limit=100000").status)
}

func TestConsole_Maintenance(t *testing.T) {
	e := newEnv(t, "/", nil)
	body := e.ok("/")
	require.Contains(t, body, `data-action="maintenance-on"`)
	require.Equal(t, "maintenance mode on: pushes are stored, pops deliver nothing", e.act("/maintenance", form("mode", "on", "confirm", "1")))
	require.True(t, e.b.MaintenanceMode())
	body = e.ok("/")
	require.Contains(t, body, `data-action="maintenance-off"`)
	require.Contains(t, body, `data-fact="maintenance">on:`)
	require.Equal(t, "maintenance mode off: pops deliver again", e.act("/maintenance", form("mode", "off", "confirm", "1")))
	require.False(t, e.b.MaintenanceMode())
	require.Equal(t, http.StatusBadRequest, e.post("/maintenance", form("mode", "sideways")).status)
	require.False(t, e.b.MaintenanceMode())

	// A live refresh in between leaves the result for the page shown.
	require.Equal(t, http.StatusSeeOther, e.post("/maintenance", form("mode", "on", "confirm", "1")).status)
	req, err := http.NewRequest("GET", e.url("/"), nil)
	require.NoError(t, err)
	req.Header.Set("X-Console-Live", "1")
	res, err := e.client.Do(req)
	require.NoError(t, err)
	require.Empty(t, resultOf(t, e.read(res).body))
	require.Equal(t, "maintenance mode on: pushes are stored, pops deliver nothing", resultOf(t, e.ok("/")))
	require.Empty(t, resultOf(t, e.ok("/")), "shown once")
}

// TestConsole_OverRemote serves the console over a remote client, which
// has none of the broker's optional methods: the pages still work, facts
// they cannot know say "—", partitions are paged from a full listing.
func TestConsole_OverRemote(t *testing.T) {
	b := queentest.NewBroker(t, &queen.Options{DefaultSubscriptionMode: queen.SubscriptionModeAll})
	api := httptest.NewServer(httpapi.New(b, nil))
	t.Cleanup(api.Close)
	rc, err := remote.Dial(api.URL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rc.Close() })
	e := newEnvOn(t, rc, nil, "/", nil)
	e.b = b
	for _, p := range []string{"p1", "p2", "p3"} {
		e.push("orders", p, `{"p":"`+p+`"}`)
	}
	e.settle("orders", "billing", queen.AckCompleted, "")
	body := e.ok("/")
	// remote's ListGroups has no OldestPendingAt (Queen's wire has none).
	require.Equal(t, []string{"orders", "3", "3", "2", "0", "0", "0", "1", "—"}, cells(rowHTML(t, body, "queues", "orders"))[:9])
	require.Equal(t, []string{"orders"}, rows(t, body, "queues"))
	require.Contains(t, body, `data-fact="version">—<`)
	require.Contains(t, body, `data-fact="maintenance">—<`)
	require.NotContains(t, body, `data-action="maintenance-on"`)
	q := e.ok("/queues/orders?limit=2")
	require.Equal(t, []string{"p1", "p2"}, rows(t, q, "partitions"))
	require.Equal(t, []string{"p3"}, rows(t, e.ok("/queues/orders?limit=2&from=2"), "partitions"))
	// remote's QueueStats has no cursors: a lag it cannot tell is "—", not 0.
	require.Contains(t, rowHTML(t, q, "lag", "p1"), `<td data-group="billing">—</td>`)
	g := e.ok("/groups/orders/billing")
	require.Contains(t, g, "This client reports no cursors per partition", "not \"no partitions\"")
	require.NotContains(t, g, "No partitions")
	require.Contains(t, g, `data-fact="consumed">—<`, "remote's groups carry no Consumed: not 0")
	require.Equal(t, "—", cells(rowHTML(t, e.ok("/groups"), "groups", "billing"))[7])
	require.Equal(t, []string{"p2"}, rows(t, e.ok("/queues/orders?q=2"), "partitions"))
	m := e.ok("/queues/orders?partition=p2")
	require.Len(t, rows(t, m, "messages"), 1)
	require.Contains(t, m, "&#34;p&#34;: &#34;p2&#34;")
	require.Contains(t, e.ok("/traces"), "This client does not serve traces.")
	require.Equal(t, http.StatusNotImplemented, e.post("/maintenance", form("mode", "on")).status)
	require.False(t, b.MaintenanceMode())
}

// cells returns the text of a row's cells, tags stripped.
func cells(row string) []string {
	var out []string
	for _, td := range strings.Split(row, "<td")[1:] {
		td = td[strings.Index(td, ">")+1:]
		td = td[:strings.Index(td, "</td>")]
		out = append(out, strings.TrimSpace(stripTags(td)))
	}
	return out
}
