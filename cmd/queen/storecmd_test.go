package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// pathRe matches the paths the commands print: they are the caller's, and
// printed whole whatever their length.
var pathRe = regexp.MustCompile(`\S*/\S*`)

// queenCmd runs "queen args..." and returns stdout, stderr and the exit
// code; text output must fit 80 columns, paths aside.
func queenCmd(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, envOf(env), &out, &errOut)
	if !strings.Contains(strings.Join(args, " "), "--json") && !strings.Contains(strings.Join(args, " "), "-o -") {
		requireFits(t, pathRe.ReplaceAllString(out.String(), "PATH"))
	}
	return out.String(), errOut.String(), code
}

func queenOK(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := queenCmd(t, nil, args...)
	require.Equal(t, 0, code, "queen %v: %s", args, errOut)
	return out
}

func queenFails(t *testing.T, code int, args ...string) string {
	t.Helper()
	out, errOut, got := queenCmd(t, nil, args...)
	require.Equal(t, code, got, "queen %v: %s%s", args, out, errOut)
	require.NotEmpty(t, errOut)
	return errOut
}

var nextRe = regexp.MustCompile(`next version (\d+): `)

// nextOf reads the next version a backup printed.
func nextOf(t *testing.T, out string) string {
	t.Helper()
	m := nextRe.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	return m[1]
}

// storeState is what a store answers: every message of every partition,
// each group's next pop, the dead letters.
type storeState struct {
	Messages map[string][]string // "queue/partition" -> payloads
	NextPop  map[string]string   // "queue@group" -> payload
	Letters  []string            // queue/partition: error
}

func stateOf(t *testing.T, dir string) storeState {
	t.Helper()
	ctx := context.Background()
	b, err := queen.Open(dir, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	s := storeState{Messages: map[string][]string{}, NextPop: map[string]string{}}
	qs, err := b.ListQueues(ctx)
	require.NoError(t, err)
	for _, q := range qs {
		st, err := b.QueueStats(ctx, q.Name)
		require.NoError(t, err)
		for _, p := range st.Partitions {
			f, err := b.Fetch(ctx, q.Name, p.Name, 0, 1000)
			require.NoError(t, err)
			for _, r := range f.Records {
				s.Messages[q.Name+"/"+p.Name] = append(s.Messages[q.Name+"/"+p.Name], string(r.Payload))
			}
		}
		for _, g := range st.Groups {
			r, err := b.Pop(ctx, queen.PopRequest{Queue: q.Name, Group: g})
			require.NoError(t, err)
			if len(r.Messages) > 0 {
				s.NextPop[q.Name+"@"+g] = string(r.Messages[0].Payload)
			}
		}
	}
	page, err := b.DeadLetters(ctx, queen.LetterFilter{})
	require.NoError(t, err)
	for _, l := range page.Letters {
		s.Letters = append(s.Letters, l.Queue+"/"+l.Partition+": "+l.Error)
	}
	return s
}

// fillStore writes messages, a group's progress and a dead letter into a
// new store in dir.
func fillStore(t *testing.T, dir string, round int) {
	t.Helper()
	ctx := context.Background()
	b, err := queen.Open(dir, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	r := strconv.Itoa(round)
	_, err = b.Push(ctx, []queen.PushItem{{Queue: "orders", Payload: json.RawMessage(`{"n":` + r + `1}`)},
		{Queue: "orders", Payload: json.RawMessage(`{"n":` + r + `2}`)},
		{Queue: "orders", Partition: "eu", Payload: json.RawMessage(`{"n":` + r + `3}`)},
		{Queue: "mail", Payload: json.RawMessage(`"hello ` + r + `"`)}})
	require.NoError(t, err)
	p, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Group: "billing", SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(t, err)
	require.Len(t, p.Messages, 1)
	_, err = b.Ack(ctx, p.Messages[0], true, queen.AckOptions{})
	require.NoError(t, err)
	p, err = b.Pop(ctx, queen.PopRequest{Queue: "mail", Group: "audit", SubscriptionMode: queen.SubscriptionModeAll})
	require.NoError(t, err)
	require.Len(t, p.Messages, 1)
	_, err = b.Ack(ctx, p.Messages[0], false, queen.AckOptions{Status: queen.AckDLQ, Error: "bounced " + r})
	require.NoError(t, err)
}

func TestBackupRestoreInspect_DataDir(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	data, full, inc, restored := filepath.Join(tmp, "data"), filepath.Join(tmp, "full.bak"), filepath.Join(tmp, "inc.bak"), filepath.Join(tmp, "restored")

	fillStore(t, data, 1)
	out := queenOK(t, "inspect", "-dir", data)
	require.Contains(t, out, "format       1 (written by "+queen.Version+")\n")
	require.Contains(t, out, "contents     2 queues, 3 partitions, 4 messages\n")
	rs := rows(out[strings.Index(out, "\n\n")+2:])
	require.Equal(t, []string{"QUEUE", "PARTS", "MESSAGES", "PENDING", "GROUPS", "DLQ", "PARKED", "SIZE~"}, rs[0])
	require.Equal(t, []string{"mail", "1", "1", "0", "1", "1", "0"}, rs[1][:7])
	require.Equal(t, []string{"orders", "2", "3", "2", "1", "0", "0"}, rs[2][:7])

	out = queenOK(t, "backup", "-o", full, "-dir", data)
	require.Contains(t, out, "full backup written to "+full)
	next := nextOf(t, out)
	atFull := stateOf(t, data)

	fillStore(t, data, 2) // more of everything, then an increment
	out = queenOK(t, "backup", "-dir", data, "-since", next, "-o", inc, "--json")
	var bj backupJSON
	require.NoError(t, json.Unmarshal([]byte(out), &bj))
	require.Equal(t, inc, bj.File)
	require.Equal(t, next, strconv.FormatUint(bj.Since, 10))
	require.Greater(t, bj.Next, bj.Since)
	st, err := os.Stat(inc)
	require.NoError(t, err)
	require.Equal(t, st.Size(), bj.Bytes)
	atInc := stateOf(t, data)
	require.NotEqual(t, atFull, atInc)
	require.Len(t, atInc.Messages["orders/Default"], 4)

	// The full backup alone restores the store as it was then; with the
	// increment, as it was at the increment.
	require.Contains(t, queenOK(t, "restore", "-dir", restored, full), "restored 1 backup files into "+restored)
	require.Equal(t, atFull, stateOf(t, restored))
	restored2 := filepath.Join(tmp, "restored2")
	queenOK(t, "restore", "-dir", restored2, full, inc)
	require.Equal(t, atInc, stateOf(t, restored2))

	var r queen.StoreReport
	require.NoError(t, json.Unmarshal([]byte(queenOK(t, "inspect", "-dir", restored2, "--json")), &r))
	require.EqualValues(t, 8, r.Messages)
	require.Len(t, r.Queues, 2)
	require.Equal(t, "mail", r.Queues[0].Name)
	require.Positive(t, r.DiskBytes)

	// To standard output, and back.
	var stdout bytes.Buffer
	var stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"backup", "-dir", data, "-o", "-"}, envOf(nil), &stdout, &stderr), stderr.String())
	require.Contains(t, stderr.String(), "next version ")
	piped := filepath.Join(tmp, "piped.bak")
	require.NoError(t, os.WriteFile(piped, stdout.Bytes(), 0o600))
	restored3 := filepath.Join(tmp, "restored3")
	queenOK(t, "restore", "-dir", restored3, piped)
	require.Equal(t, atInc, stateOf(t, restored3))
}

