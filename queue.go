package queen

import (
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/queenlite/queen/internal/compat"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/uuid"
)

func init() {
	compat.Of = func(cfg any) compat.QueueFields { return cfg.(*QueueConfig).compat }
	compat.Set = func(cfg any, f compat.QueueFields) { cfg.(*QueueConfig).compat = f }
}

// QueueConfig is a queue's configuration. [Broker.ConfigureQueue] replaces
// the whole configuration; start from [DefaultQueueConfig] and change what
// you need. Durations are truncated to the unit Queen's API uses for them.
// A QueueConfig from DefaultQueueConfig or from the broker also carries
// Queen's ttl, deadLetterQueue, dlqAfterMaxRetries and retentionEnabled
// settings, which the broker stores and reports back on Queen's API but
// does not act on (it always dead-letters, and runs retention whenever
// Retention is set); changing the other fields keeps them.
type QueueConfig struct {
	// LeaseTime is how long a pop leases its messages when the pop does not
	// say. Zero means 300 s (60 s for a queue created by a push); below 1 s
	// or above [MaxLease] (365 days) is refused.
	LeaseTime time.Duration
	// RetryLimit is how many failed acks a (partition, group) may spend
	// before the failing message is dead-lettered. Zero means none.
	RetryLimit int
	// RetryDelay is how long a partition is held back from its group after
	// a failed ack with retries left. Zero means at once.
	RetryDelay time.Duration
	// MaxSize caps the queue's pending messages, those its slowest consumer
	// group has not settled yet (every retained message while the queue has
	// no group): the figure [QueueStats].Pending reports. A push item that
	// would take it past MaxSize fails with [ErrQueueFull]; inside a
	// transaction it aborts the transaction. Messages settled by every group
	// no longer count, retained or not. A group that never reads keeps the
	// queue full: delete it (or seek it) to make room. A group added later,
	// or moved back, can leave more than MaxSize pending; pushes are then
	// refused until the queue drains below it. Zero means unlimited.
	MaxSize int
	// DelayedProcessing hides each message until this long after its push.
	DelayedProcessing time.Duration
	// WindowBuffer holds a partition back until it has had no new message
	// for this long, so a burst is delivered together.
	WindowBuffer time.Duration
	// Retention deletes messages older than this, consumed or not. Zero
	// keeps them.
	Retention time.Duration
	// CompletedRetention deletes messages older than this that every
	// consumer group of the queue has passed. Zero keeps them.
	CompletedRetention time.Duration
	// MaxWaitTime dead-letters messages that have waited longer than this
	// without a group settling them, for each such group; in a partition
	// no group reads yet, they are deleted instead. Checked every
	// Options.MaintenanceInterval. Zero disables it.
	MaxWaitTime time.Duration
	// Priority orders queues in discovery pops: higher first.
	Priority int
	// EncryptionEnabled encrypts payloads at rest with AES-256-GCM under
	// Options.EncryptionKey.
	EncryptionEnabled bool

	// Namespace and Task label the queue for discovery pops and listings.
	Namespace, Task string

	// compat holds Queen's settings that do nothing here (ttl,
	// deadLetterQueue, dlqAfterMaxRetries, retentionEnabled): stored and
	// reported back on Queen's API, reached through internal/compat.
	compat compat.QueueFields
}

// DefaultQueueConfig is the configuration of a queue created by
// [Broker.ConfigureQueue] with nothing set.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{
		LeaseTime:  DefaultConfiguredLeaseTime,
		RetryLimit: 3,
		RetryDelay: time.Second,
		compat:     compat.QueueFields{TTL: 3600 * time.Second},
	}
}

// pushCreatedConfig is the configuration of a queue created by a push.
func pushCreatedConfig(name string) QueueConfig {
	c := DefaultQueueConfig()
	c.LeaseTime = DefaultLeaseTime
	c.Namespace, c.Task, _ = strings.Cut(name, ".")
	return c
}

