package queen_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestLimits_MaxPayload pins the payload limits docs/limits.md
// ("Payload size") states: Broker.MaxPayload per memory budget in memory
// and on disk, and, in memory, that a payload of exactly that many bytes
// is stored and one byte more is ErrTooLarge. If a figure changes, change
// the table in docs/limits.md with it.
func TestLimits_MaxPayload(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget int64
		want   int
	}{
		{"default budget", 0, 91_750},
		{"16 MiB", 16 << 20, 249_036},
		{"32 MiB", 32 << 20, 563_609},
		{"64 MiB", 64 << 20, queen.MaxInMemoryPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := queentest.NewBroker(t, &queen.Options{MemoryBudget: tc.budget})
			require.Equal(t, tc.want, b.MaxPayload())
			atLimit := json.RawMessage(`"` + strings.Repeat("x", tc.want-2) + `"`)
			_, err := b.Push(bg, []queen.PushItem{{Queue: "q", Payload: atLimit}})
			require.NoError(t, err)
			_, err = b.Push(bg, []queen.PushItem{{Queue: "q", Payload: append(atLimit, ' ')}})
			require.ErrorIs(t, err, queen.ErrTooLarge)
		})
	}
	require.Equal(t, 983_040, queen.MaxInMemoryPayload)
	require.Equal(t, 67_043_328, queen.MaxPayload)
	t.Run("on disk", func(t *testing.T) {
		t.Parallel()
		b := itest.OpenDir(t, t.TempDir(), nil)
		require.Equal(t, queen.MaxPayload, b.MaxPayload())
	})
}
