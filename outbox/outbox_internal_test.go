package outbox

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNewTxID_IsAUUIDv7(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	before := time.Now().UnixMilli()
	for range 1000 {
		id := newTxID()
		if !re.MatchString(id) {
			t.Fatalf("%q is not a UUIDv7", id)
		}
		if seen[id] {
			t.Fatalf("%q twice", id)
		}
		seen[id] = true
	}
	var ms int64
	for _, c := range strings.ReplaceAll(newTxID()[:13], "-", "") {
		ms = ms<<4 | int64(strings.IndexRune("0123456789abcdef", c))
	}
	if ms < before || ms > time.Now().UnixMilli() {
		t.Fatalf("timestamp %d outside [%d, now]", ms, before)
	}
}

func TestQueries_Placeholders(t *testing.T) {
	pg, lite := newQueries(Postgres, "app.queen_outbox"), newQueries(SQLite, "main.queen_outbox")
	for _, tc := range []struct{ got, want string }{
		{pg.insert(2), "INSERT INTO app.queen_outbox (" + cols + ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9),($10,$11,$12,$13,$14,$15,$16,$17,$18)"},
		{lite.insert(1), "INSERT INTO main.queen_outbox (" + cols + ") VALUES (?,?,?,?,?,?,?,?,?)"},
		{pg.deleteIDs(3), "DELETE FROM app.queen_outbox WHERE id IN ($1,$2,$3)"},
		{pg.partRows(2), "SELECT id, " + cols + " FROM app.queen_outbox WHERE (queue_name, partition_name) IN (($1,$2),($3,$4)) ORDER BY id LIMIT $5"},
		{pg.migrate[1], "CREATE INDEX IF NOT EXISTS queen_outbox_pidx ON app.queen_outbox (queue_name, partition_name, id)"},
		{lite.migrate[1], "CREATE INDEX IF NOT EXISTS main.queen_outbox_pidx ON queen_outbox (queue_name, partition_name, id)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %s\nwant %s", tc.got, tc.want)
		}
	}
}
