package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/stretchr/testify/require"
)

// repeatJSON joins n copies of elem into a JSON array.
func repeatJSON(elem string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]"
}

// TestPush_ItemCap: a push of more than queen.MaxPushItems items is a 413
// naming the cap, decided before any item is read (the first one here is
// invalid) and writing nothing; a push at the cap is served.
func TestPush_ItemCap(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	item := `{"queue":"capped","payload":1}`
	over := `{"items":` + repeatJSON(item, queen.MaxPushItems+1) + `}`
	e.fails("POST", "/api/v1/push", over, http.StatusRequestEntityTooLarge,
		"request too large: a push takes at most 10000 items (queen.MaxPushItems), not 10001")
	bad := `{"items":[{"queue":""},` + strings.TrimPrefix(repeatJSON(item, queen.MaxPushItems), "[") + `}`
	e.fails("POST", "/api/v1/push", bad, http.StatusRequestEntityTooLarge, "at most 10000 items")
	_, err := e.b.QueueStats(t.Context(), "capped")
	require.ErrorIs(t, err, queen.ErrNotFound, "a refused push creates nothing")

	res := e.arr("POST", "/api/v1/push", `{"items":`+repeatJSON(item, queen.MaxPushItems)+`}`, http.StatusCreated)
	require.Len(t, res, queen.MaxPushItems)
}

// TestTransaction_OperationCap: a transaction of more than queen.MaxTxOps
// operations, counting each item of a push operation's items as one, is
// a 413 naming the cap and writes nothing. An operations array longer than
// the cap is refused before any operation is read (the first one here is
// invalid).
func TestTransaction_OperationCap(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	push := `{"type":"push","queue":"capped","payload":1}`
	flat := `{"operations":[{"type":"nonsense"},` + strings.TrimPrefix(repeatJSON(push, queen.MaxTxOps), "[") + `}`
	e.fails("POST", "/api/v1/transaction", flat, http.StatusRequestEntityTooLarge,
		"request too large: a transaction takes at most 10000 operations (queen.MaxTxOps)")
	half := `{"type":"push","items":` + repeatJSON(`{"queue":"capped","payload":1}`, queen.MaxTxOps/2) + `}`
	e.fails("POST", "/api/v1/transaction", `{"operations":[`+half+`,`+half+`,`+push+`]}`,
		http.StatusRequestEntityTooLarge, "at most 10000 operations (queen.MaxTxOps)")
	_, err := e.b.QueueStats(t.Context(), "capped")
	require.ErrorIs(t, err, queen.ErrNotFound, "a refused transaction creates nothing")
}

// TestAckBatch_ItemCap: an ack batch of more than queen.MaxAckItems items
// is refused with the 400 Broker.AckBatch gives, before any item is read
// (the first one here is invalid).
func TestAckBatch_ItemCap(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	ack := `{"transactionId":"t","partitionId":"0190a0b0-1111-4222-8333-444455556666"}`
	body := `{"acknowledgments":[{},` + strings.TrimPrefix(repeatJSON(ack, queen.MaxAckItems), "[") + `}`
	e.fails("POST", "/api/v1/ack/batch", body, http.StatusBadRequest, "invalid items: at most 10000 per call, not 10001")
}

// replyBuffer is a ResponseWriter whose body goes into a buffer allocated
// beforehand, so that it adds nothing to the allocations a test measures.
type replyBuffer struct {
	header http.Header
	status int
	body   []byte
	over   bool // the reply did not fit
}

