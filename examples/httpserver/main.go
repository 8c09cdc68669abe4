// Command httpserver shows an existing Go web program that mounts the
// broker's HTTP API under /queen/ next to its own routes, so Queen's
// official clients can talk to it at http://localhost:8080/queen.
//
//	go run ./examples/httpserver
//	curl -X POST localhost:8080/queen/api/v1/push -d '{"items":[{"queue":"orders","payload":{"id":1}}]}'
//	curl 'localhost:8080/queen/api/v1/pop/queue/orders?wait=true&timeout=5000'
//	curl localhost:8080/orders/count
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "listen address")
	dir := flag.String("data", "", "data directory (default: in memory)")
	flag.Parse()

	opts := &queen.Options{InMemory: *dir == ""}
	b, err := queen.Open(*dir, opts)
	if err != nil {
		log.Fatal(err)
	}

	// The program's own routes.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "my app; the broker API is under /queen/")
	})
	mux.HandleFunc("GET /orders/count", func(w http.ResponseWriter, r *http.Request) {
		st, err := b.QueueStats(r.Context(), "orders")
		if errors.Is(err, queen.ErrNotFound) {
			fmt.Fprintln(w, 0)
			return
		}
		if err != nil {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, st.Messages)
	})

	// The broker's API, under a prefix. Closing stop at shutdown ends
	// waiting long-polls at once instead of letting them run to their timeout.
	stop := make(chan struct{})
	mux.Handle("/queen/", http.StripPrefix("/queen", httpapi.New(b, &httpapi.Options{Shutdown: stop})))

	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(func() { close(stop) })

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	go func() {
		<-ctx.Done()
		sctx, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("listening on http://%s", *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Print(err)
	}
	if err := b.Close(); err != nil {
		log.Fatal(err)
	}
}
