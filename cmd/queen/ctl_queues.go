package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/queenlite/queen"
)

// queueJSON is a queue in --json output.
type queueJSON struct {
	Name        string   `json:"name"`
	Namespace   string   `json:"namespace,omitempty"`
	Task        string   `json:"task,omitempty"`
	CreatedAt   string   `json:"createdAt,omitempty"`
	Partitions  int      `json:"partitions"`
	Messages    int64    `json:"messages"`
	Pending     int64    `json:"pending"`
	InFlight    int64    `json:"inFlight"`
	DeadLetters int64    `json:"deadLetters"`
	Parked      int64    `json:"parked"`
	Groups      []string `json:"groups"`
}

func queueOf(s *queen.QueueStats) queueJSON {
	groups := s.Groups
	if groups == nil {
		groups = []string{}
	}
	return queueJSON{Name: s.Name, Namespace: s.Config.Namespace, Task: s.Config.Task, CreatedAt: timeJSON(s.CreatedAt),
		Partitions: s.PartitionN, Messages: s.Messages, Pending: s.Pending, InFlight: s.InFlight,
		DeadLetters: s.DeadLetters, Parked: s.Parked, Groups: groups}
}

func ctlQueues(x *ctl, args []string) error {
	fs := x.flags("", "", "Lists the queues: partitions, messages stored, pending (not settled by the\nslowest group), in flight, dead letters, parked, groups.")
	if _, err := x.exactly(fs, args); err != nil {
		return err
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	qs, err := c.ListQueues(x.ctx)
	if err != nil {
		return err
	}
	if x.json {
		out := make([]queueJSON, len(qs))
		for i := range qs {
			out[i] = queueOf(&qs[i])
		}
		return x.printJSON(out)
	}
	t := newTable("QUEUE<", "PARTS>", "MESSAGES>", "PENDING>", "INFLIGHT>", "DLQ>", "PARKED>", "GROUPS>")
	for _, q := range qs {
		t.add(q.Name, q.PartitionN, q.Messages, q.Pending, q.InFlight, q.DeadLetters, q.Parked, len(q.Groups))
	}
	return t.write(x.stdout)
}

// configJSON is a queue's settings in --json output; durations are in
// milliseconds, zero meaning unset.
type configJSON struct {
	LeaseTimeMs          int64  `json:"leaseTimeMs"`
	RetryLimit           int    `json:"retryLimit"`
	RetryDelayMs         int64  `json:"retryDelayMs"`
	MaxSize              int    `json:"maxSize"`
	DelayedProcessingMs  int64  `json:"delayedProcessingMs"`
	WindowBufferMs       int64  `json:"windowBufferMs"`
	RetentionMs          int64  `json:"retentionMs"`
	CompletedRetentionMs int64  `json:"completedRetentionMs"`
	MaxWaitTimeMs        int64  `json:"maxWaitTimeMs"`
	Priority             int    `json:"priority"`
	EncryptionEnabled    bool   `json:"encryptionEnabled"`
	Namespace            string `json:"namespace,omitempty"`
	Task                 string `json:"task,omitempty"`
}

// partitionJSON is a partition in --json output.
type partitionJSON struct {
	Name        string `json:"name"`
	ID          string `json:"id,omitempty"`
	Messages    int64  `json:"messages"`
	Pending     int64  `json:"pending"`
	InFlight    int64  `json:"inFlight"`
	FirstOffset int64  `json:"firstOffset"`
	NextOffset  int64  `json:"nextOffset"`
	LastPushAt  string `json:"lastPushAt,omitempty"`
}

// queueDetailJSON is the answer of ctl queue NAME in --json output.
type queueDetailJSON struct {
	queueJSON
	ID             string          `json:"id,omitempty"`
	Config         configJSON      `json:"config"`
	PartitionsList []partitionJSON `json:"partitionList"`
	ConsumerGroups []groupJSON     `json:"consumerGroups"`
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func ctlQueue(x *ctl, args []string) error {
	fs := x.flags("", "NAME", "Describes one queue: its settings, its partitions, and the lag of each group\nthat reads it.")
	pos, err := x.exactly(fs, args, "NAME")
	if err != nil {
		return err
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	s, err := c.QueueStats(x.ctx, pos[0])
	if err != nil {
		return err
	}
	gs, err := groupsOn(x, s.Name)
	if err != nil {
		return err
	}
	cfg := s.Config
	if x.json {
		d := queueDetailJSON{queueJSON: queueOf(s), ID: s.ID, PartitionsList: []partitionJSON{}, ConsumerGroups: groupsOf(gs), Config: configJSON{
			LeaseTimeMs: ms(cfg.LeaseTime), RetryLimit: cfg.RetryLimit, RetryDelayMs: ms(cfg.RetryDelay), MaxSize: cfg.MaxSize,
			DelayedProcessingMs: ms(cfg.DelayedProcessing), WindowBufferMs: ms(cfg.WindowBuffer), RetentionMs: ms(cfg.Retention),
			CompletedRetentionMs: ms(cfg.CompletedRetention), MaxWaitTimeMs: ms(cfg.MaxWaitTime), Priority: cfg.Priority,
			EncryptionEnabled: cfg.EncryptionEnabled, Namespace: cfg.Namespace, Task: cfg.Task}}
		for i := range s.Partitions {
			p := &s.Partitions[i]
			d.PartitionsList = append(d.PartitionsList, partitionJSON{Name: p.Name, ID: p.ID, Messages: p.Messages, Pending: p.Pending,
				InFlight: p.InFlight, FirstOffset: p.FirstOffset, NextOffset: p.NextOffset, LastPushAt: timeJSON(p.LastPushAt)})
		}
		return x.printJSON(d)
	}
	fields := [][2]string{{"queue", s.Name}, {"id", s.ID}, {"created", timeText(s.CreatedAt)}}
	if cfg.Namespace != "" || cfg.Task != "" {
		fields = append(fields, [2]string{"labels", "namespace " + orDash(cfg.Namespace) + ", task " + orDash(cfg.Task)})
	}
	fields = append(fields, [2]string{"settings", settingsText(cfg)},
		[2]string{"messages", fmt.Sprintf("%d stored, %d pending, %d in flight, %d dead letters, %d parked",
			s.Messages, s.Pending, s.InFlight, s.DeadLetters, s.Parked)},
		[2]string{"groups", orDash(strings.Join(s.Groups, ", "))})
	if err := writeFields(x.stdout, fields); err != nil {
		return err
	}
	fmt.Fprintln(x.stdout)
	t := newTable("PARTITION<", "MESSAGES>", "PENDING>", "INFLIGHT>", "FIRST>", "NEXT>", "LAST PUSH")
	for _, p := range s.Partitions {
		t.add(p.Name, p.Messages, p.Pending, p.InFlight, p.FirstOffset, p.NextOffset, timeText(p.LastPushAt))
	}
	if err := t.write(x.stdout); err != nil {
		return err
	}
	if len(gs) > 0 {
		fmt.Fprintln(x.stdout)
		return lagTable(gs).write(x.stdout)
	}
	return nil
}

// settingsText is a queue's non-default settings on one line.
func settingsText(c queen.QueueConfig) string {
	var parts []string
	add := func(name string, v any, set bool) {
		if set {
			parts = append(parts, fmt.Sprintf("%s %v", name, v))
		}
	}
	add("lease", c.LeaseTime, c.LeaseTime > 0)
	add("retries", c.RetryLimit, true)
	add("retry delay", c.RetryDelay, c.RetryDelay > 0)
	add("max size", c.MaxSize, c.MaxSize > 0)
	add("delay", c.DelayedProcessing, c.DelayedProcessing > 0)
	add("window", c.WindowBuffer, c.WindowBuffer > 0)
	add("retention", c.Retention, c.Retention > 0)
	add("completed retention", c.CompletedRetention, c.CompletedRetention > 0)
	add("max wait", c.MaxWaitTime, c.MaxWaitTime > 0)
	add("priority", c.Priority, c.Priority != 0)
	add("encrypted", "yes", c.EncryptionEnabled)
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// groupJSON is a consumer group on one queue in --json output.
type groupJSON struct {
	Group             string `json:"group"`
	Queue             string `json:"queue"`
	Mode              string `json:"mode"`
	From              string `json:"from,omitempty"`
	JoinedAt          string `json:"joinedAt,omitempty"`
	Partitions        int    `json:"partitions"`
	PartitionsWithLag int    `json:"partitionsWithLag"`
	Lag               int64  `json:"lag"`
	InFlight          int64  `json:"inFlight"`
	ActiveLeases      int    `json:"activeLeases"`
}

func groupsOf(gs []queen.GroupStats) []groupJSON {
	out := make([]groupJSON, len(gs))
	for i, g := range gs {
		out[i] = groupJSON{Group: g.Group, Queue: g.Queue, Mode: string(g.Mode), From: timeJSON(g.From), JoinedAt: timeJSON(g.JoinedAt),
			Partitions: g.Partitions, PartitionsWithLag: g.PartitionsWithLag, Lag: g.Lag, InFlight: g.InFlight, ActiveLeases: g.ActiveLeases}
	}
	return out
}

func ctlGroups(x *ctl, args []string) error {
	fs := x.flags("", "[GROUP]", "Lists the consumer groups, one line per group and queue; with GROUP, only\nthat group.")
	group, err := x.optional(fs, args, "GROUP")
	if err != nil {
		return err
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	gs, err := c.ListGroups(x.ctx, queen.GroupFilter{Group: group})
	if err != nil {
		return err
	}
	if group != "" && len(gs) == 0 {
		return fmt.Errorf("%w: consumer group %q", queen.ErrGroupNotFound, group)
	}
	if x.json {
		return x.printJSON(groupsOf(gs))
	}
	t := newTable("GROUP<", "QUEUE<", "MODE", "JOINED", "PARTS>", "LAG>", "LEASES>")
	for _, g := range gs {
		t.add(g.Group, g.Queue, orDash(string(g.Mode)), timeText(g.JoinedAt), g.Partitions, g.Lag, g.ActiveLeases)
	}
	return t.write(x.stdout)
}

func ctlLag(x *ctl, args []string) error {
	fs := x.flags("", "[QUEUE]", "Shows what each consumer group has left to read (messages after its cursors,\nin how many partitions), most first; with QUEUE, on that queue only.")
	queue, err := x.optional(fs, args, "QUEUE")
	if err != nil {
		return err
	}
	gs, err := groupsOn(x, queue)
	if err != nil {
		return err
	}
	if x.json {
		return x.printJSON(groupsOf(gs))
	}
	return lagTable(gs).write(x.stdout)
}

// groupsOn lists the groups on queue ("" for every queue), most lag
// first. A queue that does not exist is ErrNotFound, one no group reads
// an empty list.
func groupsOn(x *ctl, queue string) ([]queen.GroupStats, error) {
	c, err := x.remote()
	if err != nil {
		return nil, err
	}
	all, err := c.ListGroups(x.ctx, queen.GroupFilter{})
	if err != nil {
		return nil, err
	}
	gs := all[:0]
	for _, g := range all {
		if queue == "" || g.Queue == queue {
			gs = append(gs, g)
		}
	}
	if queue != "" && len(gs) == 0 {
		if _, err := c.DescribeQueue(x.ctx, queue); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].Lag > gs[j].Lag })
	return gs, nil
}

func lagTable(gs []queen.GroupStats) *table {
	t := newTable("GROUP<", "QUEUE<", "LAG>", "LAGGING>", "INFLIGHT>", "LEASES>")
	for _, g := range gs {
		t.add(g.Group, g.Queue, g.Lag, strconv.Itoa(g.PartitionsWithLag)+"/"+strconv.Itoa(g.Partitions), g.InFlight, g.ActiveLeases)
	}
	return t
}
