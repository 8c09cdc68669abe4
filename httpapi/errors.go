package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/verbatim"
)

// errorBody is every error reply: {"error": "..."}.
type errorBody struct {
	Error string `json:"error"`
}

// apiError is a refusal the handler decided itself, with its status.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// badRequest is a 400 with a precise message.
func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// tooLarge is a 413 naming the cap the request is over.
func tooLarge(format string, args ...any) error {
	return &apiError{http.StatusRequestEntityTooLarge, "request too large: " + fmt.Sprintf(format, args...)}
}

// notFound is a 404.
func notFoundErr(msg string) error { return &apiError{http.StatusNotFound, msg} }

// writeError maps err to a status and an {"error"} body. It is the only
// place that does: client mistakes are 4xx with their reason, broker
// states 404/409/413/503, and anything unknown 500 with a generic message
// while the detail goes to the log.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var arg *queen.ArgumentError
	status, msg := http.StatusInternalServerError, "internal error"
	switch {
	case errors.As(err, &ae):
		status, msg = ae.status, ae.msg
	case errors.As(err, &arg):
		status, msg = http.StatusBadRequest, strings.TrimPrefix(arg.Error(), "queen: ")
	case errors.Is(err, queen.ErrInvalidArgument):
		status, msg = http.StatusBadRequest, strings.TrimPrefix(err.Error(), "queen: ")
	case errors.Is(err, queen.ErrNotFound):
		status, msg = http.StatusNotFound, "not found"
	case errors.Is(err, queen.ErrUnsupported):
		status, msg = http.StatusNotFound, "not supported"
	case errors.Is(err, queen.ErrLeaseExpired):
		status, msg = http.StatusConflict, "Invalid or expired lease"
	case errors.Is(err, queen.ErrQueueFull):
		status, msg = http.StatusConflict, "queue full"
	case errors.Is(err, queen.ErrTooLarge):
		status, msg = http.StatusRequestEntityTooLarge, "request too large"
	case errors.Is(err, queen.ErrClosed):
		status, msg = http.StatusServiceUnavailable, "broker unavailable"
		if err != queen.ErrClosed { // a storage failure closed it
			h.log.Error("httpapi: broker unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		status, msg = http.StatusServiceUnavailable, "request cancelled"
	default:
		h.log.Error("httpapi: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, errorBody{msg})
}

// writeJSON writes v as the JSON body of a reply with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := verbatim.Marshal(v) // payloads byte for byte
	if err != nil {                  // only our own types are written: a bug
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// noContent writes a 204 with no body.
func noContent(w http.ResponseWriter) {
	w.WriteHeader(http.StatusNoContent)
}

// Per-item error texts of a refused ack (and, after "ACK operation
// failed: ", of the transaction it aborted). The first two are Queen's;
// the others are ours, for refusals Queen does not tell apart.
const (
	ackTextNotFound       = "Message not found"
	ackTextLeaseExpired   = "Invalid or expired lease"
	ackTextGroupNotFound  = "Consumer group not found"
	ackTextWrongGroup     = "Lease belongs to another consumer group"
	ackTextAlreadySettled = "Message already settled"
)

// ackErrorText is the text of a refused ack item: Queen's where Queen has
// one.
func ackErrorText(err error) string {
	var arg *queen.ArgumentError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, queen.ErrGroupNotFound):
		return ackTextGroupNotFound
	case errors.Is(err, queen.ErrNotFound):
		return ackTextNotFound
	case errors.Is(err, queen.ErrWrongGroup):
		return ackTextWrongGroup
	case errors.Is(err, queen.ErrAlreadySettled):
		return ackTextAlreadySettled
	case errors.Is(err, queen.ErrLeaseExpired):
		return ackTextLeaseExpired
	case errors.As(err, &arg):
		return arg.Reason
	}
	return "internal error"
}

// pushErrorText is the reason a transaction's push was refused.
func pushErrorText(err error) string {
	var arg *queen.ArgumentError
	switch {
	case errors.Is(err, queen.ErrQueueFull):
		return "queue full"
	case errors.As(err, &arg):
		return arg.Reason
	}
	return "internal error"
}
