// Command monolith is a web application that keeps its orders in SQLite
// and uses queen as its local, durable queue: an HTTP handler saves an
// order and enqueues its order.created event in one SQLite transaction
// (package outbox), a relay moves committed events into the broker, and a
// background worker pops and acks them. An order is never announced
// without being saved, nor saved without being announced, whatever
// crashes when. Stop it (Ctrl-C) with orders still queued and start it
// again: they are still there, and the worker picks them up.
//
// It is a module of its own, for its SQLite driver (modernc.org/sqlite,
// pure Go):
//
//	cd examples/monolith && go run .
//	curl -X POST localhost:8080/orders -d '{"customer":"c-42","total":12}'
//	curl localhost:8080/stats
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/outbox"
	_ "modernc.org/sqlite"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "listen address")
	dir := flag.String("data", "./monolith-data", "data directory: the queue and the SQLite database")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	broker, err := queen.Open(filepath.Join(*dir, "queue"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer broker.Close()

	// The application's own database. WAL and a busy timeout let the relay
	// and the handlers share it; _txlock=immediate makes every transaction
	// take SQLite's write lock at BEGIN, so none fails on upgrading it.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(*dir, "app.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL, total REAL NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	events, err := outbox.New(db, broker, outbox.Options{Dialect: outbox.SQLite})
	if err != nil {
		log.Fatal(err)
	}
	if err := events.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	relayed := make(chan error, 1)
	go func() { relayed <- events.Relay(ctx) }() // until ctx ends
	defer func() {
		if err := <-relayed; err != nil {
			log.Print(err)
		}
	}()

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
		id, err := saveOrder(r.Context(), db, events, order.Customer, order.Total, body)
		if err != nil {
			log.Printf("save order: %v", err)
			http.Error(w, "order not saved", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "order %d saved, order.created on its way\n", id)
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
		if s, err := events.Stats(r.Context()); err == nil {
			fmt.Fprintf(w, "outbox: %d waiting, %d held\n", s.Waiting, s.Held)
		}
	})

	go work(ctx, broker)

	srv := &http.Server{Addr: *addr, Handler: mux}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	log.Printf("listening on %s, data in %s", *addr, *dir)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// saveOrder inserts the order and enqueues its event in one transaction:
// both are committed, or neither. One partition per customer keeps each
// customer's events in order.
func saveOrder(ctx context.Context, db *sql.DB, events *outbox.Outbox, customer string, total float64, body []byte) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO orders (customer, total) VALUES (?, ?)`, customer, total)
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	event := queen.PushItem{Queue: "orders", Partition: customer, Payload: body, TransactionID: fmt.Sprintf("order-%d", id)}
	if err := events.Enqueue(ctx, tx, event); err != nil {
		return 0, err
	}
	return id, tx.Commit()
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
