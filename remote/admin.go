package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/compat"
	"github.com/queenlite/queen/internal/wire"
)

func isNotFound(err error) bool { return errors.Is(err, queen.ErrNotFound) }

func asArg(err error, ae **queen.ArgumentError) bool { return errors.As(err, ae) }

func str(s *string) string { return either(s, nil) }

// ConfigureQueue creates or reconfigures a queue, as
// [queen.Broker.ConfigureQueue]: it replaces the whole configuration.
// Durations travel in Queen's units (seconds; RetryDelay in
// milliseconds). The result has no CreatedAt.
func (c *Client) ConfigureQueue(ctx context.Context, name string, cfg queen.QueueConfig) (*queen.QueueInfo, error) {
	if name == "" {
		return nil, &queen.ArgumentError{Field: "name", Reason: "must not be empty"}
	}
	for _, d := range []struct {
		f string
		v time.Duration
	}{{"LeaseTime", cfg.LeaseTime}, {"RetryDelay", cfg.RetryDelay}, {"DelayedProcessing", cfg.DelayedProcessing},
		{"WindowBuffer", cfg.WindowBuffer}, {"Retention", cfg.Retention}, {"CompletedRetention", cfg.CompletedRetention},
		{"MaxWaitTime", cfg.MaxWaitTime}, {"TTL", compat.Of(&cfg).TTL}} {
		if d.v < 0 {
			return nil, &queen.ArgumentError{Field: "QueueConfig." + d.f, Reason: "must not be negative"}
		}
	}
	if cfg.LeaseTime > 0 && cfg.LeaseTime < time.Second {
		return nil, &queen.ArgumentError{Field: "QueueConfig.LeaseTime", Reason: fmt.Sprintf("must be at least 1s, not %v", cfg.LeaseTime)}
	}
	if cfg.LeaseTime > queen.MaxLease {
		return nil, &queen.ArgumentError{Field: "QueueConfig.LeaseTime", Reason: fmt.Sprintf("must be at most %v, not %v", queen.MaxLease, cfg.LeaseTime)}
	}
	if cfg.RetryLimit < 0 {
		return nil, &queen.ArgumentError{Field: "QueueConfig.RetryLimit", Reason: "must not be negative"}
	}
	if cfg.MaxSize < 0 {
		return nil, &queen.ArgumentError{Field: "QueueConfig.MaxSize", Reason: "must not be negative"}
	}
	body := map[string]any{"queue": name, "options": wire.OptionsOf(&cfg)}
	if cfg.Namespace != "" {
		body["namespace"] = cfg.Namespace
	}
	if cfg.Task != "" {
		body["task"] = cfg.Task
	}
	var out struct {
		QueueID     string             `json:"queueId"`
		PartitionID string             `json:"partitionId"`
		Queue       string             `json:"queue"`
		Namespace   *string            `json:"namespace"`
		Task        *string            `json:"task"`
		Options     *wire.QueueOptions `json:"options"`
	}
	r := &request{op: "configure", method: http.MethodPost, path: "/api/v1/configure", body: body, safe: true}
	if err := c.call(ctx, r, &out); err != nil {
		var ae *queen.ArgumentError
		if errors.As(err, &ae) && ae.Field == "options.encryptionEnabled" {
			return nil, &queen.ArgumentError{Field: "QueueConfig.EncryptionEnabled", Reason: ae.Reason}
		}
		return nil, err
	}
	info := &queen.QueueInfo{Name: firstOf(out.Queue, name), ID: out.QueueID, DefaultPartitionID: out.PartitionID, Config: cfg}
	if out.Options != nil {
		info.Config = out.Options.Config(str(out.Namespace), str(out.Task))
	}
	return info, nil
}

