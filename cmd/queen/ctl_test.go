package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/stretchr/testify/require"
)

// ctlEnv is an httpapi server over an in-memory broker, for queen ctl to
// talk to.
type ctlEnv struct {
	b   *queen.Broker
	url string
	env map[string]string
}

func newCtlEnv(t *testing.T) *ctlEnv {
	t.Helper()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	require.NoError(t, err)
	stop := make(chan struct{})
	srv := httptest.NewServer(httpapi.New(b, &httpapi.Options{Shutdown: stop}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
		require.NoError(t, b.Close())
	})
	return &ctlEnv{b: b, url: srv.URL, env: map[string]string{"QUEEN_URL": srv.URL}}
}

// ctl runs "queen ctl args..." and returns its stdout, stderr and exit
// code. Every line it prints must fit 80 columns.
func (e *ctlEnv) ctl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"ctl"}, args...), envOf(e.env), &out, &errOut)
	if !slices.Contains(args, "--json") {
		requireFits(t, out.String())
	}
	return out.String(), errOut.String(), code
}

// ok runs a command that must succeed and returns its stdout.
func (e *ctlEnv) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := e.ctl(t, args...)
	require.Equal(t, 0, code, "queen ctl %v: %s", args, errOut)
	require.Empty(t, errOut)
	return out
}

// fails runs a command that must exit with code and returns its stderr.
func (e *ctlEnv) fails(t *testing.T, code int, args ...string) string {
	t.Helper()
	out, errOut, got := e.ctl(t, args...)
	require.Equal(t, code, got, "queen ctl %v: %s%s", args, out, errOut)
	require.NotEmpty(t, errOut)
	return errOut
}

// okJSON runs a command with --json and decodes its output into v.
func (e *ctlEnv) okJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := e.ok(t, append(args, "--json")...)
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields() // the documented fields, no others
	require.NoError(t, dec.Decode(v), out)
}

func requireFits(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		require.LessOrEqual(t, utf8.RuneCountInString(line), ctlMaxWidth, "line too wide: %q", line)
	}
}

// rows splits a table into its lines' fields.
func rows(out string) [][]string {
	var rs [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rs = append(rs, strings.Fields(line))
	}
	return rs
}

func (e *ctlEnv) push(t *testing.T, queue, partition string, payloads ...string) {
	t.Helper()
	items := make([]queen.PushItem, len(payloads))
	for i, p := range payloads {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(p)}
	}
	_, err := e.b.Push(context.Background(), items)
	require.NoError(t, err)
}

