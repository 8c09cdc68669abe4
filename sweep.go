package queen

import (
	"context"
	"encoding/binary"
	"encoding/json"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/uuid"
)

// Deleting a queue: one atomic write removes the queue and its group
// metadata and records a tombstone listing its partitions' internal ids;
// a sweep then deletes those partitions' keys (messages, dedup entries,
// cursors, traces, dead letters and parked messages, the partition
// metadata last) and finally the tombstone. A sweep cut short by a crash
// or Close resumes at the next Open, and the tombstone keeps the ids from
// being handed out again or their leftovers from being read as a new
// queue's, even when a queue of the same name is created meanwhile. The
// first write removes the metadata of the deleted queue only (by its id): a
// push racing the deletion can re-create the queue and write its metadata
// first.

// tombstone is the stored form of a queue being deleted.
type tombstone struct {
	Queue string   `json:"q"`
	PIDs  []uint64 `json:"p"`
}

func tombstoneKey(id uuid.UUID) []byte { return keys.IDKey(keys.Tombstone, id) }

// DeleteQueue deletes a queue with its partitions, messages, cursors,
// leases, group metadata, dead letters, parked messages and traces, and
// reports whether the queue existed. The queue is gone (and its name free)
// once the first write is durable; DeleteQueue then waits for its data to
// be removed, which goes on in the background if ctx ends first.
func (b *Broker) DeleteQueue(ctx context.Context, name string) (existed bool, err error) {
	if err := b.enter(); err != nil {
		return false, err
	}
	defer b.leave()
	tk, ts, err := b.unlinkQueue(ctx, name)
	if tk == nil || err != nil {
		return tk != nil, err
	}
	b.qcounters.m.Delete(name)
	swept := make(chan error, 1)
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		swept <- b.sweep(tk, ts)
	}()
	return true, waitCtx(ctx, swept)
}

// unlinkQueue removes a queue from memory and, in one durable write, its
// metadata, leaving a tombstone for the sweep. A nil key means there was
// no such queue.
func (b *Broker) unlinkQueue(ctx context.Context, name string) ([]byte, tombstone, error) {
	if err := b.lockUsable(); err != nil {
		return nil, tombstone{}, err
	}
	q := b.queues[name]
	if q == nil {
		b.mu.Unlock()
		return nil, tombstone{}, nil
	}
	delete(b.queues, name)
	ts := tombstone{Queue: name}
	for _, p := range q.parts {
		for _, c := range p.cursorList() {
			if c != nil {
				b.dropLease(c)
			}
		}
		b.parts[p.pid] = nil // ids are never handed out again
		p.deleted = true
		ts.PIDs = append(ts.PIDs, p.pid)
	}
	ops := []command{deleteKey{keys.QueueKey(name)}}
	for gname, g := range q.groups {
		g.deleted = true
		g.wakeAll()
		ops = append(ops, deleteKey{keys.GroupKey(name, gname)})
	}
	tk := tombstoneKey(uuid.NewV4())
	val, _ := json.Marshal(ts)
	ops = append(ops, setKey{tk, val})
	done := b.w.submit(ops)
	b.mu.Unlock()
	return tk, ts, waitCtx(ctx, done)
}

// sweep deletes what a tombstone lists, then the tombstone.
func (b *Broker) sweep(tk []byte, ts tombstone) error {
	ctx := context.Background()
	pids := make(map[uint64]bool, len(ts.PIDs))
	var data, metas [][]byte
	for _, pid := range ts.PIDs {
		pids[pid] = true
		for _, kind := range []byte{keys.Message, keys.TxID, keys.Cursor, keys.Position, keys.Trace} {
			data = append(data, keys.PartitionScoped(kind, pid))
		}
		metas = append(metas, keys.PartitionScoped(keys.Partition, pid))
	}
	// DropPrefix removes the keys from the memtables and the tables at
	// once, so the space comes back without waiting for compactions. It
	// holds writes while it runs. The partition metadata goes last.
	if err := b.dropPrefixes(data); err != nil {
		return err
	}
	if err := b.dropPrefixes(metas); err != nil {
		return err
	}
	if err := b.deleteLettersOf(ctx, pids); err != nil {
		return err
	}
	return b.submitWait(ctx, []command{deleteKey{tk}})
}

// dropPrefixes drops every key under the prefixes, through the writer so
// no other write runs meanwhile.
func (b *Broker) dropPrefixes(prefixes [][]byte) error {
	for len(prefixes) > 0 {
		n := min(len(prefixes), 1000)
		done := make(chan error, 1)
		b.w.enqueue(&writeReq{drop: prefixes[:n], done: done})
		if err := <-done; err != nil {
			return err
		}
		prefixes = prefixes[n:]
	}
	return nil
}

// submitWait writes ops and waits for them, unless the broker is closing.
func (b *Broker) submitWait(ctx context.Context, ops []command) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	done := b.w.submit(ops)
	b.mu.Unlock()
	return waitCtx(ctx, done)
}

// deleteLettersOf removes the dead letters and parked messages of the
// given partitions.
func (b *Broker) deleteLettersOf(ctx context.Context, pids map[uint64]bool) error {
	var dels [][]byte
	err := b.db.View(func(txn *badger.Txn) error {
		for _, kind := range []byte{keys.DeadLetter, keys.Parked} {
			err := scan(txn, []byte{kind}, func(k, v []byte) error {
				var lr letterRecord
				if decodeLetter(v, &lr) == nil && pids[lr.PID] {
					dels = append(dels, append([]byte(nil), k...))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return storageErr("delete dead letters", err)
	}
	for len(dels) > 0 {
		n := min(len(dels), 10000)
		if err := b.submitWait(ctx, appendDeletes(nil, dels[:n])); err != nil {
			return err
		}
		dels = dels[n:]
	}
	return nil
}

// loadTombstones reads the deletions a previous run did not finish, and
// partitions whose queue is gone without one (left by older versions):
// their ids are reserved and sweeps are returned to run after Open.
func (b *Broker) loadTombstones(txn *badger.Txn) (map[uint64]bool, []func() error, error) {
	dead := make(map[uint64]bool)
	var sweeps []func() error
	err := scan(txn, []byte{keys.Tombstone}, func(k, v []byte) error {
		var ts tombstone
		if err := json.Unmarshal(v, &ts); err != nil {
			return err
		}
		for _, pid := range ts.PIDs {
			dead[pid] = true
		}
		tk := append([]byte(nil), k...)
		sweeps = append(sweeps, func() error { return b.sweep(tk, ts) })
		return nil
	})
	return dead, sweeps, err
}

// reservePID keeps pid from being handed out to a new partition.
func (b *Broker) reservePID(pid uint64) {
	for uint64(len(b.parts)) <= pid {
		b.parts = append(b.parts, nil)
	}
}

// orphanSweep deletes the keys of a partition whose queue is gone and
// that no tombstone covers.
func (b *Broker) orphanSweep(k []byte) func() error {
	pid := binary.BigEndian.Uint64(k[1:])
	return func() error {
		var ts tombstone
		ts.PIDs = []uint64{pid}
		return b.sweep(tombstoneKey(uuid.NewV4()), ts)
	}
}