func TestBackupRestoreInspect_Refused(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	data, full, x := filepath.Join(tmp, "data"), filepath.Join(tmp, "full.bak"), filepath.Join(tmp, "x.bak")
	fillStore(t, data, 1)
	queenOK(t, "backup", "-o", full, "-dir", data)
	good, err := os.ReadFile(full)
	require.NoError(t, err)

	// Bad usage: exit 2.
	require.Contains(t, queenFails(t, 2, "backup", "-dir", data), "-o FILE is required")
	require.Contains(t, queenFails(t, 2, "backup", "-o", x, "-dir", data, "--server", "http://localhost:1"), "not both")
	require.Contains(t, queenFails(t, 2, "backup", "-o", x, "-dir", data, "-since", "-1"), "-since")
	require.Contains(t, queenFails(t, 2, "backup", "-o", x, "-dir", data, "-since", "ten"), "-since")
	require.Contains(t, queenFails(t, 2, "backup", "-o", x, "-dir", data, "extra"), "unexpected argument")
	require.Contains(t, queenFails(t, 2, "restore", full), "-dir DIR is required")
	require.Contains(t, queenFails(t, 2, "restore", "-dir", filepath.Join(tmp, "r")), "missing FILE")
	require.Contains(t, queenFails(t, 2, "inspect"), "-dir DIR is required")
	require.Contains(t, queenFails(t, 2, "backup", "-o", x, "-dir", data, "-since", "99999999"), "ahead of this store")
	_, err = os.Stat(x)
	require.ErrorIs(t, err, os.ErrNotExist, "a refused backup leaves no file")

	// Refused: exit 1, nothing changed.
	require.Contains(t, queenFails(t, 1, "backup", "-o", full, "-dir", data), "already exists")
	kept, err := os.ReadFile(full)
	require.NoError(t, err)
	require.Equal(t, good, kept, "an existing file is left alone")
	missing := filepath.Join(tmp, "missing")
	require.Contains(t, queenFails(t, 1, "backup", "-o", filepath.Join(tmp, "m.bak"), "-dir", missing), "no store in")
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist, "a mistyped directory is not made into a store")
	require.Contains(t, queenFails(t, 1, "inspect", "-dir", missing), "no store in")

	b, err := queen.Open(data, nil)
	require.NoError(t, err)
	require.Contains(t, queenFails(t, 1, "backup", "-o", filepath.Join(tmp, "l.bak"), "-dir", data), "--server")
	require.Contains(t, queenFails(t, 1, "inspect", "-dir", data), "in use")
	require.NoError(t, b.Close())
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.Contains(e.Name(), ".tmp-"), "no temporary file left: %s", e.Name())
	}

	nonEmpty := filepath.Join(tmp, "nonempty")
	require.NoError(t, os.MkdirAll(nonEmpty, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(nonEmpty, "keep"), []byte("mine"), 0o600))
	require.Contains(t, queenFails(t, 1, "restore", "-dir", nonEmpty, full), "not empty")
	left, err := os.ReadFile(filepath.Join(nonEmpty, "keep"))
	require.NoError(t, err)
	require.Equal(t, "mine", string(left))

	corrupt := filepath.Join(tmp, "corrupt.bak")
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0x40
	require.NoError(t, os.WriteFile(corrupt, bad, 0o600))
	target := filepath.Join(tmp, "target")
	require.Contains(t, queenFails(t, 1, "restore", "-dir", target, corrupt), "corrupt")
	truncated := filepath.Join(tmp, "truncated.bak")
	require.NoError(t, os.WriteFile(truncated, good[:len(good)-10], 0o600))
	require.Contains(t, queenFails(t, 1, "restore", "-dir", target, truncated), "truncated")
	require.Contains(t, queenFails(t, 1, "restore", "-dir", target, filepath.Join(tmp, "nope.bak")), "not found")
	_, err = os.Stat(target)
	require.ErrorIs(t, err, os.ErrNotExist, "a refused restore leaves no directory")

	for _, cmd := range []string{"backup", "restore", "inspect"} {
		out, errOut, code := queenCmd(t, nil, cmd, "--help")
		require.Equal(t, 0, code, errOut)
		require.True(t, strings.HasPrefix(out, "Usage: queen "+cmd+" [flags]"), out)
		requireFits(t, out)
	}
}

