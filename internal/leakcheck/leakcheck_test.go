package leakcheck_test

import (
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen/internal/leakcheck"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { leakcheck.Main(m, nil) }

// These tests do not run in parallel: a leak check sees every goroutine.

func TestFind_ReportsALeakedGoroutine(t *testing.T) {
	before := leakcheck.Snapshot()
	stop := make(chan struct{})
	go func() { <-stop }()
	err := leakcheck.Find(&leakcheck.Options{Grace: 50 * time.Millisecond}, before)
	require.Error(t, err)
	require.Contains(t, err.Error(), "TestFind_ReportsALeakedGoroutine")
	close(stop)
	require.NoError(t, leakcheck.Find(&leakcheck.Options{Grace: 2 * time.Second}, before))
}

func TestFind_WaitsForGoroutinesThatAreEnding(t *testing.T) {
	before := leakcheck.Snapshot()
	go func() { time.Sleep(20 * time.Millisecond) }()
	require.NoError(t, leakcheck.Find(&leakcheck.Options{Grace: 5 * time.Second}, before))
}

func TestFind_IgnoreFragment(t *testing.T) {
	before := leakcheck.Snapshot()
	stop, started := make(chan struct{}), make(chan struct{})
	defer close(stop)
	go parkedForTest(started, stop)
	<-started // its stack now shows parkedForTest, which Ignore matches
	require.NoError(t, leakcheck.Find(&leakcheck.Options{Grace: 20 * time.Millisecond, Ignore: []string{"leakcheck_test.parkedForTest"}}, before))
	err := leakcheck.Find(&leakcheck.Options{Grace: 20 * time.Millisecond}, before)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "parkedForTest"))
}

func parkedForTest(started, stop chan struct{}) {
	close(started)
	<-stop
}
