// Package outbox is a transactional outbox for queen: it writes messages
// into the application's own PostgreSQL or SQLite database, in the
// application's transaction, and relays them into a [queen.Client] (an
// embedded [*queen.Broker] or package remote's client) once that
// transaction commits.
package outbox
