package browsertest

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/queenlite/queen"
)

// headers are the column headings the tests fall back on, by column
// name, where a page does not mark its cells with data-col (see the DOM
// contract).
var headers = map[string]string{
	"partitions": "Partitions", "messages": "Messages", "pending": "Pending", "inflight": "In flight",
	"deadletters": "Dead letters", "parked": "Parked", "groups": "Groups", "lag": "Lag", "mode": "Mode",
}

// cellJS is a JavaScript expression for the text of column col in the
// row matching sel: the cell marked data-col=col, else the cell under the
// table's heading for col; null when there is no such row, undefined when
// the row has no such column.
func cellJS(sel, col string) string {
	return fmt.Sprintf(`(function(){
		var r = document.querySelector(%s);
		if (!r) return null;
		var c = r.querySelector('[data-col=' + JSON.stringify(%s) + ']');
		if (!c) {
			var t = r.closest("table"), heads = t ? t.querySelectorAll("thead th") : [], i;
			for (i = 0; i < heads.length; i++) {
				if (heads[i].textContent.trim() === %s) { c = r.cells[i]; break; }
			}
		}
		return c ? c.textContent.trim() : undefined;
	})()`, jsString(sel), jsString(col), jsString(headers[col]))
}

// cell returns the text of column col in the row matching sel.
func (tb *tab) cell(sel, col string) string {
	tb.t.Helper()
	var out struct {
		Text  string `json:"text"`
		State string `json:"state"`
	}
	tb.eval(`(function(){ var v = `+cellJS(sel, col)+`; return {text: v || "", state: v === null ? "no row" : (v === undefined ? "no column" : "")}; })()`, &out)
	if out.State != "" {
		tb.t.Fatalf("%s, column %s: %s (page %s)", sel, col, out.State, tb.location())
	}
	return out.Text
}

// expectCell checks that the row matching sel shows want in column col.
func (tb *tab) expectCell(sel, col, want string) {
	tb.t.Helper()
	if got := tb.cell(sel, col); got != want {
		tb.t.Errorf("%s: column %s is %q, want %q", sel, col, got, want)
	}
}

