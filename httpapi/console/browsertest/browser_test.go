package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Each test runs its own Chromium, with a fresh profile in the test's
// temporary directory: no cookie, login or cache crosses from one test to
// another.

// actionTimeout bounds one step of a test (a navigation, a wait for a DOM
// condition). It is a deadline for a condition, never a pause: a step
// returns as soon as its condition holds.
const actionTimeout = 20 * time.Second

// startTimeout bounds the start of the browser.
const startTimeout = time.Minute

// chromiumPath finds the browser: $QUEEN_CHROMIUM, else the first of the
// usual names on $PATH.
func chromiumPath() (string, error) {
	if p := os.Getenv("QUEEN_CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on $PATH (apt-get install chromium, or set QUEEN_CHROMIUM)")
}

// startBrowser launches Chromium for t and returns the context of its
// first tab; the browser is closed when t ends. A missing browser skips
// the test, except under CI=true, where the browser tests must run.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("CI") == "true" {
		fail = t.Fatalf
	}
	path, err := chromiumPath()
	if err != nil {
		fail("browser tests need Chromium: %v", err)
	}
	// Not t.TempDir: Chromium's helpers may still be writing there for a
	// moment after the browser exits, which would fail the test's cleanup.
	dir, err := os.MkdirTemp("", "queen-browsertest-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(dir),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		// Close the browser and wait for it before its profile goes.
		_ = chromedp.Cancel(ctx)
		cancel()
		acancel()
		os.RemoveAll(dir)
	})
	// The first Run starts the browser process; one that does not come up
	// in time counts as missing.
	// (Not a context with a deadline: the context of the first Run is the
	// browser's for its whole life.)
	started := make(chan error, 1)
	go func() { started <- chromedp.Run(ctx) }()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case err := <-started:
		if err != nil {
			fail("browser tests need Chromium: start %s: %v", path, err)
		}
	case <-timer.C:
		fail("browser tests need Chromium: %s did not start in %v", path, startTimeout)
	}
	return ctx
}

// tab is one browser tab of a test, recording every JavaScript exception,
// console error and dialog (alert, confirm) the pages it shows raise.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string // the console's URL, ending in "/"

	mu       sync.Mutex
	problems []string
	dialogs  []string
}

// newTab starts a browser for t on the console at base.
func newTab(t *testing.T, base string) *tab {
	t.Helper()
	ctx := startBrowser(t)
	tb := &tab{t: t, ctx: ctx, base: base}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			tb.report("exception: " + exceptionText(ev.ExceptionDetails))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				tb.report("console." + string(ev.Type) + ": " + argsText(ev.Args))
			}
		case *page.EventJavascriptDialogOpening:
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, string(ev.Type)+": "+ev.Message)
			tb.mu.Unlock()
			// Dismiss it from another goroutine: the listener must not
			// block the event loop.
			go chromedp.Run(ctx, page.HandleJavaScriptDialog(false))
		}
	})
	// Times on the pages are read and typed in UTC whatever the machine's
	// zone.
	tb.run(emulation.SetTimezoneOverride("UTC"))
	return tb
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "?"
	}
	s := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		s += " " + d.Exception.Description
	}
	return fmt.Sprintf("%s (%s:%d)", s, d.URL, d.LineNumber)
}

func argsText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		switch {
		case a.Description != "":
			parts = append(parts, a.Description)
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		default:
			parts = append(parts, string(a.Type))
		}
	}
	return strings.Join(parts, " ")
}

func (tb *tab) report(s string) {
	tb.mu.Lock()
	tb.problems = append(tb.problems, s)
	tb.mu.Unlock()
}

// run runs browser actions, each step bounded by actionTimeout, and fails
// the test on an error.
func (tb *tab) run(actions ...chromedp.Action) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		tb.t.Fatalf("browser: %v (page %s)", err, tb.location())
	}
}

// location is the tab's current URL, for failure messages.
func (tb *tab) location() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
	defer cancel()
	var u string
	if err := chromedp.Run(ctx, chromedp.Location(&u)); err != nil {
		return "?"
	}
	return u
}

// leaks are what Go's formatting prints where a template shows a value it
// was not meant to: a struct or map dumped with %v, a zero time, a nil, a
// bad verb.
var leaks = []string{"0001-01-01", "+0000 UTC", "<nil>", "map[", "%!", "&{"}

