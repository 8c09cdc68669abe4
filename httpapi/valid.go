package httpapi

// validJSON reports whether data is one valid JSON value with optional
// white space around it: exactly what json.Valid reports (the same
// grammar, strings that may hold any byte from 0x20 up, invalid UTF-8
// included, and the same limit of maxNesting nested objects and arrays;
// FuzzValidJSON compares the two), in one pass with no allocation, where
// json.Valid steps a state machine through a function call per byte.
func validJSON(data []byte) bool {
	var depth int
	i := skipWS(data, 0)
	i, ok := validValue(data, i, &depth)
	return ok && skipWS(data, i) == len(data)
}

// maxNesting is encoding/json's limit on nested objects and arrays.
const maxNesting = 10000

// validValue checks the value starting at data[i] (white space already
// skipped) and returns the index just past it.
func validValue(data []byte, i int, depth *int) (int, bool) {
	if i >= len(data) {
		return i, false
	}
	switch c := data[i]; {
	case c == '"':
		return validString(data, i)
	case c == '{':
		if *depth++; *depth > maxNesting {
			return i, false
		}
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == '}' {
			*depth--
			return i + 1, true
		}
		for {
			if i >= len(data) || data[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = validString(data, i); !ok {
				return i, false
			}
			if i = skipWS(data, i); i >= len(data) || data[i] != ':' {
				return i, false
			}
			if i, ok = validValue(data, skipWS(data, i+1), depth); !ok {
				return i, false
			}
			var more bool
			if i, more, ok = validNext(data, i, '}', depth); !more {
				return i, ok
			}
		}
	case c == '[':
		if *depth++; *depth > maxNesting {
			return i, false
		}
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == ']' {
			*depth--
			return i + 1, true
		}
		for {
			var ok, more bool
			if i, ok = validValue(data, i, depth); !ok {
				return i, false
			}
			if i, more, ok = validNext(data, i, ']', depth); !more {
				return i, ok
			}
		}
	case c == '-' || '0' <= c && c <= '9':
		return validNumber(data, i)
	case c == 't':
		return i + 4, hasAt(data, i, "true")
	case c == 'f':
		return i + 5, hasAt(data, i, "false")
	case c == 'n':
		return i + 4, hasAt(data, i, "null")
	}
	return i, false
}

func hasAt(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// validString checks the string starting at data[i] (a quote).
func validString(data []byte, i int) (int, bool) {
	for i++; i < len(data); i++ {
		c := data[i]
		if plainInJSONString[c] {
			continue
		}
		switch {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		}
		// A backslash.
		if i++; i >= len(data) {
			return i, false
		}
		switch data[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if len(data)-i <= 4 {
				return i, false
			}
			for _, h := range data[i+1 : i+5] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return i, false
				}
			}
			i += 4
		default:
			return i, false
		}
	}
	return i, false
}

// plainInJSONString marks the bytes a JSON string holds as they are:
// all but control characters, the quote and the backslash.
var plainInJSONString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// validNumber checks the number starting at data[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(data []byte, i int) (int, bool) {
	if data[i] == '-' {
		if i++; i >= len(data) {
			return i, false
		}
	}
	switch c := data[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i = digits(data, i+1)
	default:
		return i, false
	}
	if i < len(data) && data[i] == '.' {
		j := digits(data, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(data, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}

// validNext reads what follows a member of an object or an element of an
// array, from i: a comma, after which more follows (more), or the closing
// byte, which ends the container (ok); anything else is invalid.
func validNext(data []byte, i int, closing byte, depth *int) (next int, more, ok bool) {
	if i = skipWS(data, i); i >= len(data) {
		return i, false, false
	}
	switch data[i] {
	case ',':
		return skipWS(data, i+1), true, true
	case closing:
		*depth--
		return i + 1, false, true
	}
	return i, false, false
}
