package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestParseConfig_Console(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, true},
		{[]string{"-console=false"}, nil, false},
		{nil, map[string]string{"QUEEN_CONSOLE": "false"}, false},
		{nil, map[string]string{"QUEEN_CONSOLE": "0"}, false},
		{[]string{"-console"}, map[string]string{"QUEEN_CONSOLE": "false"}, true},
	} {
		c, err := parseConfig(tc.args, envOf(tc.env), io.Discard)
		require.NoError(t, err, "%v %v", tc.args, tc.env)
		require.Equal(t, tc.want, c.console, "%v %v", tc.args, tc.env)
	}
	_, err := parseConfig(nil, envOf(map[string]string{"QUEEN_CONSOLE": "maybe"}), io.Discard)
	require.ErrorContains(t, err, "QUEEN_CONSOLE must be true or false")
}

// TestConsole_ServedBehindTheToken serves cmd/queen's handler: the
// console is at /console/, asks a browser without the token to log in,
// and lets it in with the token kept in a cookie; the API is unchanged.
func TestConsole_ServedBehindTheToken(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	c := &config{token: "s3cret-token", console: true, defaultTimeout: time.Second, defaultBatch: 1, maxBody: 1 << 20}
	srv := httptest.NewServer(c.handler(b, newAuthorizer(c, time.Now), nil, nil, nil))
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (*http.Response, string) {
		res, err := client.Get(srv.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, string(body)
	}

	res, _ := get("/console")
	require.Equal(t, http.StatusMovedPermanently, res.StatusCode)
	require.Equal(t, "/console/", res.Header.Get("Location"))
	res, _ = get("/console/")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/console/login", res.Header.Get("Location"))

	res, body := get("/console/login")
	require.Equal(t, http.StatusOK, res.StatusCode)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, csrf)
	login := func(token string) int {
		res, err := client.PostForm(srv.URL+"/console/login", url.Values{"csrf": {csrf[1]}, "token": {token}})
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, login("wrong"))
	require.Equal(t, http.StatusSeeOther, login("s3cret-token"))
	res, body = get("/console/")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `data-page="overview"`)

	// The cookie is the console's: the API still wants the header.
	res, _ = get("/api/v1/resources/queues")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	res, _ = get("/health")
	require.Equal(t, http.StatusOK, res.StatusCode)

	c.console = false
	off := httptest.NewServer(c.handler(b, newAuthorizer(c, time.Now), nil, nil, nil))
	t.Cleanup(off.Close)
	res2, err := http.Get(off.URL + "/console/")
	require.NoError(t, err)
	res2.Body.Close()
	require.Equal(t, http.StatusNotFound, res2.StatusCode)
	require.False(t, strings.Contains(res2.Header.Get("Content-Type"), "html"))
}