// settle pops one message for group and acks it with status.
func (e *ctlEnv) settle(t *testing.T, queue, group string, status queen.AckStatus, why string) *queen.Message {
	t.Helper()
	ctx := context.Background()
	r, err := e.b.Pop(ctx, queen.PopRequest{Queue: queue, Group: group, SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	_, err = e.b.Ack(ctx, r.Messages[0], status == queen.AckCompleted, queen.AckOptions{Status: status, Error: why})
	require.NoError(t, err)
	return r.Messages[0]
}

var longName = "a-queue-with-a-name-far-too-long-for-any-terminal-" + strings.Repeat("x", 60)

func TestCtl_Queues(t *testing.T) {
	t.Parallel()
	e := newCtlEnv(t)
	e.push(t, "orders", "", `{"id":1}`, `{"id":2}`, `{"id":3}`)
	e.push(t, "orders", "eu", `{"id":4}`)
	e.push(t, longName, "", `1`)
	e.settle(t, "orders", "billing", queen.AckDLQ, "bad order")

	out := e.ok(t, "queues")
	rs := rows(out)
	require.Equal(t, []string{"QUEUE", "PARTS", "MESSAGES", "PENDING", "INFLIGHT", "DLQ", "PARKED", "GROUPS"}, rs[0])
	require.Len(t, rs, 3)
	require.True(t, strings.HasPrefix(rs[1][0], "a-queue-with-a-name"), out)
	require.True(t, strings.HasSuffix(rs[1][0], "…"), "a long name is cut: %s", out)
	require.Equal(t, []string{"orders", "2", "4", "3", "0", "1", "0", "1"}, rs[2], out)

	var qs []queueJSON
	e.okJSON(t, &qs, "queues")
	require.Len(t, qs, 2)
	require.Equal(t, longName, qs[0].Name, "JSON names are whole")
	o := qs[1]
	require.Equal(t, "orders", o.Name)
	require.Equal(t, 2, o.Partitions)
	require.EqualValues(t, 4, o.Messages)
	require.EqualValues(t, 3, o.Pending)
	require.EqualValues(t, 1, o.DeadLetters)
	require.Equal(t, []string{"billing"}, o.Groups)
	require.NotEmpty(t, o.CreatedAt)

	require.Contains(t, e.fails(t, 2, "queues", "extra"), `unexpected argument "extra"`)
}

func TestCtl_Queue(t *testing.T) {
	t.Parallel()
	e := newCtlEnv(t)
	_, err := e.b.ConfigureQueue(context.Background(), "orders", queen.QueueConfig{LeaseTime: time.Minute, RetryLimit: 5, MaxSize: 100})
	require.NoError(t, err)
	e.push(t, "orders", "", `{"id":1}`, `{"id":2}`)
	e.push(t, "orders", longName, `{"id":3}`)
	e.settle(t, "orders", "billing", queen.AckCompleted, "")

	out := e.ok(t, "queue", "orders")
	require.Contains(t, out, "queue     orders\n")
	require.Contains(t, out, "lease 1m0s, retries 5, max size 100")
	require.Contains(t, out, "3 stored, 2 pending, 0 in flight, 0 dead letters, 0 parked")
	require.Contains(t, out, "groups    billing\n")
	parts := strings.Split(out, "\n\n")
	require.Len(t, parts, 3, out)
	pr := rows(parts[1])
	require.Equal(t, []string{"PARTITION", "MESSAGES", "PENDING", "INFLIGHT", "FIRST", "NEXT", "LAST", "PUSH"}, pr[0])
	require.Equal(t, []string{"Default", "2", "1", "0", "0", "2"}, pr[1][:6])
	require.True(t, strings.HasSuffix(pr[2][0], "…"), out)
	gr := rows(parts[2])
	require.Equal(t, []string{"GROUP", "QUEUE", "LAG", "LAGGING", "INFLIGHT", "LEASES"}, gr[0])
	require.Equal(t, []string{"billing", "orders", "2", "2/2", "0", "0"}, gr[1])

	var d queueDetailJSON
	e.okJSON(t, &d, "queue", "orders")
	require.Equal(t, "orders", d.Name)
	require.NotEmpty(t, d.ID)
	require.Equal(t, configJSON{LeaseTimeMs: 60000, RetryLimit: 5, MaxSize: 100}, d.Config)
	require.Len(t, d.PartitionsList, 2)
	require.Equal(t, "Default", d.PartitionsList[0].Name)
	require.EqualValues(t, 2, d.PartitionsList[0].NextOffset)
	require.Equal(t, longName, d.PartitionsList[1].Name)
	require.Len(t, d.ConsumerGroups, 1)
	require.EqualValues(t, 2, d.ConsumerGroups[0].Lag)

	require.Contains(t, e.fails(t, 1, "queue", "nope"), "not found")
	require.Contains(t, e.fails(t, 2, "queue"), "missing NAME")
	require.Contains(t, e.fails(t, 2, "queue", ""), "NAME must not be empty")
}

func TestCtl_GroupsAndLag(t *testing.T) {
	t.Parallel()
	e := newCtlEnv(t)
	e.push(t, "orders", "", `1`, `2`, `3`)
	e.push(t, "orders", "eu", `4`)
	e.push(t, "mail", "", `5`, `6`)
	e.settle(t, "orders", "billing", queen.AckCompleted, "")
	e.settle(t, "mail", "billing", queen.AckCompleted, "")
	e.settle(t, "mail", "audit", queen.AckCompleted, "")
	e.settle(t, "mail", "audit", queen.AckCompleted, "")

	var gs []groupJSON
	e.okJSON(t, &gs, "groups")
	require.Len(t, gs, 3)
	byKey := map[string]groupJSON{}
	for _, g := range gs {
		byKey[g.Group+"@"+g.Queue] = g
	}
	require.EqualValues(t, 3, byKey["billing@orders"].Lag)
	require.Equal(t, 2, byKey["billing@orders"].Partitions)
	require.Equal(t, 2, byKey["billing@orders"].PartitionsWithLag)
	require.EqualValues(t, 1, byKey["billing@mail"].Lag)
	require.EqualValues(t, 0, byKey["audit@mail"].Lag)
	require.Equal(t, "all", byKey["audit@mail"].Mode)

	out := e.ok(t, "groups", "audit")
	rs := rows(out)
	require.Len(t, rs, 2, out)
	require.Equal(t, []string{"audit", "mail", "all"}, rs[1][:3])
	require.Contains(t, e.fails(t, 1, "groups", "nobody"), "not found")

	// lag: the most behind first.
	rs = rows(e.ok(t, "lag"))
	require.Equal(t, []string{"GROUP", "QUEUE", "LAG", "LAGGING", "INFLIGHT", "LEASES"}, rs[0])
	require.Equal(t, []string{"billing", "orders", "3", "2/2", "0", "0"}, rs[1])
	require.Equal(t, []string{"billing", "mail", "1", "1/1", "0", "0"}, rs[2])
	require.Equal(t, []string{"audit", "mail", "0", "0/1", "0", "0"}, rs[3])

	// lag QUEUE: that queue's groups only.
	e.okJSON(t, &gs, "lag", "mail")
	require.Len(t, gs, 2)
	require.Equal(t, []string{"billing", "audit"}, []string{gs[0].Group, gs[1].Group})
	e.push(t, "unread", "", `7`)
	rs = rows(e.ok(t, "lag", "unread"))
	require.Len(t, rs, 1, "a queue no group reads: no rows")
	require.Contains(t, e.fails(t, 1, "lag", "nope"), "not found")
	require.Contains(t, e.fails(t, 2, "lag", "a", "b"), "unexpected argument")
	require.Contains(t, e.fails(t, 2, "lag", " "), "QUEUE must not be empty")
	require.Contains(t, e.fails(t, 2, "groups", "a", "b"), "unexpected argument")
}

func TestCtl_Letters(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cmd    string
		status queen.AckStatus
		list   func(*queen.Broker) (*queen.LetterPage, error)
	}{
		{"dlq", queen.AckDLQ, func(b *queen.Broker) (*queen.LetterPage, error) {
			return b.DeadLetters(context.Background(), queen.LetterFilter{})
		}},
		{"parked", queen.AckPark, func(b *queen.Broker) (*queen.LetterPage, error) {
			return b.ParkedMessages(context.Background(), queen.LetterFilter{})
		}},
	} {
		t.Run(c.cmd, func(t *testing.T) {
			t.Parallel()
			e := newCtlEnv(t)
			e.push(t, "orders", "", `{"id":1,"note":"first"}`, `{"id":2}`)
			e.push(t, "mail", "", `"hello"`)
			e.settle(t, "orders", "billing", c.status, "card declined")
			e.settle(t, "orders", "billing", c.status, strings.Repeat("an error far too long for one line ", 5))
			first := e.settle(t, "mail", "audit", c.status, "smtp down")
			page, err := c.list(e.b)
			require.NoError(t, err)
			require.Len(t, page.Letters, 3)

			// list, newest first, with filters.
			rs := rows(e.ok(t, c.cmd, "list"))
			require.Equal(t, []string{"ID", "QUEUE", "PARTITION", "GROUP", "ERROR"}, rs[0])
			require.Len(t, rs, 4)
			require.Equal(t, []string{page.Letters[0].ID, "mail", "Default", "audit", "smtp", "down"}, rs[1], "ids whole")
			var all struct {
				Total   int          `json:"total"`
				Letters []letterJSON `json:"letters"`
			}
			e.okJSON(t, &all, c.cmd, "list", "--queue", "orders")
			require.Equal(t, 2, all.Total)
			require.Len(t, all.Letters, 2)
			l := all.Letters[1]
			require.Equal(t, "orders", l.Queue)
			require.Equal(t, "Default", l.Partition)
			require.Equal(t, "billing", l.ConsumerGroup)
			require.Equal(t, "card declined", l.Error)
			require.JSONEq(t, `{"id":1,"note":"first"}`, string(l.Payload))
			require.NotEmpty(t, l.ID)
			require.NotEmpty(t, l.MessageID)
			require.NotEmpty(t, l.FailedAt)
			out := e.ok(t, c.cmd, "list", "--limit", "1")
			require.Contains(t, out, "(1 of 3 shown; --offset 1 for more)")
			e.okJSON(t, &all, c.cmd, "list", "--group", "audit", "--from", "2000-01-01T00:00:00Z")
			require.Len(t, all.Letters, 1)
			require.Equal(t, first.ID, all.Letters[0].MessageID)
			e.okJSON(t, &all, c.cmd, "list", "--to", "2000-01-01T00:00:00Z")
			require.Empty(t, all.Letters)
			require.Contains(t, e.fails(t, 2, c.cmd, "list", "--limit", "0"), "--limit")
			require.Contains(t, e.fails(t, 2, c.cmd, "list", "--limit", "x"), "invalid value")
			require.Contains(t, e.fails(t, 2, c.cmd, "list", "--from", "monday"), "RFC 3339")

			// show, by id or message id.
			var one letterJSON
			e.okJSON(t, &one, c.cmd, "show", l.ID)
			require.JSONEq(t, string(l.Payload), string(one.Payload))
			one.Payload = l.Payload
			require.Equal(t, l, one)
			out = e.ok(t, c.cmd, "show", l.MessageID)
			require.Contains(t, out, "error        card declined\n")
			require.Contains(t, out, "\"note\": \"first\"", "the payload is printed whole, indented")
			require.Contains(t, e.fails(t, 1, c.cmd, "show", "no-such-id"), "not found")
			require.Contains(t, e.fails(t, 2, c.cmd, "show"), "missing ID")

			// replay pushes a copy once.
			var rep []replayJSON
			e.okJSON(t, &rep, c.cmd, "replay", l.ID)
			require.Len(t, rep, 1)
			require.True(t, rep[0].OK)
			require.False(t, rep[0].Duplicate)
			require.NotNil(t, rep[0].Offset)
			require.EqualValues(t, 2, *rep[0].Offset, "after the two pushed")
			f, err := e.b.Fetch(context.Background(), "orders", "Default", 2, 10)
			require.NoError(t, err)
			require.Len(t, f.Records, 1)
			require.JSONEq(t, `{"id":1,"note":"first"}`, string(f.Records[0].Payload))
			out = e.ok(t, c.cmd, "replay", l.ID)
			require.Contains(t, out, "already replayed")

			// delete; an unknown id fails the command but not the others.
			errOut := e.fails(t, 1, c.cmd, "delete", "00000000-0000-0000-0000-000000000000", l.ID)
			require.Contains(t, errOut, "not found")
			page, err = c.list(e.b)
			require.NoError(t, err)
			require.Len(t, page.Letters, 2, "the known id was deleted")
			for _, left := range page.Letters {
				require.NotEqual(t, l.ID, left.ID)
			}
			e.fails(t, 1, c.cmd, "replay", l.ID)
			require.Contains(t, e.fails(t, 2, c.cmd, "delete"), "missing ID")
			require.Contains(t, e.fails(t, 2, c.cmd), "missing subcommand")
			require.Contains(t, e.fails(t, 2, c.cmd, "purge"), `unknown subcommand "purge"`)
		})
	}
}

func TestCtl_Seek(t *testing.T) {
	t.Parallel()
	e := newCtlEnv(t)
	e.push(t, "orders", "", `1`, `2`, `3`)
	e.push(t, "orders", "eu", `4`)
	e.settle(t, "orders", "billing", queen.AckCompleted, "")
	lag := func() int64 {
		gs, err := e.b.ListGroups(context.Background(), queen.GroupFilter{Group: "billing"})
		require.NoError(t, err)
		require.Len(t, gs, 1)
		return gs[0].Lag
	}
	require.EqualValues(t, 3, lag())

	require.Equal(t, "group billing on orders: 2 partition cursors moved\n", e.ok(t, "seek", "billing", "orders", "--to-end"))
	require.EqualValues(t, 0, lag())
	var r struct {
		PartitionsUpdated int    `json:"partitionsUpdated"`
		CursorMovedTo     *int64 `json:"cursorMovedTo"`
	}
	e.okJSON(t, &r, "seek", "--time", "2000-01-01T00:00:00Z", "billing", "orders")
	require.Equal(t, 2, r.PartitionsUpdated)
	require.Nil(t, r.CursorMovedTo)
	require.EqualValues(t, 4, lag(), "back to the start")
	require.Equal(t, "group billing on orders/eu: cursor moved to offset 1\n",
		e.ok(t, "seek", "billing", "orders", "--partition", "eu", "--to-end"))
	require.EqualValues(t, 3, lag())

	require.Contains(t, e.fails(t, 2, "seek", "billing", "orders"), "either --to-end or --time")
	require.Contains(t, e.fails(t, 2, "seek", "billing", "orders", "--to-end", "--time", "2000-01-01T00:00:00Z"), "either")
	require.Contains(t, e.fails(t, 2, "seek", "billing", "orders", "--time", "01/02/2000"), "RFC 3339")
	require.Contains(t, e.fails(t, 2, "seek", "billing", "--to-end"), "missing QUEUE")
	require.Contains(t, e.fails(t, 1, "seek", "nobody", "orders", "--to-end"), "not found")
	require.Contains(t, e.fails(t, 1, "seek", "billing", "nope", "--to-end"), "not found")
}

func TestCtl_Push(t *testing.T) {
	t.Parallel()
	e := newCtlEnv(t)
	rs := rows(e.ok(t, "push", "orders", `{"id":1}`, `"two"`, "--partition", "eu"))
	require.Equal(t, []string{"STATUS", "PARTITION", "OFFSET", "MESSAGE", "ERROR"}, rs[0])
	require.Equal(t, []string{"queued", "eu", "0"}, rs[1][:3])
	require.Equal(t, []string{"queued", "eu", "1"}, rs[2][:3])
	f, err := e.b.Fetch(context.Background(), "orders", "eu", 0, 10)
	require.NoError(t, err)
	require.Len(t, f.Records, 2)
	require.JSONEq(t, `{"id":1}`, string(f.Records[0].Payload))
	require.Equal(t, `"two"`, string(f.Records[1].Payload))

	var res []pushJSON
	e.okJSON(t, &res, "push", "orders", "--transaction-id", "t-1", "--trace-id", "01890a5d-ac96-774b-bcce-b302099a8057", `{"id":3}`)
	require.Equal(t, []pushJSON{{Status: "queued", Queue: "orders", Partition: "Default", MessageID: res[0].MessageID,
		TransactionID: "t-1", Offset: 0}}, res)
	e.okJSON(t, &res, "push", "orders", "--transaction-id", "t-1", `{"id":3}`)
	require.Equal(t, "duplicate", res[0].Status)
	e.ok(t, "push", "orders", "--", "-5")
	f, err = e.b.Fetch(context.Background(), "orders", "Default", 0, 10)
	require.NoError(t, err)
	require.Len(t, f.Records, 2)
	require.Equal(t, "-5", string(f.Records[1].Payload))

	require.Contains(t, e.fails(t, 2, "push", "orders", `{"id":`), "not valid JSON")
	require.Contains(t, e.fails(t, 2, "push", "orders", `{"a":1}`, `nope`), "payload 2 is not valid JSON")
	require.Contains(t, e.fails(t, 2, "push", "orders"), "missing JSON")
	require.Contains(t, e.fails(t, 2, "push"), "missing QUEUE")
	require.Contains(t, e.fails(t, 2, "push", "orders", "1", "2", "--transaction-id", "x"), "one message")
	require.Contains(t, e.fails(t, 2, "push", "orders", "1", "--partition", ""), "--partition")
	e.fails(t, 2, "push", strings.Repeat("q", queen.MaxNameLen+1), "1") // the server refuses the name
	st, err := e.b.QueueStats(context.Background(), "orders")
	require.NoError(t, err)
	require.EqualValues(t, 4, st.Messages, "nothing stored by the refused pushes")
}

func TestCtl_Maintenance(t *testing.T) {
	t.Parallel()
	e := newCtlEnv(t)
	require.Equal(t, "maintenance mode is off\n", e.ok(t, "maintenance"))
	require.Equal(t, "maintenance mode is on\n", e.ok(t, "maintenance", "on"))
	require.True(t, e.b.MaintenanceMode())
	var m struct {
		Maintenance bool `json:"maintenance"`
	}
	e.okJSON(t, &m, "maintenance")
	require.True(t, m.Maintenance)
	e.okJSON(t, &m, "maintenance", "off")
	require.False(t, m.Maintenance)
	require.False(t, e.b.MaintenanceMode())
	require.Contains(t, e.fails(t, 2, "maintenance", "maybe"), `on or off, not "maybe"`)
	require.Contains(t, e.fails(t, 2, "maintenance", "on", "off"), "unexpected argument")
	require.False(t, e.b.MaintenanceMode())
}

func TestCtl_Usage(t *testing.T) {
	t.Parallel()
	e := newCtlEnv(t)
	e.env["QUEEN_TOKEN"] = "s3cret-token"

	// --help on every command and subcommand: exit 0, usage on stdout.
	helps := [][]string{{}}
	for _, c := range ctlCommands {
		helps = append(helps, []string{c.name})
	}
	for _, s := range deadLetters.commands() {
		helps = append(helps, []string{"dlq", s.name}, []string{"parked", s.name})
	}
	for _, h := range helps {
		for _, flag := range []string{"--help", "-h"} {
			out, errOut, code := e.ctl(t, append(h, flag)...)
			require.Equal(t, 0, code, "%v: %s", h, errOut)
			require.Empty(t, errOut)
			require.True(t, strings.HasPrefix(out, "Usage: "+strings.Join(append([]string{"queen ctl"}, h...), " ")+" [flags]"), out)
			require.Contains(t, out, "--server")
			require.NotContains(t, out, "s3cret-token", "help never shows the token")
		}
	}
	out := e.ok(t, "--help")
	for _, c := range ctlCommands {
		require.Contains(t, out, "\n  "+c.name+" ")
	}

	require.Contains(t, e.fails(t, 2), "no command given")
	require.Contains(t, e.fails(t, 2, "frobnicate"), `unknown command "frobnicate"`)
	require.Contains(t, e.fails(t, 2, "queues", "--nope"), "flag provided but not defined")
	require.Contains(t, e.fails(t, 2, "queues", "--server", "ftp://x"), "scheme")
	require.Contains(t, e.fails(t, 2, "queues", "--timeout", "0s"), "--timeout")
	require.Contains(t, e.fails(t, 2, "tail", "orders", "--interval", "0s"), "--interval")

	// Flags before the command work as after it.
	e.env["QUEEN_URL"] = "http://127.0.0.1:1" // nothing listens there
	require.Contains(t, e.fails(t, 1, "queues", "--timeout", "2s"), "connection refused")
	e.ok(t, "--server", e.url, "queues")
	e.ok(t, "queues", "--server", e.url)
}

// TestCtl_AgainstServe runs queen ctl against cmd/queen's own serve path
// with a token: refused without it (exit 1), served with it.
func TestCtl_AgainstServe(t *testing.T) {
	t.Parallel()
	base, _, stop := startRun(t, []string{"-host", "127.0.0.1", "-token", "tok"}, nil)
	e := &ctlEnv{url: base, env: map[string]string{"QUEEN_URL": base}}
	require.Contains(t, e.fails(t, 1, "queues"), "401")
	e.env["QUEEN_TOKEN"] = "tok"
	e.ok(t, "push", "orders", `{"id":1}`)
	var qs []queueJSON
	e.okJSON(t, &qs, "queues")
	require.Len(t, qs, 1)
	require.EqualValues(t, 1, qs[0].Messages)
	require.Contains(t, e.fails(t, 1, "queues", "--token", "wrong"), "401")
	require.Equal(t, 0, stop())
}

// startTail runs queen ctl tail with args until the returned stop is
// called; it waits until tail has read where the partitions end.
func (e *ctlEnv) startTail(t *testing.T, args ...string) (out *lockedBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"ctl", "tail", "--interval", "5ms"}, args...), envOf(e.env), out, errOut)
	}()
	require.Eventually(t, func() bool { return strings.Contains(errOut.String(), "following ") }, 10*time.Second, time.Millisecond,
		"tail did not start: %s", errOut.String())
	stopped := false
	stop = func() int {
		stopped = true
		cancel()
		select {
		case code := <-done:
			require.Len(t, strings.Split(strings.TrimSpace(errOut.String()), "\n"), 1, "nothing but the start line: %s", errOut.String())
			return code
		case <-time.After(10 * time.Second):
			t.Fatal("tail did not stop when cancelled")
			return -1
		}
	}
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
		}
	})
	return out, stop
}

