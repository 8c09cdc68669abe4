package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/queenlite/queen"
)

// readBody reads a JSON object body, capped at the handler's limit.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) (*fields, error) {
	data, err := readAll(http.MaxBytesReader(w, r.Body, h.maxBody), r.ContentLength, h.maxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &apiError{http.StatusRequestEntityTooLarge, "request body larger than " + strconv.FormatInt(tooBig.Limit, 10) + " bytes"}
		}
		return nil, badRequest("cannot read request body")
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, badRequest("Empty request body")
	}
	if !validJSON(data) {
		var v any
		err := json.Unmarshal(data, &v)
		msg := "syntax error"
		if err != nil {
			msg = strings.TrimPrefix(err.Error(), "json: ")
		}
		return nil, badRequest("Invalid JSON: %s", msg)
	}
	kv, ok := objectMembers(data, nil)
	if !ok {
		return nil, badRequest("request body must be a JSON object")
	}
	return &fields{kv: kv}, nil
}

// objectMembers cuts a valid JSON object into members appended to kv,
// with splitObject or, for keys it does not handle, json.Unmarshal; ok is
// false when raw is not an object.
func objectMembers(raw []byte, kv []member) ([]member, bool) {
	if kv, ok := splitObject(raw, kv); ok {
		return kv, true
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return kv, false
	}
	for k, v := range m {
		kv = append(kv, member{key: []byte(k), val: v})
	}
	return kv, true
}

// readAll is io.ReadAll into a buffer of the body's announced length
// (when it is within max), so that a large body is read into one
// allocation of its size instead of a series of doublings (about twice
// its size in all).
func readAll(r io.Reader, length, max int64) ([]byte, error) {
	if length <= 0 || length > max {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, length+1) // the byte more sees EOF without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) { // longer than announced: cannot be over HTTP/1.1
			b = append(b, 0)[:len(b)]
		}
	}
}

// fields reads the members of a JSON object with type checks. The first
// problem is kept in err and later reads return zero values, so a handler
// reads everything and checks err once.
//
// The members are kept in a slice, not a map, and looked up by a scan from
// the end (the last of repeated members wins, as in json.Unmarshal): an
// object has a handful of them, and the elements of a long array reuse
// one fields (see elem), so that reading an item allocates nothing but
// the strings it returns.
type fields struct {
	kv []member
	// path prefixes member names in messages: "" for the body, e.g.
	// "options." in an object. An element's, e.g. "items[2].", is made
	// only for a message, from elemOf and elemAt (see prefix).
	path   string
	elemOf string
	elemAt int
	err    error
}

// member is one member of an object: its key (no escapes, see
// splitObject) and its value's JSON text, both within the request body.
type member struct{ key, val []byte }

// get returns a member's JSON text.
func (f *fields) get(name string) (json.RawMessage, bool) {
	for i := len(f.kv) - 1; i >= 0; i-- {
		if string(f.kv[i].key) == name {
			return f.kv[i].val, true
		}
	}
	return nil, false
}

// prefix is what member names are prefixed with in messages, e.g.
// "items[2]."; made on each call, for messages only.
func (f *fields) prefix() string {
	if f.elemOf == "" {
		return f.path
	}
	return f.elemOf + "[" + strconv.Itoa(f.elemAt) + "]."
}

// kind is the JSON type of a raw value: one of `"`, `t` (boolean), `n`
// (null), `{`, `[`, or `0` (number).
func kind(raw json.RawMessage) byte {
	i := 0
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\r' || raw[i] == '\n') {
		i++ // not bytes.TrimLeft: its cutset is made anew on every call
	}
	if i == len(raw) {
		return 'n'
	}
	switch c := raw[i]; c {
	case '"', '{', '[', 'n':
		return c
	case 't', 'f':
		return 't'
	}
	return '0'
}

func (f *fields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = badRequest(format, args...)
	}
}

