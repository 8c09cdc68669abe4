package queen_test

import (
	"bytes"
	"path/filepath"

	"fmt"
	"github.com/queenlite/queen"
	"io"
	"testing"

	itest "github.com/queenlite/queen/internal/queentest"
)

// BenchmarkBackup writes full backups of a store of 20,000 messages of
// 256-byte payloads in 20 partitions; b.SetBytes makes it report MB/s of
// payload.
func BenchmarkBackup(b *testing.B) {
	br := openStore(b, b.TempDir(), itest.NewClock())
	const parts, per, size = 20, 1000, 256
	pushPadded(b, br, "q", parts, per, size)
	b.SetBytes(parts * per * size)
	b.ResetTimer()
	for range b.N {
		if _, err := br.Backup(bg, io.Discard, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreReport asks for the store report of one queue of many
// partitions: it is O(queues), so the time does not grow with them.
func BenchmarkStoreReport(b *testing.B) {
	for _, parts := range []int{100, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			br := openStore(b, b.TempDir(), itest.NewClock())
			pushPadded(b, br, "q", parts, 1, 8)
			b.ResetTimer()
			for range b.N {
				if _, err := br.StoreReport(bg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRestore restores the full backup of BenchmarkBackup's store
// into a new directory each time.
func BenchmarkRestore(b *testing.B) {
	br := openStore(b, b.TempDir(), itest.NewClock())
	const parts, per, size = 20, 1000, 256
	pushPadded(b, br, "q", parts, per, size)
	var full bytes.Buffer
	if _, err := br.Backup(bg, &full, 0); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(parts * per * size)
	b.ResetTimer()
	for i := range b.N {
		dir := filepath.Join(b.TempDir(), fmt.Sprint(i))
		if err := queen.Restore(bg, dir, nil, bytes.NewReader(full.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
}
