package browsertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/remote"
)

// TestCmdQueen_ServesTheConsole builds cmd/queen, runs it with a token on
// a fresh data directory, pushes over its HTTP API, and opens /console/
// in the browser: a visitor is sent to the login page, the token logs in,
// and the overview and the queue page show what was pushed.
func TestCmdQueen_ServesTheConsole(t *testing.T) {
	startBrowser(t) // skips early without Chromium, before the build
	dir := t.TempDir()
	bin := filepath.Join(dir, "queen")
	build := exec.Command("go", "build", "-o", bin, "github.com/queenlite/queen/cmd/queen")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/queen: %v\n%s", err, out)
	}

	const token = "cmd-queen-token"
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-host", "127.0.0.1", "-port", "0", "-data", filepath.Join(dir, "data"),
		"-durability", "none", "-token", token, "-log-level", "info")
	cmd.Env = append(os.Environ(), "QUEEN_CONSOLE=", "QUEEN_TOKEN=", "JWT_SECRET=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})

	// The listening address is in the first log lines.
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`addr[=":]+(127\.0\.0\.1:\d+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	var base string
	timer := time.NewTimer(actionTimeout)
	defer timer.Stop()
	select {
	case a := <-addr:
		base = "http://" + a
	case <-timer.C:
		t.Fatal("cmd/queen logged no listening address")
	}

	rc, err := remote.Dial(base, &remote.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	items := make([]queen.PushItem, 5)
	for i := range items {
		items[i] = queen.PushItem{Queue: "signups", Partition: "web", Payload: json.RawMessage(fmt.Sprintf(`{"user":%d}`, i))}
	}
	if _, err := rc.Push(context.Background(), items); err != nil {
		t.Fatal(err)
	}

	tb := newTab(t, base+"/console/")
	tb.open("", "login")
	tb.typeInto(`form[data-form="login"] input[name="token"]`, "wrong-"+token)
	tb.markOld()
	tb.click(`form[data-form="login"] [data-action="login"]`)
	tb.waitJS("the login page again", fresh+` && !!document.querySelector('main[data-page="login"]')`, nil)
	if tb.count("[data-error]") != 1 {
		t.Error("a wrong token shows no error on the login page")
	}
	tb.clean("cmd/queen wrong token")
	tb.typeInto(`form[data-form="login"] input[name="token"]`, token)
	tb.click(`form[data-form="login"] [data-action="login"]`)
	tb.waitPage("overview")
	tb.expectCell(row("queues", "signups"), "messages", strconv.Itoa(len(items)))
	tb.clean("cmd/queen overview")

	tb.open(queuePath("signups")+"?partition=web&offset=0", "queue")
	if n := len(tb.rowKeys("messages")); n != len(items) {
		t.Errorf("cmd/queen's message browser shows %d messages, want %d", n, len(items))
	}
	tb.clean("cmd/queen queue page")
}