func (c *QueueConfig) validate(encryptionKey bool) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"LeaseTime", c.LeaseTime}, {"RetryDelay", c.RetryDelay}, {"DelayedProcessing", c.DelayedProcessing},
		{"WindowBuffer", c.WindowBuffer}, {"Retention", c.Retention}, {"CompletedRetention", c.CompletedRetention},
		{"MaxWaitTime", c.MaxWaitTime}, {"TTL", c.compat.TTL},
	} {
		if d.v < 0 {
			return argErr("QueueConfig."+d.name, "must not be negative")
		}
	}
	if c.LeaseTime > 0 && c.LeaseTime < time.Second {
		return argErr("QueueConfig.LeaseTime", "must be at least 1s, not %v", c.LeaseTime)
	}
	if c.LeaseTime > MaxLease {
		return argErr("QueueConfig.LeaseTime", "must be at most %v, not %v", MaxLease, c.LeaseTime)
	}
	if c.RetryLimit < 0 {
		return argErr("QueueConfig.RetryLimit", "must not be negative")
	}
	if c.MaxSize < 0 {
		return argErr("QueueConfig.MaxSize", "must not be negative")
	}
	if err := checkLabel("QueueConfig.Namespace", c.Namespace); err != nil {
		return err
	}
	if err := checkLabel("QueueConfig.Task", c.Task); err != nil {
		return err
	}
	if c.EncryptionEnabled && !encryptionKey {
		return argErr("QueueConfig.EncryptionEnabled", "needs Options.EncryptionKey")
	}
	return nil
}

// QueueInfo describes a queue.
type QueueInfo struct {
	Name      string
	ID        string
	CreatedAt time.Time
	Config    QueueConfig
	// DefaultPartitionID is the id of the queue's Default partition.
	DefaultPartitionID string
}

// queue is the in-memory state of a queue. Fields are guarded by Broker.mu.
type queue struct {
	name        string
	id          uuid.UUID
	createdAt   int64
	cfg         QueueConfig
	parts       map[string]*partition
	order       []*partition // every partition in creation (pid) order: what groups discover (see group.scan)
	pend        []int64      // by partition idx: its share of pending (see repend)
	groups      map[string]*group
	slots       []*group                // group by cursor slot; nil where a group was deleted
	count       int64                   // retained messages
	pending     int64                   // sum of the partitions' pend: what MaxSize bounds
	reserved    int64                   // MaxSize room held by transactions on their way to the writer
	holes       map[*partition]*holeSet // see holeSet
	dlqCount    int64
	parkedCount int64
	persisted   bool // metadata is on disk
	// sizeSum and sizeN sample the stored size of the queue's messages
	// (key, value and dedup entry): the newest messages of its partitions
	// read at Open and every message pushed since. Their mean times the
	// messages stored is the queue's approximate size (see approxBytes).
	sizeSum, sizeN int64
}

// queueMeta is the stored form of a queue.
type queueMeta struct {
	ID        string       `json:"id"`
	CreatedAt int64        `json:"createdAt"`
	Config    storedConfig `json:"config"`
}

// storedConfig is a QueueConfig as the store keeps it: Queen's settings
// beside the others, under the names they have always had there.
type storedConfig struct {
	QueueConfig
	TTL                time.Duration
	DeadLetterQueue    bool
	DLQAfterMaxRetries bool
	RetentionEnabled   bool
}

func storedConfigOf(c QueueConfig) storedConfig {
	f := c.compat
	return storedConfig{QueueConfig: c, TTL: f.TTL, DeadLetterQueue: f.DeadLetterQueue, DLQAfterMaxRetries: f.DLQAfterMaxRetries, RetentionEnabled: f.RetentionEnabled}
}

// config is the QueueConfig s stores.
func (s storedConfig) config() QueueConfig {
	c := s.QueueConfig
	c.compat = compat.QueueFields{TTL: s.TTL, DeadLetterQueue: s.DeadLetterQueue, DLQAfterMaxRetries: s.DLQAfterMaxRetries, RetentionEnabled: s.RetentionEnabled}
	return c
}

func (q *queue) meta() []byte {
	b, _ := json.Marshal(queueMeta{ID: q.id.String(), CreatedAt: q.createdAt, Config: storedConfigOf(q.cfg)})
	return b
}

func (q *queue) info() *QueueInfo {
	qi := &QueueInfo{Name: q.name, ID: q.id.String(), CreatedAt: time.UnixMicro(q.createdAt).UTC(), Config: q.cfg}
	if p := q.parts[DefaultPartition]; p != nil {
		qi.DefaultPartitionID = p.uuid()
	}
	return qi
}

