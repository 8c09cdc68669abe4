package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// apiJSON GETs path from the HTTP API of b and decodes its JSON answer.
func apiJSON(t *testing.T, b *queen.Broker, path string) map[string]any {
	t.Helper()
	srv := httptest.NewServer(httpapi.New(b, nil))
	defer srv.Close()
	res, err := http.Get(srv.URL + path)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
	return out
}

// factOf is the text of the page's data-fact="name" element.
func factOf(t *testing.T, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(`data-fact="` + name + `">([^<]*)<`).FindStringSubmatch(body)
	require.NotNil(t, m, "no fact %s", name)
	return m[1]
}

// rowCells are the texts of the cells of a table row.
func rowCells(t *testing.T, body, table, key string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(rowHTML(t, body, table, key), -1) {
		out = append(out, strings.TrimSpace(stripTags(m[1])))
	}
	return out
}

// lease pops n messages of queue's partition for group and keeps them
// leased.
func (e *env) lease(queue, partition, group string, n int) {
	e.t.Helper()
	res, err := e.b.Pop(context.Background(), queen.PopRequest{Queue: queue, Partition: partition, Group: group, Batch: n,
		SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(e.t, err)
	require.Len(e.t, res.Messages, n)
}

// TestConsole_PendingIsTheAPIs: the console's Pending of a queue
// (overview and queue page) is the HTTP API's pending of the same queue,
// in its listing and in /api/v1/resources/queues/{q}'s totals, leased
// messages out of it. With two groups leasing one partition's message,
// the two must still agree (summing per-partition figures would not).
func TestConsole_PendingIsTheAPIs(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.push("orders", "a", `1`)
	e.push("orders", "b", `1`, `2`, `3`, `4`)
	e.lease("orders", "a", "g1", 1)
	e.lease("orders", "a", "g2", 1)
	e.lease("orders", "b", "g1", 1)
	qs, err := e.b.QueueStats(context.Background(), "orders")
	require.NoError(t, err)
	require.Equal(t, int64(5), qs.Pending)
	require.Equal(t, int64(3), qs.InFlight)
	const want = "2" // 5 unsettled, 3 of them under leases

	require.Equal(t, want, rowCells(t, e.ok("/"), "queues", "orders")[3], "overview's Pending")
	require.Equal(t, want, factOf(t, e.ok("/queues/orders"), "pending"), "queue page's Pending")

	list := apiJSON(t, e.b, "/api/v1/resources/queues")["queues"].([]any)[0].(map[string]any)
	require.Equal(t, 2.0, list["messages"].(map[string]any)["pending"], "the API's listing")
	detail := apiJSON(t, e.b, "/api/v1/resources/queues/orders")
	require.Equal(t, 2.0, detail["totals"].(map[string]any)["pending"], "the API's totals")
	status := apiJSON(t, e.b, "/api/v1/status/queues/orders")
	require.Equal(t, 2.0, status["totals"].(map[string]any)["pending"], "the status route's totals")

	// A partition's: b has 4 unsettled, 1 leased; the console's row and
	// the API's partition say 3.
	require.Equal(t, "3", rowCells(t, e.ok("/queues/orders"), "partitions", "b")[2], "queue page's partition b")
	for _, p := range detail["partitions"].([]any) {
		if p := p.(map[string]any); p["name"] == "b" {
			require.Equal(t, 3.0, p["stats"].(map[string]any)["pending"])
		}
	}
}

// TestConsole_CompletedExcludesLetters: a partition with one
// completed, one dead-lettered and one parked message reports completed 1,
// deadLetter 1 and failed 1, in the partition and in the queue's totals
// and listing: a dead letter is not completed.
func TestConsole_CompletedExcludesLetters(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.push("orders", "", `1`, `2`, `3`)
	e.settle("orders", "g", queen.AckCompleted, "")
	e.settle("orders", "g", queen.AckDLQ, "bad")
	e.settle("orders", "g", queen.AckPark, "later")
	want := map[string]any{"total": 3.0, "pending": 0.0, "processing": 0.0, "completed": 1.0, "failed": 1.0, "deadLetter": 1.0}

	detail := apiJSON(t, e.b, "/api/v1/resources/queues/orders")
	require.Equal(t, want, detail["totals"])
	parts := detail["partitions"].([]any)
	require.Len(t, parts, 1)
	require.Equal(t, want, parts[0].(map[string]any)["stats"])
	status := apiJSON(t, e.b, "/api/v1/status/queues/orders")
	require.Equal(t, 1.0, status["totals"].(map[string]any)["completed"])
	list := apiJSON(t, e.b, "/api/v1/resources/queues")["queues"].([]any)[0].(map[string]any)
	require.Equal(t, want, list["messages"])
}

// duOf is the space dir takes on disk, its files' allocated blocks, and
// the files' sizes.
func duOf(t *testing.T, dir string) (du, size int64) {
	t.Helper()
	require.NoError(t, filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			du += fi.Sys().(*syscall.Stat_t).Blocks * 512
			size += fi.Size()
		}
		return err
	}))
	return du, size
}

// TestConsole_StoreOnDiskIsDiskUse: "Store on disk" is the space
// the store's files take (allocated blocks), not their sizes: Badger
// preallocates its value log file, so a store of a few hundred KiB showed
// 128 MiB; and before Badger's first measure, 0 B.
func TestConsole_StoreOnDiskIsDiskUse(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("allocated blocks are read through syscall.Stat_t on Linux here")
	}
	dir := t.TempDir()
	clock := queentest.NewClock(start)
	b, err := queen.Open(dir, &queen.Options{Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	e := newEnvOn(t, b, clock, "/", nil)
	e.push("orders", "", `{"n":1}`, `{"n":2}`)

	du, size := duOf(t, dir)
	require.Less(t, du*4, size, "the test needs a store whose files are larger than their disk use")
	got, err := b.DiskUsage()
	require.NoError(t, err)
	require.Equal(t, du, got, "DiskUsage is the sum of the files' allocated blocks")

	shown := factOf(t, e.ok("/"), "store")
	m := regexp.MustCompile(`^([0-9.]+) KiB$`).FindStringSubmatch(shown)
	require.NotNil(t, m, "a store of %d bytes on disk (files of %d bytes) shown as %q", du, size, shown)
	kib, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	require.InEpsilon(t, float64(du)/1024, kib, 0.25, "shown %s for %d bytes on disk", shown, du)
}
