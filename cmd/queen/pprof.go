//go:build pprof

package main

// Built with -tags pprof (never by default), the server serves
// net/http/pprof on QUEEN_PPROF (e.g. 127.0.0.1:6060), a listener of its
// own; bench/cmd/compare -profile uses it to profile cmd/queen.

import (
	"net/http"
	_ "net/http/pprof" // registers on http.DefaultServeMux
	"os"
)

func init() {
	if addr := os.Getenv("QUEEN_PPROF"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