// clean fails the test if any page so far raised a JavaScript exception,
// logged a console error or opened a dialog, or if the page shown now has
// Go formatting in its text; and forgets the problems.
func (tb *tab) clean(where string) {
	tb.t.Helper()
	var text string
	tb.eval(`document.body ? document.body.innerText : ""`, &text)
	for _, l := range leaks {
		if i := strings.Index(text, l); i >= 0 {
			tb.t.Errorf("%s: the page shows %q, Go formatting of a value: …%s…", where, l, text[max(0, i-60):min(len(text), i+60)])
		}
	}
	tb.mu.Lock()
	problems, dialogs := tb.problems, tb.dialogs
	tb.problems, tb.dialogs = nil, nil
	tb.mu.Unlock()
	for _, p := range problems {
		tb.t.Errorf("%s: %s", where, p)
	}
	for _, d := range dialogs {
		tb.t.Errorf("%s: a dialog opened: %s", where, d)
	}
}

// open loads the console page at path (relative to the console's root)
// and waits for its <main data-page=NAME>.
func (tb *tab) open(path, name string) {
	tb.t.Helper()
	tb.run(
		chromedp.Navigate(tb.base+strings.TrimPrefix(path, "/")),
		chromedp.WaitReady(fmt.Sprintf(`main[data-page=%q]`, name), chromedp.ByQuery),
	)
}

// waitPage waits until the tab shows <main data-page=NAME>, after a click
// that navigates.
func (tb *tab) waitPage(name string) {
	tb.t.Helper()
	tb.run(chromedp.WaitReady(fmt.Sprintf(`main[data-page=%q]`, name), chromedp.ByQuery))
}

// eval evaluates a JavaScript expression in the page into out.
func (tb *tab) eval(js string, out any) {
	tb.t.Helper()
	tb.run(chromedp.Evaluate(js, out))
}

// count is how many elements match the CSS selector.
func (tb *tab) count(sel string) int {
	tb.t.Helper()
	var n int
	tb.eval(fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel)), &n)
	return n
}

// text is the text of the first element matching sel ("" when none).
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	var s string
	tb.eval(fmt.Sprintf(`(function(){var e=document.querySelector(%s);return e?e.textContent:""})()`, jsString(sel)), &s)
	return s
}

// waitJS waits until the JavaScript expression is truthy (polling in the
// page on DOM changes), up to actionTimeout, through navigations: a page
// replaced while the expression is being polled is polled again. It
// stores the expression's value in out (nil for none).
func (tb *tab) waitJS(what, js string, out any) {
	tb.t.Helper()
	deadline := time.Now().Add(actionTimeout)
	for {
		ctx, cancel := context.WithDeadline(tb.ctx, deadline)
		err := chromedp.Run(ctx, chromedp.Poll(js, out, chromedp.WithPollingMutation()))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || tb.ctx.Err() != nil || !navigated(err) {
			tb.t.Fatalf("waiting for %s: %v (page %s)", what, err, tb.location())
		}
	}
}

// navigated tells an error of a script whose page went away (the next
// page is polled instead).
func navigated(err error) bool {
	s := err.Error()
	return strings.Contains(s, "navigated or closed") || strings.Contains(s, "context was destroyed") || strings.Contains(s, "Cannot find context")
}

// click clicks the first element matching the CSS selector.
func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.run(chromedp.Click(sel, chromedp.ByQuery, chromedp.NodeVisible))
}

// typeInto replaces the value of the text field matching sel by typing
// value into it.
func (tb *tab) typeInto(sel, value string) {
	tb.t.Helper()
	tb.eval(`document.querySelector(`+jsString(sel)+`).value = ""`, nil)
	tb.run(chromedp.SendKeys(sel, value, chromedp.ByQuery))
}

// screenshot saves a full-page PNG of the tab as NAME.png: under
// docs/console/ with UPDATE_SCREENSHOTS=1, else in the test's temporary
// directory.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	var png []byte
	tb.run(chromedp.FullScreenshot(&png, 100))
	dir := tb.t.TempDir()
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "..", "..", "docs", "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot %s", path)
}

// jsString quotes s as a JavaScript string literal (JSON's quoting, which
// also escapes <, > and &, so the literal is safe inside any script).
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// cssString quotes s as a CSS string, for an attribute selector such as
// tr[data-row=...] whose value is a queue name of any characters.
func cssString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\%x ", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// evalAwait evaluates a JavaScript expression whose value is a promise and
// stores what it resolves to in out.
func evalAwait(js string, out any) chromedp.Action {
	return chromedp.Evaluate(js, out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	})
}

// navigate loads url in the tab.
func navigate(url string) chromedp.Action { return chromedp.Navigate(url) }
