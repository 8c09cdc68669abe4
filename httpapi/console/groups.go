package console

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/queenlite/queen"
)

// groupLabel is how a group name is shown: the queue-mode group by what
// it is.
func groupLabel(name string) string {
	if name == "" || name == queen.QueueModeGroup {
		return "(queue mode)"
	}
	return name
}

// groupPath is a group's name in a URL: the queue-mode group by its
// reserved name, so the segment is never empty.
func groupPath(name string) string {
	if name == "" {
		return queen.QueueModeGroup
	}
	return name
}

type groupsData struct {
	Queue  string
	Groups []queen.GroupStats
	// NoConsumed is set for a client that is not an in-process broker
	// (remote's), whose groups carry no Consumed count: shown as "—", not 0.
	NoConsumed bool
	Pager      pager
	Links      links
}

func (h *handler) groupsPage(w http.ResponseWriter, r *http.Request) {
	p, msg := readPager(r)
	if msg != "" {
		h.fail(w, r, http.StatusBadRequest, msg)
		return
	}
	queue := strings.TrimSpace(r.URL.Query().Get("queue"))
	all, err := h.groups(r.Context(), queue, "")
	if err != nil {
		h.clientErr(w, r, err)
		return
	}
	page := pageOf(&p, all)
	h.render(w, r, http.StatusOK, "groups", groupsData{Queue: queue, Groups: page, NoConsumed: !h.countsGroups(), Pager: p, Links: pageLinks(r, p)})
}

type groupData struct {
	queen.GroupStats
	Cursors    []groupCursor // the page's partitions
	NoConsumed bool          // as in groupsData
	// NoCursors is set when the client reports no cursors at all (a
	// remote client's QueueStats has none): the table says so rather than
	// "no partitions".
	NoCursors bool
	Search    string
	Pager     pager
	Links     links
}

// groupCursor is the group's position in one partition.
type groupCursor struct {
	Partition string
	Messages  int64
	queen.CursorStats
}

// findGroup returns the stats of group on queue.
func (h *handler) findGroup(r *http.Request, queue, group string) (*queen.GroupStats, error) {
	gs, err := h.groups(r.Context(), queue, group)
	if err != nil {
		return nil, err
	}
	for i := range gs {
		if gs[i].Queue == queue && gs[i].Group == group {
			return &gs[i], nil
		}
	}
	return nil, queen.ErrGroupNotFound
}

// groupName reads the {group} path value, the queue-mode group's
// reserved name standing for itself.
func groupName(r *http.Request) string { return r.PathValue("group") }

func (h *handler) groupPage(w http.ResponseWriter, r *http.Request) {
	queue, group := r.PathValue("queue"), groupName(r)
	p, msg := readPager(r)
	if msg != "" {
		h.fail(w, r, http.StatusBadRequest, msg)
		return
	}
	gs, err := h.findGroup(r, queue, group)
	if err != nil {
		h.clientErr(w, r, err)
		return
	}
	search := strings.TrimSpace(r.URL.Query().Get("q"))
	parts, err := h.partitions(r, queue, search, &p)
	if err != nil {
		h.clientErr(w, r, err)
		return
	}
	d := groupData{GroupStats: *gs, NoConsumed: !h.countsGroups(), Search: search}
	_, lister := h.c.(partitionLister)
	d.NoCursors = !lister && len(parts.Partitions) > 0
	for _, ps := range parts.Partitions {
		if len(ps.Cursors) > 0 {
			d.NoCursors = false
		}
		for _, c := range ps.Cursors {
			if c.Group == group {
				d.Cursors = append(d.Cursors, groupCursor{Partition: ps.Name, Messages: ps.Messages, CursorStats: c})
			}
		}
	}
	d.Pager, d.Links = p, pageLinks(r, p)
	h.render(w, r, http.StatusOK, "group", d)
}

// groupBack is the group's page.
func groupBack(r *http.Request, queue, group string) string {
	return base(r) + "/groups/" + pathSeg(queue) + "/" + pathSeg(groupPath(group))
}

