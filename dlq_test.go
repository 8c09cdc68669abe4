package queen_test

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"context"

	"sync"

	"errors"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// deadLetter pushes one message and dead-letters it for group.
func deadLetter(t *testing.T, b *queen.Broker, queue, group, payload string) {
	t.Helper()
	pushOne(t, b, queue, "p", "", payload)
	pr := pop(t, b, queen.PopRequest{Queue: queue, Group: group, SubscriptionMode: queen.SubscriptionModeAll, Partition: "p", Batch: 100})
	require.NotEmpty(t, pr.Messages)
	items := ackItems(pr.Messages, queen.AckCompleted)
	items[len(items)-1].Status, items[len(items)-1].Error = queen.AckDLQ, "gave up"
	ack(t, b, items...)
}

func TestDLQ_ReplayCopiesToEveryGroupOnce(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		deadLetter(t, b, "orders", "billing", `{"order":9}`)
		// A second group has read everything already.
		other := pop(t, b, queen.PopRequest{Queue: "orders", Group: "emails", SubscriptionMode: queen.SubscriptionModeAll, Partition: "p", Batch: 10})
		ackAll(t, b, other.Messages, queen.AckCompleted)

		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "orders", ConsumerGroup: "billing"})
		require.NoError(t, err)
		require.Equal(t, 1, page.Total)
		id := page.Letters[0].ID

		rr, err := b.ReplayDeadLetter(bg, id)
		require.NoError(t, err)
		require.Equal(t, "dlq:"+id, rr.TransactionID)
		require.Equal(t, int64(1), rr.Offset, "appended at the end of the partition")
		require.False(t, rr.Duplicate)
		again, err := b.ReplayDeadLetter(bg, id)
		require.NoError(t, err)
		require.True(t, again.Duplicate, "a second replay is not a second copy")
		require.Equal(t, rr.MessageID, again.MessageID)

		for _, g := range []string{"billing", "emails"} {
			got := pop(t, b, queen.PopRequest{Queue: "orders", Group: g, Partition: "p", Batch: 10})
			require.Len(t, got.Messages, 1, g)
			require.Equal(t, `{"order":9}`, string(got.Messages[0].Payload))
			require.Equal(t, "dlq:"+id, got.Messages[0].TransactionID)
		}

		require.NoError(t, b.DeleteDeadLetter(bg, id))
		require.ErrorIs(t, b.DeleteDeadLetter(bg, id), queen.ErrNotFound)
		_, err = b.ReplayDeadLetter(bg, id)
		require.ErrorIs(t, err, queen.ErrNotFound)
		_, err = b.ReplayDeadLetter(bg, "not-an-id")
		require.ErrorIs(t, err, queen.ErrNotFound)
		page, err = b.DeadLetters(bg, queen.LetterFilter{})
		require.NoError(t, err)
		require.Zero(t, page.Total)
	})
}

func TestDLQ_ParkedReplayAndDelete(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushOne(t, b, "q", "p", "", `"v9"`)
	pr := pop(t, b, queen.PopRequest{Queue: "q"})
	ackAll(t, b, pr.Messages, queen.AckPark)
	page, err := b.ParkedMessages(bg, queen.LetterFilter{Queue: "q"})
	require.NoError(t, err)
	require.Equal(t, 1, page.Total)
	dl, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "q"})
	require.NoError(t, err)
	require.Zero(t, dl.Total, "parking is not dead-lettering")
	rr, err := b.ReplayParked(bg, page.Letters[0].ID)
	require.NoError(t, err)
	require.Equal(t, "parked:"+page.Letters[0].ID, rr.TransactionID)
	require.Len(t, pop(t, b, queen.PopRequest{Queue: "q"}).Messages, 1)
	require.NoError(t, b.DeleteParked(bg, page.Letters[0].ID))
	st, err := b.QueueStats(bg, "q")
	require.NoError(t, err)
	require.Zero(t, st.Parked)
}

