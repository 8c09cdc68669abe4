package main

import (
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/record"
	"github.com/queenlite/queen/internal/uuid"
)

// badgerOptions are the options queen.Open uses (at its default memory
// budget), so the raw row measures the same engine configuration; the
// raw row syncs itself.
func badgerOptions(dir string) badger.Options {
	o, err := queen.BadgerOptions(dir, &queen.Options{Durability: queen.SyncNever})
	if err != nil {
		panic(err) // a constant configuration
	}
	return o
}

// tunedBadger reports whether the job overrides Badger's options.
func (j *Job) tunedBadger() bool { return j.Tuned }

func (j *Job) badgerOptions() badger.Options {
	o := badgerOptions(j.Dir)
	if j.BadgerMemMB > 0 {
		o = o.WithMemTableSize(int64(j.BadgerMemMB) << 20)
	}
	if j.BadgerMemtables > 0 {
		o = o.WithNumMemtables(j.BadgerMemtables)
	}
	if j.BadgerCacheMB >= 0 {
		o = o.WithBlockCacheSize(int64(j.BadgerCacheMB) << 20)
	}
	return o
}

func runBadger(j *Job) (Result, error) {
	if j.Kind != "push" {
		return Result{}, fmt.Errorf("badger: unknown kind %q", j.Kind)
	}
	db, err := badger.Open(badgerOptions(j.Dir))
	if err != nil {
		return Result{}, err
	}
	payload := fixedPayload(j.Payload)
	parts := max(j.Partitions, 1)
	prof := startProfile(j)
	// The same bytes the broker writes for a message: the record under
	// M pid offset, and the dedup entry T pid txid -> offset. Each call is
	// one WriteBatch, flushed, then fsynced when j.Sync.
	p, err := produce(j, func(w, lo, hi int) error {
		wb := db.NewWriteBatch()
		defer wb.Cancel()
		now := time.Now()
		for i := lo; i < hi; i++ {
			pid := uint64(i%parts) + 1
			txid := uuid.NewV7At(now).String()
			m := record.Message{CreatedAt: now.UnixMicro(), ID: uuid.NewV7At(now), TxID: txid, Payload: payload}
			val := record.AppendMessage(make([]byte, 0, record.MessageSize(&m)), &m)
			if err := wb.Set(keys.MessageKey(pid, int64(i)), val); err != nil {
				return err
			}
			if err := wb.Set(keys.TxIDKey(pid, txid), record.Offset(int64(i))); err != nil {
				return err
			}
		}
		if err := wb.Flush(); err != nil {
			return err
		}
		if j.Sync {
			return db.Sync()
		}
		return nil
	})
	prof.stop()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, err
	}
	db, err = badger.Open(badgerOptions(j.Dir))
	if err != nil {
		return Result{}, err
	}
	defer db.Close()
	var n int64
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{keys.Message}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	if n != p.n {
		return Result{}, fmt.Errorf("verify: %d message keys, wrote %d", n, p.n)
	}
	return p.result(), nil
}