// has reports whether name is present and not null.
func (f *fields) has(name string) bool {
	raw, ok := f.get(name)
	return ok && kind(raw) != 'n'
}

// present reports whether name is present, even as null.
func (f *fields) present(name string) bool {
	_, ok := f.get(name)
	return ok
}

// raw returns a member's JSON text, nil when absent.
func (f *fields) raw(name string) json.RawMessage { raw, _ := f.get(name); return raw }

// str reads an optional string; absent and null read as "".
func (f *fields) str(name string) string { return f.strLike(name, "") }

// strLike is str returning like itself, without allocating, when the
// value equals it: the queue of the items of a push is usually the same.
func (f *fields) strLike(name, like string) string {
	raw := f.raw(name)
	switch kind(raw) {
	case 'n':
		return ""
	case '"':
		// like is valid UTF-8 (a decoded string), so the same bytes with
		// no escape decode to like.
		if len(raw) == len(like)+2 && string(raw[1:len(raw)-1]) == like && bytes.IndexByte(raw, '\\') < 0 {
			return like
		}
		if s, ok := simpleString(raw); ok {
			return s
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			f.fail("%s%s is not a valid string", f.prefix(), name)
		}
		return s
	}
	f.fail("%s%s must be a string", f.prefix(), name)
	return ""
}

// num reads an optional integer; absent and null read as def. Negative
// values are refused unless signed.
func (f *fields) num(name string, def int64, signed bool) int64 {
	raw := f.raw(name)
	switch kind(raw) {
	case 'n':
		return def
	case '0':
		n, err := parseInt(string(bytes.TrimSpace(raw)))
		if err != nil {
			f.fail("%s%s must be an integer", f.prefix(), name)
			return def
		}
		if n < 0 && !signed {
			f.fail("%s%s must not be negative", f.prefix(), name)
			return def
		}
		return n
	}
	f.fail("%s%s must be a number", f.prefix(), name)
	return def
}

// boolean reads an optional boolean; absent and null read as def.
func (f *fields) boolean(name string, def bool) bool {
	raw := f.raw(name)
	switch kind(raw) {
	case 'n':
		return def
	case 't':
		return bytes.HasPrefix(bytes.TrimSpace(raw), []byte("true"))
	}
	f.fail("%s%s must be a boolean", f.prefix(), name)
	return def
}

// object reads an optional nested object; nil when absent or null.
func (f *fields) object(name string) *fields {
	raw := f.raw(name)
	switch kind(raw) {
	case 'n':
		return nil
	case '{':
		kv, ok := objectMembers(raw, nil)
		if !ok {
			f.fail("%s%s is not a valid object", f.prefix(), name)
			return nil
		}
		return &fields{kv: kv, path: f.prefix() + name + "."}
	}
	f.fail("%s%s must be an object", f.prefix(), name)
	return nil
}

// arrayMax is array for an array of at most max elements: n is its
// length, and elems is nil when n > max (see splitArray).
func (f *fields) arrayMax(name string, max int) (elems []json.RawMessage, n int, ok bool) {
	raw := f.raw(name)
	switch kind(raw) {
	case 'n':
		return nil, 0, false
	case '[':
		if elems, n, ok := splitArray(raw, max); ok {
			return elems, n, true
		}
		if err := json.Unmarshal(raw, &elems); err != nil {
			f.fail("%s%s is not a valid array", f.prefix(), name)
			return nil, 0, false
		}
		if n = len(elems); n > max {
			elems = nil
		}
		return elems, n, true
	}
	f.fail("%s%s must be an array", f.prefix(), name)
	return nil, 0, false
}

