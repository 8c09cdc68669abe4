package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/internal/wire"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pages holds one template set per page, each the layout plus the page.
type pages struct {
	byName map[string]*template.Template
}

var funcs = template.FuncMap{
	"path":      url.PathEscape,
	"query":     url.QueryEscape,
	"num":       formatNum,
	"waiting":   waiting,
	"grouplag":  groupLag,
	"bytes":     formatBytes,
	"ago":       formatAgo,
	"time":      formatTime,
	"dur":       formatDur,
	"pretty":    prettyJSON,
	"group":     groupLabel,
	"grouppath": groupPath,
	"inc":       func(i int) int { return i + 1 },
	"add":       func(a, b int) int { return a + b },
}

func loadPages() *pages {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err) // a malformed pattern: a bug, caught by every test
	}
	ps := &pages{byName: make(map[string]*template.Template)}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || name == "parts" {
			continue
		}
		t := template.Must(template.Must(layout.Clone()).ParseFS(templateFS, n))
		ps.byName[name] = t
	}
	return ps
}

// view is what every template gets: the page's own data in Data, and what
// the layout needs.
type view struct {
	Page     string // the data-page name
	Base     string // mount path, no final slash
	CSRF     string
	CanWrite bool // show read-write actions
	CanAdmin bool // show admin actions
	LoggedIn bool
	Nav      bool   // show the page links (not to a visitor still to log in)
	Result   string // the last action's result
	Error    string
	Refresh  int64 // live refresh period in ms; 0 for none
	Now      time.Time
	Data     any
}

// render writes page with data.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, page string, data any) {
	h.renderView(w, r, status, h.newView(w, r, page, data))
}

func (h *handler) newView(w http.ResponseWriter, r *http.Request, page string, data any) *view {
	v := &view{Page: page, Base: base(r), CSRF: h.csrf(h.session(w, r)), Now: h.now(), Data: data}
	if page != "login" {
		v.CanWrite = h.can(r, httpapi.AccessReadWrite)
		v.CanAdmin = h.can(r, httpapi.AccessAdmin)
		if h.opts.Refresh > 0 {
			v.Refresh = h.opts.Refresh.Milliseconds()
		}
	}
	_, err := r.Cookie(tokenCookie)
	v.LoggedIn = err == nil
	v.Nav = page != "login" || v.LoggedIn || h.opts.Authorize == nil
	// A live refresh leaves the result for the page the browser shows.
	if r.Method == http.MethodGet && r.Header.Get("X-Console-Live") == "" {
		v.Result = h.takeResult(w, r)
	}
	return v
}

func (h *handler) renderView(w http.ResponseWriter, r *http.Request, status int, v *view) {
	t := h.pages.byName[v.Page]
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		h.log.Error("console: rendering a page", "page", v.Page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers with an error page.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	v := h.newView(w, r, "error", nil)
	v.Error = msg
	h.renderView(w, r, status, v)
}

// clientErr answers a failed client call: a mistake in the request as 4xx
// with the error's text, a storage failure as 500 (logged).
func (h *handler) clientErr(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := statusOf(err)
	if status == http.StatusInternalServerError {
		h.log.Error("console: client call failed", "path", r.URL.Path, "err", err)
	}
	h.fail(w, r, status, msg)
}

// static serves the embedded CSS and script.
func (h *handler) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(b)
}

// groupLag is a group's lag in messages, or "—" when the client cannot
// tell it: no lag at all with partitions lagging (Queen's server sends a
// group's lagging partitions but not its lag, which remote then reports
// as 0).
func groupLag(g queen.GroupStats) string {
	if g.Lag == 0 && g.PartitionsWithLag > 0 {
		return "—"
	}
	return formatNum(g.Lag)
}

func formatNum(n any) string {
	var v int64
	switch x := n.(type) {
	case int:
		v = int64(x)
	case int64:
		v = x
	default:
		return fmt.Sprint(n)
	}
	s := strconv.FormatInt(v, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// formatAgo is how long before now t was, "—" for the zero time.
func formatAgo(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return formatDur(now.Sub(t).Truncate(time.Second)) + " ago"
}

func formatDur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Second {
		return d.Truncate(time.Millisecond).String()
	}
	d = d.Truncate(time.Second)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	s := d.String()
	if days > 0 {
		return fmt.Sprintf("%dd%s", days, s)
	}
	return s
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// prettyJSON indents a JSON payload; anything else is shown as it is.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

// waiting is the Pending the pages show, of a queue (from its totals) or
// a partition: the one definition the HTTP API answers too
// ([wire.Counts.Waiting]), leased messages out of it.
func waiting(pending, inFlight int64) int64 {
	return wire.Counts{Pending: pending, InFlight: inFlight}.Waiting()
}
