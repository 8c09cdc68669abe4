package httpapi

import (
	"encoding/json"
	"unicode/utf8"
)

// Request bodies are validated once (validJSON in readBody); after that
// their objects and arrays are cut into members by the scanners below
// rather than by json.Unmarshal, which checks its whole input again on
// every call and reflects into a map. They give exactly what
// json.Unmarshal gives into map[string]json.RawMessage or
// []json.RawMessage (the keys and values are subslices of the input; of
// repeated members, looked up from the end, the last one wins); on
// anything they do not handle simply (a key with an escape or a non-ASCII
// byte, a value that is not an object or an array) they report false and
// the caller falls back to json.Unmarshal. They must only be given valid
// JSON.

// splitObject cuts a valid JSON object into its members, appended to kv
// (which the caller may reuse from one object to the next).
func splitObject(raw []byte, kv []member) ([]member, bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return kv, false
	}
	start0 := len(kv)
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return kv, skipWS(raw, i+1) == len(raw)
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return kv[:start0], false
		}
		start := i + 1
		end := start
		for end < len(raw) && raw[end] != '"' {
			if c := raw[end]; c == '\\' || c >= utf8.RuneSelf {
				return kv[:start0], false // decoded by json.Unmarshal instead
			}
			end++
		}
		if end >= len(raw) {
			return kv[:start0], false
		}
		key := raw[start:end:end]
		i = skipWS(raw, end+1)
		if i >= len(raw) || raw[i] != ':' {
			return kv[:start0], false
		}
		i = skipWS(raw, i+1)
		vend := valueEnd(raw, i)
		if vend <= i {
			return kv[:start0], false
		}
		kv = append(kv, member{key: key, val: raw[i:vend:vend]})
		var closed, ok bool
		if i, closed, ok = afterMember(raw, vend, '}'); !ok {
			return kv[:start0], false
		} else if closed {
			return kv, true
		}
	}
	return kv[:start0], false
}

// splitArray cuts a valid JSON array into its elements and counts them
// (n). It counts first, then cuts into a slice of that length, so that a
// long array costs no doublings; past max elements it only counts, and
// elems is nil: a request over a cap costs no memory per element.
func splitArray(raw []byte, max int) (elems []json.RawMessage, n int, ok bool) {
	if n, ok = eachElem(raw, nil); !ok || n > max {
		return nil, n, ok
	}
	elems = make([]json.RawMessage, 0, n)
	_, ok = eachElem(raw, func(e []byte) { elems = append(elems, e) })
	return elems, n, ok
}

// eachElem calls fn, unless nil, with each element of a valid JSON array,
// and counts them.
func eachElem(raw []byte, fn func([]byte)) (n int, ok bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return 0, false
	}
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return 0, skipWS(raw, i+1) == len(raw)
	}
	for i < len(raw) {
		vend := valueEnd(raw, i)
		if vend <= i {
			return 0, false
		}
		if n++; fn != nil {
			fn(raw[i:vend:vend])
		}
		var closed bool
		if i, closed, ok = afterMember(raw, vend, ']'); !ok {
			return 0, false
		} else if closed {
			return n, true
		}
	}
	return 0, false
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
