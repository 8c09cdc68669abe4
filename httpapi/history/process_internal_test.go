package history

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRSS(t *testing.T) {
	t.Parallel()
	require.EqualValues(t, 1234<<10, parseRSS([]byte("Name:\tqueen\nVmPeak:\t 9999 kB\nVmRSS:\t    1234 kB\nThreads: 9\n")))
	require.Zero(t, parseRSS([]byte("Name:\tqueen\n")), "no VmRSS line")
	require.Zero(t, parseRSS([]byte("VmRSS:\t12 MB\n")), "an unknown unit")
	require.Zero(t, parseRSS([]byte("VmRSS:\tlots kB\n")))
	require.Zero(t, readRSS("/nonexistent/status"))
}
