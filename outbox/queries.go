package outbox

import (
	"strconv"
	"strings"
)

// queries holds every SQL statement of one outbox table in one dialect:
// the only place that knows the tables' layout.
type queries struct {
	d                 Dialect
	table, held       string
	migrate           []string
	selectCols        string
	lockParts         string // Postgres: the partitions of the oldest rows this relay could lock
	oldest            string // SQLite: the oldest rows
	stats, heldCount  string
	heldPage, heldOne string
	requeue, delHeld  string
	hold              string
}

// rowColumns is the number of columns Enqueue writes per row.
const rowColumns = 9

const cols = "queue_name, partition_name, transaction_id, payload, trace_id, namespace, task, producer_sub, enqueued_at"

func newQueries(d Dialect, table string) queries {
	schema, base := "", table
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, base = table[:i+1], table[i+1:]
	}
	held := table + "_held"
	q := queries{d: d, table: table, held: held, selectCols: "id, " + cols}
	id, payload, index := "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "BYTEA", "CREATE INDEX IF NOT EXISTS "+base+"_pidx ON "+table
	if d == SQLite {
		// AUTOINCREMENT: an id is never used twice, so a held row keeps
		// its id as its key.
		id, payload, index = "INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB", "CREATE INDEX IF NOT EXISTS "+schema+base+"_pidx ON "+base
	}
	body := `
	queue_name     TEXT NOT NULL,
	partition_name TEXT NOT NULL,
	transaction_id TEXT NOT NULL,
	payload        ` + payload + ` NOT NULL,
	trace_id       TEXT NOT NULL DEFAULT '',
	namespace      TEXT NOT NULL DEFAULT '',
	task           TEXT NOT NULL DEFAULT '',
	producer_sub   TEXT NOT NULL DEFAULT '',
	enqueued_at    BIGINT NOT NULL`
	q.migrate = []string{
		"CREATE TABLE IF NOT EXISTS " + table + " (\n\tid " + id + "," + body + "\n)",
		index + " (queue_name, partition_name, id)",
		"CREATE TABLE IF NOT EXISTS " + held + " (\n\tid BIGINT PRIMARY KEY," + body + ",\n\theld_at        BIGINT NOT NULL,\n\terror          TEXT NOT NULL\n)",
	}
	// The partitions of the oldest rows, each locked for this
	// transaction unless another relay holds it. The lock is taken in the
	// outer query, on the distinct partitions only (PostgreSQL does not
	// push a volatile function into a subquery), and the rows are read by
	// a later statement, whose snapshot sees what the lock's last holder
	// committed. The key hashes the table and the length-prefixed names:
	// two partitions that collide only share a lock.
	q.lockParts = `SELECT queue_name, partition_name FROM (
	SELECT DISTINCT queue_name, partition_name FROM (SELECT queue_name, partition_name FROM ` + table + ` ORDER BY id LIMIT $1) s
) d WHERE pg_try_advisory_xact_lock(hashtextextended($2 || length(queue_name) || ':' || queue_name || partition_name, 0))`
	q.oldest = "SELECT " + q.selectCols + " FROM " + table + " ORDER BY id LIMIT ?"
	q.stats = "SELECT count(*), coalesce(min(enqueued_at), 0) FROM " + table
	q.heldCount = "SELECT count(*) FROM " + held
	q.heldPage = "SELECT id, " + cols + ", held_at, error FROM " + held + " WHERE id > " + q.ph(1) + " ORDER BY id LIMIT " + q.ph(2)
	q.heldOne = "SELECT count(*) FROM " + held + " WHERE id = " + q.ph(1)
	q.requeue = "INSERT INTO " + table + " (" + cols + ") SELECT " + strings.Replace(cols, "enqueued_at", q.ph(1), 1) + " FROM " + held + " WHERE id = " + q.ph(2)
	q.delHeld = "DELETE FROM " + held + " WHERE id = " + q.ph(1)
	q.hold = "INSERT INTO " + held + " (id, " + cols + ", held_at, error) SELECT id, " + cols + ", " + q.ph(1) + ", " + q.ph(2) + " FROM " + table + " WHERE id = " + q.ph(3)
	return q
}

// ph is the n-th placeholder (from 1).
func (q *queries) ph(n int) string {
	if q.d == Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// insert writes n rows.
func (q *queries) insert(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + q.table + " (" + cols + ") VALUES ")
	p := 1
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for j := range rowColumns {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(q.ph(p))
			p++
		}
		b.WriteByte(')')
	}
	return b.String()
}

// partRows reads the oldest rows, at most limit, of n partitions: its
// arguments are n (queue, partition) pairs, then limit.
func (q *queries) partRows(n int) string {
	var b strings.Builder
	b.WriteString("SELECT " + q.selectCols + " FROM " + q.table + " WHERE (queue_name, partition_name) IN (")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(" + q.ph(2*i+1) + "," + q.ph(2*i+2) + ")")
	}
	b.WriteString(") ORDER BY id LIMIT " + q.ph(2*n+1))
	return b.String()
}

// deleteIDs deletes n rows by id.
func (q *queries) deleteIDs(n int) string {
	var b strings.Builder
	b.WriteString("DELETE FROM " + q.table + " WHERE id IN (")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(q.ph(i + 1))
	}
	b.WriteByte(')')
	return b.String()
}
