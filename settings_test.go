package queen_test

import (
	"testing"

	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/stretchr/testify/require"
)

// TestMaintenanceMode_SurvivesARestart: the switch is stored.
func TestMaintenanceMode_SurvivesARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := itest.NewClock()
	b := openStore(t, dir, clock)
	require.NoError(t, b.SetMaintenanceMode(bg, true))
	require.NoError(t, b.Close())
	b = openStore(t, dir, clock)
	require.True(t, b.MaintenanceMode())
	require.NoError(t, b.SetMaintenanceMode(bg, false))
	require.NoError(t, b.Close())
	b = openStore(t, dir, clock)
	require.False(t, b.MaintenanceMode())
}