// statusQueueJSON is GET /api/v1/status/queues/{queue}.
type statusQueueJSON struct {
	Queue struct {
		ID        string  `json:"id"`
		Name      string  `json:"name"`
		Namespace *string `json:"namespace"`
		Task      *string `json:"task"`
		Priority  int     `json:"priority"`
		CreatedAt *string `json:"createdAt"`
		Config    struct {
			LeaseTime       int64 `json:"leaseTime"`
			RetryLimit      int   `json:"retryLimit"`
			RetryDelay      int64 `json:"retryDelay"`
			TTL             int64 `json:"ttl"`
			MaxQueueSize    int   `json:"maxQueueSize"`
			DeadLetterQueue bool  `json:"deadLetterQueue"`
		} `json:"config"`
		Options *wire.QueueOptions `json:"options"`
		Groups  []string           `json:"groups"`
		Counts  *wire.Counts       `json:"counts"` // ours
	} `json:"queue"`
	Partitions []struct {
		ID            string           `json:"id"`
		Name          string           `json:"name"`
		CreatedAt     *string          `json:"createdAt"`
		Messages      wire.QueenCounts `json:"messages"`
		Counts        *wire.Counts     `json:"counts"` // ours
		NewestMessage *string          `json:"newestMessage"`
		FirstOffset   int64            `json:"firstOffset"`
		NextOffset    int64            `json:"nextOffset"`
	} `json:"partitions"`
	Totals wire.QueenCounts `json:"totals"`
}

// countsOf is the broker's counts when the server sent them (ours), else
// what Queen's counters say (Queen's server; see wire.QueenCounts.Counts).
func countsOf(own *wire.Counts, theirs wire.QueenCounts) wire.Counts {
	if own != nil {
		return *own
	}
	return theirs.Counts()
}

func timeOf(s *string) time.Time {
	if s == nil {
		return time.Time{}
	}
	return parseTime(*s)
}

// statusQueue reads GET /api/v1/status/queues/{queue}.
func (c *Client) statusQueue(ctx context.Context, name string) (*statusQueueJSON, error) {
	if name == "" {
		return nil, &queen.ArgumentError{Field: "name", Reason: "must not be empty"}
	}
	r := &request{op: "describe queue", method: http.MethodGet, path: pathOf("/api/v1/status/queues/", name), safe: true}
	a, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	if a.status < 200 || a.status > 299 {
		return nil, c.errorFor(r, a)
	}
	if err := errorIn(r.op, a.body, "Queue not found"); err != nil { // Queen's server: 200 {"error":"Queue not found"}
		return nil, err
	}
	var out statusQueueJSON
	if err := json.Unmarshal(a.body, &out); err != nil {
		return nil, &TransportError{Op: r.op, URL: c.redacted(r), Err: fmt.Errorf("answer is not a queue's status: %w", err)}
	}
	return &out, nil
}

func (s *statusQueueJSON) info() *queen.QueueInfo {
	q := &s.Queue
	info := &queen.QueueInfo{Name: q.Name, ID: q.ID, CreatedAt: timeOf(q.CreatedAt)}
	if q.Options != nil {
		info.Config = q.Options.Config(str(q.Namespace), str(q.Task))
	} else { // Queen's server: the config block only
		info.Config = queen.QueueConfig{LeaseTime: time.Duration(q.Config.LeaseTime) * time.Second, RetryLimit: q.Config.RetryLimit,
			RetryDelay: time.Duration(q.Config.RetryDelay) * time.Millisecond,
			MaxSize:    q.Config.MaxQueueSize, Priority: q.Priority,
			Namespace: str(q.Namespace), Task: str(q.Task)}
		compat.Set(&info.Config, compat.QueueFields{TTL: time.Duration(q.Config.TTL) * time.Second, DeadLetterQueue: q.Config.DeadLetterQueue})
	}
	for _, p := range s.Partitions {
		if p.Name == queen.DefaultPartition {
			info.DefaultPartitionID = p.ID
		}
	}
	return info
}

