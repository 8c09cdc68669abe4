package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/queenlite/queen"
)

// letterKind is what differs between the dead-letter and the parked pages.
type letterKind struct {
	path string // URL path segment, and the data-page name
	noun string // "dead letters", "parked messages"
	one  string // "dead letter", "parked message"
	list func(c queen.Client, ctx context.Context, f queen.LetterFilter) (*queen.LetterPage, error)
	// replay and remove act on one entry.
	replay func(c queen.Client, ctx context.Context, id string) (*queen.ReplayResult, error)
	remove func(c queen.Client, ctx context.Context, id string) error
}

var (
	deadLetters = letterKind{path: "deadletters", noun: "dead letters", one: "dead letter",
		list: queen.Client.DeadLetters, replay: queen.Client.ReplayDeadLetter, remove: queen.Client.DeleteDeadLetter}
	parked = letterKind{path: "parked", noun: "parked messages", one: "parked message",
		list: queen.Client.ParkedMessages, replay: queen.Client.ReplayParked, remove: queen.Client.DeleteParked}
)

// Limits of the letter actions.
const (
	// maxSelected is the most entries one replay or delete of the selected
	// ones names.
	maxSelected = 1000
	// maxMatching is the most entries one replay or delete of all those
	// matching a filter acts on, one broker call each (so that the request
	// ends within a server's write timeout); the result says when more
	// remain.
	maxMatching = 10_000
	// maxName is the longest queue, group or partition name a filter
	// takes, as the broker's own limit.
	maxName = 255
)

// matchPage is the page size matching lists entries with (a variable
// so that tests can cross pages with few entries).
var matchPage = maxPageSize

// letterFilter is a letter page's filter as the form holds it.
type letterFilter struct {
	Queue, Group, Partition string
	From, To                string // as typed: RFC 3339 or the browser's datetime-local
	f                       queen.LetterFilter
}

// readLetterFilter reads the filter from form values (the query of a GET,
// the body of a POST).
func readLetterFilter(v url.Values) (letterFilter, string) {
	lf := letterFilter{Queue: strings.TrimSpace(v.Get("queue")), Group: strings.TrimSpace(v.Get("group")),
		Partition: strings.TrimSpace(v.Get("partition")), From: strings.TrimSpace(v.Get("from_time")), To: strings.TrimSpace(v.Get("to_time"))}
	for _, n := range []struct{ field, v string }{{"queue", lf.Queue}, {"group", lf.Group}, {"partition", lf.Partition}} {
		if len(n.v) > maxName {
			return lf, fmt.Sprintf("%s must be at most %d bytes", n.field, maxName)
		}
	}
	lf.f = queen.LetterFilter{Queue: lf.Queue, ConsumerGroup: lf.Group, Partition: lf.Partition}
	var err error
	if lf.f.From, err = parseTime(lf.From); err != nil {
		return lf, "from: " + err.Error()
	}
	if lf.f.To, err = parseTime(lf.To); err != nil {
		return lf, "to: " + err.Error()
	}
	if !lf.f.From.IsZero() && !lf.f.To.IsZero() && lf.f.To.Before(lf.f.From) {
		return lf, "to must not be before from"
	}
	return lf, ""
}

// query is the filter as a query string, to link back to the page.
func (lf letterFilter) query() string {
	v := url.Values{}
	for _, kv := range [][2]string{{"queue", lf.Queue}, {"group", lf.Group}, {"partition", lf.Partition}, {"from_time", lf.From}, {"to_time", lf.To}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// Any reports whether the filter restricts anything.
func (lf letterFilter) Any() bool { return lf.query() != "" }

// Describe says in words what the filter matches.
func (lf letterFilter) Describe() string {
	var parts []string
	for _, kv := range [][2]string{{"queue", lf.Queue}, {"group", lf.Group}, {"partition", lf.Partition}, {"failed from", lf.From}, {"failed until", lf.To}} {
		if kv[1] != "" {
			parts = append(parts, fmt.Sprintf("%s %q", kv[0], kv[1]))
		}
	}
	if len(parts) == 0 {
		return "with no filter (every one)"
	}
	return "matching " + strings.Join(parts, ", ")
}

// parseTime reads an instant typed in a form: RFC 3339, or a
// datetime-local value (taken as UTC); "" is the zero time.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time such as 2026-01-02T15:04:05Z", s)
}

type lettersData struct {
	Kind    string // deadletters or parked
	Noun    string
	Filter  letterFilter
	Letters []queen.DeadLetter
	Pager   pager
	Links   links
}

func (h *handler) lettersPage(k letterKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, msg := readPager(r)
		if msg != "" {
			h.fail(w, r, http.StatusBadRequest, msg)
			return
		}
		lf, msg := readLetterFilter(r.URL.Query())
		if msg != "" {
			h.fail(w, r, http.StatusBadRequest, msg)
			return
		}
		f := lf.f
		f.Offset, f.Limit = p.From, p.Limit
		page, err := k.list(h.c, r.Context(), f)
		if err != nil {
			h.clientErr(w, r, err)
			return
		}
		p.counted(len(page.Letters), page.Total)
		h.render(w, r, http.StatusOK, k.path, lettersData{Kind: k.path, Noun: k.noun, Filter: lf, Letters: page.Letters, Pager: p, Links: pageLinks(r, p)})
	}
}

// confirmData is the confirmation page of an action: what will happen,
// and the form that does it.
type confirmData struct {
	What   string
	Action string      // form action path
	Fields [][2]string // hidden fields to post again, csrf aside
	Danger bool
	Cancel string // where cancel goes
}

