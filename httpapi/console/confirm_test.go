package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/compat"
	"github.com/stretchr/testify/require"
)

// confirmation posts an action without confirm=1 and checks that the
// console answers a confirmation page (200, data-page="confirm") saying
// each of want, with a form that posts the same action again with
// confirm=1 and the CSRF token. It returns the confirmation's fields.
func (e *env) confirmation(path string, f map[string][]string, want ...string) map[string]string {
	e.t.Helper()
	p := e.post(path, f)
	require.Equal(e.t, http.StatusOK, p.status, "POST %s without confirm=1 must ask first: %s", path, p.body)
	require.Contains(e.t, p.body, `data-page="confirm"`, "POST %s without confirm=1", path)
	text := stripTags(p.body)
	for _, w := range want {
		require.Contains(e.t, text, w, "the confirmation of %s", path)
	}
	require.Contains(e.t, p.body, `action="`+e.prefix+path+`"`, "the confirmation posts the same action")
	require.Contains(e.t, p.body, `name="confirm" value="1"`)
	fields := map[string]string{}
	for _, m := range hiddenRE.FindAllStringSubmatch(p.body, -1) {
		fields[htmlUnescape(m[1])] = htmlUnescape(m[2])
	}
	require.NotEmpty(e.t, fields["csrf"], "the confirmation carries the CSRF token")
	return fields
}

// confirmed posts a confirmation page's fields back, as its button does.
func (e *env) confirmed(path string, fields map[string]string) string {
	e.t.Helper()
	f := form()
	for k, v := range fields {
		f.Set(k, v)
	}
	return e.act(path, f)
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)

