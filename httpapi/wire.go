package httpapi

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/queenlite/queen/internal/verbatim"
)

// The wire types below are unexported on purpose: the wire format is
// Queen's, defined by its server and official clients, and every field
// carries an explicit JSON tag so renaming a Go field never changes it.

// nullString is a string written as null when empty.
type nullString string

// MarshalJSON writes null for "".
func (s nullString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

// msTime is a timestamp written with milliseconds, as Queen's admin
// routes do ("2006-01-02T15:04:05.000Z"), or null when zero.
type msTime time.Time

// MarshalJSON writes the timestamp or null.
func (t msTime) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return []byte(strconv.Quote(tt.UTC().Format("2006-01-02T15:04:05.000Z"))), nil
}

// usTime is a timestamp written with microseconds, as Queen's pop does
// ("2006-01-02T15:04:05.000000Z"), or null when zero.
type usTime time.Time

// MarshalJSON writes the timestamp or null.
func (t usTime) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return []byte(strconv.Quote(tt.UTC().Format("2006-01-02T15:04:05.000000Z"))), nil
}

// pagination is the page echo of listing routes.
type pagination struct {
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
}

// seconds and millis render durations in the units of Queen's options.
func seconds(d time.Duration) int64 { return int64(d / time.Second) }
func millis(d time.Duration) int64  { return int64(d / time.Millisecond) }

// payload returns a stored payload as JSON written byte for byte
// (writeJSON, appendRawJSON), null when empty.
func payload(p json.RawMessage) verbatim.JSON {
	if len(p) == 0 {
		return verbatim.JSON("null")
	}
	return verbatim.JSON(p)
}
