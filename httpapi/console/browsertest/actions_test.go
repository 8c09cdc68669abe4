package browsertest

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/queenlite/queen"
)

// Each action is driven through clicks, as an operator would, and its
// effect is checked through the broker's Go API, not through the page.

// submit clicks the action button matching sel and waits for what the
// console shows next: a confirmation (reported true) or a result.
func (tb *tab) submit(sel string) (confirming bool) {
	tb.t.Helper()
	tb.markOld()
	tb.click(sel)
	var next string
	tb.waitJS("a confirmation or a result", `document.querySelector("dialog[data-confirm][open]") ? "confirm" : (`+fresh+` ? (document.querySelector("[data-confirm]") ? "confirm" : (document.querySelector("[data-result],[data-error]") ? "result" : "")) : "")`, &next)
	return next == "confirm"
}

// actConfirmed clicks the action button matching sel, checks that the
// console asks for a confirmation first (saying each of want), confirms,
// and returns the result the page shows. Every action asks first.
func (tb *tab) actConfirmed(sel string, want ...string) string {
	tb.t.Helper()
	if !tb.submit(sel) {
		tb.t.Fatalf("%s: done without a confirmation (it should say %q): %s", sel, want, tb.text(`[data-result],[data-error]`))
	}
	return tb.confirm(want...)
}

// expectResult checks that an action's result text reports n things done
// with a verb matching verb (e.g. "replayed 3").
func expectResult(t *testing.T, got, verb string, n int) {
	t.Helper()
	re := regexp.MustCompile(`(?i)\b` + verb + `\D*\b` + strconv.Itoa(n) + `\b|\b` + strconv.Itoa(n) + `\b.*\b` + verb)
	if !re.MatchString(got) {
		t.Errorf("result %q does not report %s %d", got, verb, n)
	}
}