func TestDLQ_ListFiltersAndPages(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	start := clock.Now()
	for i := 0; i < 5; i++ {
		deadLetter(t, b, "a", "g1", `1`)
		clock.Advance(time.Minute)
	}
	deadLetter(t, b, "a", "g2", `2`)
	deadLetter(t, b, "b", "g1", `3`)

	page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "a", ConsumerGroup: "g1", Limit: 2, Offset: 1})
	require.NoError(t, err)
	require.Equal(t, 5, page.Total)
	require.Len(t, page.Letters, 2)
	require.True(t, page.Letters[0].FailedAt.After(page.Letters[1].FailedAt), "newest first")
	page, err = b.DeadLetters(bg, queen.LetterFilter{From: start.Add(90 * time.Second), To: start.Add(3*time.Minute + time.Second)})
	require.NoError(t, err)
	require.Equal(t, 2, page.Total)
	page, err = b.DeadLetters(bg, queen.LetterFilter{Partition: "nope"})
	require.NoError(t, err)
	require.Zero(t, page.Total)
	_, err = b.DeadLetters(bg, queen.LetterFilter{Limit: -1})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

func TestDLQ_HugeDeadLetterBatchIsWrittenWhole(t *testing.T) {
	t.Parallel()
	var logs itest.LogBuffer
	// The smallest memory budget has the smallest storage transactions;
	// payloads under Badger's value threshold stay inline in them.
	opts := &queen.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), MemoryBudget: queen.MinMemoryBudget}
	itest.Run(t, opts, func(t *testing.T, b *queen.Broker) {
		const n = 5000 // about 1 MB of dead-letter copies: more than one storage transaction
		payload := []byte(`"` + strings.Repeat("p", 100) + `"`)
		items := make([]queen.PushItem, n)
		for i := range items {
			items[i] = queen.PushItem{Queue: "huge", Payload: payload}
		}
		_, err := b.Push(bg, items)
		require.NoError(t, err)
		pr := pop(t, b, queen.PopRequest{Queue: "huge", Batch: n})
		require.Len(t, pr.Messages, n)
		splits := strings.Count(logs.String(), "split")
		ackAll(t, b, pr.Messages, queen.AckDLQ)
		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "huge", Limit: 1000})
		require.NoError(t, err)
		require.Equal(t, n, page.Total)
		require.Equal(t, string(payload), string(page.Letters[0].Payload))
		require.Greater(t, strings.Count(logs.String(), "split"), splits, "the ack's write took several storage transactions")
		// The broker still serves.
		pushN(t, b, "huge", "", 1)
		require.Len(t, pop(t, b, queen.PopRequest{Queue: "huge"}).Messages, 1)
	})
}

// fillLetters pushes n messages of payload to queue (partition p) and
// dead-letters them all for group g.
func fillLetters(t testing.TB, b *queen.Broker, queue string, n int, payload []byte) {
	t.Helper()
	const chunk = 100
	for done := 0; done < n; done += chunk {
		items := make([]queen.PushItem, min(chunk, n-done))
		for i := range items {
			items[i] = queen.PushItem{Queue: queue, Partition: "p", Payload: payload}
		}
		_, err := b.Push(bg, items)
		require.NoError(t, err)
		pr := pop(t, b, queen.PopRequest{Queue: queue, Group: "g", SubscriptionMode: queen.SubscriptionModeAll, Partition: "p", Batch: len(items)})
		require.Len(t, pr.Messages, len(items))
		ackAll(t, b, pr.Messages, queen.AckDLQ)
	}
}

// allocated returns the fewest bytes the heap grew by over calls of fn:
// up to ten, stopping at the first under bound. The measure is the
// process's, so Badger's own work in the background (flushing and
// compacting what the test wrote) only adds to it; the fewest is fn's
// cost with the least of that.
func allocated(bound uint64, fn func()) uint64 {
	var least uint64
	for i := 0; i < 10; i++ {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		fn()
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; i == 0 || n < least {
			least = n
		}
		if least < bound {
			break
		}
	}
	return least
}