// DescribeQueue describes a queue, as [queen.Broker.DescribeQueue]. An
// unknown queue is [queen.ErrNotFound] (Queen's server says so with a 200
// carrying {"error":"Queue not found"}). Queen's server stores MaxSize but
// never enforces it.
func (c *Client) DescribeQueue(ctx context.Context, name string) (*queen.QueueInfo, error) {
	s, err := c.statusQueue(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.info(), nil
}

// QueueStats describes a queue and its partitions, as
// [queen.Broker.QueueStats], without per-partition cursors (Cursors is
// nil). The counts are the broker's, as the server sends them. Against
// Queen's server, which sends only its counters, they are read from those
// (see the package doc), and FirstOffset and NextOffset are zero. Those
// counters live in a table that server refreshes in the background (every
// 10 s): the call first asks it to refresh them (one of its admin routes,
// see [Client.ListQueues]), so that they are those of the call, not old
// ones. That server's answer names no groups: Groups is read from its
// group listing, one more request.
func (c *Client) QueueStats(ctx context.Context, name string) (*queen.QueueStats, error) {
	if err := c.liveCounts(ctx); err != nil {
		return nil, err
	}
	s, err := c.statusQueue(ctx, name)
	if err != nil {
		return nil, err
	}
	qs := &queen.QueueStats{QueueInfo: *s.info(), PartitionN: len(s.Partitions), Groups: s.Queue.Groups}
	if c.serverKind(ctx) == ServerQueen {
		byQueue, err := c.groupsByQueue(ctx)
		if err != nil {
			return nil, err
		}
		qs.Groups = byQueue[name]
	}
	countsOf(s.Queue.Counts, s.Totals).SetQueue(qs)
	for _, p := range s.Partitions {
		ps := queen.PartitionStats{Name: p.Name, ID: p.ID, CreatedAt: timeOf(p.CreatedAt),
			FirstOffset: p.FirstOffset, NextOffset: p.NextOffset, LastPushAt: timeOf(p.NewestMessage)}
		countsOf(p.Counts, p.Messages).SetPartition(&ps)
		qs.Partitions = append(qs.Partitions, ps)
	}
	return qs, nil
}

// ListQueues describes every queue by name, as [queen.Broker.ListQueues];
// each Config holds only the labels and Priority. The counts are read as in
// [Client.QueueStats]. Against Queen's server, whose listing has neither,
// DefaultPartitionID is empty and Groups is read from its group listing
// (one more request), and the counts are those of the call: it first asks that server to refresh its stats table (POST
// /api/v1/stats/refresh, an admin route: a token without that right is a
// [*ServerError] 403); while another server over the same database runs
// its own refresh, that one is awaited, and one that never ends is an
// error matching [queen.ErrUnavailable], never counts that may be up to 2
// minutes old.
func (c *Client) ListQueues(ctx context.Context) ([]queen.QueueStats, error) {
	var out struct {
		Queues []struct {
			ID         string           `json:"id"`
			Name       string           `json:"name"`
			Namespace  *string          `json:"namespace"`
			Task       *string          `json:"task"`
			Priority   int              `json:"priority"`
			CreatedAt  *string          `json:"createdAt"`
			Partitions int              `json:"partitions"`
			Messages   wire.QueenCounts `json:"messages"`
			Counts     *wire.Counts     `json:"counts"` // ours
			// Ours; absent from Queen's server, where they stay empty.
			DefaultPartitionID string   `json:"defaultPartitionId"`
			Groups             []string `json:"groups"`
		} `json:"queues"`
	}
	if err := c.liveCounts(ctx); err != nil {
		return nil, err
	}
	r := &request{op: "list queues", method: http.MethodGet, path: "/api/v1/resources/queues", safe: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	var byQueue map[string][]string
	if c.serverKind(ctx) == ServerQueen {
		var err error
		if byQueue, err = c.groupsByQueue(ctx); err != nil {
			return nil, err
		}
	}
	qs := make([]queen.QueueStats, 0, len(out.Queues))
	for _, q := range out.Queues {
		st := queen.QueueStats{
			QueueInfo: queen.QueueInfo{Name: q.Name, ID: q.ID, CreatedAt: timeOf(q.CreatedAt), DefaultPartitionID: q.DefaultPartitionID,
				Config: queen.QueueConfig{Namespace: str(q.Namespace), Task: str(q.Task), Priority: q.Priority}},
			PartitionN: q.Partitions,
		}
		if len(q.Groups) > 0 { // nil when none, as a Broker's
			st.Groups = q.Groups
		}
		if byQueue != nil {
			st.Groups = byQueue[q.Name]
		}
		countsOf(q.Counts, q.Messages).SetQueue(&st)
		qs = append(qs, st)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name }) // the server lists newest first
	return qs, nil
}

// groupsByQueue names the consumer groups of every queue, sorted, from
// the group listing: Queen's server names none in its queue answers.
func (c *Client) groupsByQueue(ctx context.Context) (map[string][]string, error) {
	gs, err := c.ListGroups(ctx, queen.GroupFilter{})
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string)
	for _, g := range gs {
		out[g.Queue] = append(out[g.Queue], g.Group)
	}
	for _, names := range out {
		sort.Strings(names)
	}
	return out, nil
}

