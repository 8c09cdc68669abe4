package queen_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestBackup_CancelledBetweenChunks: a store larger than one chunk (1 MiB)
// backed up under a cancelled ctx stops with ctx's error, and what it
// wrote is not a backup Restore accepts.
func TestBackup_CancelledBetweenChunks(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	payload := []byte(`"` + strings.Repeat("x", 64<<10) + `"`)
	for range 40 { // about 2.5 MiB
		_, err := b.Push(context.Background(), []queen.PushItem{{Queue: "big", Payload: payload}})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var w bytes.Buffer
	_, err := b.Backup(ctx, &w, 0)
	require.ErrorIs(t, err, context.Canceled)
	err = queen.Restore(context.Background(), t.TempDir()+"/store", nil, bytes.NewReader(w.Bytes()))
	require.ErrorIs(t, err, queen.ErrCorruptBackup, "no end record")
}