// seek moves the group's cursors on the queue to the end or to a time,
// after a confirmation.
func (h *handler) seek(w http.ResponseWriter, r *http.Request) {
	queue, group := r.PathValue("queue"), groupName(r)
	var opts queen.SeekOptions
	var what string
	switch r.PostFormValue("to") {
	case "end":
		opts.ToEnd = true
		what = fmt.Sprintf("Move group %s on queue %q to the end of every partition: the messages it has not read yet are skipped, never delivered to it, and its live leases are released.", groupLabel(group), queue)
	case "time":
		t, err := parseTime(strings.TrimSpace(r.PostFormValue("time")))
		if err != nil || t.IsZero() {
			h.fail(w, r, http.StatusBadRequest, "time: give a time such as 2026-01-02T15:04:05Z")
			return
		}
		opts.Timestamp = t
		what = fmt.Sprintf("Move group %s on queue %q, in every partition, to the first message pushed at or after %s: messages before it are skipped, those after it are delivered (again, if it read them), and its live leases are released.", groupLabel(group), queue, formatTime(t))
	default:
		h.fail(w, r, http.StatusBadRequest, "to must be end or time")
		return
	}
	if !confirmed(r) {
		h.confirm(w, r, confirmData{What: what, Action: r.URL.Path, Danger: true, Cancel: groupBack(r, queue, group),
			Fields: [][2]string{{"to", r.PostFormValue("to")}, {"time", r.PostFormValue("time")}}})
		return
	}
	res, err := h.c.SeekGroup(r.Context(), group, queue, opts)
	if err != nil {
		h.clientErr(w, r, err)
		return
	}
	h.done(w, r, groupBack(r, queue, group), fmt.Sprintf("moved %d partitions", res.PartitionsUpdated))
}

// subscription moves the group's start point, after a confirmation.
func (h *handler) subscription(w http.ResponseWriter, r *http.Request) {
	queue, group := r.PathValue("queue"), groupName(r)
	t, err := parseTime(strings.TrimSpace(r.PostFormValue("from")))
	if err != nil || t.IsZero() {
		h.fail(w, r, http.StatusBadRequest, "from: give a time such as 2026-01-02T15:04:05Z")
		return
	}
	if !confirmed(r) {
		h.confirm(w, r, confirmData{Action: r.URL.Path, Danger: true, Cancel: groupBack(r, queue, group),
			What:   fmt.Sprintf("Change the subscription of group %s to start at %s, on every queue it reads: each partition it has not started on moves to the first message pushed at or after that time, and so do partitions created later; partitions it has started on keep their place.", groupLabel(group), formatTime(t)),
			Fields: [][2]string{{"from", r.PostFormValue("from")}}})
		return
	}
	n, err := h.c.SetGroupSubscription(r.Context(), group, t)
	if err != nil {
		h.clientErr(w, r, err)
		return
	}
	h.done(w, r, groupBack(r, queue, group), fmt.Sprintf("subscription changed: %d cursors moved", n))
}

// deleteGroup removes the group's cursors on the queue, after a
// confirmation.
func (h *handler) deleteGroup(w http.ResponseWriter, r *http.Request) {
	queue, group := r.PathValue("queue"), groupName(r)
	forget := r.PostFormValue("forget") == "1"
	if !confirmed(r) {
		what := fmt.Sprintf("Delete group %s on queue %q: its cursors in every partition are removed and its live leases released.", groupLabel(group), queue)
		if forget {
			what += " The group is forgotten too: its next pop starts it afresh, from its subscription mode."
		} else {
			what += " Its start point is kept: its next pop reads again from there."
		}
		f := [][2]string{}
		if forget {
			f = append(f, [2]string{"forget", "1"})
		}
		h.confirm(w, r, confirmData{What: what, Action: r.URL.Path, Danger: true, Cancel: groupBack(r, queue, group), Fields: f})
		return
	}
	n, err := h.c.DeleteGroup(r.Context(), group, queue, forget)
	if err != nil {
		h.clientErr(w, r, err)
		return
	}
	h.done(w, r, base(r)+"/groups?queue="+queryEsc(queue), fmt.Sprintf("deleted group %s on %s: %d cursors removed", groupLabel(group), queue, n))
}