// elem turns element at of the array of path of (e.g. "items") into
// fields, or records in f that it is not an object. The fields are dst,
// emptied, when dst is not nil: a loop over a long array reuses one.
func (f *fields) elem(dst *fields, raw json.RawMessage, of string, at int) *fields {
	if dst == nil {
		dst = &fields{}
	}
	*dst = fields{kv: dst.kv[:0], elemOf: of, elemAt: at}
	if kind(raw) != '{' {
		f.fail("%s must be an object", strings.TrimSuffix(dst.prefix(), "."))
		return dst
	}
	var ok bool
	if dst.kv, ok = objectMembers(raw, dst.kv); !ok {
		f.fail("%s is not a valid object", strings.TrimSuffix(dst.prefix(), "."))
	}
	return dst
}

// parseInt parses a JSON or query integer; integral floats such as 300.0
// or 3e2 are accepted. Beyond ±2^53, where a JSON number no longer names
// one integer, it is refused however it is written.
func parseInt(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > 1<<53 || n < -(1<<53) {
			return 0, errors.New("not an integer")
		}
		return n, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
		return 0, errors.New("not an integer")
	}
	return int64(v), nil
}

// params reads query parameters by exact name, keeping the first problem.
type params struct {
	q   url.Values
	err error
}

func newParams(r *http.Request) *params { return &params{q: r.URL.Query()} }

func (p *params) fail(format string, args ...any) {
	if p.err == nil {
		p.err = badRequest(format, args...)
	}
}

// str returns a parameter's value ("" when absent) and whether it is present.
func (p *params) str(name string) (string, bool) {
	v, ok := p.q[name]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// num reads a non-negative integer, def when absent.
func (p *params) num(name string, def int64) int64 {
	s, ok := p.str(name)
	if !ok {
		return def
	}
	n, err := parseInt(s)
	switch {
	case err != nil:
		p.fail("%s must be a number, not %q", name, s)
		return def
	case n < 0:
		p.fail("%s must not be negative", name)
		return def
	}
	return n
}

// boolean reads true/1 or false/0, def when absent.
func (p *params) boolean(name string, def bool) bool {
	s, ok := p.str(name)
	if !ok {
		return def
	}
	switch strings.ToLower(s) {
	case "true", "1":
		return true
	case "false", "0":
		return false
	}
	p.fail("%s must be true or false, not %q", name, s)
	return def
}

// name reads an optional name parameter with the name rules.
func (p *params) name(name string) string {
	s, _ := p.str(name)
	if err := checkLabel(name, s); err != nil && p.err == nil {
		p.err = err
	}
	return s
}

// time reads an optional timestamp.
func (p *params) time(name string) time.Time {
	s, ok := p.str(name)
	if !ok || s == "" {
		return time.Time{}
	}
	t, err := parseTime(s)
	if err != nil {
		p.fail("%s must be an ISO-8601 timestamp, not %q", name, s)
	}
	return t
}

// checkName validates a required queue, partition or group name.
func checkName(field, s string) error {
	if s == "" {
		return badRequest("%s is required", field)
	}
	return checkLabel(field, s)
}

// checkLabel validates an optional name-like string.
func checkLabel(field, s string) error {
	switch {
	case len(s) > queen.MaxNameLen:
		return badRequest("%s is longer than %d bytes", field, queen.MaxNameLen)
	case !utf8.ValidString(s):
		return badRequest("%s is not valid UTF-8", field)
	case strings.IndexByte(s, 0) >= 0:
		return badRequest("%s contains a NUL byte", field)
	}
	return nil
}

// isUUID reports whether s is the 36-character textual form of a UUID.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// checkUUID refuses a value that is not a UUID where one is required.
func checkUUID(field, s string) error {
	if !isUUID(s) {
		return badRequest("%s must be a UUID, not %q", field, s)
	}
	return nil
}

// pathName reads a name from the path.
func pathName(r *http.Request, wildcard string) (string, error) {
	s := r.PathValue(wildcard)
	return s, checkName(wildcard, s)
}

// timeLayouts are the timestamp forms accepted on input, ISO-8601 first.
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02",
}

// parseTime reads an ISO-8601 timestamp; one without a zone is UTC.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("not a timestamp")
}
