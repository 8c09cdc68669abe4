package console

import (
	"net/http"
	"strings"

	"github.com/queenlite/queen"
)

type tracesData struct {
	Supported                  bool
	PartitionID, TransactionID string
	Name                       string
	Traces                     []queen.TraceEvent // of the message, or of the name
	Names                      []queen.TraceName  // when neither is asked for
	Pager                      pager
	Links                      links
}

// tracesPage shows the traces of one message (partition_id and
// transaction_id), those filed under a name (name), or the names.
func (h *handler) tracesPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := tracesData{PartitionID: strings.TrimSpace(q.Get("partition_id")), TransactionID: strings.TrimSpace(q.Get("transaction_id")), Name: strings.TrimSpace(q.Get("name"))}
	t, ok := h.c.(tracer)
	if !ok {
		h.render(w, r, http.StatusOK, "traces", d)
		return
	}
	d.Supported = true
	p, msg := readPager(r)
	if msg != "" {
		h.fail(w, r, http.StatusBadRequest, msg)
		return
	}
	for _, s := range []string{d.PartitionID, d.TransactionID, d.Name} {
		if len(s) > maxName {
			h.fail(w, r, http.StatusBadRequest, "names and ids are at most 255 bytes")
			return
		}
	}
	switch {
	case d.PartitionID != "" || d.TransactionID != "":
		if d.PartitionID == "" || d.TransactionID == "" {
			h.fail(w, r, http.StatusBadRequest, "a message is named by both its partition id and its transaction id")
			return
		}
		evs, err := t.Traces(r.Context(), d.PartitionID, d.TransactionID)
		if err != nil {
			h.clientErr(w, r, err)
			return
		}
		d.Traces = pageOf(&p, evs)
	case d.Name != "":
		page, err := t.TracesByName(r.Context(), d.Name, p.Limit, p.From)
		if err != nil {
			h.clientErr(w, r, err)
			return
		}
		d.Traces = page.Traces
		p.Total = page.Total
		if p.From+len(page.Traces) < page.Total {
			p.Next = p.From + len(page.Traces)
		}
	default:
		page, err := t.TraceNames(r.Context(), p.Limit, p.From)
		if err != nil {
			h.clientErr(w, r, err)
			return
		}
		d.Names = page.Names
		p.Total = page.Total
		if p.From+len(page.Names) < page.Total {
			p.Next = p.From + len(page.Names)
		}
	}
	d.Pager, d.Links = p, pageLinks(r, p)
	h.render(w, r, http.StatusOK, "traces", d)
}
