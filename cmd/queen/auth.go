package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/queenlite/queen/httpapi"
)

// authorizer checks the bearer token of every request but those of
// public routes (GET /health, and the metrics with -public-metrics), with
// a shared token (QUEEN_TOKEN), Queen's HS256 JWTs (JWT_SECRET), or both.
type authorizer struct {
	// tokenSum is the SHA-256 of the shared token, nil without one. Sums
	// of equal length are compared in constant time.
	tokenSum []byte
	// secret is the HMAC key of JWTs, nil without one.
	secret []byte
	// issuer and audience, when set, must match the iss and aud claims.
	issuer, audience string
	// skew is the leeway on exp and nbf.
	skew time.Duration
	now  func() time.Time
}

// newAuthorizer returns the authorizer of c, or nil when c asks for none.
func newAuthorizer(c *config, now func() time.Time) *authorizer {
	if c.token == "" && c.jwtSecret == nil {
		return nil
	}
	a := &authorizer{secret: c.jwtSecret, issuer: c.jwtIssuer, audience: c.jwtAudience, skew: c.jwtSkew, now: now}
	if c.token != "" {
		sum := sha256.Sum256([]byte(c.token))
		a.tokenSum = sum[:]
	}
	return a
}

// mode names what a checks, for the log.
func (a *authorizer) mode() string {
	switch {
	case a == nil:
		return "none"
	case a.tokenSum != nil && a.secret != nil:
		return "token+jwt"
	case a.tokenSum != nil:
		return "token"
	}
	return "jwt"
}

// unauthorized is a 401 with a reason.
func unauthorized(reason string) error {
	return fmt.Errorf("%w: %s", httpapi.ErrUnauthorized, reason)
}

// authorize is the [httpapi.Options.Authorize] hook. Public routes
// (/health; the metrics with -public-metrics, read-only routes without)
// need nothing; every other route needs a token: the shared token grants
// every level, a JWT the level of its role.
func (a *authorizer) authorize(r *http.Request, level httpapi.Access) error {
	if level == httpapi.AccessPublic {
		return nil
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return httpapi.ErrUnauthorized
	}
	if a.tokenSum != nil {
		sum := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(sum[:], a.tokenSum) == 1 {
			return nil
		}
		if a.secret == nil {
			return unauthorized("invalid token")
		}
	}
	claims, err := a.verify(token)
	if err != nil {
		return err
	}
	if claims.level() < max(level, httpapi.AccessReadOnly) {
		return httpapi.ErrForbidden
	}
	return nil
}

// producerSub is the [httpapi.Options.ProducerSub] hook: the sub claim of
// the request's JWT, stamped on what it pushes, as Queen's server does.
// The shared token names nobody. Called only for requests authorize let
// through, so the token is valid.
func (a *authorizer) producerSub(r *http.Request) string {
	_, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if a.tokenSum != nil {
		sum := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(sum[:], a.tokenSum) == 1 {
			return ""
		}
	}
	claims, err := a.verify(token)
	if err != nil {
		return ""
	}
	return claims.Sub
}

// jwtClaims are the claims the server reads. Roles are Queen's: the
// claim role (a string) or roles (an array), with the values read-only,
// read-write and admin.
type jwtClaims struct {
	Sub   string          `json:"sub"`
	Exp   *float64        `json:"exp"`
	Nbf   *float64        `json:"nbf"`
	Iss   string          `json:"iss"`
	Aud   json.RawMessage `json:"aud"`
	Role  json.RawMessage `json:"role"`
	Roles json.RawMessage `json:"roles"`
}

// roleLevels maps Queen's role names to access levels.
var roleLevels = map[string]httpapi.Access{
	"read-only":  httpapi.AccessReadOnly,
	"read-write": httpapi.AccessReadWrite,
	"admin":      httpapi.AccessAdmin,
}

// claimStrings reads a claim that is a string or an array of strings; any
// other value, an array with a non-string in it included, holds none.
func claimStrings(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		return nil // Unmarshal keeps the strings it read before the error
	}
	return many
}

// level is the highest level the token's roles grant; AccessPublic when it
// has none of Queen's roles.
func (c *jwtClaims) level() httpapi.Access {
	best := httpapi.AccessPublic
	for _, r := range append(claimStrings(c.Role), claimStrings(c.Roles)...) {
		best = max(best, roleLevels[r])
	}
	return best
}

// maxTokenBytes bounds the tokens verify decodes.
const maxTokenBytes = 16 << 10

// b64 is the unpadded base64url of JWTs, refusing non-canonical input so a
// signature has one spelling.
var b64 = base64.RawURLEncoding.Strict()

// verify checks an HS256 JWT against a's secret and clock and returns its
// claims. Every refusal wraps [httpapi.ErrUnauthorized]. The algorithm
// must be HS256 exactly: "none" and every other one are refused before
// the signature is looked at.
func (a *authorizer) verify(token string) (*jwtClaims, error) {
	if a.secret == nil {
		return nil, unauthorized("invalid token")
	}
	parts := strings.Split(token, ".")
	if len(token) > maxTokenBytes || len(parts) != 3 {
		return nil, unauthorized("malformed token")
	}
	var header struct {
		Alg  string          `json:"alg"`
		Crit json.RawMessage `json:"crit"`
	}
	data, err := b64.DecodeString(parts[0])
	if err != nil || json.Unmarshal(data, &header) != nil {
		return nil, unauthorized("malformed token header")
	}
	if header.Alg != "HS256" {
		return nil, unauthorized(fmt.Sprintf("unsupported token algorithm %q: only HS256 is accepted", header.Alg))
	}
	if header.Crit != nil {
		return nil, unauthorized("unsupported critical token header")
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return nil, unauthorized("malformed token signature")
	}
	mac := hmac.New(sha256.New, a.secret)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return nil, unauthorized("invalid token signature")
	}
	var c jwtClaims
	if data, err = b64.DecodeString(parts[1]); err != nil || json.Unmarshal(data, &c) != nil {
		return nil, unauthorized("malformed token claims")
	}
	// Compare in seconds as floats: NumericDate may have a fraction, and
	// a huge exp must not overflow a time.Duration.
	now := float64(a.now().UnixNano()) / 1e9
	skew := a.skew.Seconds()
	if c.Exp != nil && now >= *c.Exp+skew {
		return nil, unauthorized("token has expired")
	}
	if c.Nbf != nil && now < *c.Nbf-skew {
		return nil, unauthorized("token is not valid yet")
	}
	if a.issuer != "" && c.Iss != a.issuer {
		return nil, unauthorized("token issuer mismatch")
	}
	if a.audience != "" {
		ok := false
		for _, aud := range claimStrings(c.Aud) {
			ok = ok || aud == a.audience
		}
		if !ok {
			return nil, unauthorized("token audience mismatch")
		}
	}
	return &c, nil
}

// exposed reports whether addr can be reached from other machines: any
// address but a loopback one.
func exposed(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return !ok || !tcp.IP.IsLoopback()
}

// errNoSecret is returned when JWT_ENABLED asks for tokens this server
// cannot verify.
var errNoSecret = errors.New("JWT_ENABLED=true needs JWT_SECRET: this server verifies HS256 tokens only (no JWT_JWKS_URL or JWT_PUBLIC_KEY)")