// A page of dead letters or parked messages costs the letters it returns,
// not every letter of the store: a one-letter page over 2,000 letters of
// 32 KiB allocates a few payloads' worth, not 64 MiB.
// Not parallel: it measures the process's allocations. On disk only: in
// memory, Badger keeps the payloads in its tables, and its flushes and
// compactions of them, in the background for seconds after the fill,
// drown what is measured.
func TestDLQ_PageCostsWhatItShows(t *testing.T) {
	clock := itest.NewClock()
	b := itest.OpenDir(t, t.TempDir(), &queen.Options{Clock: clock, Durability: queen.SyncNever})
	const n, size = 2000, 32 << 10
	payload := []byte(`"` + strings.Repeat("x", size-2) + `"`)
	fillLetters(t, b, "big", n, payload)
	clock.Advance(time.Second)
	deadLetter(t, b, "small", "g", `"last"`) // the newest letter, of another queue

	// One payload is returned, copied twice on the way (out of the store,
	// out of its record): allow four, and 64 bytes a letter (0.2 % of a
	// payload) for Badger's walk over its keys, 256 KiB in all. Reading
	// every header through encoding/json would take twice that; copying
	// every payload, 64 MiB.
	bound := uint64(4*size + n*64)
	var page *queen.LetterPage
	got := allocated(bound, func() {
		var err error
		page, err = b.DeadLetters(bg, queen.LetterFilter{Queue: "big", Limit: 1})
		require.NoError(t, err)
	})
	require.Equal(t, n, page.Total)
	require.Len(t, page.Letters, 1)
	require.True(t, bytes.Equal(payload, page.Letters[0].Payload), "the page's letter has its payload")
	t.Logf("a one-letter page over %d letters allocated %d bytes", n, got)
	require.Less(t, got, bound, "a one-letter page allocated %d bytes over %d letters", got, n)

	got = allocated(bound, func() {
		var err error
		page, err = b.DeadLetters(bg, queen.LetterFilter{Limit: 1})
		require.NoError(t, err)
	})
	require.Equal(t, n+1, page.Total)
	require.Equal(t, `"last"`, string(page.Letters[0].Payload), "newest first")
	t.Logf("a one-letter page over %d letters allocated %d bytes", n, got)
	require.Less(t, got, bound, "a one-letter page allocated %d bytes over %d letters", got, n)
}

// Every page of a listing is the slice of the whole listing, in its order
// (newest failure first, then the greater id), whatever its offset and
// limit: a page keeps only the letters up to its end, and these must be
// the right ones. Many letters share a failure time, so the ids decide.
func TestDLQ_PagesAreSlicesOfTheWholeListing(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	const n = 240
	for i := 0; i < n; i += 40 {
		fillLetters(t, b, "q", 40, []byte(`1`))
		clock.Advance(time.Second)
	}
	all, err := b.DeadLetters(bg, queen.LetterFilter{Limit: 1000})
	require.NoError(t, err)
	require.Equal(t, n, all.Total)
	require.Len(t, all.Letters, n)
	for i := 1; i < n; i++ {
		prev, cur := all.Letters[i-1], all.Letters[i]
		require.True(t, prev.FailedAt.After(cur.FailedAt) || prev.FailedAt.Equal(cur.FailedAt) && prev.ID > cur.ID,
			"letter %d (%s, %s) is listed after %d (%s, %s)", i, cur.FailedAt, cur.ID, i-1, prev.FailedAt, prev.ID)
	}
	for _, pg := range []struct{ offset, limit int }{{0, 1}, {0, 7}, {1, 1}, {39, 2}, {40, 40}, {100, 37}, {233, 10}, {239, 5}, {240, 1}, {500, 3}} {
		page, err := b.DeadLetters(bg, queen.LetterFilter{Offset: pg.offset, Limit: pg.limit})
		require.NoError(t, err)
		require.Equal(t, n, page.Total)
		want := all.Letters[min(pg.offset, n):min(pg.offset+pg.limit, n)]
		require.Len(t, page.Letters, len(want), "offset %d limit %d", pg.offset, pg.limit)
		for i := range want {
			require.Equal(t, want[i].ID, page.Letters[i].ID, "offset %d limit %d: letter %d", pg.offset, pg.limit, i)
		}
	}
}

// From and To are inclusive, to the microsecond.
func TestDLQ_FromAndToAreInclusive(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	for i := 0; i < 3; i++ {
		deadLetter(t, b, "q", "g", `1`)
		clock.Advance(time.Microsecond)
	}
	all, err := b.DeadLetters(bg, queen.LetterFilter{})
	require.NoError(t, err)
	require.Equal(t, 3, all.Total)
	mid := all.Letters[1].FailedAt
	page, err := b.DeadLetters(bg, queen.LetterFilter{From: mid, To: mid})
	require.NoError(t, err)
	require.Equal(t, 1, page.Total)
	require.Equal(t, all.Letters[1].ID, page.Letters[0].ID)
}

