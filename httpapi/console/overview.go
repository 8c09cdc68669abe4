package console

import (
	"net/http"
	"strings"
	"time"

	"github.com/queenlite/queen"
)

// queueRow is one queue of the overview.
type queueRow struct {
	queen.QueueStats
	// OldestPending is when the oldest message a group has not settled
	// was pushed, over the queue's groups; zero with no lag or no group.
	OldestPending time.Time
	// Rates are from the history recorder's newest sample; nil without.
	Rates *queueRates
}

// brokerFacts is the overview's panel about the broker; a field the
// client cannot tell is "—".
type brokerFacts struct {
	Version, Durability, Uptime, Store, Heap, RSS string
	// Maintenance is known only for a client that has it.
	MaintenanceKnown, Maintenance bool
	Counters                      *queen.Counters
	Acked                         int64
}

type overviewData struct {
	Search string
	Queues []queueRow
	Pager  pager
	Links  links
	Facts  brokerFacts
	Chart  chart
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	p, msg := readPager(r)
	if msg != "" {
		h.fail(w, r, http.StatusBadRequest, msg)
		return
	}
	all, err := h.c.ListQueues(r.Context())
	if err != nil {
		h.clientErr(w, r, err)
		return
	}
	search := strings.TrimSpace(r.URL.Query().Get("q"))
	if search != "" {
		all = filter(all, func(q *queen.QueueStats) bool { return strings.Contains(q.Name, search) })
	}
	page := pageOf(&p, all)
	rows := make([]queueRow, len(page))
	for i := range page {
		rows[i].QueueStats = page[i]
	}
	if len(rows) > 0 {
		if err := h.oldestPending(r, rows); err != nil {
			h.clientErr(w, r, err)
			return
		}
	}
	rs := latestRates(h.opts.History)
	for i := range rows {
		if qr, ok := rs[rows[i].Name]; ok {
			rows[i].Rates = &qr
		}
	}
	data := overviewData{Search: search, Queues: rows, Pager: p, Links: pageLinks(r, p), Facts: h.facts(), Chart: h.throughput("", h.now())}
	h.render(w, r, http.StatusOK, "overview", data)
}

// overviewWalk is the most partitions of a queue the overview walks to
// find its groups' oldest pending message; a larger queue's shows "—"
// there (its groups' pages show it).
const overviewWalk = 100_000

// oldestPending fills the rows' OldestPending from the groups of their
// queues: one ListGroups per queue of the page from an in-process broker,
// or one ListGroups of all from another client (a remote one: one request).
func (h *handler) oldestPending(r *http.Request, rows []queueRow) error {
	at := make(map[string]int, len(rows))
	for i := range rows {
		at[rows[i].Name] = i
	}
	note := func(groups []queen.GroupStats) {
		for _, g := range groups {
			i, ok := at[g.Queue]
			if !ok || g.OldestPendingAt.IsZero() {
				continue
			}
			if o := &rows[i].OldestPending; o.IsZero() || g.OldestPendingAt.Before(*o) {
				*o = g.OldestPendingAt
			}
		}
	}
	if !h.countsGroups() {
		groups, err := h.c.ListGroups(r.Context(), queen.GroupFilter{})
		if err != nil {
			return err
		}
		note(groups)
		return nil
	}
	for i := range rows {
		if len(rows[i].Groups) == 0 || rows[i].Pending == 0 || rows[i].PartitionN > overviewWalk {
			continue
		}
		groups, err := h.groups(r.Context(), rows[i].Name, "")
		if err != nil {
			return err
		}
		note(groups)
	}
	return nil
}

// facts gathers what the client tells of the broker.
func (h *handler) facts() brokerFacts {
	f := brokerFacts{Version: "—", Durability: "—", Uptime: "—", Store: "—", Heap: "—", RSS: "—"}
	if fs, ok := h.c.(factsSource); ok {
		bf := fs.Facts()
		f.Version, f.Durability = bf.Version, bf.Durability.String()
		f.Uptime = formatDur(h.now().Sub(bf.OpenedAt))
		if bf.InMemory {
			// Nothing is on disk, so a sync mode would promise nothing.
			f.Store, f.Durability = "in memory", "none (in memory)"
		} else if du, ok := h.c.(diskUser); ok {
			// The space the files take, not their (preallocated) sizes.
			if n, err := du.DiskUsage(); err == nil {
				f.Store = formatBytes(n)
			} else {
				h.log.Warn("console: store disk usage", "err", err)
			}
		}
		// The broker runs in this process: its memory is this process's.
		if n := heapBytes(); n >= 0 {
			f.Heap = formatBytes(n)
		}
		if n := rssBytes(); n >= 0 {
			f.RSS = formatBytes(n)
		}
	}
	if m, ok := h.c.(maintainer); ok {
		f.MaintenanceKnown, f.Maintenance = true, m.MaintenanceMode()
	}
	if cs, ok := h.c.(counterSource); ok {
		c := cs.Counters()
		f.Counters = &c
		for _, n := range c.Acked {
			f.Acked += n
		}
	}
	return f
}

// maintenance turns maintenance mode on or off.
func (h *handler) maintenance(w http.ResponseWriter, r *http.Request) {
	m, ok := h.c.(maintainer)
	if !ok {
		h.fail(w, r, http.StatusNotImplemented, "this client has no maintenance mode")
		return
	}
	var on bool
	switch r.PostFormValue("mode") {
	case "on":
		on = true
	case "off":
	default:
		h.fail(w, r, http.StatusBadRequest, "mode must be on or off")
		return
	}
	if !confirmed(r) {
		d := confirmData{Action: r.URL.Path, Fields: [][2]string{{"mode", "off"}}, Cancel: base(r) + "/",
			What: "Turn maintenance mode off: pops deliver messages again to every consumer."}
		if on {
			d.Fields[0][1], d.Danger = "on", true
			d.What = "Turn maintenance mode on: every consumer stops receiving messages (pops deliver nothing, on every queue) until it is turned off; pushes are still stored."
		}
		h.confirm(w, r, d)
		return
	}
	if err := m.SetMaintenanceMode(r.Context(), on); err != nil {
		h.clientErr(w, r, err)
		return
	}
	result := "maintenance mode off: pops deliver again"
	if on {
		result = "maintenance mode on: pushes are stored, pops deliver nothing"
	}
	h.done(w, r, base(r)+"/", result)
}
