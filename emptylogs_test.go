package queen_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// TestOpen_EmptyLogFileLeftByAKill: a process killed between creating a
// memtable or value-log file and writing its first bytes leaves it empty,
// and Badger then refuses to open the directory (its own open treats the
// empty file as an error). Open removes such a file, which holds nothing,
// says so, and opens the store with every message it held.
func TestOpen_EmptyLogFileLeftByAKill(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		file func(dir string) string // the empty file a kill left
	}{
		{"memtable", func(dir string) string { return filepath.Join(dir, fmt.Sprintf("%05d.mem", nextFid(t, dir, ".mem"))) }},
		{"value log", func(dir string) string { return filepath.Join(dir, fmt.Sprintf("%06d.vlog", nextFid(t, dir, ".vlog"))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			b, err := queen.Open(dir, nil)
			require.NoError(t, err)
			pushN(t, b, "q", "", 3)
			require.NoError(t, b.Close())

			empty := tc.file(dir)
			require.NoError(t, os.WriteFile(empty, nil, 0o644))

			logs := &itest.LogBuffer{}
			b = itest.OpenDir(t, dir, &queen.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			got := pop(t, b, queen.PopRequest{Queue: "q", Batch: 10})
			require.Len(t, got.Messages, 3, "every message the store held")
			require.Contains(t, logs.String(), "removed an empty log file a killed process left")
			require.Contains(t, logs.String(), filepath.Base(empty), "the log names the file")
		})
	}
}

// nextFid is one more than the highest file id of the files with suffix
// in dir (Badger numbers its memtable and value-log files).
func nextFid(t *testing.T, dir, suffix string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var ids []int
	for _, e := range entries {
		var id int
		if name, ok := strings.CutSuffix(e.Name(), suffix); ok {
			_, err := fmt.Sscanf(name, "%d", &id)
			require.NoError(t, err)
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	if len(ids) == 0 {
		return 1
	}
	return ids[len(ids)-1] + 1
}
