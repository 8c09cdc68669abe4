package main

import (
	"log/slog"
	"net/http"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/console"
	"github.com/queenlite/queen/httpapi/history"
)

// consolePath is where the server mounts the operator console.
const consolePath = "/console"

// withConsole serves the operator console of b at /console/, checked by
// auth (nil for none) as the API is, with the charts of rec (nil for
// none), and api everywhere else.
func withConsole(api http.Handler, b *queen.Broker, auth *authorizer, rec *history.Recorder, logger *slog.Logger) http.Handler {
	opts := &console.Options{Prefix: consolePath, Logger: logger, History: rec}
	if auth != nil {
		opts.Authorize = auth.authorize
	}
	mux := http.NewServeMux()
	ch := console.New(b, opts)
	mux.Handle(consolePath+"/", ch)
	mux.Handle(consolePath, ch) // redirects to /console/
	mux.Handle("/", api)
	return mux
}
