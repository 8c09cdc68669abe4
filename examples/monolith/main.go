// Command monolith is a web application that uses queen as its local,
// durable queue: an HTTP handler pushes an order, a background worker pops
// and acks it. Stop it (Ctrl-C) with orders still queued and start it again:
// they are still there, and the worker picks them up.
//
//	go run ./examples/monolith
//	curl -X POST localhost:8080/orders -d '{"customer":"c-42","total":12}'
//	curl localhost:8080/stats
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/queenlite/queen"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "listen address")
	dir := flag.String("data", "./monolith-data", "queue directory")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	broker, err := queen.Open(*dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer broker.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		var order struct {
			Customer string  `json:"customer"`
			Total    float64 `json:"total"`
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil || json.Unmarshal(body, &order) != nil || order.Customer == "" {
			http.Error(w, "want {\"customer\":\"...\",\"total\":n}", http.StatusBadRequest)
			return
		}
		// One partition per customer keeps each customer's orders in order.
		res, err := broker.Push(r.Context(), []queen.PushItem{{Queue: "orders", Partition: order.Customer, Payload: body}})
		if err != nil {
			http.Error(w, "queue unavailable", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "queued %s at offset %d\n", res[0].TransactionID, res[0].Offset)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := broker.QueueStats(r.Context(), "orders")
		if errors.Is(err, queen.ErrNotFound) {
			fmt.Fprintln(w, "no orders yet")
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "messages %d, pending %d, in flight %d, dead letters %d\n", st.Messages, st.Pending, st.InFlight, st.DeadLetters)
	})

	go work(ctx, broker)

	srv := &http.Server{Addr: *addr, Handler: mux}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	log.Printf("listening on %s, queue in %s", *addr, *dir)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// work is the background worker: it waits for orders, handles them and
// acks. An order it fails on comes back after the queue's retry delay.
func work(ctx context.Context, broker *queen.Broker) {
	for ctx.Err() == nil {
		res, err := broker.Pop(ctx, queen.PopRequest{Queue: "orders", Group: "fulfilment", SubscriptionMode: queen.SubscriptionModeAll, Batch: 10, Wait: true})
		if err != nil {
			if ctx.Err() == nil {
				log.Printf("pop: %v", err)
				time.Sleep(time.Second)
			}
			continue
		}
		for _, m := range res.Messages {
			err := fulfil(m)
			if err != nil {
				log.Printf("order %s failed: %v", m.TransactionID, err)
			}
			if _, err := broker.Ack(context.WithoutCancel(ctx), m, err == nil, queen.AckOptions{Error: errText(err)}); err != nil {
				log.Printf("ack: %v", err)
			}
		}
	}
}

func fulfil(m *queen.Message) error {
	data, err := m.Decode()
	if err != nil {
		return err
	}
	log.Printf("fulfilling order of %v (offset %d in %s, attempt %d)", data["customer"], m.Offset, m.Partition, m.DeliveryAttempt)
	return nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
