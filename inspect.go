package queen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// StoreReport describes a store: its format, its size on disk and what its
// queues hold. [Inspect] makes one of a closed store, [Broker.StoreReport]
// of an open broker's.
type StoreReport struct {
	// Dir is the store's directory ("" in memory).
	Dir string `json:"dir"`
	// Format is the store's format ([FormatUnversioned] for a store that
	// predates the format record); WrittenBy the release that wrote the
	// record, and StoreID the store's id (both "" without one).
	Format    int    `json:"format"`
	WrittenBy string `json:"writtenBy"`
	StoreID   string `json:"storeId"`
	// Upgrade reports a store of an older format that [Open] upgrades in
	// place (Inspect leaves it as it is).
	Upgrade bool `json:"upgrade"`
	// MaintenanceMode is the stored maintenance switch.
	MaintenanceMode bool `json:"maintenanceMode"`

	// DiskBytes is the size of the store's files: LSMBytes of tables and
	// ValueLogBytes of value logs (payloads of 128 bytes and more, and
	// space not yet given back by value-log GC). For an open broker they
	// are Badger's figures, refreshed once a minute; 0 in memory.
	DiskBytes     int64 `json:"diskBytes"`
	LSMBytes      int64 `json:"lsmBytes"`
	ValueLogBytes int64 `json:"valueLogBytes"`

	// Queues, by name, and their totals.
	Queues     []QueueReport `json:"queues"`
	Partitions int           `json:"partitions"`
	Messages   int64         `json:"messages"`
}

// QueueReport is one queue of a [StoreReport].
type QueueReport struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	// Messages is how many messages the queue stores (completed ones
	// included, until retention deletes them); Pending how many its
	// slowest group has not settled (see [QueueStats]).
	Messages    int64 `json:"messages"`
	Pending     int64 `json:"pending"`
	Groups      int   `json:"groups"`
	DeadLetters int64 `json:"deadLetters"`
	Parked      int64 `json:"parked"`
	// ApproxBytes estimates the bytes the queue's records take in the
	// store, before Badger's own overhead and garbage: the mean size of
	// its messages (key, record with payload, dedup entry) as sampled
	// from the newest message of each partition at Open and from every
	// push since, times its messages, dead letters and parked messages,
	// plus its partition records. No scan: it costs nothing to ask.
	ApproxBytes int64 `json:"approxBytes"`
}

// partitionRecordSize estimates a partition's stored metadata, key and
// record, for ApproxBytes.
const partitionRecordSize = 64

// dedupEntrySize estimates a message's dedup entry (key with a UUID
// transactionId and offset value) when the entry is not at hand.
const dedupEntrySize = 9 + 36 + 8

// approxBytes is q's ApproxBytes. Under b.mu.
func (q *queue) approxBytes() int64 {
	n := int64(len(q.order)) * partitionRecordSize
	if q.sizeN > 0 {
		n += (q.count + q.dlqCount + q.parkedCount) * (q.sizeSum / q.sizeN)
	}
	return n
}

// report fills r's queues from b's state. Under b.mu (or before b serves).
func (b *Broker) report(r *StoreReport) {
	r.MaintenanceMode = b.maint.Load()
	r.Queues = make([]QueueReport, 0, len(b.queues))
	for _, q := range b.queues {
		qr := QueueReport{Name: q.name, Partitions: len(q.order), Messages: q.count, Pending: q.pending,
			Groups: len(q.groups), DeadLetters: q.dlqCount, Parked: q.parkedCount, ApproxBytes: q.approxBytes()}
		r.Queues = append(r.Queues, qr)
		r.Partitions += qr.Partitions
		r.Messages += qr.Messages
	}
	slices.SortFunc(r.Queues, func(a, b QueueReport) int { return strings.Compare(a.Name, b.Name) })
}

// StoreReport describes the broker's store: format, size on disk, and
// per queue its partitions, messages and approximate size. It reads no
// stored record (O(queues)): cheap enough for a status page polled often,
// whatever the number of partitions.
func (b *Broker) StoreReport(ctx context.Context) (*StoreReport, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	r := &StoreReport{Dir: b.db.Opts().Dir}
	fr, _, err := storedFormat(b.db)
	if err != nil {
		return nil, storageErr("report", err)
	}
	r.Format, r.WrittenBy, r.StoreID = fr.Format, fr.WrittenBy, fr.ID
	r.LSMBytes, r.ValueLogBytes = b.db.Size()
	r.DiskBytes = r.LSMBytes + r.ValueLogBytes
	if err := b.lockUsable(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	b.report(r)
	return r, nil
}

// Inspect reports on the closed store in dir without changing it: Badger
// opened read-only, the state loaded as Open loads it, nothing upgraded,
// swept or written. A store open in a broker is [ErrLocked]; a missing
// dir [ErrNotFound]; a store of a newer format [ErrIncompatibleStore].
// opts sizes Badger's memory as for Open. ctx is checked before the load.
func Inspect(ctx context.Context, dir string, opts *Options) (*StoreReport, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.InMemory {
		return nil, argErr("Options.InMemory", "Inspect reads a directory")
	}
	if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: no store in %s", ErrNotFound, dir)
		}
		return nil, fmt.Errorf("queen: inspect: %w", err)
	}
	bo, err := badgerOptions(dir, o)
	if err != nil {
		return nil, err
	}
	db, err := openBadger(bo.WithReadOnly(true), o.lockWait)
	if errors.Is(err, errLockHeld) {
		return nil, fmt.Errorf("%w: %s is open in a broker", ErrLocked, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("queen: inspect %s: %w", dir, err)
	}
	defer db.Close()
	r := &StoreReport{Dir: dir}
	fr, has, err := storedFormat(db)
	if err != nil {
		return nil, storageErr("inspect", err)
	}
	if err := checkFormat(dir, fr.Format); err != nil {
		return nil, err
	}
	r.Format, r.WrittenBy, r.StoreID = fr.Format, fr.WrittenBy, fr.ID
	r.Upgrade = !has || fr.Format < StoreFormat
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := inspectDB(db, o)
	if err := b.loadState(); err != nil {
		return nil, err
	}
	for _, q := range b.queues {
		for _, p := range q.order {
			b.repend(p)
		}
	}
	b.report(r)
	r.LSMBytes, r.ValueLogBytes = filesSize(dir)
	r.DiskBytes = r.LSMBytes + r.ValueLogBytes
	return r, nil
}

// inspectDB is a broker on db that only loads state: no writer, no timers,
// no background work.
func inspectDB(db *badger.DB, o Options) *Broker {
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	b := &Broker{db: db, opts: o, clock: o.Clock, queues: make(map[string]*queue), leases: make(map[string]*lease)}
	b.parts = make([]*partition, 1)
	return b
}

// filesSize sums the sizes of Badger's table and value-log files in dir.
func filesSize(dir string) (lsm, vlog int64) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		switch filepath.Ext(e.Name()) {
		case ".sst":
			lsm += info.Size()
		case ".vlog":
			vlog += info.Size()
		}
	}
	return lsm, vlog
}