// copies counts the messages of payments/cards whose transaction id
// names the dead letter or parked entry id as its replay.
func (s *seeded) copies(t *testing.T, prefix, id string) int {
	t.Helper()
	res, err := s.b.Fetch(context.Background(), qPayments, "cards", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range res.Records {
		if r.TransactionID == prefix+id {
			n++
		}
	}
	return n
}

func (s *seeded) letterTotal(t *testing.T, parked bool) int {
	t.Helper()
	f := queen.LetterFilter{Queue: qPayments}
	list := s.b.DeadLetters
	if parked {
		list = s.b.ParkedMessages
	}
	page, err := list(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return page.Total
}

// TestActions_DeadLetters replays one dead letter, then the selected ones,
// and deletes all that match a filter, each by clicks.
func TestActions_DeadLetters(t *testing.T) {
	c := startConsole(t)
	tb := c.login(t, adminToken)
	one, two, three := c.dead[0].ID, c.dead[1].ID, c.dead[2].ID

	tb.open("deadletters?queue="+qPayments, "deadletters")
	res := tb.actConfirmed(row("deadletters", one)+` [data-action="replay"]`, "Replay 1 dead letter", one)
	expectResult(t, res, "replayed", 1)
	if n := c.copies(t, "dlq:", one); n != 1 {
		t.Fatalf("after replaying dead letter %s, payments/cards holds %d copies of it, want 1", one, n)
	}
	tb.clean("replay one")

	tb.open("deadletters?queue="+qPayments, "deadletters")
	tb.click(`[data-select="` + two + `"]`)
	tb.click(`[data-select="` + three + `"]`)
	res = tb.actConfirmed(`[data-action="replay-selected"]`, "Replay 2 dead letters")
	expectResult(t, res, "replayed", 2)
	for _, id := range []string{two, three} {
		if n := c.copies(t, "dlq:", id); n != 1 {
			t.Errorf("after replaying the selected, payments/cards holds %d copies of dead letter %s, want 1", n, id)
		}
	}
	if n := c.copies(t, "dlq:", one); n != 1 {
		t.Errorf("replaying the selected replayed the unselected %s again (%d copies)", one, n)
	}
	tb.clean("replay selected")

	// The filter narrows to the group; all three match.
	tb.open("deadletters?queue="+qPayments+"&group="+gCharger+"&partition=cards", "deadletters")
	res = tb.actConfirmed(`[data-action="delete-matching"]`, "Delete "+strconv.Itoa(deadCount)+" dead letters")
	expectResult(t, res, "deleted", deadCount)
	if n := c.letterTotal(t, false); n != 0 {
		t.Errorf("after deleting all matching, %d dead letters are left", n)
	}
	if n := tb.count(`table[data-table="deadletters"] tr[data-row]`); n != 0 {
		t.Errorf("after deleting all matching, the page still lists %d dead letters", n)
	}
	tb.clean("delete matching")
}

// TestActions_Parked deletes one selected parked message and replays all
// that match.
func TestActions_Parked(t *testing.T) {
	c := startConsole(t)
	tb := c.login(t, adminToken)
	keep, drop := c.parked[0].ID, c.parked[1].ID

	tb.open("parked?queue="+qPayments, "parked")
	tb.click(`[data-select="` + drop + `"]`)
	res := tb.actConfirmed(`[data-action="delete-selected"]`, "Delete 1 parked message")
	expectResult(t, res, "deleted", 1)
	if n := c.letterTotal(t, true); n != parkedCount-1 {
		t.Errorf("after deleting one selected, %d parked are left, want %d", n, parkedCount-1)
	}
	tb.clean("delete selected")

	tb.open("parked?queue="+qPayments, "parked")
	res = tb.actConfirmed(`[data-action="replay-matching"]`, "Replay 1 parked message")
	expectResult(t, res, "replayed", 1)
	if n := c.copies(t, "parked:", keep); n != 1 {
		t.Errorf("after replaying all matching, %d copies of parked %s, want 1", n, keep)
	}
	if n := c.copies(t, "parked:", drop); n != 0 {
		t.Errorf("the deleted parked %s was replayed (%d copies)", drop, n)
	}
	tb.clean("replay matching")

	tb.open("parked?queue="+qPayments, "parked")
	res = tb.actConfirmed(row("parked", keep)+` [data-action="delete"]`, "Delete 1 parked message", keep)
	expectResult(t, res, "deleted", 1)
	if n := c.letterTotal(t, true); n != 0 {
		t.Errorf("after deleting the last parked message, %d are left", n)
	}
	tb.clean("delete one")
}

// nextPop pops one message of queue's partition for group, without
// waiting, and returns its payload ("" when there is none).
func (s *seeded) nextPop(t *testing.T, group, partition string) string {
	t.Helper()
	res, err := s.b.Pop(context.Background(), queen.PopRequest{Queue: qOrders, Partition: partition, Group: group, Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) == 0 {
		return ""
	}
	return string(res.Messages[0].Payload)
}

// TestActions_Groups seeks a group to the end and to a time, changes
// another's subscription and deletes a group, checking each time where the
// group's next pop lands.
func TestActions_Groups(t *testing.T) {
	c := startConsole(t)
	tb := c.login(t, adminToken)
	half := c.start.Add(30 * time.Minute).UTC().Format(time.RFC3339)

	// billing read eu-1 and eu-2; to a time between the two batches, its
	// next pop on eu is the first of the later batch, and us has nothing
	// after that time.
	tb.open("groups/"+qOrders+"/"+gBilling, "group")
	tb.run(chromedp.SendKeys(`form:has([data-action="seek-time"]) input[name="time"]`, half, chromedp.ByQuery))
	tb.actConfirmed(`[data-action="seek-time"]`, gBilling, qOrders)
	if got := c.nextPop(t, gBilling, "eu"); got != `{"order":"eu-4"}` {
		t.Errorf("after seeking billing to %s, its next pop on eu is %s, want eu-4", half, got)
	}
	if got := c.nextPop(t, gBilling, "us"); got != "" {
		t.Errorf("after seeking billing to %s, its next pop on us is %s, want none", half, got)
	}
	tb.clean("seek to time")

	// To the end: nothing left to pop until a new push.
	tb.open("groups/"+qOrders+"/"+gBilling, "group")
	tb.actConfirmed(`[data-action="seek-end"]`, gBilling, qOrders)
	if got := c.nextPop(t, gBilling, "eu"); got != "" {
		t.Errorf("after seeking billing to the end, its next pop on eu is %s, want none", got)
	}
	if _, err := c.b.Push(context.Background(), []queen.PushItem{{Queue: qOrders, Partition: "eu", Payload: []byte(`{"order":"eu-new"}`)}}); err != nil {
		t.Fatal(err)
	}
	if got := c.nextPop(t, gBilling, "eu"); got != `{"order":"eu-new"}` {
		t.Errorf("after seeking billing to the end and one push, its next pop is %s, want eu-new", got)
	}
	tb.clean("seek to end")

	// audit has not started on eu: a subscription from the later batch
	// starts it there.
	late := c.late.UTC().Format(time.RFC3339)
	tb.open("groups/"+qOrders+"/"+gAudit, "group")
	tb.run(chromedp.SendKeys(`form:has([data-action="subscription"]) input[name="from"]`, late, chromedp.ByQuery))
	tb.actConfirmed(`[data-action="subscription"]`, gAudit)
	if got := c.nextPop(t, gAudit, "eu"); got != `{"order":"eu-4"}` {
		t.Errorf("after subscribing audit from %s, its next pop on eu is %s, want eu-4", late, got)
	}
	tb.clean("subscription")

	// Deleted but remembered, billing starts over from its start point
	// (every message: it joined in mode all).
	tb.open("groups/"+qOrders+"/"+gBilling, "group")
	tb.actConfirmed(`[data-action="delete-group"]`, gBilling)
	if got := c.nextPop(t, gBilling, "eu"); got != `{"order":"eu-1"}` {
		t.Errorf("after deleting billing (start point kept), its next pop on eu is %s, want eu-1", got)
	}
	tb.clean("delete group, start point kept")

	// Deleted and forgotten: gone.
	tb.open("groups/"+qOrders+"/"+gBilling, "group")
	tb.click(`form:has([data-action="delete-group"]) input[name="forget"]`)
	tb.actConfirmed(`[data-action="delete-group"]`, gBilling)
	groups, err := c.b.ListGroups(context.Background(), queen.GroupFilter{Group: gBilling})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g.Queue == qOrders {
			t.Errorf("billing is still a group of orders after its deletion: %+v", g)
		}
	}
	tb.open("groups", "groups")
	if contains(tb.rowKeys("groups"), gBilling) {
		t.Error("the groups page still lists billing after its deletion")
	}
	tb.clean("delete group, forgotten")
}

// TestActions_QueueConfigAndMaintenance edits a queue's configuration (a
// valid edit is stored, an invalid one refused and not stored) and turns
// maintenance mode on and off.
func TestActions_QueueConfigAndMaintenance(t *testing.T) {
	c := startConsole(t)
	tb := c.login(t, adminToken)
	ctx := context.Background()

	tb.open(queuePath(qOrders), "queue")
	setField(tb, "RetryLimit", "7")
	tb.actConfirmed(`[data-action="save-config"]`, "RetryLimit from", "to 7")
	info, err := c.b.DescribeQueue(ctx, qOrders)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.RetryLimit != 7 {
		t.Errorf("after saving retry limit 7, orders' retry limit is %d", info.Config.RetryLimit)
	}
	if info.Config.LeaseTime != 5*time.Minute {
		t.Errorf("saving the retry limit changed the lease time to %v", info.Config.LeaseTime)
	}
	tb.clean("save config")

	tb.open(queuePath(qOrders), "queue")
	setField(tb, "RetryLimit", "-3")
	if !tb.submit(`[data-action="save-config"]`) {
		t.Fatal("saving a configuration did not ask for a confirmation first")
	}
	tb.markOld()
	tb.click(`[data-confirm] [data-action="confirm"]`)
	tb.waitJS("the refusal of an invalid configuration", fresh+` && !!document.querySelector("[data-error]")`, nil)
	info, err = c.b.DescribeQueue(ctx, qOrders)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.RetryLimit != 7 {
		t.Errorf("an invalid retry limit was stored: %d", info.Config.RetryLimit)
	}
	tb.clean("invalid config")

	tb.open("", "overview")
	tb.actConfirmed(`[data-action="maintenance-on"]`, "maintenance mode on", "every consumer stops")
	if !c.b.MaintenanceMode() {
		t.Fatal("maintenance-on did not turn maintenance mode on")
	}
	tb.actConfirmed(`[data-action="maintenance-off"]`, "maintenance mode off")
	if c.b.MaintenanceMode() {
		t.Error("maintenance-off did not turn maintenance mode off")
	}
	tb.clean("maintenance")
}

// setField replaces the value of the config form's input name.
func setField(tb *tab, name, value string) {
	tb.t.Helper()
	sel := `form:has([data-action="save-config"]) [name="` + name + `"]`
	tb.typeInto(sel, value)
	if got := strings.TrimSpace(tb.value(sel)); got != value {
		tb.t.Fatalf("config field %s holds %q after typing %q", name, got, value)
	}
}

// value is the value of the form control matching sel.
func (tb *tab) value(sel string) string {
	tb.t.Helper()
	var v string
	tb.run(chromedp.Value(sel, &v, chromedp.ByQuery))
	return v
}
