package queen_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/compat"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// The fixtures in testdata/stores are stores written by earlier commits
// of this repository (the commit is in the name), each by the same small
// program, run in a worktree of that commit and not kept in it: on a
// clock fixed at fixtureTime it configures two queues, pushes five orders
// to partitions eu and us of "orders" and three events to "events", lets
// group billing complete two orders of eu, and in queue mode
// dead-letters the first order of us and parks the second. Badger ran
// with 1 MiB value-log files and memtables; each archive is about 3 KB.
//
//	unversioned-json-partitions-c252429  before binary partition records (43ae4fd): JSON partition records
//	unversioned-binary-partitions-f7f7911 the last commit before the format record
var fixtureTime = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

var fixtures = []string{"unversioned-json-partitions-c252429", "unversioned-binary-partitions-f7f7911"}

// untar extracts testdata/stores/name.tar.gz into a new directory.
func untar(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "stores", name+".tar.gz"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.Mkdir(dir, 0o755))
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		out, err := os.Create(filepath.Join(dir, filepath.Base(h.Name)))
		require.NoError(t, err)
		_, err = io.Copy(out, tr)
		require.NoError(t, err)
		require.NoError(t, out.Close())
	}
	return dir
}

// partitionRecords returns the stored partition records of the store in
// dir (closed), opened read-only.
func partitionRecords(t *testing.T, dir string) [][]byte {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithReadOnly(true).WithLogger(nil))
	require.NoError(t, err)
	defer db.Close()
	var out [][]byte
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{'P'}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	}))
	return out
}

func TestFormat_EarlierStoresOpenAndAreUpgraded(t *testing.T) {
	t.Parallel()
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := untar(t, name)
			recs := partitionRecords(t, dir)
			require.Len(t, recs, 4) // orders: Default, eu, us; events: Default
			json := strings.Contains(name, "json")
			for _, r := range recs {
				require.Equal(t, json, r[0] == '{', "partition record %q", r)
			}

			rep, err := queen.Inspect(bg, dir, nil)
			require.NoError(t, err)
			require.Equal(t, queen.FormatUnversioned, rep.Format)
			require.True(t, rep.Upgrade)
			require.Equal(t, int64(13), rep.Messages)
			require.Equal(t, 4, rep.Partitions)
			require.Len(t, partitionRecords(t, dir), 4, "Inspect changed nothing")
			require.Equal(t, json, partitionRecords(t, dir)[0][0] == '{', "Inspect changed nothing")

			clock := queentest.NewClock(fixtureTime)
			b := openStore(t, dir, clock)
			checkFixture(t, b)
			require.NoError(t, b.Close())

			// Upgraded in place: the format record, binary partition
			// records; and it opens again as it did.
			for _, r := range partitionRecords(t, dir) {
				require.NotEqual(t, byte('{'), r[0], "partition record %q not upgraded", r)
			}
			rep, err = queen.Inspect(bg, dir, nil)
			require.NoError(t, err)
			require.Equal(t, queen.StoreFormat, rep.Format)
			require.Equal(t, queen.Version, rep.WrittenBy)
			require.False(t, rep.Upgrade)
			b = openStore(t, dir, clock)
			checkFixture(t, b)
		})
	}
}

