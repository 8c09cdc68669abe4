package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/queenlite/queen"
)

// TransportError reports a request that got no usable answer: the
// connection failed, the request's deadline passed, or the answer was not
// the API's (not JSON, or cut short). Err is the cause. The call's effect
// on the server is unknown, except for calls the client repeats (see the
// package doc), which are safe to repeat again.
type TransportError struct {
	Op  string // the call: "push", "pop", "ack", ...
	URL string // method and URL, credentials removed
	Err error
}

// Error names the call, the URL and the cause.
func (e *TransportError) Error() string {
	return fmt.Sprintf("queen: remote %s (%s): %v", e.Op, e.URL, e.Err)
}

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// Is reports whether target is [queen.ErrUnavailable], which every
// transport error matches.
func (e *TransportError) Is(target error) bool { return target == queen.ErrUnavailable }

// ErrMixedStores is matched (errors.Is) by every [*StoreMismatchError]:
// the servers of a client's URL list hold different stores.
var ErrMixedStores = errors.New("queen: remote: the servers of the URL list hold different stores")

// StoreMismatchError refuses a call routed to a server whose store is not
// the one of the client's URL list: the store named by the first server
// that told the client its store (the storeId of GET /health). Nothing of
// the call was sent to that server. Such a list fronts independent stores
// (two cmd/queen processes with their own data directories, say): what a
// push left on one would never be popped through the other, so the client
// refuses the server for as long as it lives; list the fronts of one
// store only (see the package doc, "Several servers"). It matches
// [ErrMixedStores].
type StoreMismatchError struct {
	Op          string // the call refused: "push", "ack", ...
	URL         string // the server refused, credentials removed
	StoreID     string // the store it holds
	ListURL     string // the server that named the list's store first, credentials removed
	ListStoreID string // the list's store
}

// Error says which servers hold which stores.
func (e *StoreMismatchError) Error() string {
	return fmt.Sprintf("queen: remote %s: %s holds store %s but %s holds store %s: the servers hold different stores, "+
		"and a URL list must name fronts of one store; nothing was sent to %s", e.Op, e.URL, e.StoreID, e.ListURL, e.ListStoreID, e.URL)
}

// Is reports whether target is [ErrMixedStores].
func (e *StoreMismatchError) Is(target error) bool { return target == ErrMixedStores }

// ServerError reports an error answer that no sentinel of package queen
// stands for: a 500 (the server's storage failed), a 401 or 403 (the
// token), a 200 carrying {"success": false, "error": ...} from Queen's
// server. Err, when set, is the sentinel it also matches: [queen.ErrClosed]
// for a server whose broker has closed (503 "broker unavailable"). A 5xx
// answer also matches [queen.ErrUnavailable].
type ServerError struct {
	Op         string
	StatusCode int
	Message    string // the server's {"error": ...} text, or the start of its body
	Err        error
}

// Error names the call, the status and the server's message.
func (e *ServerError) Error() string {
	return fmt.Sprintf("queen: remote %s: server answered %d: %s", e.Op, e.StatusCode, e.Message)
}

// Unwrap returns Err.
func (e *ServerError) Unwrap() error { return e.Err }

// Is reports whether target is [queen.ErrUnavailable], which a 5xx answer
// matches: the server failed or is going away, which says nothing about
// the request.
func (e *ServerError) Is(target error) bool {
	return target == queen.ErrUnavailable && e.StatusCode >= 500
}

// messageOf is the {"error": ...} text of an answer, or the start of its
// body.
func messageOf(body []byte) string {
	var eb struct {
		Error any `json:"error"`
	}
	if json.Unmarshal(body, &eb) == nil {
		if s, ok := eb.Error.(string); ok && s != "" {
			return s
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// errorFor maps an error answer to package queen's errors.
func (c *Client) errorFor(req *request, a *answer) error {
	msg := messageOf(a.body)
	switch a.status {
	case http.StatusBadRequest:
		return argumentOf(msg)
	case http.StatusNotFound:
		if msg == "not supported" {
			return fmt.Errorf("%w: %s", queen.ErrUnsupported, req.op)
		}
		if req.notFound != nil {
			return req.notFound(msg)
		}
		return notFound(msg)
	case http.StatusConflict:
		switch {
		case strings.Contains(strings.ToLower(msg), "lease"):
			return queen.ErrLeaseExpired
		case msg == "queue full":
			return queen.ErrQueueFull
		}
	case http.StatusRequestEntityTooLarge:
		return fmt.Errorf("%w: %s: %s", queen.ErrTooLarge, req.op, msg)
	case http.StatusServiceUnavailable:
		if msg == "broker unavailable" {
			return &ServerError{Op: req.op, StatusCode: a.status, Message: msg, Err: queen.ErrClosed}
		}
	}
	return &ServerError{Op: req.op, StatusCode: a.status, Message: msg}
}

// notFound is ErrNotFound with the server's words, or ErrGroupNotFound
// for a group the broker does not know.
func notFound(msg string) error {
	switch msg {
	case "", "not found":
		return queen.ErrNotFound
	case "Consumer group not found":
		return queen.ErrGroupNotFound
	}
	return fmt.Errorf("%w: %s", queen.ErrNotFound, msg)
}

// argumentOf turns a 400's message into the *queen.ArgumentError it
// reports: "invalid <field>: <reason>" from a broker's refusal, or
// "<field> <reason>" from the server's own checks.
func argumentOf(msg string) *queen.ArgumentError {
	if rest, ok := strings.CutPrefix(msg, "invalid "); ok {
		if f, r, ok := strings.Cut(rest, ": "); ok && isField(f) {
			return &queen.ArgumentError{Field: f, Reason: r}
		}
	}
	if f, r, ok := strings.Cut(msg, " "); ok && isField(f) && f[0] >= 'a' && f[0] <= 'z' {
		return &queen.ArgumentError{Field: f, Reason: r}
	}
	return &queen.ArgumentError{Field: "request", Reason: msg}
}

// isField reports whether s looks like a field path: Items[0].Queue.
func isField(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '[', r == ']', r == '_':
		default:
			return false
		}
	}
	return true
}

// ackError maps a refused ack item's text to the error the broker gives.
func ackError(text string) error {
	switch {
	case text == "":
		return &queen.ArgumentError{Field: "Status", Reason: "refused"}
	case text == "Consumer group not found":
		return queen.ErrGroupNotFound
	case text == "Lease belongs to another consumer group":
		return queen.ErrWrongGroup
	case text == "Message already settled":
		return queen.ErrAlreadySettled
	case text == "Message not found", strings.HasSuffix(text, "not found"):
		return queen.ErrNotFound
	case strings.Contains(strings.ToLower(text), "lease"):
		return queen.ErrLeaseExpired
	case strings.HasPrefix(text, "invalid status"):
		return &queen.ArgumentError{Field: "Status", Reason: text}
	}
	return &queen.ArgumentError{Field: "AckItem", Reason: text}
}

// pushError maps a refused push item's text.
func pushError(text string) error {
	switch text {
	case "queue full":
		return queen.ErrQueueFull
	case "", "internal error":
		return &ServerError{Op: "push", StatusCode: http.StatusOK, Message: "item failed: " + text}
	}
	return &queen.ArgumentError{Field: "PushItem", Reason: text}
}
