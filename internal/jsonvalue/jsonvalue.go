// Package jsonvalue decodes a JSON object into a map[string]any exactly as
// encoding/json's Unmarshal does, in one pass and without reflection. It
// is what fills [queen.Message.Data] for every message a consume loop
// delivers, so it sits on the loop's hot path.
//
// The fast path covers the JSON that is usually sent: objects, arrays,
// strings whose text is valid UTF-8 (escapes included, except \u),
// numbers that fit a float64, true, false and null, nested up to
// maxDepth. Anything else (a \u escape, invalid UTF-8, a number out of
// range, deeper nesting, or input that is not valid JSON) is handed to
// encoding/json, so the result and the error are always Unmarshal's.
package jsonvalue

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// maxDepth is the deepest nesting the fast path decodes; deeper input goes
// to encoding/json, which has its own limit.
const maxDepth = 1000

// DecodeObject decodes b, which should hold a JSON object, as
// json.Unmarshal(b, &m) with m a map[string]any does, and returns m.
func DecodeObject(b []byte) (map[string]any, error) {
	d := decoder{b: b}
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '{' {
		if m, ok := d.object(0); ok {
			d.space()
			if d.i == len(d.b) {
				return m, nil
			}
		}
	}
	var m map[string]any
	err := json.Unmarshal(b, &m)
	return m, err
}

type decoder struct {
	b []byte
	i int
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value decodes the value at d.i; false means the fast path gives up.
func (d *decoder) value(depth int) (any, bool) {
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		m, ok := d.object(depth + 1)
		return m, ok
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		s, ok := d.str()
		return s, ok
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	return nil, false
}

func (d *decoder) literal(word string) bool {
	if len(d.b)-d.i < len(word) || string(d.b[d.i:d.i+len(word)]) != word {
		return false
	}
	d.i += len(word)
	return true
}

// object decodes the object at d.i, its '{' included. Later duplicates of
// a key win, as in encoding/json.
func (d *decoder) object(depth int) (map[string]any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.i++ // '{'
	m := make(map[string]any)
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return m, true
	}
	for {
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, false
		}
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, false
		}
		d.i++
		d.space()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v
		d.space()
		if d.i >= len(d.b) {
			return nil, false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
			d.space()
		case '}':
			d.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *decoder) array(depth int) ([]any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.i++ // '['
	a := []any{}
	d.space()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return a, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.space()
		if d.i >= len(d.b) {
			return nil, false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
			d.space()
		case ']':
			d.i++
			return a, true
		default:
			return nil, false
		}
	}
}

// plain marks the bytes a string holds as they are: printable ASCII other
// than the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str decodes the string at d.i, its opening quote included.
func (d *decoder) str() (string, bool) {
	d.i++ // '"'
	start := d.i
	ascii := true
	for d.i < len(d.b) {
		// Plain ASCII text, the common case, in a tight loop.
		for d.i < len(d.b) && plain[d.b[d.i]] {
			d.i++
		}
		if d.i >= len(d.b) {
			break
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			d.i++
			return string(s), true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.i++
	}
	return "", false
}

// escaped finishes a string that started at start and holds an escape at
// d.i.
func (d *decoder) escaped(start int) (string, bool) {
	buf := make([]byte, 0, d.i-start+16)
	buf = append(buf, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			if !utf8.Valid(buf) {
				return "", false
			}
			d.i++
			return string(buf), true
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return "", false
			}
			var r byte
			switch d.b[d.i+1] {
			case '"', '\\', '/':
				r = d.b[d.i+1]
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			default: // \u, or not JSON
				return "", false
			}
			buf = append(buf, r)
			d.i += 2
			continue
		case c < 0x20:
			return "", false
		}
		buf = append(buf, c)
		d.i++
	}
	return "", false
}

// number decodes the number at d.i as encoding/json does into an any: a
// float64.
func (d *decoder) number() (any, bool) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	// int part: 0, or a non-zero digit and digits
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.i < len(d.b) && d.b[d.i] >= '1' && d.b[d.i] <= '9':
		d.digits()
	default:
		return nil, false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if !d.digits() {
			return nil, false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if !d.digits() {
			return nil, false
		}
	}
	f, err := strconv.ParseFloat(string(d.b[start:d.i]), 64)
	if err != nil { // out of range: encoding/json's error
		return nil, false
	}
	return f, true
}

// digits skips one or more digits; false if there is none.
func (d *decoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}