// A message dead-lettered because its failed acks used up RetryLimit
// carries "Retries exhausted" when the last ack gave no error text, and
// the ack's own text when it gave one.
func TestDLQ_ExhaustedRetriesSayWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ given, want string }{
		{"", "Retries exhausted"},
		{"card declined", "card declined"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			b := queentest.NewBroker(t, nil)
			configureWith(t, b, "q", func(c *queen.QueueConfig) { c.RetryLimit, c.RetryDelay = 1, 0 })
			pushOne(t, b, "q", "p", "", `1`)
			req := queen.PopRequest{Queue: "q", Partition: "p"}
			for attempt := 1; attempt <= 2; attempt++ {
				pr := pop(t, b, req)
				require.Len(t, pr.Messages, 1, "attempt %d", attempt)
				res, err := b.Ack(bg, pr.Messages[0], false, queen.AckOptions{Error: tc.given})
				require.NoError(t, err)
				require.Equal(t, attempt == 2, res.DeadLettered, "dead-lettered on the attempt past RetryLimit, not before")
			}
			require.Empty(t, pop(t, b, req).Messages)
			page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "q"})
			require.NoError(t, err)
			require.Equal(t, 1, page.Total)
			require.Equal(t, tc.want, page.Letters[0].Error)
			require.Equal(t, 1, page.Letters[0].RetryCount, "the failed acks spent")
		})
	}
}

// TestDLQ_ErrorTextIsCappedAt4KiB: a dead letter keeps the first 4 KiB of
// its ack's error text, no more.
func TestDLQ_ErrorTextIsCappedAt4KiB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := queentest.NewBroker(t, nil)
	_, err := b.Push(ctx, []queen.PushItem{{Queue: "long", Payload: []byte(`1`)}})
	require.NoError(t, err)
	res, err := b.Pop(ctx, queen.PopRequest{Queue: "long"})
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	text := strings.Repeat("e", 5<<10)
	_, err = b.Ack(ctx, res.Messages[0], false, queen.AckOptions{Status: queen.AckDLQ, Error: text})
	require.NoError(t, err)
	page, err := b.DeadLetters(ctx, queen.LetterFilter{Queue: "long"})
	require.NoError(t, err)
	require.Len(t, page.Letters, 1)
	require.Equal(t, text[:4<<10], page.Letters[0].Error)
}

// TestDLQ_PayloadIsByteExact: a dead letter keeps its
// payload inside a JSON record, and encoding/json compacts it and escapes
// <, > and &. The entry, and the copy a replay pushes, then differ from
// the bytes pushed, while a pop returns them exactly.
func TestDLQ_PayloadIsByteExact(t *testing.T) {
	t.Parallel()
	for _, p := range []string{` {"a" : 1} `, `{"html":"<b>&</b>"}`, "[1,\n2]"} {
		b := queentest.NewBroker(t, nil)
		pushOne(t, b, "dl", "", "tx", p)
		got := pop(t, b, queen.PopRequest{Queue: "dl"})
		require.Equal(t, p, string(got.Messages[0].Payload))
		ackAll(t, b, got.Messages, queen.AckDLQ)
		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "dl"})
		require.NoError(t, err)
		require.Equal(t, p, string(page.Letters[0].Payload), "dead letter")
		r, err := b.ReplayDeadLetter(bg, page.Letters[0].ID)
		require.NoError(t, err)
		f, err := b.Fetch(bg, "dl", "", r.Offset, 1)
		require.NoError(t, err)
		require.Equal(t, p, string(f.Records[0].Payload), "replayed copy")
	}
}

// TestDLQ_ConcurrentDeletesSucceedOnce: two concurrent DeleteDeadLetter of
// one id both returned nil and the queue's DeadLetters count went to -1.
// Now one succeeds, the others are ErrNotFound, and counts stay exact; the
// same for DeleteParked.
func TestDLQ_ConcurrentDeletesSucceedOnce(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		const letters = 100
		for i := 0; i < letters; i++ {
			pushOne(t, b, "d", "p", "", `{}`)
		}
		pr := pop(t, b, queen.PopRequest{Queue: "d", Partition: "p", Batch: letters})
		items := ackItems(pr.Messages, queen.AckDLQ)
		for i := letters / 2; i < letters; i++ {
			items[i].Status = queen.AckPark
		}
		ack(t, b, items...)
		st := queueStats(t, b, "d")
		require.Equal(t, int64(letters/2), st.DeadLetters)
		require.Equal(t, int64(letters/2), st.Parked)

		dead, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "d"})
		require.NoError(t, err)
		parked, err := b.ParkedMessages(bg, queen.LetterFilter{Queue: "d"})
		require.NoError(t, err)
		for _, c := range []struct {
			page *queen.LetterPage
			del  func(context.Context, string) error
		}{{dead, b.DeleteDeadLetter}, {parked, b.DeleteParked}} {
			for _, l := range c.page.Letters {
				var wg sync.WaitGroup
				start := make(chan struct{})
				errs := make([]error, 8)
				for k := range errs {
					wg.Add(1)
					go func() { defer wg.Done(); <-start; errs[k] = c.del(bg, l.ID) }()
				}
				close(start)
				wg.Wait()
				ok := 0
				for _, err := range errs {
					if err == nil {
						ok++
					} else {
						require.ErrorIs(t, err, queen.ErrNotFound)
					}
				}
				require.Equal(t, 1, ok, "deletes of %s that succeeded", l.ID)
			}
		}
		st = queueStats(t, b, "d")
		require.Equal(t, int64(0), st.DeadLetters)
		require.Equal(t, int64(0), st.Parked)
	})
}