// TestBackupRestore_Server backs up cmd/queen's own serve path while it
// runs (full, then an increment), restores, and compares.
func TestBackupRestore_Server(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data")
	base, _, stop := startRun(t, []string{"-host", "127.0.0.1", "-token", "tok", "-data", data}, nil)
	env := map[string]string{"QUEEN_URL": base, "QUEEN_TOKEN": "tok"}
	ok := func(args ...string) string {
		t.Helper()
		out, errOut, code := queenCmd(t, env, args...)
		require.Equal(t, 0, code, "queen %v: %s", args, errOut)
		return out
	}
	ok("ctl", "push", "orders", `{"n":1}`, `{"n":2}`)
	ok("ctl", "push", "orders", "--partition", "eu", `{"n":3}`)
	full, inc := filepath.Join(tmp, "full.bak"), filepath.Join(tmp, "inc.bak")
	next := nextOf(t, ok("backup", "-o", full))
	ok("ctl", "push", "mail", `"later"`)
	ok("backup", "-o", inc, "-since", next)

	_, errOut, code := queenCmd(t, map[string]string{"QUEEN_URL": base}, "backup", "-o", filepath.Join(tmp, "no.bak"))
	require.Equal(t, 1, code, "no token: refused")
	require.Contains(t, errOut, "401")
	_, err := os.Stat(filepath.Join(tmp, "no.bak"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, 0, stop())
	want := stateOf(t, data)

	restored := filepath.Join(tmp, "restored")
	ok("restore", "-dir", restored, full, inc)
	require.Equal(t, want, stateOf(t, restored))
	require.Equal(t, []string{`{"n":1}`, `{"n":2}`}, want.Messages["orders/Default"])
	require.Equal(t, []string{`"later"`}, want.Messages["mail/Default"])

	atFull := filepath.Join(tmp, "atfull")
	ok("restore", "-dir", atFull, full)
	require.NotContains(t, stateOf(t, atFull).Messages, "mail/Default", "the full backup predates the mail push")
}
