package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/compat"
)

// browseLimit is how many messages the message browser shows at once.
const browseLimit = 20

type queueData struct {
	Info       *queen.QueueInfo
	Stats      queen.QueueStats
	Partitions []queen.PartitionStats
	Search     string
	Pager      pager
	Links      links
	Config     []configField
	// ConfigError is a refused edit, shown over the form.
	ConfigError string
	Browser     *browser
	// Lag has a row per partition of the page, a cell per group of
	// Stats.Groups, in that order.
	Lag []lagRow
	// Chart is the queue's throughput over the last hour.
	Chart chart
}

type lagRow struct {
	Partition string
	Cells     []lagCell
}

// lagCell is a group's cursor in a partition; Known is false when the
// client reported none (a remote client reports no cursors), shown as "—",
// never as a lag of 0.
type lagCell struct {
	queen.CursorStats
	Known bool
}

// lagRows lays the page's cursors out by group, in the order of groups.
func lagRows(parts []queen.PartitionStats, groups []string) []lagRow {
	rows := make([]lagRow, len(parts))
	for i, ps := range parts {
		rows[i] = lagRow{Partition: ps.Name, Cells: make([]lagCell, len(groups))}
		for j, g := range groups {
			rows[i].Cells[j].Group = g
		}
		for _, c := range ps.Cursors {
			for j, g := range groups {
				if c.Group == g {
					rows[i].Cells[j] = lagCell{CursorStats: c, Known: true}
				}
			}
		}
	}
	return rows
}

// browser is the message browser: a page of one partition read by
// offset through Fetch, which takes no lease and spends no retry.
type browser struct {
	Partition   string
	PartitionID string // "" when unknown (no traces link)
	From        int64
	Records     []queen.Record
	Next        int64 // offset of the next page; -1 at the end
	Error       string
}

func (h *handler) queuePage(w http.ResponseWriter, r *http.Request) {
	h.showQueue(w, r, http.StatusOK, nil, "")
}

// showQueue renders the queue page; cfg, when not nil, is a refused edit
// to show again with its error.
func (h *handler) showQueue(w http.ResponseWriter, r *http.Request, status int, edited []configField, cfgErr string) {
	name := r.PathValue("queue")
	p, msg := readPager(r)
	if msg != "" {
		h.fail(w, r, http.StatusBadRequest, msg)
		return
	}
	info, err := h.c.DescribeQueue(r.Context(), name)
	if err != nil {
		h.clientErr(w, r, err)
		return
	}
	search := strings.TrimSpace(r.URL.Query().Get("q"))
	page, err := h.partitions(r, name, search, &p)
	if err != nil {
		h.clientErr(w, r, err)
		return
	}
	d := queueData{Info: info, Stats: page.Queue, Partitions: page.Partitions, Search: search, Pager: p, Links: pageLinks(r, p),
		Config: configFields(info.Config), ConfigError: cfgErr, Lag: lagRows(page.Partitions, page.Queue.Groups),
		Chart: h.throughput(name, h.now())}
	if edited != nil {
		d.Config = edited
	}
	if part := r.URL.Query().Get("partition"); part != "" {
		d.Browser = h.browse(r, name, part)
	}
	h.render(w, r, status, "queue", d)
}

// partitions reads a page of queue's partitions: through ListPartitions
// when the client has it, else by paging a full QueueStats (a remote
// client). p.From is an index in the queue's partitions.
func (h *handler) partitions(r *http.Request, queue, search string, p *pager) (*queen.PartitionPage, error) {
	if pl, ok := h.c.(partitionLister); ok {
		page, err := pl.ListPartitions(r.Context(), queue, queen.PartitionFilter{Search: search, From: p.From, Limit: p.Limit})
		if err != nil {
			return nil, err
		}
		p.Next = page.Next
		p.Total = page.Queue.PartitionN
		if search != "" {
			p.Total = -1 // not counted: only the page's part was searched
			p.searched = true
		}
		return page, nil
	}
	qs, err := h.c.QueueStats(r.Context(), queue)
	if err != nil {
		return nil, err
	}
	parts := qs.Partitions
	if search != "" {
		parts = filter(parts, func(ps *queen.PartitionStats) bool { return strings.Contains(ps.Name, search) })
	}
	page := &queen.PartitionPage{Queue: *qs, Partitions: pageOf(p, parts)}
	page.Queue.Partitions = nil
	return page, nil
}

