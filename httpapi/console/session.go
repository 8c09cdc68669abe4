package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/queenlite/queen/httpapi"
)

// Errors of a POST refused before its action runs.
var (
	errCrossSite = errors.New("cross-site request refused")
	errCSRF      = errors.New("missing or invalid CSRF token: reload the page and try again")
)

// session returns the browser's session id, setting a new session cookie
// when the request has none (or a malformed one).
func (h *handler) session(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(sessionCookie); err == nil && validSession(c.Value) {
		return c.Value
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	s := hex.EncodeToString(id)
	http.SetCookie(w, h.cookie(r, sessionCookie, s, 0))
	// Later reads in this request (the form being rendered) see it.
	r.AddCookie(&http.Cookie{Name: sessionCookie, Value: s})
	return s
}

func validSession(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) == 32
}

// csrf is the CSRF token of a session: an HMAC of its id under the
// handler's key, which a page from another site cannot read or forge.
func (h *handler) csrf(session string) string {
	m := hmac.New(sha256.New, h.secret)
	m.Write([]byte(session))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// cookie is a console cookie: HttpOnly, SameSite=Strict, scoped to the
// mount path, Secure over TLS; maxAge < 0 deletes it.
func (h *handler) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: base(r) + "/", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

// checkPost refuses a POST from another site or without the session's
// CSRF token.
func (h *handler) checkPost(r *http.Request) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return errCrossSite
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || o == "null" || !strings.EqualFold(u.Host, r.Host) {
			return errCrossSite
		}
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || !validSession(c.Value) {
		return errCSRF
	}
	got := r.PostFormValue("csrf")
	if !hmac.Equal([]byte(got), []byte(h.csrf(c.Value))) {
		return errCSRF
	}
	return nil
}

// withToken returns r carrying the login cookie's token as a bearer
// token, for the Authorize hook, unless r has an Authorization header.
func withToken(r *http.Request) *http.Request {
	if r.Header.Get("Authorization") != "" {
		return r
	}
	c, err := r.Cookie(tokenCookie)
	if err != nil || c.Value == "" {
		return r
	}
	tok, err := url.QueryUnescape(c.Value)
	if err != nil {
		return r
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+tok)
	return r2
}

// loginData is the login page's.
type loginData struct {
	Error    string
	Required bool // an Authorize hook is set
	LoggedIn bool
}

func (h *handler) loginPage(w http.ResponseWriter, r *http.Request) {
	_, in := r.Cookie(tokenCookie)
	h.render(w, r, http.StatusOK, "login", loginData{Required: h.opts.Authorize != nil, LoggedIn: in == nil})
}

// login checks the token typed in and keeps it in the token cookie.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	if err := h.checkPost(r); err != nil {
		h.fail(w, r, http.StatusForbidden, err.Error())
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if tok == "" || len(tok) > 8192 || strings.ContainsAny(tok, "\r\n") {
		h.render(w, r, http.StatusBadRequest, "login", loginData{Error: "enter a token", Required: h.opts.Authorize != nil})
		return
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+tok)
	if err := h.authorize(r2, httpapi.AccessReadOnly); err != nil {
		h.render(w, r, http.StatusUnauthorized, "login", loginData{Error: "token refused: " + err.Error(), Required: h.opts.Authorize != nil})
		return
	}
	http.SetCookie(w, h.cookie(r, tokenCookie, url.QueryEscape(tok), 0))
	http.Redirect(w, r, base(r)+"/", http.StatusSeeOther)
}

// logout forgets the token.
func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	if err := h.checkPost(r); err != nil {
		h.fail(w, r, http.StatusForbidden, err.Error())
		return
	}
	http.SetCookie(w, h.cookie(r, tokenCookie, "", -1))
	http.Redirect(w, r, base(r)+"/login", http.StatusSeeOther)
}

// done reports an action's result on the page it redirects to.
func (h *handler) done(w http.ResponseWriter, r *http.Request, to, result string) {
	http.SetCookie(w, h.cookie(r, resultCookie, url.QueryEscape(result), 60))
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// takeResult reads and clears the result of the last action.
func (h *handler) takeResult(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(resultCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, h.cookie(r, resultCookie, "", -1))
	s, err := url.QueryUnescape(c.Value)
	if err != nil {
		return ""
	}
	return s
}
