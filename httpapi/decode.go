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
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
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
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		msg := "syntax error"
		if err != nil {
			msg = strings.TrimPrefix(err.Error(), "json: ")
		}
		return nil, badRequest("Invalid JSON: %s", msg)
	}
	m, ok := splitObject(data)
	if !ok {
		if err := json.Unmarshal(data, &m); err != nil || m == nil {
			return nil, badRequest("request body must be a JSON object")
		}
	}
	return &fields{m: m}, nil
}

// fields reads the members of a JSON object with type checks. The first
// problem is kept in err and later reads return zero values, so a handler
// reads everything and checks err once.
type fields struct {
	m    map[string]json.RawMessage
	path string // prefix of member names in messages, e.g. "items[2]."
	err  error
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
	raw, ok := f.m[name]
	return ok && kind(raw) != 'n'
}

// present reports whether name is present, even as null.
func (f *fields) present(name string) bool {
	_, ok := f.m[name]
	return ok
}

// raw returns a member's JSON text, nil when absent.
func (f *fields) raw(name string) json.RawMessage { return f.m[name] }

// str reads an optional string; absent and null read as "".
func (f *fields) str(name string) string {
	raw := f.m[name]
	switch kind(raw) {
	case 'n':
		return ""
	case '"':
		if s, ok := simpleString(raw); ok {
			return s
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			f.fail("%s%s is not a valid string", f.path, name)
		}
		return s
	}
	f.fail("%s%s must be a string", f.path, name)
	return ""
}

// num reads an optional integer; absent and null read as def. Negative
// values are refused unless signed.
func (f *fields) num(name string, def int64, signed bool) int64 {
	raw := f.m[name]
	switch kind(raw) {
	case 'n':
		return def
	case '0':
		n, err := parseInt(string(bytes.TrimSpace(raw)))
		if err != nil {
			f.fail("%s%s must be an integer", f.path, name)
			return def
		}
		if n < 0 && !signed {
			f.fail("%s%s must not be negative", f.path, name)
			return def
		}
		return n
	}
	f.fail("%s%s must be a number", f.path, name)
	return def
}

// boolean reads an optional boolean; absent and null read as def.
func (f *fields) boolean(name string, def bool) bool {
	raw := f.m[name]
	switch kind(raw) {
	case 'n':
		return def
	case 't':
		return bytes.HasPrefix(bytes.TrimSpace(raw), []byte("true"))
	}
	f.fail("%s%s must be a boolean", f.path, name)
	return def
}

// object reads an optional nested object; nil when absent or null.
func (f *fields) object(name string) *fields {
	raw := f.m[name]
	switch kind(raw) {
	case 'n':
		return nil
	case '{':
		m, ok := splitObject(raw)
		if !ok {
			if err := json.Unmarshal(raw, &m); err != nil {
				f.fail("%s%s is not a valid object", f.path, name)
				return nil
			}
		}
		return &fields{m: m, path: f.path + name + "."}
	}
	f.fail("%s%s must be an object", f.path, name)
	return nil
}

// array reads an optional array; ok is false when absent or null.
func (f *fields) array(name string) (elems []json.RawMessage, ok bool) {
	raw := f.m[name]
	switch kind(raw) {
	case 'n':
		return nil, false
	case '[':
		if elems, ok := splitArray(raw); ok {
			return elems, true
		}
		if err := json.Unmarshal(raw, &elems); err != nil {
			f.fail("%s%s is not a valid array", f.path, name)
			return nil, false
		}
		return elems, true
	}
	f.fail("%s%s must be an array", f.path, name)
	return nil, false
}

// elem turns an array element into fields, or records that it is not an
// object.
func (f *fields) elem(raw json.RawMessage, path string) *fields {
	if kind(raw) != '{' {
		f.fail("%s must be an object", path)
		return &fields{m: map[string]json.RawMessage{}, path: path + "."}
	}
	m, ok := splitObject(raw)
	if !ok {
		if err := json.Unmarshal(raw, &m); err != nil {
			f.fail("%s is not a valid object", path)
		}
	}
	return &fields{m: m, path: path + "."}
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
