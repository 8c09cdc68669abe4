package remote_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/contract"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// The tests named RealQueen run against Queen MQ's own server, started
// outside the test (../shared/realqueen/start.sh prints the variables):
// QUEEN_REAL_URL (or the first of QUEEN_REAL_URLS) is its base URL, and
// QUEEN_REAL_STATE the state directory that reset.sh (beside start.sh, or
// QUEEN_REAL_RESET) empties its tables with between cases. Unset, they
// skip.

// realQueen returns the server's URL and a function that empties it, or
// skips t.
func realQueen(t testing.TB) (string, func(testing.TB)) {
	url := os.Getenv("QUEEN_REAL_URL")
	if url == "" {
		url, _, _ = strings.Cut(os.Getenv("QUEEN_REAL_URLS"), ",")
	}
	if url == "" {
		t.Skip("QUEEN_REAL_URL is not set: these tests run against Queen's own server (start it with ../shared/realqueen/start.sh)")
	}
	reset := os.Getenv("QUEEN_REAL_RESET")
	if reset == "" {
		reset = filepath.Join("..", "..", "shared", "realqueen", "reset.sh")
	}
	if os.Getenv("QUEEN_REAL_STATE") == "" {
		t.Fatal("QUEEN_REAL_URL is set but QUEEN_REAL_STATE is not: the tests cannot empty the server between cases")
	}
	return url, func(t testing.TB) {
		t.Helper()
		out, err := exec.Command("bash", reset).CombinedOutput()
		require.NoError(t, err, "%s: %s", reset, out)
	}
}

// queenLacks is what Queen's server lacks, as docs/remote.md lists it.
var queenLacks = map[contract.Feature]string{
	contract.Offsets:       "Queen's server sends no offsets nor delivery attempts",
	contract.FetchByOffset: "Queen's server has no read by offset",
	contract.ParkedStore:   "Queen's server has no parked store",
	contract.LetterAdmin:   "Queen's server cannot replay or delete a dead letter, and names none by id",
	contract.Conflation:    "Queen's server ignores conflation",
	contract.ShortPopLease: "Queen's server leases for the queue's LeaseTime and never shortens a lease",
	contract.RetryDelay:    "Queen's server redelivers a failed message at once",
	contract.FullConfig:    "Queen's status route sends back only part of a queue's configuration",
	contract.GroupDetails:  "Queen's group listing has no mode, join time nor lag",
	contract.AckReasons:    "Queen's server tells only an unknown message and a lost lease apart",
	contract.UnknownNames:  "Queen's server answers a seek, delete or subscription of an unknown queue or group as a success moving nothing",
	contract.MaxSize:       "Queen's server stores MaxSize but never enforces it",
	contract.KeyCheck:      "Queen's server accepts encryptionEnabled without a key",
}

// TestRealQueen_Contract runs the contract suite through package remote
// against Queen's server, emptied before each case.
func TestRealQueen_Contract(t *testing.T) {
	url, reset := realQueen(t)
	contract.Run(t, []contract.Backend{{
		Name:   "queen",
		Server: "Queen's server",
		Lacks:  queenLacks,
		New: func(t *testing.T, _ queen.Clock) queen.Client {
			reset(t)
			c, err := remote.Dial(url, nil) // the dialect is learned from /health
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, c.Ping(ctx))
			return c
		},
	}})
}