// browse reads the message browser's page of partition part.
func (h *handler) browse(r *http.Request, queue, part string) *browser {
	b := &browser{Partition: part, Next: -1}
	if s := r.URL.Query().Get("offset"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			b.Error = "offset must be a number, 0 or more"
			return b
		}
		b.From = n
	}
	res, err := h.c.Fetch(r.Context(), queue, part, b.From, browseLimit)
	if err != nil {
		_, b.Error = statusOf(err)
		if b.Error == "not found" {
			b.Error = "no partition " + strconv.Quote(part) + " in this queue"
		}
		return b
	}
	b.Records = res.Records
	if len(res.Records) == browseLimit {
		b.Next = res.NextOffset
	}
	if pl, ok := h.c.(partitionLister); ok {
		if pp, err := pl.ListPartitions(r.Context(), queue, queen.PartitionFilter{Name: part}); err == nil && len(pp.Partitions) == 1 {
			b.PartitionID = pp.Partitions[0].ID
		}
	}
	return b
}

// configField is one field of the configuration form.
type configField struct {
	Name  string // form field and QueueConfig field
	Kind  string // duration, int, bool or text
	Value string
	Help  string
}

// configFields are cfg's fields as the form shows them.
func configFields(c queen.QueueConfig) []configField {
	q := compat.Of(&c)
	d := func(name string, v time.Duration, help string) configField {
		return configField{Name: name, Kind: "duration", Value: v.String(), Help: help}
	}
	i := func(name string, v int, help string) configField {
		return configField{Name: name, Kind: "int", Value: strconv.Itoa(v), Help: help}
	}
	b := func(name string, v bool, help string) configField {
		return configField{Name: name, Kind: "bool", Value: strconv.FormatBool(v), Help: help}
	}
	t := func(name, v, help string) configField {
		return configField{Name: name, Kind: "text", Value: v, Help: help}
	}
	return []configField{
		d("LeaseTime", c.LeaseTime, "lease of a pop that names none; 0 for the default"),
		i("RetryLimit", c.RetryLimit, "failed acks before a message is dead-lettered"),
		d("RetryDelay", c.RetryDelay, "hold-back after a failed ack"),
		i("MaxSize", c.MaxSize, "most pending messages; 0 for no limit"),
		d("DelayedProcessing", c.DelayedProcessing, "messages hidden this long after their push"),
		d("WindowBuffer", c.WindowBuffer, "a partition waits this long after its last push"),
		d("Retention", c.Retention, "delete messages older than this; 0 keeps them"),
		d("CompletedRetention", c.CompletedRetention, "delete settled messages older than this"),
		d("MaxWaitTime", c.MaxWaitTime, "dead-letter messages waiting longer; 0 disables"),
		i("Priority", c.Priority, "higher first in discovery pops"),
		b("EncryptionEnabled", c.EncryptionEnabled, "encrypt payloads at rest"),
		t("Namespace", c.Namespace, "label for discovery and listings"),
		t("Task", c.Task, "label for discovery and listings"),
		d("TTL", q.TTL, "kept for Queen compatibility"),
		b("DeadLetterQueue", q.DeadLetterQueue, "kept for Queen compatibility"),
		b("DLQAfterMaxRetries", q.DLQAfterMaxRetries, "kept for Queen compatibility"),
		b("RetentionEnabled", q.RetentionEnabled, "kept for Queen compatibility"),
	}
}