// DeleteQueue deletes a queue and everything in it, as
// [queen.Broker.DeleteQueue].
func (c *Client) DeleteQueue(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, &queen.ArgumentError{Field: "name", Reason: "must not be empty"}
	}
	var out struct {
		Existed bool `json:"existed"`
	}
	r := &request{op: "delete queue", method: http.MethodDelete, path: pathOf("/api/v1/resources/queues/", name), safe: true}
	if err := c.call(ctx, r, &out); err != nil {
		return false, err
	}
	return out.Existed, nil
}

// Fetch reads a partition by offset, as [queen.Broker.Fetch]. Queen's
// server has no such read: [queen.ErrUnsupported].
func (c *Client) Fetch(ctx context.Context, queue, partition string, from int64, limit int) (*queen.FetchResult, error) {
	switch {
	case queue == "":
		return nil, &queen.ArgumentError{Field: "queue", Reason: "must not be empty"}
	case partition == "":
		return nil, &queen.ArgumentError{Field: "partition", Reason: "must not be empty"}
	case from < 0:
		return nil, &queen.ArgumentError{Field: "from", Reason: "must not be negative"}
	case limit < 0:
		return nil, &queen.ArgumentError{Field: "limit", Reason: "must not be negative"}
	}
	if err := c.unsupportedOn(ctx, "fetch by offset"); err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = 100
	}
	q := url.Values{"fromOffset": {strconv.FormatInt(from, 10)}, "limit": {strconv.Itoa(min(limit, 1000))}}
	var out struct {
		Queue      string `json:"queue"`
		Partition  string `json:"partition"`
		NextOffset int64  `json:"nextOffset"`
		Records    []struct {
			Offset        int64           `json:"offset"`
			ID            string          `json:"id"`
			TransactionID string          `json:"transactionId"`
			Data          json.RawMessage `json:"data"`
			CreatedAt     *string         `json:"createdAt"`
			TraceID       *string         `json:"traceId"`
		} `json:"records"`
	}
	r := &request{op: "fetch", method: http.MethodGet, path: pathOf("/api/v1/fetch/queue/", queue, "/partition/", partition), query: q,
		safe: true, notFound: c.missingRoute("fetch by offset", "Queue or partition not found")}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	res := &queen.FetchResult{Queue: firstOf(out.Queue, queue), Partition: firstOf(out.Partition, partition), NextOffset: out.NextOffset,
		Records: make([]queen.Record, len(out.Records))}
	for i, rec := range out.Records {
		res.Records[i] = queen.Record{Offset: rec.Offset, MessageID: rec.ID, TransactionID: rec.TransactionID, TraceID: str(rec.TraceID),
			Payload: rec.Data, CreatedAt: timeOf(rec.CreatedAt)}
	}
	return res, nil
}

// missingRoute maps the 404 of a route Queen's server lacks: the known
// not-found message of ours is ErrNotFound, anything else (the server has
// no such route) ErrUnsupported.
func (c *Client) missingRoute(what, ours string) func(string) error {
	return func(msg string) error {
		if msg == ours {
			return notFound(msg)
		}
		return fmt.Errorf("%w: %s (the server has no such route)", queen.ErrUnsupported, what)
	}
}

// wireGroup is the group as the routes under /api/v1/consumer-groups/
// name it: the empty group is queue mode there, as in a Broker
// ("As in PopRequest.Group, an empty group (or QueueModeGroup) is the
// queue-mode group").
func wireGroup(group string) string {
	if group == "" {
		return queen.QueueModeGroup
	}
	return group
}