// rowKeys lists the data-row keys of table's body rows, in page order.
func (tb *tab) rowKeys(table string) []string {
	tb.t.Helper()
	var keys []string
	tb.eval(fmt.Sprintf(`Array.prototype.map.call(document.querySelectorAll('table[data-table=%q] tr[data-row]'), function (r) { return r.getAttribute("data-row"); })`, table), &keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// pathOf is the console path of a queue's page.
func queuePath(queue string) string { return "queues/" + url.PathEscape(queue) }

// TestPages_LoadCleanAndShowSeededData visits every page as an
// administrator: each loads without a JavaScript exception or console
// error and shows what the broker holds.
func TestPages_LoadCleanAndShowSeededData(t *testing.T) {
	c := startConsole(t)

	login := newTab(t, c.base)
	login.open("", "login")
	if login.count(`form[data-form="login"] input[name="token"]`) != 1 {
		t.Fatal("the login page has no token field")
	}
	login.screenshot("login")
	login.clean("login page")

	tb := c.login(t, adminToken)

	// Overview: every queue with its counts.
	tb.open("", "overview")
	keys := tb.rowKeys("queues")
	for _, q := range []string{qOrders, qPayments, qScript} {
		if !contains(keys, q) {
			t.Errorf("overview lists queues %q, not %q", keys, q)
		}
	}
	orders := row("queues", qOrders)
	tb.expectCell(orders, "messages", strconv.Itoa(ordersEarlyEU+ordersEarlyUS+ordersLateEU))
	tb.expectCell(orders, "partitions", "3") // eu, us and the Default partition every queue has
	tb.expectCell(orders, "groups", "2")
	payments := row("queues", qPayments)
	tb.expectCell(payments, "deadletters", strconv.Itoa(deadCount))
	tb.expectCell(payments, "parked", strconv.Itoa(parkedCount))
	if v := strings.TrimSpace(tb.text(`[data-fact="maintenance"]`)); v != "off" {
		t.Errorf("maintenance fact is %q, want off", v)
	}
	if n := tb.count(`[data-live] svg[data-chart="throughput"]`); n != 1 {
		t.Errorf("the overview has %d throughput charts, want 1", n)
	}
	tb.screenshot("overview")
	tb.clean("overview")

	// Queue: partitions, each group's lag, the message browser.
	tb.open(queuePath(qOrders), "queue")
	parts := tb.rowKeys("partitions")
	if !contains(parts, "eu") || !contains(parts, "us") {
		t.Errorf("queue page lists partitions %q, want eu and us", parts)
	}
	tb.expectCell(row("partitions", "eu"), "messages", strconv.Itoa(ordersEarlyEU+ordersLateEU))
	// Each group's lag per partition: billing settled two of eu, audit
	// holds one of us.
	for _, l := range []struct{ part, group, want string }{
		{"eu", gBilling, strconv.Itoa(ordersEarlyEU + ordersLateEU - 2)},
		{"us", gBilling, strconv.Itoa(ordersEarlyUS)},
		{"eu", gAudit, strconv.Itoa(ordersEarlyEU + ordersLateEU)},
		{"us", gAudit, strconv.Itoa(ordersEarlyUS) + " (1 in flight)"},
	} {
		sel := row("lag", l.part) + ` td[data-group=` + cssString(l.group) + `]`
		if got := strings.TrimSpace(tb.text(sel)); got != l.want {
			t.Errorf("queue page: lag of %s on %s is %q, want %q", l.group, l.part, got, l.want)
		}
	}
	tb.clean("queue page")

	tb.open(queuePath(qOrders)+"?partition=eu&offset=0", "queue")
	msgs := tb.rowKeys("messages")
	if len(msgs) != ordersEarlyEU+ordersLateEU {
		t.Errorf("message browser on eu shows %d messages, want %d", len(msgs), ordersEarlyEU+ordersLateEU)
	}
	if !contains(msgs, c.traced.ID) {
		t.Errorf("message browser rows %q lack the traced message %s", msgs, c.traced.ID)
	}
	if p := tb.text(`pre[data-payload]`); !strings.Contains(p, `"order": "eu-1"`) {
		t.Errorf("first payload is %q, want eu-1 pretty-printed", p)
	}
	tb.screenshot("queue")
	tb.clean("message browser")

	// Groups: both groups of orders and the one of payments, with lag.
	tb.open("groups", "groups")
	groups := tb.rowKeys("groups")
	for _, g := range []string{gBilling, gAudit, gCharger} {
		if !contains(groups, g) {
			t.Errorf("groups page lists %q, not %q", groups, g)
		}
	}
	billing := fmt.Sprintf(`table[data-table="groups"] tr[data-row=%q][data-queue=%q]`, gBilling, qOrders)
	tb.expectCell(billing, "lag", strconv.Itoa(ordersEarlyEU+ordersEarlyUS+ordersLateEU-2))
	tb.expectCell(fmt.Sprintf(`table[data-table="groups"] tr[data-row=%q]`, gAudit), "inflight", "1")
	tb.screenshot("groups")
	tb.clean("groups")

	tb.open("groups/"+qOrders+"/"+gBilling, "group")
	tb.expectCell(row("lag", "eu"), "lag", strconv.Itoa(ordersEarlyEU+ordersLateEU-2))
	tb.screenshot("group")
	tb.clean("group")

	// Dead letters and parked: every entry with its error.
	for _, kind := range []struct {
		page    string
		letters []queen.DeadLetter
	}{{"deadletters", c.dead}, {"parked", c.parked}} {
		tb.open(kind.page, kind.page)
		keys := tb.rowKeys(kind.page)
		for _, dl := range kind.letters {
			if !contains(keys, dl.ID) {
				t.Errorf("%s page lists %q, not %s", kind.page, keys, dl.ID)
				continue
			}
			if txt := tb.text(row(kind.page, dl.ID)); !strings.Contains(txt, dl.Error) {
				t.Errorf("%s: %s shows %q, not its error %q", kind.page, dl.ID, txt, dl.Error)
			}
		}
		tb.screenshot(kind.page)
		tb.clean(kind.page)
	}

	// Traces: by name and by message.
	tb.open("traces?name="+traceName, "traces")
	if n := tb.count(`table[data-table="traces"] tr[data-row]`); n != 2 {
		t.Errorf("traces of %s: %d rows, want 2", traceName, n)
	}
	if txt := tb.text(`table[data-table="traces"]`); !strings.Contains(txt, "charged card") || !strings.Contains(txt, "reserved stock") {
		t.Errorf("traces of %s show %q, want both steps", traceName, txt)
	}
	tb.screenshot("traces")
	tb.clean("traces by name")

	tb.open("traces?partition_id="+url.QueryEscape(c.traced.PartitionID)+"&transaction_id="+url.QueryEscape(c.traced.TransactionID), "traces")
	if n := tb.count(`table[data-table="traces"] tr[data-row]`); n != 2 {
		t.Errorf("traces of message %s: %d rows, want 2", c.traced.ID, n)
	}
	tb.clean("traces by message")
}