// TestDLQ_LetterOfDeletedQueue: a dead letter of a deleted queue whose
// removal had not run yet could be deleted (decrementing the count of a
// new queue of the same name) and replayed into that new queue. Now such
// an entry is not found.
func TestDLQ_LetterOfDeletedQueue(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	deadLetter(t, b, "q", "g", `{"old":true}`)
	page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "q"})
	require.NoError(t, err)
	oldID := page.Letters[0].ID
	// A cancelled context ends DeleteQueue once the queue is unlinked,
	// before its dead letters are swept.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, _ = b.DeleteQueue(ctx, "q")
	require.Eventually(t, func() bool { _, err := b.DescribeQueue(bg, "q"); return errors.Is(err, queen.ErrNotFound) }, 5*time.Second, time.Millisecond)

	deadLetter(t, b, "q", "g", `{"new":true}`)
	require.Equal(t, int64(1), queueStats(t, b, "q").DeadLetters)
	require.ErrorIs(t, b.DeleteDeadLetter(bg, oldID), queen.ErrNotFound)
	_, err = b.ReplayDeadLetter(bg, oldID)
	require.ErrorIs(t, err, queen.ErrNotFound)
	require.Equal(t, int64(1), queueStats(t, b, "q").DeadLetters)
	f, err := b.Fetch(bg, "q", "p", 0, 10)
	require.NoError(t, err)
	require.Len(t, f.Records, 1, "no replayed copy of the old letter")
}

// TestDLQ_ReplayAfterCopyRetained: the copy a replay pushed is removed by
// retention; a later replay of the same entry pushes a new copy (the
// dedup on "dlq:<id>" holds while a copy is retained).
func TestDLQ_ReplayAfterCopyRetained(t *testing.T) {
	t.Parallel()
	clock := itest.NewClock()
	itest.Run(t, &queen.Options{Clock: clock}, func(t *testing.T, b *queen.Broker) {
		cfg := queen.DefaultQueueConfig()
		cfg.Retention = time.Hour
		_, err := b.ConfigureQueue(bg, "rr", cfg)
		require.NoError(t, err)
		deadLetter(t, b, "rr", "g", `{"v":1}`)
		page, err := b.DeadLetters(bg, queen.LetterFilter{Queue: "rr"})
		require.NoError(t, err)
		id := page.Letters[0].ID
		first, err := b.ReplayDeadLetter(bg, id)
		require.NoError(t, err)
		require.False(t, first.Duplicate)
		dup, err := b.ReplayDeadLetter(bg, id)
		require.NoError(t, err)
		require.True(t, dup.Duplicate)

		clock.Advance(2 * time.Hour)
		require.NoError(t, b.Maintain(bg))
		f, err := b.Fetch(bg, "rr", "p", 0, 10)
		require.NoError(t, err)
		require.Empty(t, f.Records, "retention removed the message and its copy")

		second, err := b.ReplayDeadLetter(bg, id)
		require.NoError(t, err)
		require.False(t, second.Duplicate, "the copy is gone: a new one is pushed")
		require.Greater(t, second.Offset, first.Offset)
		require.NotEqual(t, first.MessageID, second.MessageID)
		got := pop(t, b, queen.PopRequest{Queue: "rr", Group: "g", Partition: "p", Batch: 10})
		require.Len(t, got.Messages, 1)
		require.Equal(t, "dlq:"+id, got.Messages[0].TransactionID)
		require.Equal(t, `{"v":1}`, string(got.Messages[0].Payload))
	})
}