// SeekGroup moves a group's cursors on a queue, as
// [queen.Broker.SeekGroup]: an unknown queue is [queen.ErrNotFound], a
// group that never popped it [queen.ErrGroupNotFound]. Queen's own server
// answers both as a seek that moved 0 partitions.
func (c *Client) SeekGroup(ctx context.Context, group, queue string, opts queen.SeekOptions) (*queen.SeekResult, error) {
	if queue == "" {
		return nil, &queen.ArgumentError{Field: "queue", Reason: "must not be empty"}
	}
	group = wireGroup(group)
	body := map[string]any{"toEnd": true}
	if !opts.ToEnd && !opts.Timestamp.IsZero() {
		body = map[string]any{"timestamp": opts.Timestamp.UTC().Format(time.RFC3339Nano)}
	}
	var out struct {
		PartitionsUpdated int `json:"partitionsUpdated"`
	}
	r := &request{op: "seek", method: http.MethodPost, path: pathOf("/api/v1/consumer-groups/", group, "/queues/", queue, "/seek"), body: body, safe: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return &queen.SeekResult{PartitionsUpdated: out.PartitionsUpdated}, nil
}

// SeekPartition moves a group's cursor on one partition to its end, as
// [queen.Broker.SeekPartition]; the API has no seek of one partition to a
// time, so opts with a Timestamp (and not ToEnd) is
// [queen.ErrUnsupported]. An unknown partition is [queen.ErrNotFound], a
// group that never popped the queue [queen.ErrGroupNotFound]. Queen's
// server, which has no offsets, reports where the cursor went as a time:
// CursorMovedTo is zero there.
func (c *Client) SeekPartition(ctx context.Context, group, queue, partition string, opts queen.SeekOptions) (*queen.SeekResult, error) {
	if partition == "" {
		return nil, &queen.ArgumentError{Field: "partition", Reason: "must not be empty"}
	}
	if !opts.ToEnd && !opts.Timestamp.IsZero() {
		return nil, fmt.Errorf("%w: seeking one partition to a time over HTTP", queen.ErrUnsupported)
	}
	group = wireGroup(group)
	r := &request{op: "seek partition", method: http.MethodPost,
		path: pathOf("/api/v1/consumer-groups/", group, "/queues/", queue, "/partitions/", partition, "/seek"), body: map[string]any{}, safe: true}
	a, err := c.send(ctx, r)
	if err == nil && (a.status < 200 || a.status > 299) {
		err = c.errorFor(r, a)
	}
	if err == nil { // Queen's server: 200 {"success":false,"error":"Partition not found"}
		err = errorIn(r.op, a.body, "Partition not found")
	}
	if err != nil {
		var se *ServerError // an older Queen answers 500 "Partition not found"
		if errors.As(err, &se) && se.Message == "Partition not found" {
			return nil, fmt.Errorf("%w: Partition not found", queen.ErrNotFound)
		}
		return nil, err
	}
	var out struct {
		Updated bool `json:"updated"`
		// An offset from cmd/queen; Queen's server sends the time of the
		// message the cursor is now at, which a SeekResult has no field for.
		CursorMovedTo json.RawMessage `json:"cursorMovedTo"`
	}
	if err := json.Unmarshal(a.body, &out); err != nil {
		return nil, &TransportError{Op: r.op, URL: c.redacted(r), Err: fmt.Errorf("answer is not a seek result: %w", err)}
	}
	res := &queen.SeekResult{}
	if len(out.CursorMovedTo) > 0 && out.CursorMovedTo[0] != '"' && string(out.CursorMovedTo) != "null" {
		if err := json.Unmarshal(out.CursorMovedTo, &res.CursorMovedTo); err != nil {
			return nil, &TransportError{Op: r.op, URL: c.redacted(r), Err: fmt.Errorf("cursorMovedTo is neither an offset nor a time: %w", err)}
		}
	}
	if out.Updated {
		res.PartitionsUpdated = 1
	}
	return res, nil
}

// ListGroups describes the consumer groups f selects, as
// [queen.Broker.ListGroups], without Consumed, LastAckAt and
// OldestPendingAt (so f.MaxProbes, which bounds the reads that find
// OldestPendingAt, changes nothing but must not be negative). Queen's server does not send a group's subscription
// mode, start time, join time, lag in messages, in-flight messages or live
// leases: Mode is "", From and JoinedAt are zero, and Lag, InFlight and
// ActiveLeases are 0 there, which says nothing about the group (read
// PartitionsWithLag, which it does send). Partitions counts the cursors
// it has.
func (c *Client) ListGroups(ctx context.Context, f queen.GroupFilter) ([]queen.GroupStats, error) {
	if f.MaxProbes < 0 {
		return nil, &queen.ArgumentError{Field: "MaxProbes", Reason: "must not be negative"}
	}
	var out []struct {
		Name                  string  `json:"name"`
		QueueName             string  `json:"queueName"`
		Members               int     `json:"members"`
		PartitionsWithLag     int     `json:"partitionsWithLag"`
		TotalLag              *int64  `json:"totalLag"`
		SubscriptionMode      *string `json:"subscriptionMode"`
		SubscriptionTimestamp *string `json:"subscriptionTimestamp"`
		SubscriptionCreatedAt *string `json:"subscriptionCreatedAt"`
		InFlight              int64   `json:"inFlight"`
		ActiveLeases          int     `json:"activeLeases"`
		Conflation            bool    `json:"conflation"`
	}
	r := &request{op: "list groups", method: http.MethodGet, path: "/api/v1/consumer-groups", safe: true}
	a, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	if a.status < 200 || a.status > 299 {
		return nil, c.errorFor(r, a)
	}
	gs := []queen.GroupStats{}
	if len(bytes.TrimSpace(a.body)) == 0 { // Queen's server with no group at all: 200 and no body
		return gs, nil
	}
	if err := json.Unmarshal(a.body, &out); err != nil {
		return nil, &TransportError{Op: r.op, URL: c.redacted(r), Err: fmt.Errorf("answer 200 is not a list of groups: %w", err)}
	}
	for _, g := range out {
		if (f.Group != "" && g.Name != f.Group) || (f.Queue != "" && g.QueueName != f.Queue) {
			continue
		}
		s := queen.GroupStats{Queue: g.QueueName, Group: g.Name, Mode: queen.SubscriptionMode(str(g.SubscriptionMode)),
			JoinedAt: timeOf(g.SubscriptionCreatedAt), Conflation: g.Conflation, Partitions: g.Members,
			PartitionsWithLag: g.PartitionsWithLag, InFlight: g.InFlight, ActiveLeases: g.ActiveLeases}
		if g.TotalLag != nil {
			s.Lag = *g.TotalLag
		}
		if s.Mode == "timestamp" {
			s.From = timeOf(g.SubscriptionTimestamp)
		}
		gs = append(gs, s)
	}
	return gs, nil
}

// DeleteGroup removes a group's cursors on queue (every queue when queue
// is ""), as [queen.Broker.DeleteGroup]: an unknown queue is
// [queen.ErrNotFound], a group that never popped it
// [queen.ErrGroupNotFound] (Queen's own server answers 0 removed).
func (c *Client) DeleteGroup(ctx context.Context, group, queue string, deleteMetadata bool) (int, error) {
	group = wireGroup(group)
	path := pathOf("/api/v1/consumer-groups/", group)
	if queue != "" {
		path = pathOf("/api/v1/consumer-groups/", group, "/queues/", queue)
	}
	var out struct {
		DeletedPartitions int `json:"deletedPartitions"`
	}
	r := &request{op: "delete group", method: http.MethodDelete, path: path,
		query: url.Values{"deleteMetadata": {strconv.FormatBool(deleteMetadata)}}, safe: true}
	if err := c.call(ctx, r, &out); err != nil {
		return 0, err
	}
	return out.DeletedPartitions, nil
}

// SetGroupSubscription moves a group's start point, as
// [queen.Broker.SetGroupSubscription]: a group that popped no queue is
// [queen.ErrGroupNotFound] (Queen's own server answers 0 moved).
func (c *Client) SetGroupSubscription(ctx context.Context, group string, from time.Time) (int, error) {
	group = wireGroup(group)
	var out struct {
		RowsUpdated int `json:"rowsUpdated"`
	}
	r := &request{op: "group subscription", method: http.MethodPost, path: pathOf("/api/v1/consumer-groups/", group, "/subscription"),
		body: map[string]string{"subscriptionTimestamp": from.UTC().Format(time.RFC3339Nano)}, safe: true}
	if err := c.call(ctx, r, &out); err != nil {
		return 0, err
	}
	return out.RowsUpdated, nil
}

// letterJSON is a dead-letter or parked entry.
type letterJSON struct {
	DeadLetterID  string          `json:"deadLetterId"`
	ParkedID      string          `json:"parkedId"`
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   *string         `json:"partitionId"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	ErrorMessage  *string         `json:"errorMessage"`
	RetryCount    int             `json:"retryCount"`
	Data          json.RawMessage `json:"data"`
	TraceID       *string         `json:"traceId"`
	ProducerSub   *string         `json:"producerSub"`
	CreatedAt     *string         `json:"createdAt"`
	FailedAt      *string         `json:"failedAt"`
	Offset        int64           `json:"offset"`
}

// letters lists /api/v1/dlq or /api/v1/parked.
func (c *Client) letters(ctx context.Context, parked bool, f queen.LetterFilter) (*queen.LetterPage, error) {
	if f.Limit < 0 || f.Offset < 0 {
		return nil, &queen.ArgumentError{Field: "LetterFilter.Limit", Reason: "limit and offset must not be negative"}
	}
	path, op := "/api/v1/dlq", "dead letters"
	if parked {
		path, op = "/api/v1/parked", "parked messages"
		if err := c.unsupportedOn(ctx, "the parked store"); err != nil {
			return nil, err
		}
	}
	q := url.Values{}
	for k, v := range map[string]string{"queue": f.Queue, "consumerGroup": f.ConsumerGroup, "partition": f.Partition} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.From.IsZero() {
		q.Set("from", f.From.UTC().Format(time.RFC3339Nano))
	}
	if !f.To.IsZero() {
		q.Set("to", f.To.UTC().Format(time.RFC3339Nano))
	}
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
	q.Set("limit", strconv.Itoa(min(limit, 1000)))
	if f.Offset > 0 {
		q.Set("offset", strconv.Itoa(f.Offset))
	}
	var out struct {
		Messages []letterJSON `json:"messages"`
		Total    *int         `json:"total"`
	}
	r := &request{op: op, method: http.MethodGet, path: path, query: q, safe: true, notFound: c.missingRoute(op, "")}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	page := &queen.LetterPage{Letters: make([]queen.DeadLetter, len(out.Messages))}
	if out.Total != nil {
		page.Total = *out.Total
	}
	for i, l := range out.Messages {
		page.Letters[i] = queen.DeadLetter{ID: firstOf(l.ParkedID, l.DeadLetterID), MessageID: l.ID, TransactionID: l.TransactionID,
			Queue: l.Queue, Partition: l.Partition, PartitionID: str(l.PartitionID), ConsumerGroup: l.ConsumerGroup,
			Error: str(l.ErrorMessage), RetryCount: l.RetryCount, Payload: l.Data, TraceID: str(l.TraceID),
			ProducerSub: str(l.ProducerSub), Offset: l.Offset, CreatedAt: timeOf(l.CreatedAt), FailedAt: timeOf(l.FailedAt)}
	}
	return page, nil
}

// replay replays a dead letter or parked message.
func (c *Client) replay(ctx context.Context, parked bool, id string) (*queen.ReplayResult, error) {
	base, what, ours := "/api/v1/dlq/", "replaying dead letters", "Dead letter not found"
	if parked {
		base, what, ours = "/api/v1/parked/", "the parked store", "Parked message not found"
	}
	if id == "" {
		return nil, queen.ErrNotFound
	}
	if err := c.unsupportedOn(ctx, what); err != nil {
		return nil, err
	}
	var out struct {
		DeadLetterID  string `json:"deadLetterId"`
		ParkedID      string `json:"parkedId"`
		MessageID     string `json:"messageId"`
		TransactionID string `json:"transactionId"`
		Offset        int64  `json:"offset"`
		Duplicate     bool   `json:"duplicate"`
	}
	r := &request{op: "replay", method: http.MethodPost, path: pathOf(base, id, "/replay"), body: map[string]any{}, safe: true,
		notFound: c.missingRoute(what, ours)}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, idNotFound(err)
	}
	return &queen.ReplayResult{ID: firstOf(firstOf(out.ParkedID, out.DeadLetterID), id), MessageID: out.MessageID,
		TransactionID: out.TransactionID, Offset: out.Offset, Duplicate: out.Duplicate}, nil
}

// idNotFound turns the server's refusal of an id it could never have
// issued (not a UUID) into ErrNotFound, as the broker answers.
func idNotFound(err error) error {
	var ae *queen.ArgumentError
	if errors.As(err, &ae) && (ae.Field == "deadLetterId" || ae.Field == "parkedId") {
		return queen.ErrNotFound
	}
	return err
}

// deleteLetter deletes a dead letter or parked message.
func (c *Client) deleteLetter(ctx context.Context, parked bool, id string) error {
	base, what, ours := "/api/v1/dlq/", "deleting dead letters", "Dead letter not found"
	if parked {
		base, what, ours = "/api/v1/parked/", "the parked store", "Parked message not found"
	}
	if id == "" {
		return queen.ErrNotFound
	}
	if err := c.unsupportedOn(ctx, what); err != nil {
		return err
	}
	r := &request{op: "delete letter", method: http.MethodDelete, path: pathOf(base, id), notFound: c.missingRoute(what, ours)}
	return idNotFound(c.call(ctx, r, nil))
}

// DeadLetters lists dead letters, as [queen.Broker.DeadLetters]. Against
// Queen's server Total, ID and Offset are zero.
func (c *Client) DeadLetters(ctx context.Context, f queen.LetterFilter) (*queen.LetterPage, error) {
	return c.letters(ctx, false, f)
}

// ReplayDeadLetter pushes a copy of a dead letter back, as
// [queen.Broker.ReplayDeadLetter]; [queen.ErrUnsupported] on Queen's
// server.
func (c *Client) ReplayDeadLetter(ctx context.Context, id string) (*queen.ReplayResult, error) {
	return c.replay(ctx, false, id)
}

// DeleteDeadLetter removes a dead letter, as
// [queen.Broker.DeleteDeadLetter]; [queen.ErrUnsupported] on Queen's
// server.
func (c *Client) DeleteDeadLetter(ctx context.Context, id string) error {
	return c.deleteLetter(ctx, false, id)
}

// ParkedMessages lists parked messages, as [queen.Broker.ParkedMessages];
// [queen.ErrUnsupported] on Queen's server.
func (c *Client) ParkedMessages(ctx context.Context, f queen.LetterFilter) (*queen.LetterPage, error) {
	return c.letters(ctx, true, f)
}

// ReplayParked pushes a copy of a parked message back, as
// [queen.Broker.ReplayParked]; [queen.ErrUnsupported] on Queen's server.
func (c *Client) ReplayParked(ctx context.Context, id string) (*queen.ReplayResult, error) {
	return c.replay(ctx, true, id)
}

// DeleteParked removes a parked message, as [queen.Broker.DeleteParked];
// [queen.ErrUnsupported] on Queen's server.
func (c *Client) DeleteParked(ctx context.Context, id string) error {
	return c.deleteLetter(ctx, true, id)
}

// Ping reports whether the server can serve (GET /health answers 200).
// A server whose broker has closed answers [queen.ErrClosed].
func (c *Client) Ping(ctx context.Context) error {
	var out struct {
		Status string `json:"status"`
		Server string `json:"server"`
	}
	a, err := c.send(ctx, &request{op: "ping", method: http.MethodGet, path: "/health", safe: true})
	if err != nil {
		return err
	}
	_ = json.Unmarshal(a.body, &out)
	switch {
	case a.status == http.StatusOK:
		return nil
	case a.status == http.StatusServiceUnavailable:
		return &ServerError{Op: "ping", StatusCode: a.status, Message: firstOf(out.Status, "unhealthy"), Err: queen.ErrClosed}
	}
	return c.errorFor(&request{op: "ping"}, a)
}