// checkFixture checks, message by message, what a fixture store holds,
// then what it answers to pops and a repeated push.
func checkFixture(t *testing.T, b *queen.Broker) {
	t.Helper()
	orders, err := b.DescribeQueue(bg, "orders")
	require.NoError(t, err)
	require.Equal(t, 3, orders.Config.RetryLimit)
	require.Equal(t, 40*time.Second, orders.Config.LeaseTime)
	require.Equal(t, 2, orders.Config.Priority)
	require.True(t, compat.Of(&orders.Config).DeadLetterQueue)
	require.Equal(t, time.Hour, compat.Of(&orders.Config).TTL, "Queen's ttl, 3600 s by default")
	events, err := b.DescribeQueue(bg, "events")
	require.NoError(t, err)
	require.Equal(t, 100, events.Config.MaxSize)
	require.Equal(t, 72*time.Hour, events.Config.Retention)

	for _, c := range []struct {
		queue, partition, txid, payload string
		n                               int
	}{
		{"orders", "eu", "o-eu-%d", `{"order":%d,"region":"eu"}`, 5},
		{"orders", "us", "o-us-%d", `{"order":%d,"region":"us"}`, 5},
		{"events", "Default", "e-%d", `{"event":%d}`, 3},
	} {
		res, err := b.Fetch(bg, c.queue, c.partition, 0, 100)
		require.NoError(t, err)
		require.Len(t, res.Records, c.n, "%s/%s", c.queue, c.partition)
		for i, rec := range res.Records {
			require.Equal(t, int64(i), rec.Offset)
			require.Equal(t, fmt.Sprintf(c.txid, i), rec.TransactionID)
			require.JSONEq(t, fmt.Sprintf(c.payload, i), string(rec.Payload))
			require.True(t, fixtureTime.Equal(rec.CreatedAt), "%s/%s@%d created %v", c.queue, c.partition, i, rec.CreatedAt)
		}
	}
	dead, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "orders"})
	require.NoError(t, err)
	require.Len(t, dead.Letters, 1)
	require.Equal(t, "o-us-0", dead.Letters[0].TransactionID)
	require.Equal(t, "fixture dlq", dead.Letters[0].Error)
	require.JSONEq(t, `{"order":0,"region":"us"}`, string(dead.Letters[0].Payload))
	parked, err := b.ParkedMessages(bg, queen.LetterFilter{Queue: "orders"})
	require.NoError(t, err)
	require.Len(t, parked.Letters, 1)
	require.Equal(t, "o-us-1", parked.Letters[0].TransactionID)
	require.Equal(t, int64(1), parked.Letters[0].Offset)

	groups, err := b.ListGroups(bg, queen.GroupFilter{Group: "billing"})
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Equal(t, int64(8), groups[0].Lag, "billing completed two of the ten orders")

	// The answers: pops (acking nothing, so a reopened store answers the
	// same), and a push repeating a
	// transactionId, a duplicate.
	r := pop(t, b, queen.PopRequest{Queue: "orders", Partition: "eu", Group: "billing", Batch: 10})
	require.Equal(t, []int64{2, 3, 4}, offsets(r.Messages))
	r = pop(t, b, queen.PopRequest{Queue: "orders", Partition: "us", Batch: 10})
	require.Equal(t, []int64{2, 3, 4}, offsets(r.Messages))
	res := pushOne(t, b, "orders", "eu", "o-eu-1", `{"again":true}`)
	require.Equal(t, queen.PushDuplicate, res.Status)
	require.Equal(t, int64(1), res.Offset)
}

func TestFormat_NewerStoreIsRefused(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	b := openStore(t, dir, queentest.NewClock(fixtureTime))
	pushN(t, b, "q", "", 2)
	require.NoError(t, b.Close())

	// What a later release would write.
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	require.NoError(t, err)
	v, _ := json.Marshal(map[string]any{"format": queen.StoreFormat + 1, "writtenBy": "9.0.0"})
	require.NoError(t, db.Update(func(txn *badger.Txn) error { return txn.Set([]byte{'F'}, v) }))
	require.NoError(t, db.Close())

	_, err = queen.Open(dir, nil)
	var ie *queen.IncompatibleStoreError
	require.True(t, errors.As(err, &ie), "%v", err)
	require.ErrorIs(t, err, queen.ErrIncompatibleStore)
	require.Equal(t, queen.StoreFormat+1, ie.Found)
	require.Equal(t, queen.StoreFormat, ie.Supported)
	require.Contains(t, err.Error(), fmt.Sprintf("format %d", queen.StoreFormat+1))
	require.Contains(t, err.Error(), fmt.Sprintf("formats %d to %d", queen.OldestStoreFormat, queen.StoreFormat))
	_, err = queen.Inspect(bg, dir, nil)
	require.ErrorIs(t, err, queen.ErrIncompatibleStore)

	// Refused without a change: the record is still the newer one.
	db, err = badger.Open(badger.DefaultOptions(dir).WithReadOnly(true).WithLogger(nil))
	require.NoError(t, err)
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte{'F'})
		require.NoError(t, err)
		got, err := item.ValueCopy(nil)
		require.Equal(t, v, got)
		return err
	}))
	require.NoError(t, db.Close())
}

func TestFormat_NewStoreHasTheRecord(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	b := openStore(t, dir, queentest.NewClock(fixtureTime))
	rep, err := b.StoreReport(bg)
	require.NoError(t, err)
	require.Equal(t, queen.StoreFormat, rep.Format)
	require.NotEmpty(t, rep.StoreID)
	require.NoError(t, b.Close())
	again, err := queen.Inspect(bg, dir, nil)
	require.NoError(t, err)
	require.Equal(t, rep.StoreID, again.StoreID, "the id is made once")
	require.False(t, again.Upgrade)
}