func (q *queue) leaseTime() time.Duration {
	if q.cfg.LeaseTime <= 0 {
		return DefaultLeaseTime
	}
	return q.cfg.LeaseTime
}

// addPart appends p, a new partition of q, to q.order.
func (q *queue) addPart(p *partition) {
	p.idx = uint32(len(q.order))
	q.order = append(q.order, p)
	q.pend = append(q.pend, 0)
}

// newQueue creates a queue in memory, under b.mu. The writer persists it.
func (b *Broker) newQueue(name string, cfg QueueConfig) *queue {
	q := &queue{
		name:      name,
		id:        uuid.NewV4(),
		createdAt: b.now(),
		cfg:       cfg,
		parts:     make(map[string]*partition),
		groups:    make(map[string]*group),
	}
	b.queues[name] = q
	if wl := b.queueWait[name]; wl != nil {
		wl.wakeAll()
	}
	return q
}

// ConfigureQueue creates the queue or replaces its whole configuration, and
// makes sure its Default partition exists. A shorter DelayedProcessing or
// WindowBuffer applies at once, to messages already held too.
func (b *Broker) ConfigureQueue(ctx context.Context, name string, cfg QueueConfig) (*QueueInfo, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if err := checkName("queue", name); err != nil {
		return nil, err
	}
	if err := cfg.validate(len(b.opts.EncryptionKey) > 0); err != nil {
		return nil, err
	}
	if cfg.LeaseTime == 0 {
		cfg.LeaseTime = DefaultConfiguredLeaseTime
	}
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	q := b.queues[name]
	if q == nil {
		q = b.newQueue(name, cfg)
	}
	old := q.cfg
	q.cfg = cfg
	if cfg.DelayedProcessing < old.DelayedProcessing || cfg.WindowBuffer < old.WindowBuffer {
		b.shortenHolds(q, (old.DelayedProcessing - cfg.DelayedProcessing).Microseconds())
	}
	ops := []command{setKey{keys.QueueKey(name), q.meta()}}
	q.persisted = true
	p, created := b.partitionFor(q, DefaultPartition)
	if created {
		p.persisted = true
		ops = append(ops, setKey{keys.PartitionKey(p.pid), b.partitionRecord(p)})
	}
	info := q.info()
	done := b.w.submit(ops)
	b.mu.Unlock()
	if err := waitCtx(ctx, done); err != nil {
		return nil, err
	}
	return info, nil
}

// shortenHolds applies a shorter DelayedProcessing (by cut µs, 0 if it did
// not shrink) or WindowBuffer to q's cursors at once: each is checked
// again, so one held until the old time is served, or scheduled, by the
// new one. Under b.mu.
func (b *Broker) shortenHolds(q *queue, cut int64) {
	now := b.now()
	for _, p := range q.parts {
		for _, c := range p.cursorList() {
			if c == nil {
				continue
			}
			if cut > 0 && c.held {
				c.notBefore -= cut
			}
			b.check(c, now)
		}
	}
}

// lockQueue enters b and locks b.mu for the queue called name; unlock
// undoes both. A closed broker's error, or [ErrNotFound] for an unknown
// queue, leaves nothing locked.
func (b *Broker) lockQueue(name string) (q *queue, unlock func(), err error) {
	if err := b.enter(); err != nil {
		return nil, nil, err
	}
	if q, err = b.lockKnownQueue(name); err != nil {
		b.leave()
		return nil, nil, err
	}
	unlock = func() {
		b.mu.Unlock()
		b.leave()
	}
	return q, unlock, nil
}

// DescribeQueue returns a queue's configuration, or [ErrNotFound].
func (b *Broker) DescribeQueue(ctx context.Context, name string) (*QueueInfo, error) {
	q, unlock, err := b.lockQueue(name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return q.info(), nil
}

// checkName validates a queue, partition or group name.
func checkName(field, s string) error {
	if s == "" {
		return argErr(field, "must not be empty")
	}
	return checkLabel(field, s)
}

// checkLabel validates an optional name-like string.
func checkLabel(field, s string) error {
	if len(s) > MaxNameLen {
		return argErr(field, "longer than %d bytes", MaxNameLen)
	}
	if !utf8.ValidString(s) {
		return argErr(field, "not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return argErr(field, "contains a NUL byte")
	}
	return nil
}