// readConfig reads the form into a QueueConfig. Fields keep what was
// typed, to show again with the error.
func readConfig(form url.Values) (queen.QueueConfig, []configField, string) {
	var c queen.QueueConfig
	fields := configFields(c)
	var problems []string
	for i := range fields {
		f := &fields[i]
		v := strings.TrimSpace(form.Get(f.Name))
		if f.Kind == "bool" {
			v = strconv.FormatBool(v == "true" || v == "on")
		}
		f.Value = v
		if err := setConfig(&c, f.Name, f.Kind, v); err != nil {
			problems = append(problems, f.Name+": "+err.Error())
		}
	}
	return c, fields, strings.Join(problems, "; ")
}

// setConfig sets the named field of c from its form text.
func setConfig(c *queen.QueueConfig, name, kind, v string) error {
	var dur time.Duration
	var n int
	var err error
	switch kind {
	case "duration":
		if v == "" || v == "0" {
			break
		}
		if dur, err = time.ParseDuration(v); err != nil {
			return fmt.Errorf("%q is not a duration such as 30s or 5m", v)
		}
	case "int":
		if v == "" {
			break
		}
		if n, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
	}
	switch name {
	case "LeaseTime":
		c.LeaseTime = dur
	case "RetryLimit":
		c.RetryLimit = n
	case "RetryDelay":
		c.RetryDelay = dur
	case "MaxSize":
		c.MaxSize = n
	case "DelayedProcessing":
		c.DelayedProcessing = dur
	case "WindowBuffer":
		c.WindowBuffer = dur
	case "Retention":
		c.Retention = dur
	case "CompletedRetention":
		c.CompletedRetention = dur
	case "MaxWaitTime":
		c.MaxWaitTime = dur
	case "Priority":
		c.Priority = n
	case "EncryptionEnabled":
		c.EncryptionEnabled = v == "true"
	case "Namespace":
		c.Namespace = v
	case "Task":
		c.Task = v
	case "TTL", "DeadLetterQueue", "DLQAfterMaxRetries", "RetentionEnabled":
		q := compat.Of(c)
		switch name {
		case "TTL":
			q.TTL = dur
		case "DeadLetterQueue":
			q.DeadLetterQueue = v == "true"
		case "DLQAfterMaxRetries":
			q.DLQAfterMaxRetries = v == "true"
		case "RetentionEnabled":
			q.RetentionEnabled = v == "true"
		}
		compat.Set(c, q)
	}
	return nil
}

// saveConfig reconfigures the queue with the form's values; the broker
// validates them as it validates the API's.
func (h *handler) saveConfig(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	info, err := h.c.DescribeQueue(r.Context(), name)
	if err != nil {
		h.clientErr(w, r, err) // edit an existing queue, never create one
		return
	}
	cfg, fields, problem := readConfig(r.PostForm)
	if problem != "" {
		h.showQueue(w, r, http.StatusBadRequest, fields, problem)
		return
	}
	if !confirmed(r) {
		d := confirmData{Action: r.URL.Path, Cancel: base(r) + "/queues/" + pathSeg(name)}
		var changes []string
		for i, was := range configFields(info.Config) {
			f := fields[i]
			d.Fields = append(d.Fields, [2]string{f.Name, f.Value})
			if f.Value != was.Value {
				changes = append(changes, fmt.Sprintf("%s from %s to %s", f.Name, was.Value, f.Value))
			}
		}
		if len(changes) == 0 {
			d.What = fmt.Sprintf("Save the configuration of queue %q: nothing changes.", name)
		} else {
			d.What = fmt.Sprintf("Save the configuration of queue %q, changing %s. The new settings apply at once, to the messages already stored too (a shorter Retention deletes older messages at the next maintenance run).", name, strings.Join(changes, ", "))
		}
		h.confirm(w, r, d)
		return
	}
	if _, err := h.c.ConfigureQueue(r.Context(), name, cfg); err != nil {
		status, msg := statusOf(err)
		if status == http.StatusBadRequest {
			h.showQueue(w, r, status, fields, msg)
			return
		}
		h.clientErr(w, r, err)
		return
	}
	h.done(w, r, base(r)+"/queues/"+pathSeg(name), "saved the configuration of "+name)
}

func pathSeg(s string) string  { return url.PathEscape(s) }
func queryEsc(s string) string { return url.QueryEscape(s) }