// TestConsole_EveryActionAsksFirst: a single dead letter's or
// parked message's Replay and Delete, the selected ones, maintenance on
// and off and a configuration edit each answer a confirmation and change
// nothing until it is posted back with confirm=1: neither one click nor a
// forged POST without confirm acts.
func TestConsole_EveryActionAsksFirst(t *testing.T) {
	e := newEnv(t, "/", nil)
	ctx := context.Background()
	e.deadLetters("orders", "billing", 3)
	ids := rows(t, e.ok("/deadletters"), "deadletters")
	require.Len(t, ids, 3)

	// Replay one.
	f := e.confirmation("/deadletters/replay", form("one", ids[0]), "Replay 1 dead letter", ids[0])
	require.Equal(t, 0, e.replayed("orders"), "nothing replayed before the confirmation")
	require.Equal(t, "replayed 1", e.confirmed("/deadletters/replay", f))
	require.Equal(t, 1, e.replayed("orders"))

	// Delete one.
	e.ok("/deadletters")
	f = e.confirmation("/deadletters/delete", form("one", ids[0]), "Delete 1 dead letter", ids[0])
	require.Equal(t, 3, e.dlqTotal(), "nothing deleted before the confirmation")
	require.Equal(t, "deleted 1", e.confirmed("/deadletters/delete", f))
	require.Equal(t, 2, e.dlqTotal())

	// The selected ones: the confirmation carries every id.
	e.ok("/deadletters")
	f = e.confirmation("/deadletters/replay", form("scope", "selected", "id", ids[1], "id", ids[2]), "Replay 2 dead letters")
	require.Equal(t, 1, e.replayed("orders"))
	p := e.post("/deadletters/replay", form("scope", "selected", "id", ids[1], "id", ids[2], "confirm", "1"))
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, 3, e.replayed("orders"))
	require.Equal(t, "selected", f["scope"])
	e.ok("/deadletters")
	e.confirmation("/deadletters/delete", form("scope", "selected", "id", ids[1], "id", ids[2]), "Delete 2 dead letters")
	require.Equal(t, 2, e.dlqTotal())
	p = e.post("/deadletters/delete", form("scope", "selected", "id", ids[1], "id", ids[2], "confirm", "1"))
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, 0, e.dlqTotal())

	// Parked: the same.
	e.push("orders", "", `{"p":1}`)
	e.settle("orders", "billing", queen.AckPark, "later")
	pids := rows(t, e.ok("/parked"), "parked")
	require.Len(t, pids, 1)
	f = e.confirmation("/parked/delete", form("one", pids[0]), "Delete 1 parked message")
	page, err := e.b.ParkedMessages(ctx, queen.LetterFilter{})
	require.NoError(t, err)
	require.Equal(t, 1, page.Total, "nothing deleted before the confirmation")
	require.Equal(t, "deleted 1", e.confirmed("/parked/delete", f))
	page, err = e.b.ParkedMessages(ctx, queen.LetterFilter{})
	require.NoError(t, err)
	require.Equal(t, 0, page.Total)

	// Maintenance, on (it stops every consumer) and off.
	e.ok("/")
	f = e.confirmation("/maintenance", form("mode", "on"), "maintenance mode on")
	require.False(t, e.b.MaintenanceMode(), "maintenance on before the confirmation")
	require.Equal(t, "maintenance mode on: pushes are stored, pops deliver nothing", e.confirmed("/maintenance", f))
	require.True(t, e.b.MaintenanceMode())
	e.ok("/")
	f = e.confirmation("/maintenance", form("mode", "off"), "maintenance mode off")
	require.True(t, e.b.MaintenanceMode())
	require.Equal(t, "maintenance mode off: pops deliver again", e.confirmed("/maintenance", f))
	require.False(t, e.b.MaintenanceMode())

	// A configuration edit: the confirmation names what changes.
	before, err := e.b.DescribeQueue(ctx, "orders")
	require.NoError(t, err)
	edit := configForm(t, e.ok("/queues/orders"))
	// configForm reads a checkbox as its value, checked or not: the
	// booleans as the queue has them.
	c, q := before.Config, compat.Of(&before.Config)
	for name, v := range map[string]bool{"EncryptionEnabled": c.EncryptionEnabled, "DeadLetterQueue": q.DeadLetterQueue,
		"DLQAfterMaxRetries": q.DLQAfterMaxRetries, "RetentionEnabled": q.RetentionEnabled} {
		edit[name] = strconv.FormatBool(v)
	}
	edit["RetryLimit"] = "9"
	edit["Retention"] = "1h0m0s"
	ef := form()
	for k, v := range edit {
		ef.Set(k, v)
	}
	f = e.confirmation("/queues/orders/config", ef, "RetryLimit", "9", "Retention", "1h0m0s")
	text := stripTags(e.post("/queues/orders/config", ef).body)
	require.NotContains(t, text, "LeaseTime", "only the changed fields are named")
	require.NotContains(t, text, "DeadLetterQueue", "only the changed fields are named")
	after, err := e.b.DescribeQueue(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, before.Config, after.Config, "nothing saved before the confirmation")
	require.Equal(t, "saved the configuration of orders", e.confirmed("/queues/orders/config", f))
	after, err = e.b.DescribeQueue(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, 9, after.Config.RetryLimit)
	require.Equal(t, before.Config.LeaseTime, after.Config.LeaseTime)
}

// TestConsole_ConfirmIsExactlyOne: only confirm=1 confirms; any
// other value asks again and changes nothing.
func TestConsole_ConfirmIsExactlyOne(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.deadLetters("orders", "billing", 1)
	id := rows(t, e.ok("/deadletters"), "deadletters")[0]
	for _, v := range []string{"", "0", "yes", "true", " 1"} {
		p := e.post("/deadletters/delete", form("one", id, "confirm", v))
		require.Equal(t, http.StatusOK, p.status, "confirm=%q", v)
		require.True(t, strings.Contains(p.body, `data-page="confirm"`), "confirm=%q", v)
		p = e.post("/maintenance", form("mode", "on", "confirm", v))
		require.Equal(t, http.StatusOK, p.status, "confirm=%q", v)
	}
	require.Equal(t, 1, e.dlqTotal())
	require.False(t, e.b.MaintenanceMode())
}
