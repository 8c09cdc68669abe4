package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/outbox"
)

// Example saves an order in SQLite and enqueues its event in the same
// transaction; a relay pushes the committed event into the broker, where
// a consumer pops it.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	broker, err := queen.Open("", &queen.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer broker.Close()
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT)`); err != nil {
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
	go func() { relayed <- events.Relay(ctx) }()

	// The order and its event: both committed, or neither.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO orders (id, customer) VALUES (9137, 'c-42')`); err != nil {
		log.Fatal(err)
	}
	err = events.Enqueue(ctx, tx, queen.PushItem{Queue: "orders", Partition: "c-42", TransactionID: "order-9137", Payload: []byte(`{"order":9137}`)})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	res, err := broker.Pop(ctx, queen.PopRequest{Queue: "orders", Group: "billing", SubscriptionMode: queen.SubscriptionModeAll, Wait: true})
	if err != nil {
		log.Fatal(err)
	}
	m := res.Messages[0]
	fmt.Println(m.TransactionID, string(m.Payload))
	cancel()
	if err := <-relayed; err != nil {
		log.Fatal(err)
	}
	// Output: order-9137 {"order":9137}
}