func TestCtl_Tail(t *testing.T) {
	t.Parallel()

	t.Run("new messages in every partition, new partitions included", func(t *testing.T) {
		t.Parallel()
		e := newCtlEnv(t)
		e.push(t, "orders", "", `{"old":1}`)
		e.push(t, "orders", "eu", `{"old":2}`)
		out, stop := e.startTail(t, "orders")
		e.push(t, "orders", "", `{"new":1}`, `{"new":2}`)
		e.push(t, "orders", "asia", `{"new":3}`)
		e.push(t, "orders", "eu", `{"new":4, "text": "`+strings.Repeat("long ", 30)+`"}`)
		require.Eventually(t, func() bool { return strings.Count(out.String(), "\n") >= 4 }, 10*time.Second, time.Millisecond)
		require.Equal(t, 0, stop())
		text := out.String()
		requireFits(t, text)
		require.NotContains(t, text, "old")
		lines := strings.Split(strings.TrimSpace(text), "\n")
		require.Len(t, lines, 4, text)
		// Each partition in order; partitions are not ordered among them.
		var dflt []string
		for _, l := range lines {
			if strings.Contains(l, "  Default  ") {
				dflt = append(dflt, l)
			}
		}
		require.Len(t, dflt, 2, text)
		require.Regexp(t, `^\S+Z  Default  1  \{"new":1\}$`, dflt[0])
		require.Regexp(t, `^\S+Z  Default  2  \{"new":2\}$`, dflt[1])
		require.Contains(t, text, `  asia  0  {"new":3}`+"\n", "a partition made after the start is followed from its start")
		require.Contains(t, text, `  eu  1  {"new":4,"text":"long long`)
		require.Contains(t, text, "…\n", "a long line is cut")

		gs, err := e.b.ListGroups(context.Background(), queen.GroupFilter{})
		require.NoError(t, err)
		require.Empty(t, gs, "tail reads by offset: no group, no lease")
	})

	t.Run("json, one partition, from the start", func(t *testing.T) {
		t.Parallel()
		e := newCtlEnv(t)
		e.push(t, "orders", "", `{"old":1}`)
		e.push(t, "orders", "eu", `{"old":2}`)
		out, stop := e.startTail(t, "orders", "--json", "--partition", "eu", "--from-start")
		e.push(t, "orders", "", `{"new":1}`)
		e.push(t, "orders", "eu", `{"new":2}`)
		require.Eventually(t, func() bool { return strings.Count(out.String(), "\n") >= 2 }, 10*time.Second, time.Millisecond)
		require.Equal(t, 0, stop())
		dec := json.NewDecoder(strings.NewReader(out.String()))
		dec.DisallowUnknownFields()
		var got []tailJSON
		for dec.More() {
			var m tailJSON
			require.NoError(t, dec.Decode(&m))
			got = append(got, m)
		}
		require.Len(t, got, 2, out.String())
		require.Equal(t, "eu", got[0].Partition)
		require.EqualValues(t, 0, got[0].Offset)
		require.JSONEq(t, `{"old":2}`, string(got[0].Payload))
		require.EqualValues(t, 1, got[1].Offset)
		require.JSONEq(t, `{"new":2}`, string(got[1].Payload))
		require.NotEmpty(t, got[1].MessageID)
		require.NotEmpty(t, got[1].CreatedAt)
	})

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		e := newCtlEnv(t)
		e.push(t, "orders", "", `1`)
		require.Contains(t, e.fails(t, 1, "tail", "nope"), "not found")
		require.Contains(t, e.fails(t, 1, "tail", "orders", "--partition", "nope"), "not found")
		require.Contains(t, e.fails(t, 2, "tail"), "missing QUEUE")
	})
}

// TestCtl_QueenServer runs queen ctl against a stand-in for Queen's own
// server (our API, saying it is Queen's, without the routes Queen lacks):
// what that server cannot do exits 1 as not supported; the rest works.
func TestCtl_QueenServer(t *testing.T) {
	t.Parallel()
	b, err := queen.Open("", &queen.Options{InMemory: true})
	require.NoError(t, err)
	api := httpapi.New(b, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/health":
			_, _ = w.Write([]byte(`{"status":"healthy","server":"C++ Queen Server (libqueen)"}`))
		case strings.HasPrefix(p, "/api/v1/fetch/"), strings.HasPrefix(p, "/api/v1/parked"):
			http.NotFound(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, b.Close())
	})
	e := &ctlEnv{b: b, url: srv.URL, env: map[string]string{"QUEEN_URL": srv.URL}}
	e.ok(t, "push", "orders", `{"id":1}`)
	require.Contains(t, e.ok(t, "queues"), "orders")
	require.Contains(t, e.fails(t, 1, "tail", "orders"), "not supported")
	require.Contains(t, e.fails(t, 1, "parked", "list"), "not supported")
	require.Contains(t, e.fails(t, 1, "dlq", "replay", "00000000-0000-0000-0000-000000000000"), "not supported")
}
