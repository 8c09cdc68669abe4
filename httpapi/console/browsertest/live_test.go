package browsertest

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/queenlite/queen"
)

// TestLive_OverviewRefreshesWithoutReload pushes from Go while the
// overview is open: its counts change in place, without a reload (a
// marker set on the page's window survives), within a deadline.
func TestLive_OverviewRefreshesWithoutReload(t *testing.T) {
	c := startConsole(t)
	tb := c.login(t, adminToken)
	tb.open("", "overview")
	if n := tb.count(`[data-live] table[data-table="queues"]`); n != 1 {
		t.Fatalf("the queues table is in %d live regions, want 1", n)
	}
	before := ordersEarlyEU + ordersEarlyUS + ordersLateEU
	tb.expectCell(row("queues", qOrders), "messages", strconv.Itoa(before))
	tb.eval(`window.__queenMarker = "still here"`, nil)

	const more = 4
	items := make([]queen.PushItem, more)
	for i := range items {
		items[i] = queen.PushItem{Queue: qOrders, Partition: "us", Payload: []byte(fmt.Sprintf(`{"order":"us-live-%d"}`, i))}
	}
	if _, err := c.b.Push(context.Background(), items); err != nil {
		t.Fatal(err)
	}

	// The page's own refresh brings the new count; the test only reads
	// the cell.
	want := strconv.Itoa(before + more)
	tb.waitJS("the overview to show "+want+" messages in orders", cellJS(row("queues", qOrders), "messages")+` === `+jsString(want), nil)
	var marker string
	tb.eval(`String(window.__queenMarker)`, &marker)
	if marker != "still here" {
		t.Errorf("the overview reloaded to show the new count (marker %q)", marker)
	}
	tb.clean("live overview")
}
