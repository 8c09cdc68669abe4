package httpapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/queenlite/queen"
)

// partLag is a group's cursor in one partition, with the push time of the
// oldest message it has not settled.
type partLag struct {
	queue  string
	part   *queen.PartitionStats
	cur    queen.CursorStats
	oldest time.Time // zero with no lag
}

// groupParts returns group's cursors on queue; an unknown queue has none.
func (h *handler) groupParts(ctx context.Context, queue, group string) ([]partLag, error) {
	qs, err := h.b.QueueStats(ctx, queue)
	if errors.Is(err, queen.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []partLag
	for i := range qs.Partitions {
		p := &qs.Partitions[i]
		for _, c := range p.Cursors {
			if c.Group != group {
				continue
			}
			pl := partLag{queue: queue, part: p, cur: c}
			if c.Lag > 0 {
				res, err := h.b.Fetch(ctx, queue, p.Name, c.Offset, 1)
				if err != nil && !errors.Is(err, queen.ErrNotFound) {
					return nil, err
				}
				if err == nil && len(res.Records) > 0 {
					pl.oldest = res.Records[0].CreatedAt
				}
			}
			out = append(out, pl)
		}
	}
	return out, nil
}

// lagSeconds is how long ago t was, in whole seconds; 0 for a zero t.
func lagSeconds(t, now time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(0, int64(now.Sub(t)/time.Second))
}

// groupSummary is one (group, queue) of GET /api/v1/consumer-groups.
type groupSummary struct {
	Name                  string     `json:"name"`
	Topics                []string   `json:"topics"`
	QueueName             string     `json:"queueName"`
	Members               int        `json:"members"`
	PartitionsWithLag     int        `json:"partitionsWithLag"`
	TotalLag              int64      `json:"totalLag"`
	MaxTimeLag            int64      `json:"maxTimeLag"`
	State                 string     `json:"state"`
	SubscriptionMode      nullString `json:"subscriptionMode"`
	SubscriptionTimestamp msTime     `json:"subscriptionTimestamp"`
	SubscriptionCreatedAt msTime     `json:"subscriptionCreatedAt"`
	InFlight              int64      `json:"inFlight"`
	ActiveLeases          int        `json:"activeLeases"`
	Conflation            bool       `json:"conflation"`
}

// listGroups serves GET /api/v1/consumer-groups: one entry per (group,
// queue), queue mode included.
func (h *handler) listGroups(w http.ResponseWriter, r *http.Request) {
	groups, err := h.b.ListGroups(r.Context(), queen.GroupFilter{})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	now := h.b.Now()
	out := make([]groupSummary, 0, len(groups))
	for _, g := range groups {
		s := groupSummary{
			Name: g.Group, Topics: []string{g.Queue}, QueueName: g.Queue, Members: g.Partitions,
			PartitionsWithLag: g.PartitionsWithLag, TotalLag: g.Lag, MaxTimeLag: lagSeconds(g.OldestPendingAt, now),
			SubscriptionMode: nullString(g.Mode), SubscriptionCreatedAt: msTime(g.JoinedAt),
			InFlight: g.InFlight, ActiveLeases: g.ActiveLeases, Conflation: g.Conflation,
		}
		switch g.Mode {
		case "timestamp":
			s.SubscriptionTimestamp = msTime(g.From)
		case queen.SubscriptionModeNew:
			s.SubscriptionTimestamp = msTime(g.JoinedAt)
		}
		switch {
		case s.MaxTimeLag > 300:
			s.State = "Lagging"
		case g.Consumed > 0 || g.InFlight > 0:
			s.State = "Stable"
		default:
			s.State = "Dead"
		}
		out = append(out, s)
	}
	writeJSON(w, http.StatusOK, out)
}

// groupPartition is one partition of GET /api/v1/consumer-groups/{group}.
type groupPartition struct {
	Partition      string     `json:"partition"`
	PartitionID    string     `json:"partitionId"`
	WorkerID       nullString `json:"workerId"`
	LastConsumedAt msTime     `json:"lastConsumedAt"`
	TotalConsumed  int64      `json:"totalConsumed"`
	OffsetLag      int64      `json:"offsetLag"`
	TimeLagSeconds int64      `json:"timeLagSeconds"`
	LeaseActive    bool       `json:"leaseActive"`
	Offset         int64      `json:"offset"`
	InFlight       int        `json:"inFlight"`
}

// getGroup serves GET /api/v1/consumer-groups/{group}: the group's
// partitions keyed by queue; {} for an unknown group.
func (h *handler) getGroup(w http.ResponseWriter, r *http.Request) {
	group, err := pathName(r, "group")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	groups, err := h.b.ListGroups(r.Context(), queen.GroupFilter{Group: group})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type queueParts struct {
		Partitions []groupPartition `json:"partitions"`
	}
	now := h.b.Now()
	out := make(map[string]queueParts)
	for _, g := range groups {
		parts, err := h.groupParts(r.Context(), g.Queue, group)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		qp := queueParts{Partitions: []groupPartition{}}
		for _, p := range parts {
			qp.Partitions = append(qp.Partitions, groupPartition{
				Partition: p.part.Name, PartitionID: p.part.ID, WorkerID: nullString(p.cur.LeaseID),
				LastConsumedAt: msTime(p.cur.LastAckAt), TotalConsumed: p.cur.Consumed, OffsetLag: p.cur.Lag,
				TimeLagSeconds: lagSeconds(p.oldest, now), LeaseActive: p.cur.LeaseID != "", Offset: p.cur.Offset,
				InFlight: p.cur.InFlight,
			})
		}
		out[g.Queue] = qp
	}
	writeJSON(w, http.StatusOK, out)
}

// laggingRow is one partition of GET /api/v1/consumer-groups/lagging.
type laggingRow struct {
	ConsumerGroup      string     `json:"consumer_group"`
	QueueName          string     `json:"queue_name"`
	PartitionName      string     `json:"partition_name"`
	PartitionID        string     `json:"partition_id"`
	WorkerID           nullString `json:"worker_id"`
	OffsetLag          int64      `json:"offset_lag"`
	TimeLagSeconds     int64      `json:"time_lag_seconds"`
	LagHours           float64    `json:"lag_hours"`
	OldestUnconsumedAt msTime     `json:"oldest_unconsumed_at"`
	LastConsumedAt     msTime     `json:"last_consumed_at"`
}

// laggingGroups serves GET /api/v1/consumer-groups/lagging: partitions
// whose oldest unsettled message waited at least minLagSeconds (default
// 3600), most lagging first. worker_id is always null. Queen's own server
// puts the lease id there (observed), which its dashboard shows as the
// worker; but a lease id is a credential (it acks and extends the lease),
// and this route is read-only, and this broker records no other consumer
// identity to show.
func (h *handler) laggingGroups(w http.ResponseWriter, r *http.Request) {
	p := newParams(r)
	minLag := min(p.num("minLagSeconds", 3600), maxDurationUnits)
	if p.err != nil {
		h.writeError(w, r, p.err)
		return
	}
	groups, err := h.b.ListGroups(r.Context(), queen.GroupFilter{})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	now := h.b.Now()
	out := []laggingRow{}
	for _, g := range groups {
		if g.Lag == 0 || lagSeconds(g.OldestPendingAt, now) < minLag {
			continue
		}
		parts, err := h.groupParts(r.Context(), g.Queue, g.Group)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		for _, pl := range parts {
			lag := lagSeconds(pl.oldest, now)
			if pl.cur.Lag == 0 || lag < minLag {
				continue
			}
			out = append(out, laggingRow{
				ConsumerGroup: g.Group, QueueName: g.Queue, PartitionName: pl.part.Name, PartitionID: pl.part.ID,
				WorkerID: "", OffsetLag: pl.cur.Lag, TimeLagSeconds: lag,
				LagHours: math.Round(float64(lag)/36) / 100, OldestUnconsumedAt: msTime(pl.oldest), LastConsumedAt: msTime(pl.cur.LastAckAt),
			})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TimeLagSeconds > out[j].TimeLagSeconds })
	writeJSON(w, http.StatusOK, out)
}

// deleteGroup serves DELETE /api/v1/consumer-groups/{group} and
// DELETE /api/v1/consumer-groups/{group}/queues/{queue}.
func (h *handler) deleteGroup(w http.ResponseWriter, r *http.Request) {
	group, err := pathName(r, "group")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	queue := r.PathValue("queue")
	perQueue := strings.Contains(r.Pattern, "{queue}")
	if perQueue {
		if err := checkName("queue", queue); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	p := newParams(r)
	meta := p.boolean("deleteMetadata", true)
	if p.err != nil {
		h.writeError(w, r, p.err)
		return
	}
	n, err := h.b.DeleteGroup(r.Context(), group, queue, meta)
	if err != nil {
		h.writeError(w, r, groupNotFound(err, "Queue not found"))
		return
	}
	out := map[string]any{"success": true, "consumerGroup": group, "deletedPartitions": n, "metadataDeleted": meta}
	if perQueue {
		out["queueName"] = queue
	}
	writeJSON(w, http.StatusOK, out)
}

// groupSubscription serves POST /api/v1/consumer-groups/{group}/subscription.
func (h *handler) groupSubscription(w http.ResponseWriter, r *http.Request) {
	group, err := pathName(r, "group")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if kind(f.raw("subscriptionTimestamp")) != '"' {
		h.writeError(w, r, badRequest("Missing subscriptionTimestamp in request body"))
		return
	}
	ts := f.str("subscriptionTimestamp")
	from, err := parseTime(ts)
	if err != nil {
		h.writeError(w, r, badRequest("subscriptionTimestamp must be an ISO-8601 timestamp, not %q", ts))
		return
	}
	n, err := h.b.SetGroupSubscription(r.Context(), group, from)
	if err != nil {
		h.writeError(w, r, groupNotFound(err, "not found"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": group, "newTimestamp": msTime(from), "rowsUpdated": n})
}

// seekQueue serves POST /api/v1/consumer-groups/{group}/queues/{queue}/seek
// with {"toEnd": true} or {"timestamp": "..."}.
func (h *handler) seekQueue(w http.ResponseWriter, r *http.Request) {
	group, err := pathName(r, "group")
	var queue string
	if err == nil {
		queue, err = pathName(r, "queue")
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	f, err := h.readBody(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var opts queen.SeekOptions
	opts.ToEnd = f.boolean("toEnd", false)
	ts := f.str("timestamp")
	if f.err != nil {
		h.writeError(w, r, f.err)
		return
	}
	switch {
	case opts.ToEnd:
	case ts != "":
		if opts.Timestamp, err = parseTime(ts); err != nil {
			h.writeError(w, r, badRequest("timestamp must be an ISO-8601 timestamp, not %q", ts))
			return
		}
	default:
		h.writeError(w, r, badRequest("Must specify either 'toEnd': true or 'timestamp'"))
		return
	}
	res, err := h.b.SeekGroup(r.Context(), group, queue, opts)
	if err != nil {
		h.writeError(w, r, groupNotFound(err, "Queue not found"))
		return
	}
	target := msTime{}
	if !opts.ToEnd {
		target = msTime(opts.Timestamp)
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": group, "queueName": queue,
		"seekToEnd": opts.ToEnd, "targetTimestamp": target, "partitionsUpdated": res.PartitionsUpdated})
}

// seekPartition serves POST .../queues/{queue}/partitions/{partition}/seek:
// it moves the group to the end of one partition. The body is not read.
func (h *handler) seekPartition(w http.ResponseWriter, r *http.Request) {
	var group, queue, part string
	var err error
	for _, p := range []struct {
		dst  *string
		name string
	}{{&group, "group"}, {&queue, "queue"}, {&part, "partition"}} {
		if *p.dst, err = pathName(r, p.name); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	res, err := h.b.SeekPartition(r.Context(), group, queue, part, queen.SeekOptions{ToEnd: true})
	if err != nil {
		h.writeError(w, r, groupNotFound(err, "Partition not found"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": group, "queueName": queue,
		"partitionName": part, "updated": res.PartitionsUpdated > 0, "cursorMovedTo": res.CursorMovedTo})
}

// groupNotFound names what a group route did not find: 404 "Consumer group
// not found" for a group that never popped the queue (any queue, for the
// routes without one), else 404 with other for an unknown queue or
// partition. Other errors are returned as they are. Queen's server answers
// 200 with nothing changed; a caller's typo is a 4xx here (Part A, A13).
func groupNotFound(err error, other string) error {
	switch {
	case errors.Is(err, queen.ErrGroupNotFound):
		return notFoundErr(ackTextGroupNotFound)
	case errors.Is(err, queen.ErrNotFound):
		return notFoundErr(other)
	}
	return err
}

// refreshStats serves POST /api/v1/stats/refresh. Statistics here are
// computed on every read, so there is nothing to refresh.
func (h *handler) refreshStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"skipped": true, "reason": "statistics are computed live"})
}
