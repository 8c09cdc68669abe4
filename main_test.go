package queen_test

import (
	"testing"

	"github.com/queenlite/queen/internal/leakcheck"
)

// TestMain fails the package if any goroutine a test started (a broker's
// writer, timer or maintenance goroutine, a waiting pop, a consumer) is
// still running after every test ended: Close must stop everything.
func TestMain(m *testing.M) { leakcheck.Main(m, nil) }
