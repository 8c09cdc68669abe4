package browsertest

import (
	"net/url"
	"strings"
	"testing"
)

// expectInert checks that nothing seeded as markup ran or became an
// element on the page shown: no script set window.__xss, no <img src=x>
// exists, no <script> holds the seeded code.
func (tb *tab) expectInert(where string) {
	tb.t.Helper()
	var ran any
	tb.eval(`window.__xss === undefined ? null : String(window.__xss)`, &ran)
	if ran != nil {
		tb.t.Errorf("%s: seeded markup ran (window.__xss = %v)", where, ran)
	}
	if n := tb.count(`img[src="x"]`); n != 0 {
		tb.t.Errorf("%s: the HTML payload became %d <img> elements", where, n)
	}
	var injected int
	tb.eval(`Array.prototype.filter.call(document.scripts, function (s) { return s.textContent.indexOf("__xss") >= 0; }).length`, &injected)
	if injected != 0 {
		tb.t.Errorf("%s: the queue name became %d <script> elements", where, injected)
	}
}

// TestEscaping_HTMLShownAsText shows the queue named with a script tag and
// the payload holding an image tag on every page that has them: each is
// displayed as its text, never run or turned into an element.
func TestEscaping_HTMLShownAsText(t *testing.T) {
	c := startConsole(t)
	tb := c.login(t, adminToken)
	note := `<img src=x onerror=window.__xss=1;alert(1)>`

	tb.open("", "overview")
	if !contains(tb.rowKeys("queues"), qScript) {
		t.Errorf("the overview does not list the queue %q", qScript)
	} else if txt := tb.text(row("queues", qScript)); !strings.Contains(txt, qScript) {
		t.Errorf("the overview's row of %q shows %q, not the name", qScript, txt)
	}
	tb.expectInert("overview")
	tb.clean("overview")

	tb.open(queuePath(qScript), "queue")
	if txt := tb.text("h1"); !strings.Contains(txt, qScript) {
		t.Errorf("the page of queue %q is headed %q", qScript, txt)
	}
	tb.expectInert("queue page of the script-named queue")
	tb.clean("queue page of the script-named queue")

	tb.open(queuePath(qScript)+"?partition=Default&offset=0", "queue")
	if p := tb.text(`pre[data-payload]`); !strings.Contains(p, `"hello": "world"`) {
		t.Errorf("the script-named queue's message browser shows %q", p)
	}
	tb.expectInert("message browser of the script-named queue")
	tb.clean("message browser of the script-named queue")

	tb.open("groups", "groups")
	tb.expectInert("groups")
	tb.clean("groups")

	tb.open(queuePath(qPayments)+"?partition=cards&offset=0", "queue")
	if p := tb.text(`pre[data-payload]`); !strings.Contains(p, note) {
		t.Errorf("the message browser shows the HTML payload as %q, want it to hold %q", p, note)
	}
	tb.expectInert("message browser of payments")
	tb.clean("message browser of payments")

	var htmlDead string
	for _, dl := range c.dead {
		if string(dl.Payload) == htmlPayload {
			htmlDead = dl.ID
		}
	}
	tb.open("deadletters?queue="+qPayments, "deadletters")
	if p := tb.text(row("deadletters", htmlDead) + ` pre[data-payload]`); !strings.Contains(p, note) {
		t.Errorf("the dead letter of the HTML payload shows %q, want it to hold %q", p, note)
	}
	tb.expectInert("dead letters")
	tb.clean("dead letters")

	// A filter echoes what was typed.
	tb.open("deadletters?queue="+url.QueryEscape(qScript), "deadletters")
	if v := tb.value(`input[name="queue"]`); v != qScript {
		t.Errorf("the filter field holds %q, want %q", v, qScript)
	}
	tb.expectInert("dead letters filtered by the script-named queue")
	tb.clean("dead letters filtered by the script-named queue")

	tb.open("traces?name="+url.QueryEscape(qScript), "traces")
	tb.expectInert("traces by a script-named name")
	tb.clean("traces by a script-named name")
}
