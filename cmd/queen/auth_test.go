package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

const testSecret = "queen-test-secret"

// epoch is the clock of the table tests: 2023-11-14T22:13:20Z.
var epoch = time.Unix(1_700_000_000, 0)

// signJWT makes a token with the given header and claims, signed with
// HMAC-SHA256 under secret.
func signJWT(t *testing.T, header, claims map[string]any, secret string) string {
	t.Helper()
	enc := func(v any) string {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(data)
	}
	signed := enc(header) + "." + enc(claims)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// hs256 is signJWT with the usual header and the test secret.
func hs256(t *testing.T, claims map[string]any) string {
	t.Helper()
	return signJWT(t, map[string]any{"alg": "HS256", "typ": "JWT"}, claims, testSecret)
}

func jwtAuthorizer(now time.Time) *authorizer {
	return newAuthorizer(&config{jwtSecret: []byte(testSecret), jwtSkew: 30 * time.Second}, func() time.Time { return now })
}

func TestVerify_KnownTokens(t *testing.T) {
	t.Parallel()
	// Signed by another implementation (Python's hmac), so the check does
	// not only agree with itself. Its claims: role read-write,
	// nbf = epoch-100 s, exp = epoch+600 s.
	const token = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJzdmMtMSIsInJvbGUiOiJyZWFkLXdyaXRlIiwiZXhwIjoxNzAwMDAwNjAwLCJuYmYiOjE2OTk5OTk5MDB9.Umkh6bgu_mq3Ychsve5feOY7Yal315aExESF-Pk2DBI"
	c, err := jwtAuthorizer(epoch).verify(token)
	require.NoError(t, err)
	require.Equal(t, httpapi.AccessReadWrite, c.level())
	_, err = jwtAuthorizer(epoch.Add(631 * time.Second)).verify(token)
	require.ErrorIs(t, err, httpapi.ErrUnauthorized)
	require.ErrorContains(t, err, "token has expired")

	// The example token of the JWT debugger at jwt.io: valid, no role.
	a := newAuthorizer(&config{jwtSecret: []byte("your-256-bit-secret")}, time.Now)
	c, err = a.verify("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
	require.NoError(t, err)
	require.Equal(t, httpapi.AccessPublic, c.level())
}

func TestVerify(t *testing.T) {
	t.Parallel()
	now := epoch.Unix()
	good := hs256(t, map[string]any{"sub": "x", "role": "admin", "exp": now + 60})
	parts := strings.Split(good, ".")
	otherClaims := strings.Split(hs256(t, map[string]any{"role": "admin", "exp": now + 6000}), ".")[1]
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	// A 32-byte signature is 43 characters whose last 2 bits are padding:
	// flipping one of them spells the same bytes another way.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, good[len(good)-1])
	respelled := good[:len(good)-1] + string(alphabet[last^1])

	for _, c := range []struct {
		name, token string
		want        string // "" for valid
	}{
		{"valid", good, ""},
		{"no exp never expires", hs256(t, map[string]any{"role": "admin"}), ""},
		{"fractional exp", hs256(t, map[string]any{"exp": float64(now) + 0.5}), ""},
		{"exp within the skew", hs256(t, map[string]any{"exp": now - 29}), ""},
		{"expired past the skew", hs256(t, map[string]any{"exp": now - 30}), "token has expired"},
		{"expired long ago", hs256(t, map[string]any{"exp": 1}), "token has expired"},
		{"huge exp", hs256(t, map[string]any{"exp": 1e300}), ""},
		{"nbf within the skew", hs256(t, map[string]any{"nbf": now + 29}), ""},
		{"nbf in the future", hs256(t, map[string]any{"nbf": now + 31}), "token is not valid yet"},
		{"exp not a number", hs256(t, map[string]any{"exp": "tomorrow"}), "malformed token claims"},
		{"claims not an object", parts[0] + "." + b64(`[1]`) + "." + parts[2], "invalid token signature"},
		{"wrong secret", signJWT(t, map[string]any{"alg": "HS256"}, map[string]any{"role": "admin"}, "guess"), "invalid token signature"},
		{"claims swapped", parts[0] + "." + otherClaims + "." + parts[2], "invalid token signature"},
		{"signature cut", parts[0] + "." + parts[1] + "." + parts[2][:20], "invalid token signature"},
		{"no signature", parts[0] + "." + parts[1] + ".", "invalid token signature"},
		{"signature padded", good + "=", "malformed token signature"},
		{"signature respelled", respelled, "malformed token signature"},
		{"signature not base64url", parts[0] + "." + parts[1] + ".@@@", "malformed token signature"},
		{"alg none", b64(`{"alg":"none","typ":"JWT"}`) + "." + parts[1] + ".", `unsupported token algorithm "none"`},
		{"alg none, signed anyway", signJWT(t, map[string]any{"alg": "none"}, map[string]any{"role": "admin"}, testSecret), `unsupported token algorithm "none"`},
		{"alg HS512", signJWT(t, map[string]any{"alg": "HS512"}, map[string]any{"role": "admin"}, testSecret), `unsupported token algorithm "HS512"`},
		{"alg RS256", signJWT(t, map[string]any{"alg": "RS256"}, map[string]any{"role": "admin"}, testSecret), `unsupported token algorithm "RS256"`},
		{"alg lower case", signJWT(t, map[string]any{"alg": "hs256"}, map[string]any{"role": "admin"}, testSecret), `unsupported token algorithm "hs256"`},
		{"no alg", signJWT(t, map[string]any{"typ": "JWT"}, map[string]any{"role": "admin"}, testSecret), `unsupported token algorithm ""`},
		{"crit header", signJWT(t, map[string]any{"alg": "HS256", "crit": []string{"b64"}, "b64": false}, map[string]any{}, testSecret), "unsupported critical token header"},
		{"two parts", parts[0] + "." + parts[1], "malformed token"},
		{"four parts", good + ".x", "malformed token"},
		{"header not base64url", "!!." + parts[1] + "." + parts[2], "malformed token header"},
		{"header not JSON", b64("alg") + "." + parts[1] + "." + parts[2], "malformed token header"},
		{"too long", parts[0] + "." + strings.Repeat("A", maxTokenBytes) + "." + parts[2], "malformed token"},
	} {
		_, err := jwtAuthorizer(epoch).verify(c.token)
		if c.want == "" {
			require.NoError(t, err, c.name)
			continue
		}
		require.ErrorIs(t, err, httpapi.ErrUnauthorized, c.name)
		require.ErrorContains(t, err, c.want, c.name)
	}

	// Issuer and audience, when configured.
	a := jwtAuthorizer(epoch)
	a.issuer, a.audience = "https://auth.example", "queen"
	_, err := a.verify(hs256(t, map[string]any{"iss": "https://auth.example", "aud": "queen"}))
	require.NoError(t, err)
	_, err = a.verify(hs256(t, map[string]any{"iss": "https://auth.example", "aud": []string{"other", "queen"}}))
	require.NoError(t, err)
	_, err = a.verify(hs256(t, map[string]any{"iss": "https://evil.example", "aud": "queen"}))
	require.ErrorContains(t, err, "token issuer mismatch")
	_, err = a.verify(hs256(t, map[string]any{"iss": "https://auth.example"}))
	require.ErrorContains(t, err, "token audience mismatch")
	_, err = a.verify(hs256(t, map[string]any{"iss": "https://auth.example", "aud": []string{"other"}}))
	require.ErrorContains(t, err, "token audience mismatch")
}

func TestClaims_Level(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		claims map[string]any
		want   httpapi.Access
	}{
		{map[string]any{"role": "read-only"}, httpapi.AccessReadOnly},
		{map[string]any{"role": "read-write"}, httpapi.AccessReadWrite},
		{map[string]any{"role": "admin"}, httpapi.AccessAdmin},
		{map[string]any{"roles": []string{"read-only", "read-write"}}, httpapi.AccessReadWrite},
		{map[string]any{"roles": []string{"viewer", "admin"}}, httpapi.AccessAdmin},
		{map[string]any{"role": "read-only", "roles": []string{"admin"}}, httpapi.AccessAdmin},
		{map[string]any{"roles": "read-write"}, httpapi.AccessReadWrite},
		{map[string]any{"role": "Admin"}, httpapi.AccessPublic}, // names are exact
		{map[string]any{"role": 3}, httpapi.AccessPublic},
		{map[string]any{"roles": []any{"admin", 1}}, httpapi.AccessPublic},
		{map[string]any{}, httpapi.AccessPublic},
	} {
		got, err := jwtAuthorizer(epoch).verify(hs256(t, c.claims))
		require.NoError(t, err)
		require.Equal(t, c.want, got.level(), "%v", c.claims)
	}
}

// authEnv is a handler on a real broker behind an authorizer.
type authEnv struct {
	t *testing.T
	h http.Handler
}

func newAuthEnv(t *testing.T, a *authorizer) authEnv {
	b := queentest.NewBroker(t, nil)
	return authEnv{t, httpapi.New(b, &httpapi.Options{Authorize: a.authorize, ProducerSub: a.producerSub})}
}

// send answers one request with the Authorization header auth ("" for
// none).
func (e authEnv) send(method, path, auth, body string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// status requires the reply's status, and for a refusal its error body.
func (e authEnv) status(method, path, auth, body string, want int, wantErr string) {
	e.t.Helper()
	rec := e.send(method, path, auth, body)
	require.Equal(e.t, want, rec.Code, "%s %s with %q: %s", method, path, auth, rec.Body.String())
	if wantErr != "" {
		require.JSONEq(e.t, `{"error":`+strconvQuote(wantErr)+`}`, rec.Body.String())
	}
}

func strconvQuote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}

const pushBody = `{"items":[{"queue":"q","payload":1}]}`

func TestAuthorize_JWTRoles(t *testing.T) {
	t.Parallel()
	a := newAuthorizer(&config{jwtSecret: []byte(testSecret), jwtSkew: 30 * time.Second}, time.Now)
	e := newAuthEnv(t, a)
	exp := time.Now().Add(time.Hour).Unix()
	bearer := func(claims map[string]any) string { return "Bearer " + hs256(t, claims) }
	reader := bearer(map[string]any{"role": "read-only", "exp": exp})
	writer := bearer(map[string]any{"roles": []string{"read-write"}, "exp": exp})
	admin := bearer(map[string]any{"role": "admin", "exp": exp})
	nobody := bearer(map[string]any{"exp": exp})

	// /health is public; every other route needs a token, /metrics too.
	e.status("GET", "/health", "", "", http.StatusOK, "")
	e.status("GET", "/metrics", "", "", http.StatusUnauthorized, "authentication required")
	e.status("GET", "/metrics/prometheus", reader, "", http.StatusOK, "")
	e.status("GET", "/api/v1/resources/queues", "", "", http.StatusUnauthorized, "authentication required")
	e.status("GET", "/api/v1/resources/queues", "Basic "+base64.StdEncoding.EncodeToString([]byte("a:b")), "", http.StatusUnauthorized, "authentication required")
	e.status("GET", "/api/v1/resources/queues", "Bearer ", "", http.StatusUnauthorized, "authentication required")
	e.status("GET", "/api/v1/resources/queues", strings.TrimPrefix(reader, "Bearer "), "", http.StatusUnauthorized, "authentication required")
	e.status("GET", "/api/v1/resources/queues", "Bearer junk", "", http.StatusUnauthorized, "authentication required: malformed token")
	// Checked against the real clock.
	e.status("GET", "/api/v1/resources/queues", bearer(map[string]any{"role": "admin", "exp": time.Now().Add(-time.Hour).Unix()}), "",
		http.StatusUnauthorized, "authentication required: token has expired")
	e.status("GET", "/api/v1/resources/queues", bearer(map[string]any{"role": "admin", "nbf": time.Now().Add(time.Hour).Unix()}), "",
		http.StatusUnauthorized, "authentication required: token is not valid yet")

	// A token without one of Queen's roles reads nothing.
	e.status("GET", "/api/v1/resources/queues", nobody, "", http.StatusForbidden, "insufficient permissions")
	e.status("GET", "/metrics", nobody, "", http.StatusForbidden, "insufficient permissions")

	// read-only reads, and cannot push, pop or delete.
	e.status("GET", "/api/v1/resources/queues", reader, "", http.StatusOK, "")
	e.status("GET", "/metrics", reader, "", http.StatusOK, "")
	e.status("POST", "/api/v1/push", reader, pushBody, http.StatusForbidden, "insufficient permissions")
	e.status("GET", "/api/v1/pop/queue/q", reader, "", http.StatusForbidden, "insufficient permissions")
	e.status("DELETE", "/api/v1/resources/queues/q", reader, "", http.StatusForbidden, "insufficient permissions")

	// read-write pushes and pops, and cannot delete.
	e.status("POST", "/api/v1/push", writer, pushBody, http.StatusCreated, "")
	e.status("GET", "/api/v1/pop/queue/q?autoAck=true", "bearer "+strings.TrimPrefix(writer, "Bearer "), "", http.StatusOK, "")
	e.status("DELETE", "/api/v1/resources/queues/q", writer, "", http.StatusForbidden, "insufficient permissions")
	e.status("GET", "/api/v1/system/maintenance", writer, "", http.StatusForbidden, "insufficient permissions")

	// A push is stamped with the token's sub; the client's producerSub is ignored.
	alice := bearer(map[string]any{"roles": []string{"read-write"}, "sub": "alice", "exp": exp})
	e.status("POST", "/api/v1/push", alice, `{"items":[{"queue":"who","payload":1,"producerSub":"mallory"}]}`, http.StatusCreated, "")
	rec := e.send("GET", "/api/v1/pop/queue/who", alice, "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"producerSub":"alice"`)

	// admin does everything.
	e.status("GET", "/api/v1/system/maintenance", admin, "", http.StatusOK, "")
	e.status("DELETE", "/api/v1/resources/queues/q", admin, "", http.StatusOK, "")

	// Preflights need no token.
	e.status("OPTIONS", "/api/v1/push", "", "", http.StatusNoContent, "")
}

func TestAuthorize_SharedToken(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, newAuthorizer(&config{token: "s3cret-token"}, time.Now))
	e.status("GET", "/health", "", "", http.StatusOK, "")
	e.status("GET", "/metrics", "", "", http.StatusUnauthorized, "authentication required")
	e.status("POST", "/api/v1/push", "", pushBody, http.StatusUnauthorized, "authentication required")
	e.status("POST", "/api/v1/push", "Bearer s3cret-tokeN", pushBody, http.StatusUnauthorized, "authentication required: invalid token")
	e.status("POST", "/api/v1/push", "Bearer s3cret-token-and-more", pushBody, http.StatusUnauthorized, "authentication required: invalid token")
	e.status("POST", "/api/v1/push", "Bearer s3cret", pushBody, http.StatusUnauthorized, "authentication required: invalid token")
	e.status("POST", "/api/v1/push", "s3cret-token", pushBody, http.StatusUnauthorized, "authentication required")
	// Without JWT_SECRET a JWT is just a wrong token.
	e.status("GET", "/metrics", "Bearer "+hs256(t, map[string]any{"role": "admin"}), "", http.StatusUnauthorized, "authentication required: invalid token")
	// The token grants every level.
	e.status("POST", "/api/v1/push", "Bearer s3cret-token", pushBody, http.StatusCreated, "")
	e.status("GET", "/metrics", "Bearer s3cret-token", "", http.StatusOK, "")
	e.status("DELETE", "/api/v1/resources/queues/q", "Bearer s3cret-token", "", http.StatusOK, "")

	// With both, either works.
	both := newAuthEnv(t, newAuthorizer(&config{token: "s3cret-token", jwtSecret: []byte(testSecret)}, time.Now))
	both.status("DELETE", "/api/v1/resources/queues/q", "Bearer s3cret-token", "", http.StatusOK, "")
	both.status("POST", "/api/v1/push", "Bearer "+hs256(t, map[string]any{"role": "read-write"}), pushBody, http.StatusCreated, "")
	both.status("POST", "/api/v1/push", "Bearer wrong", pushBody, http.StatusUnauthorized, "authentication required: malformed token")
}

func TestParseConfig_Auth(t *testing.T) {
	t.Parallel()
	c, err := parseConfig(nil, envOf(map[string]string{"QUEEN_TOKEN": " from-env ", "JWT_SECRET": "k", "JWT_ISSUER": "iss",
		"JWT_AUDIENCE": "aud", "JWT_CLOCK_SKEW": "5", "JWT_ENABLED": "true", "JWT_ALGORITHM": "HS256"}), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "from-env", c.token)
	require.Equal(t, []byte("k"), c.jwtSecret)
	require.Equal(t, "iss", c.jwtIssuer)
	require.Equal(t, "aud", c.jwtAudience)
	require.Equal(t, 5*time.Second, c.jwtSkew)
	require.Equal(t, "token+jwt", newAuthorizer(c, time.Now).mode())

	c, err = parseConfig([]string{"-token", "from-flag"}, envOf(map[string]string{"QUEEN_TOKEN": "from-env"}), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "from-flag", c.token)
	require.Equal(t, "token", newAuthorizer(c, time.Now).mode())

	c, err = parseConfig(nil, envOf(nil), io.Discard)
	require.NoError(t, err)
	require.Nil(t, newAuthorizer(c, time.Now), "no token, no secret: no authorizer")
	require.Equal(t, "none", newAuthorizer(c, time.Now).mode())

	for _, bad := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"JWT_ENABLED": "true"}, "JWT_ENABLED=true needs JWT_SECRET"},
		{map[string]string{"JWT_ENABLED": "TRUE", "JWT_JWKS_URL": "https://x"}, "JWT_ENABLED=true needs JWT_SECRET"},
		{map[string]string{"JWT_SECRET": "k", "JWT_ALGORITHM": "RS256"}, `JWT_ALGORITHM "RS256" is not supported`},
		{map[string]string{"JWT_SECRET": "k", "JWT_CLOCK_SKEW": "30s"}, "JWT_CLOCK_SKEW must be a number of seconds"},
		{map[string]string{"JWT_SECRET": "k", "JWT_CLOCK_SKEW": "-1"}, "JWT_CLOCK_SKEW must be a number of seconds"},
	} {
		_, err := parseConfig(nil, envOf(bad.env), io.Discard)
		require.ErrorContains(t, err, bad.want, "%v", bad.env)
	}
}

