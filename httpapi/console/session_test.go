package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sessionOf is the session cookie a response sets, "" for none.
func sessionOf(res *http.Response) string {
	for _, c := range res.Cookies() {
		if c.Name == "queen_console_session" {
			return c.Value
		}
	}
	return ""
}

var sessionID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestConsole_SessionIDOfWrongLengthIsReplaced: a session cookie
// that is not 32 hex digits (shorter, longer, or not hex) is replaced by a
// new one, and a valid one is kept.
func TestConsole_SessionIDOfWrongLengthIsReplaced(t *testing.T) {
	e := newEnv(t, "/", nil)
	get := func(cookie string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/login", nil)
		require.NoError(t, err)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "queen_console_session", Value: cookie})
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		return sessionOf(res)
	}
	fresh := get("")
	require.Regexp(t, sessionID, fresh, "a browser without a session gets one")
	require.Empty(t, get(fresh), "a valid session is kept")
	for _, bad := range []string{
		strings.Repeat("a", 31), strings.Repeat("a", 33), strings.Repeat("ab", 32), "ab", fresh[:30],
		strings.Repeat("g", 32), // 32 but not hex
	} {
		got := get(bad)
		require.Regexp(t, sessionID, got, "session %q (%d bytes) is replaced", bad, len(bad))
		require.NotEqual(t, bad, got)
	}
}

// TestConsole_FormsOverOneMiBAreRefused: a POST whose form is
// over 1 MiB is refused (413, saying so) and acts on nothing, even with a
// valid CSRF token and confirm=1; one just under the limit acts.
func TestConsole_FormsOverOneMiBAreRefused(t *testing.T) {
	e := newEnv(t, "/", nil)
	e.deadLetters("orders", "billing", 2)
	ids := rows(t, e.ok("/deadletters"), "deadletters")
	require.Len(t, ids, 2)

	// The encoded form is the padding plus some 150 bytes of fields.
	padded := func(id string, size int) page {
		f := form("one", id, "confirm", "1", "csrf", e.csrf)
		fixed := len(f.Encode()) + len("&pad=")
		f.Set("pad", strings.Repeat("x", size-fixed))
		require.Equal(t, size, len(f.Encode()))
		return e.post("/deadletters/delete", f)
	}
	p := padded(ids[0], 1<<20+1)
	require.Equal(t, http.StatusRequestEntityTooLarge, p.status, p.body)
	require.Contains(t, p.body, "1 MiB")
	require.Equal(t, 2, e.dlqTotal(), "nothing deleted by a form over 1 MiB")

	e.ok("/deadletters")
	p = padded(ids[1], 1<<20)
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, 1, e.dlqTotal(), "a form of exactly 1 MiB acts")
}