func (w *replyBuffer) Header() http.Header { return w.header }
func (w *replyBuffer) WriteHeader(s int)   { w.status = s }
func (w *replyBuffer) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if len(w.body)+len(p) > cap(w.body) {
		w.over = true
		return len(p), nil
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// pushAllocs serves one push request of body to h and returns the bytes
// allocated meanwhile (by every goroutine, the broker's writer and Badger
// included) and the reply.
func pushAllocs(t *testing.T, h http.Handler, body []byte) (uint64, *replyBuffer) {
	t.Helper()
	w := &replyBuffer{header: http.Header{}, body: make([]byte, 0, 8<<20)}
	req := httptest.NewRequest("POST", "/api/v1/push", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h.ServeHTTP(w, req)
	runtime.ReadMemStats(&after)
	require.False(t, w.over, "reply over 8 MiB")
	require.Equal(t, http.StatusCreated, w.status, "%.200s", w.body)
	return after.TotalAlloc - before.TotalAlloc, w
}

// TestPush_MemoryOfOneRequest: one push request at the item cap, through
// the handler into a broker on disk, allocates (in all, garbage included,
// the broker's writer and Badger's commits too) at most 2.5× its body plus
// 2 KiB per item: under 4× the body with 1 KiB payloads (a 10 MiB body),
// and about 20 MiB with the smallest items, whose body is mostly per-item
// overhead. The reply, streamed, is at most 400 bytes per item with short
// names. Not parallel: it measures the whole process's allocations.
func TestPush_MemoryOfOneRequest(t *testing.T) {
	b, err := queen.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	h := httpapi.New(b, nil)
	_, _ = pushAllocs(t, h, e2eBody(10, 10)) // pools, the queue and its partition

	for _, c := range []struct {
		name    string
		payload int
	}{{"1 KiB payloads", 1000}, {"smallest items", 0}} {
		t.Run(c.name, func(t *testing.T) {
			body := e2eBody(queen.MaxPushItems, c.payload)
			allocs, w := pushAllocs(t, h, body)
			t.Logf("body %d bytes, reply %d bytes, allocated %d bytes: %.1f× the body, %d bytes per item",
				len(body), len(w.body), allocs, float64(allocs)/float64(len(body)), allocs/queen.MaxPushItems)
			var res []map[string]any
			require.NoError(t, json.Unmarshal(w.body, &res))
			require.Len(t, res, queen.MaxPushItems)
			for _, r := range res {
				require.Equal(t, "queued", r["status"])
			}
			require.LessOrEqual(t, len(w.body), 400*queen.MaxPushItems, "reply bytes per item")
			bound := uint64(len(body))*5/2 + 2048*queen.MaxPushItems
			require.LessOrEqual(t, allocs, bound, "%.1f× the body, %d bytes per item",
				float64(allocs)/float64(len(body)), allocs/queen.MaxPushItems)
		})
	}
}

// e2eBody is a push body of n items to queue "mem", each with a payload
// of about size bytes.
func e2eBody(n, size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if size == 0 {
			b.WriteString(`{"queue":"mem"}`)
			continue
		}
		fmt.Fprintf(&b, `{"queue":"mem","payload":{"i":%d,"pad":"%s"}}`, i, strings.Repeat("x", size))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// queuedPusher is an httpapi.Broker whose Push answers res, made
// beforehand, so that a test measures the handler alone.
type queuedPusher struct {
	failing
	res []queen.PushResult
}

func (q queuedPusher) Push(_ context.Context, items []queen.PushItem) ([]queen.PushResult, error) {
	return q.res[:len(items)], nil
}

// TestPush_HandlerAllocationsPerItem: the handler reads an item of a push
// and writes its result with one allocation, the item's transactionId:
// no map, no field-name string, no copy of a queue name repeated from the
// item before, no encoding buffer per result.
func TestPush_HandlerAllocationsPerItem(t *testing.T) {
	res := make([]queen.PushResult, queen.MaxPushItems)
	for i := range res {
		res[i] = queen.PushResult{Status: queen.PushQueued, Queue: "mem", Partition: "Default", PartitionID: "0190a0b0-1111-8222-8333-444455556666",
			MessageID: "0190a0b0-1111-7222-8333-444455556666", TransactionID: "0190a0b0-1111-7222-8333-444455556667", Offset: int64(i)}
	}
	h := httpapi.New(queuedPusher{res: res}, nil)
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := range queen.MaxPushItems {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"queue":"mem","partition":"Default","transactionId":"0190a0b0-1111-7222-8333-%012d","payload":{"i":%d}}`, i, i)
	}
	b.WriteString(`]}`)
	body := b.Bytes()
	w := &replyBuffer{header: http.Header{}, body: make([]byte, 0, 8<<20)}
	allocs := testing.AllocsPerRun(3, func() {
		w.body, w.header = w.body[:0], http.Header{}
		h.ServeHTTP(w, httptest.NewRequest("POST", "/api/v1/push", bytes.NewReader(body)))
	})
	require.Equal(t, http.StatusCreated, w.status)
	require.False(t, w.over)
	t.Logf("%.0f allocations for %d items", allocs, queen.MaxPushItems)
	require.LessOrEqual(t, allocs, float64(queen.MaxPushItems+100), "allocations per item: %.2f", allocs/queen.MaxPushItems)
}
