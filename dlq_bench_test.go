package queen_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
)

// benchLetterBytes is the payload size of BenchmarkDeadLetters_Page's
// letters.
var benchLetterBytes = flag.Int("bench.letterbytes", 1<<10, "payload bytes of each dead letter of BenchmarkDeadLetters_Page")

// BenchmarkDeadLetters_Page lists one page of 10 dead letters of a queue
// holding 100,000 (of -bench.letterbytes each), in a store on disk: what
// the console's dead-letter view asks every 5 s. A page costs the letters
// it returns plus a header read per letter, not every payload.
func BenchmarkDeadLetters_Page(b *testing.B) {
	const n = 100_000
	br := itest.OpenDir(b, b.TempDir(), &queen.Options{Durability: queen.SyncNever})
	payload := []byte(`"` + strings.Repeat("x", max(*benchLetterBytes-2, 0)) + `"`)
	fillLetters(b, br, "big", n, payload)
	b.Run("letters=100k", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			page, err := br.DeadLetters(bg, queen.LetterFilter{Queue: "big", Limit: 10})
			if err != nil || page.Total != n || len(page.Letters) != 10 {
				b.Fatalf("page of %d of %d: %v", len(page.Letters), page.Total, err)
			}
		}
	})
}
