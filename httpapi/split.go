package httpapi

import (
	"encoding/json"
	"unicode/utf8"
)

// Request bodies are validated once (json.Valid in readBody); after that
// their objects and arrays are cut into members by the scanners below
// rather than by json.Unmarshal, which checks its whole input again on
// every call and reflects into a map. They give exactly what
// json.Unmarshal gives into map[string]json.RawMessage or
// []json.RawMessage (the values are subslices of the input; for a repeated
// member the last one wins); on anything they do not handle simply (a key
// with an escape or a non-ASCII byte, a value that is not an object or an
// array) they report false and the caller falls back to json.Unmarshal.
// They must only be given valid JSON.

// splitObject cuts a valid JSON object into its members.
func splitObject(raw []byte) (map[string]json.RawMessage, bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	m := make(map[string]json.RawMessage, 8)
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return m, skipWS(raw, i+1) == len(raw)
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return nil, false
		}
		start := i + 1
		end := start
		for end < len(raw) && raw[end] != '"' {
			if c := raw[end]; c == '\\' || c >= utf8.RuneSelf {
				return nil, false // decoded by json.Unmarshal instead
			}
			end++
		}
		if end >= len(raw) {
			return nil, false
		}
		key := string(raw[start:end])
		i = skipWS(raw, end+1)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = skipWS(raw, i+1)
		vend := valueEnd(raw, i)
		if vend <= i {
			return nil, false
		}
		m[key] = raw[i:vend:vend]
		var closed, ok bool
		if i, closed, ok = afterMember(raw, vend, '}'); !ok {
			return nil, false
		} else if closed {
			return m, true
		}
	}
	return nil, false
}

// splitArray cuts a valid JSON array into its elements and counts them
// (n). Past max elements it only counts: elems is nil when n > max, so
// that a request over a cap costs no memory per element.
func splitArray(raw []byte, max int) (elems []json.RawMessage, n int, ok bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, 0, false
	}
	elems = make([]json.RawMessage, 0, 16)
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return elems, 0, skipWS(raw, i+1) == len(raw)
	}
	for i < len(raw) {
		vend := valueEnd(raw, i)
		if vend <= i {
			return nil, 0, false
		}
		if n++; n <= max {
			elems = append(elems, raw[i:vend:vend])
		} else {
			elems = nil
		}
		var closed bool
		if i, closed, ok = afterMember(raw, vend, ']'); !ok {
			return nil, 0, false
		} else if closed {
			return elems, n, true
		}
	}
	return nil, 0, false
}

// afterMember reads what follows a member ending at i: a comma (next is
// where the following member starts) or closer, which must end raw but
// for white space (closed).
func afterMember(raw []byte, i int, closer byte) (next int, closed, ok bool) {
	i = skipWS(raw, i)
	switch {
	case i >= len(raw):
		return 0, false, false
	case raw[i] == ',':
		return skipWS(raw, i+1), false, true
	case raw[i] == closer:
		return 0, true, skipWS(raw, i+1) == len(raw)
	}
	return 0, false, false
}

func skipWS(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// valueEnd returns the index just past the valid JSON value starting at
// raw[i], or i when there is none.
func valueEnd(raw []byte, i int) int {
	if i >= len(raw) {
		return i
	}
	switch raw[i] {
	case '"':
		return stringEnd(raw, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(raw); j++ {
			switch raw[j] {
			case '"':
				j = stringEnd(raw, j) - 1
				if j < 0 {
					return i
				}
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return i
	}
	j := i // number, true, false or null
	for j < len(raw) {
		switch raw[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// stringEnd returns the index just past the string starting at raw[i] (a
// quote), or 0 when it does not end.
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return 0
}

// simpleString returns the value of a JSON string with no escapes and only
// printable ASCII, which is its bytes between the quotes.
func simpleString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c == '\\' || c == '"' || c >= utf8.RuneSelf {
			return "", false
		}
	}
	return string(raw[1 : len(raw)-1]), true
}
