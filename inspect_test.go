package queen_test

import (
	"testing"

	"encoding/json"
	"fmt"
	"strings"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// TestStoreReport_SizesPerQueue checks the approximate size of queues of
// large and of small messages: from pushes while open, from the sample
// read at Open after a restart, and from Inspect; and the size on disk.
func TestStoreReport_SizesPerQueue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := itest.NewClock()
	b := openStore(t, dir, clock)
	big := pushPadded(t, b, "big", 4, 50, 2000)
	pushN(t, b, "small", "", 100)

	// A message of "big" takes its payload plus some 100 bytes of key,
	// record and dedup entry; one of "small" only those.
	check := func(rep *queen.StoreReport) {
		t.Helper()
		bq, sq := queueReport(t, rep, "big"), queueReport(t, rep, "small")
		require.Equal(t, int64(200), bq.Messages)
		require.Equal(t, 4, bq.Partitions)
		require.Equal(t, int64(100), sq.Messages)
		require.Equal(t, int64(300), rep.Messages)
		require.Equal(t, 5, rep.Partitions)
		require.InDelta(t, 200*(len(big)+100), bq.ApproxBytes, 200*60, "big: %d", bq.ApproxBytes)
		require.InDelta(t, 100*(8+100), sq.ApproxBytes, 100*60, "small: %d", sq.ApproxBytes)
	}
	rep, err := b.StoreReport(bg)
	require.NoError(t, err)
	check(rep)
	require.Equal(t, queen.StoreFormat, rep.Format)

	// Deleting messages shrinks the estimate with the count.
	before := queueReport(t, rep, "small").ApproxBytes
	res, err := b.Fetch(bg, "small", "", 0, 10)
	require.NoError(t, err)
	for _, rec := range res.Records {
		require.NoError(t, b.DeleteMessage(bg, partitionID(t, b, "small", queen.DefaultPartition), rec.TransactionID))
	}
	rep, err = b.StoreReport(bg)
	require.NoError(t, err)
	require.Equal(t, int64(90), queueReport(t, rep, "small").Messages)
	require.Less(t, queueReport(t, rep, "small").ApproxBytes, before)
	pushN(t, b, "small", "", 10)
	require.NoError(t, b.Close())

	rep, err = queen.Inspect(bg, dir, nil)
	require.NoError(t, err)
	check(rep)
	require.Greater(t, rep.ValueLogBytes, int64(200*len(big)), "the payloads are in the value log")
	require.Equal(t, rep.LSMBytes+rep.ValueLogBytes, rep.DiskBytes)

	b = openStore(t, dir, clock)
	rep, err = b.StoreReport(bg)
	require.NoError(t, err)
	check(rep)
}

func TestInspect_Refusals(t *testing.T) {
	t.Parallel()
	_, err := queen.Inspect(bg, t.TempDir(), nil)
	require.ErrorIs(t, err, queen.ErrNotFound)
	_, err = queen.Inspect(bg, "", &queen.Options{InMemory: true})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	dir := t.TempDir()
	b := openStore(t, dir, itest.NewClock())
	_, err = queen.Inspect(bg, dir, nil)
	require.ErrorIs(t, err, queen.ErrLocked, "an open store is not inspected")
	require.NoError(t, b.Close())
	_, err = queen.Inspect(bg, dir, nil)
	require.NoError(t, err)
}

// pushPadded pushes n messages of a pad bytes long to each of partitions
// "0", "1", ... of queue, and returns the payload.
func pushPadded(t testing.TB, b *queen.Broker, queue string, partitions, n, pad int) string {
	t.Helper()
	payload := fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", pad))
	for p := range partitions {
		items := make([]queen.PushItem, n)
		for i := range items {
			items[i] = queen.PushItem{Queue: queue, Partition: fmt.Sprint(p), Payload: json.RawMessage(payload)}
		}
		_, err := b.Push(bg, items)
		require.NoError(t, err)
	}
	return payload
}

// queueReport finds name in rep.
func queueReport(t *testing.T, rep *queen.StoreReport, name string) queen.QueueReport {
	t.Helper()
	for _, q := range rep.Queues {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("no queue %s in the report", name)
	return queen.QueueReport{}
}
