package console

import (
	"errors"
	"net/http"

	"github.com/queenlite/queen"
)

// statusOf maps a client error to the page's status and text: the
// caller's mistakes keep their text, storage failures say only
// "internal error".
func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, queen.ErrGroupNotFound):
		return http.StatusNotFound, "consumer group not found"
	case errors.Is(err, queen.ErrNotFound):
		return http.StatusNotFound, "not found"
	case errors.Is(err, queen.ErrInvalidArgument):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, queen.ErrUnsupported):
		return http.StatusNotImplemented, "not supported by this client"
	case errors.Is(err, queen.ErrClosed), errors.Is(err, queen.ErrUnavailable):
		return http.StatusServiceUnavailable, "broker unavailable"
	}
	return http.StatusInternalServerError, "internal error"
}
