package outbox_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/outbox"
)

// saveOrder inserts an order and enqueues its event in one transaction:
// both are committed, or neither. (A runnable version on SQLite is
// Example in module outbox/dbtest.)
func saveOrder(ctx context.Context, db *sql.DB, events *outbox.Outbox, id, customer string, body []byte) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, customer) VALUES ($1, $2)`, id, customer); err != nil {
		return err
	}
	// Refused here, with Push's error, if the broker would refuse it.
	err = events.Enqueue(ctx, tx, queen.PushItem{Queue: "orders", Partition: customer, TransactionID: "order-" + id, Payload: body})
	if err != nil {
		return err
	}
	return tx.Commit()
}

// The application opens its database with its own driver (here
// PostgreSQL through pgx's stdlib adapter), creates the outbox's tables,
// runs a relay, and enqueues in its transactions.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@localhost/app") // import _ "github.com/jackc/pgx/v5/stdlib"
	if err != nil {
		log.Fatal(err)
	}
	broker, err := queen.Open("./queue-data", nil)
	if err != nil {
		log.Fatal(err)
	}
	events, err := outbox.New(db, broker, outbox.Options{Dialect: outbox.Postgres})
	if err != nil {
		log.Fatal(err)
	}
	if err := events.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	go events.Relay(ctx) // in each instance; several are safe
	if err := saveOrder(ctx, db, events, "9137", "c-42", []byte(`{"total":12}`)); err != nil {
		log.Fatal(err)
	}
}