func TestExposed(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:6632": false, "127.1.2.3:1": false, "[::1]:6632": false,
		"0.0.0.0:6632": true, "[::]:6632": true, "192.0.2.10:6632": true, "[2001:db8::1]:6632": true,
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		require.NoError(t, err)
		require.Equal(t, want, exposed(tcp), addr)
	}
	require.True(t, exposed(&net.UnixAddr{Name: "/tmp/x", Net: "unix"}))
}

// startRun runs the server in process with args and env and returns its
// base URL, its log and a function that stops it and returns its exit
// code.
func startRun(t *testing.T, args []string, env map[string]string) (string, *lockedBuffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"-data", t.TempDir(), "-port", "0"}, args...), envOf(env), io.Discard, logs)
	}()
	re := regexp.MustCompile(`msg="queen: listening" addr=\S*:(\d+)`)
	var port string
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(logs.String())
		if m != nil {
			port = m[1]
		}
		return m != nil
	}, 30*time.Second, 5*time.Millisecond, "the server did not start")
	stopped := false
	stop := func() int {
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	return "http://127.0.0.1:" + port, logs, stop
}

func TestRun_Auth(t *testing.T) {
	t.Parallel()
	get := func(url, auth string) int {
		req, err := http.NewRequest("GET", url, nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	t.Run("token", func(t *testing.T) {
		t.Parallel()
		base, logs, stop := startRun(t, []string{"-host", "127.0.0.1", "-token", "tok"}, nil)
		require.Equal(t, http.StatusOK, get(base+"/health", ""))
		require.Equal(t, http.StatusUnauthorized, get(base+"/api/v1/resources/queues", ""))
		require.Equal(t, http.StatusUnauthorized, get(base+"/api/v1/resources/queues", "Bearer nope"))
		require.Equal(t, http.StatusOK, get(base+"/api/v1/resources/queues", "Bearer tok"))
		require.Equal(t, 0, stop())
		require.Contains(t, logs.String(), "auth=token")
		require.NotContains(t, logs.String(), "non-loopback")
	})

	t.Run("jwt", func(t *testing.T) {
		t.Parallel()
		base, logs, stop := startRun(t, []string{"-host", "127.0.0.1"}, map[string]string{"JWT_SECRET": testSecret})
		reader := "Bearer " + hs256(t, map[string]any{"role": "read-only", "exp": time.Now().Add(time.Hour).Unix()})
		expired := "Bearer " + hs256(t, map[string]any{"role": "admin", "exp": time.Now().Add(-time.Hour).Unix()})
		require.Equal(t, http.StatusOK, get(base+"/api/v1/resources/queues", reader))
		require.Equal(t, http.StatusForbidden, get(base+"/api/v1/pop/queue/q", reader))
		require.Equal(t, http.StatusUnauthorized, get(base+"/api/v1/resources/queues", expired))
		require.Equal(t, 0, stop())
		require.Contains(t, logs.String(), "auth=jwt")
	})

	t.Run("open on loopback: no warning", func(t *testing.T) {
		t.Parallel()
		base, logs, stop := startRun(t, []string{"-host", "127.0.0.1"}, nil)
		require.Equal(t, http.StatusOK, get(base+"/api/v1/resources/queues", ""))
		require.Equal(t, 0, stop())
		require.Contains(t, logs.String(), "auth=none")
		require.NotContains(t, logs.String(), "non-loopback")
	})

	t.Run("open on every interface when asked: a warning", func(t *testing.T) {
		t.Parallel()
		_, logs, stop := startRun(t, []string{"-host", "0.0.0.0", "-allow-unauthenticated"}, nil)
		require.Equal(t, 0, stop())
		require.Contains(t, logs.String(), "level=WARN msg=\"queen: listening on a non-loopback address with no QUEEN_TOKEN or JWT_SECRET")
	})

	t.Run("guarded on every interface: no warning", func(t *testing.T) {
		t.Parallel()
		_, logs, stop := startRun(t, []string{"-host", "0.0.0.0"}, map[string]string{"QUEEN_TOKEN": "tok"})
		require.Equal(t, 0, stop())
		require.NotContains(t, logs.String(), "non-loopback")
	})
}

// TestPublicMetrics: with a token, /metrics and /metrics/prometheus need
// it (a read role) unless -public-metrics or QUEEN_PUBLIC_METRICS makes
// them public, as in Queen; /health is public and every other route needs
// the token either way.
func TestPublicMetrics(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args   []string
		env    map[string]string
		public bool
	}{
		{[]string{"-token", "s3cret"}, nil, false},
		{[]string{"-token", "s3cret", "-public-metrics"}, nil, true},
		{nil, map[string]string{"QUEEN_TOKEN": "s3cret", "QUEEN_PUBLIC_METRICS": "true"}, true},
		{nil, map[string]string{"QUEEN_TOKEN": "s3cret", "QUEEN_PUBLIC_METRICS": "0"}, false},
		{[]string{"-public-metrics=false"}, map[string]string{"QUEEN_TOKEN": "s3cret", "QUEEN_PUBLIC_METRICS": "1"}, false},
		{nil, map[string]string{"JWT_SECRET": testSecret, "QUEEN_PUBLIC_METRICS": "1"}, true},
	} {
		cfg, err := parseConfig(c.args, envOf(c.env), io.Discard)
		require.NoError(t, err, "%v %v", c.args, c.env)
		require.Equal(t, c.public, cfg.publicMetrics, "%v %v", c.args, c.env)
		e := authEnv{t, cfg.handler(queentest.NewBroker(t, nil), newAuthorizer(cfg, time.Now), nil, nil, nil)}
		e.status("GET", "/health", "", "", http.StatusOK, "")
		for _, path := range []string{"/metrics", "/metrics/prometheus"} {
			if c.public {
				e.status("GET", path, "", "", http.StatusOK, "")
			} else {
				e.status("GET", path, "", "", http.StatusUnauthorized, "authentication required")
				e.status("GET", path, "Bearer s3cret", "", http.StatusOK, "")
			}
		}
		e.status("GET", "/api/v1/resources/queues", "", "", http.StatusUnauthorized, "authentication required")
		e.status("POST", "/api/v1/push", "", pushBody, http.StatusUnauthorized, "authentication required")
	}
	_, err := parseConfig(nil, envOf(map[string]string{"QUEEN_PUBLIC_METRICS": "yes"}), io.Discard)
	require.ErrorContains(t, err, "QUEEN_PUBLIC_METRICS must be true or false")
}