// lettersAction replays (replay) or deletes entries: the one named by
// the field one, the ones named by the fields id (scope selected), or
// every one matching the filter (scope matching, after a confirmation).
func (h *handler) lettersAction(k letterKind, replay bool) http.HandlerFunc {
	verb, done := "delete", "deleted"
	if replay {
		verb, done = "replay", "replayed"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		lf, msg := readLetterFilter(r.PostForm)
		if msg != "" {
			h.fail(w, r, http.StatusBadRequest, msg)
			return
		}
		back := base(r) + "/" + k.path + lf.query()
		var ids []string
		more := false
		var what string
		var fields [][2]string
		switch scope := r.PostFormValue("scope"); {
		case r.PostFormValue("one") != "":
			one := r.PostFormValue("one")
			ids = []string{one}
			what = fmt.Sprintf("%s 1 %s: %s.", capital(verb), k.one, one)
			fields = append(lf.Fields(), [2]string{"one", one})
		case scope == "selected":
			ids = r.PostForm["id"]
			if len(ids) == 0 {
				h.fail(w, r, http.StatusBadRequest, "select at least one "+k.one)
				return
			}
			if len(ids) > maxSelected {
				h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("select at most %d %s at once, or act on all matching the filter", maxSelected, k.noun))
				return
			}
			what = fmt.Sprintf("%s %d %s, the ones selected.", capital(verb), len(ids), k.nounOf(len(ids)))
			fields = append(lf.Fields(), [2]string{"scope", "selected"})
			for _, id := range ids {
				fields = append(fields, [2]string{"id", id})
			}
		case scope == "matching":
			var err error
			if ids, more, err = h.matching(r.Context(), k, lf.f); err != nil {
				h.clientErr(w, r, err)
				return
			}
			what = fmt.Sprintf("%s %d %s %s%s.", capital(verb), len(ids), k.nounOf(len(ids)), lf.Describe(), moreText(more))
			fields = append(lf.Fields(), [2]string{"scope", "matching"})
		default:
			h.fail(w, r, http.StatusBadRequest, "say which "+k.noun+": one, scope=selected or scope=matching")
			return
		}
		if !confirmed(r) {
			if replay {
				what += " A replay pushes a copy of each to its partition; the entries stay until deleted."
			} else {
				what += " Deleted entries are gone: they cannot be replayed afterwards."
			}
			h.confirm(w, r, confirmData{What: what, Action: r.URL.Path, Fields: fields, Danger: !replay, Cancel: back})
			return
		}
		n, dup, failed, firstErr := 0, 0, 0, ""
		for _, id := range ids {
			if len(id) == 0 || len(id) > 128 {
				failed++
				firstErr = "an id of 1 to 128 bytes"
				continue
			}
			var err error
			if replay {
				var res *queen.ReplayResult
				if res, err = k.replay(h.c, r.Context(), id); err == nil && res.Duplicate {
					dup++
				}
			} else {
				err = k.remove(h.c, r.Context(), id)
			}
			if err != nil {
				if r.Context().Err() != nil {
					break
				}
				failed++
				if firstErr == "" {
					_, firstErr = statusOf(err)
				}
				continue
			}
			n++
		}
		result := fmt.Sprintf("%s %d", done, n)
		if dup > 0 {
			result += fmt.Sprintf(" (%d had been replayed before: no second copy)", dup)
		}
		if failed > 0 {
			result += fmt.Sprintf("; %d failed (%s)", failed, firstErr)
		}
		if more {
			result += fmt.Sprintf("; more than %d matched: run it again for the rest", maxMatching)
		}
		h.done(w, r, back, result)
	}
}

// matching lists the ids of the entries matching f, at most maxMatching;
// more reports that there were more.
func (h *handler) matching(ctx context.Context, k letterKind, f queen.LetterFilter) (ids []string, more bool, err error) {
	f.Limit = matchPage
	for {
		page, err := k.list(h.c, ctx, f)
		if err != nil {
			return nil, false, err
		}
		for _, l := range page.Letters {
			if len(ids) == maxMatching {
				return ids, true, nil
			}
			ids = append(ids, l.ID)
		}
		if len(page.Letters) == 0 || f.Offset+len(page.Letters) >= page.Total {
			return ids, false, nil
		}
		f.Offset += len(page.Letters)
	}
}

// Fields are the filter's form fields, as name and value.
func (lf letterFilter) Fields() [][2]string {
	return [][2]string{{"queue", lf.Queue}, {"group", lf.Group}, {"partition", lf.Partition}, {"from_time", lf.From}, {"to_time", lf.To}}
}

func moreText(more bool) string {
	if more {
		return fmt.Sprintf(" (the first %d of more)", maxMatching)
	}
	return ""
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// nounOf is the kind's noun for n entries: "1 dead letter", "2 dead
// letters".
func (k letterKind) nounOf(n int) string {
	if n == 1 {
		return k.one
	}
	return k.noun
}

// confirmed reports whether an action's POST says it was confirmed: the
// field confirm is exactly "1", as the confirmation page's form sends it.
// Every action that changes anything runs only when confirmed; without it,
// the action answers its confirmation page and changes nothing, so one
// click (or a forged POST without the field) never acts.
func confirmed(r *http.Request) bool { return r.PostFormValue("confirm") == "1" }

// confirm shows what an action will do and asks to go on.
func (h *handler) confirm(w http.ResponseWriter, r *http.Request, d confirmData) {
	h.render(w, r, http.StatusOK, "confirm", d)
}
