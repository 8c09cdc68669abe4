package remote_test

import (
	"testing"

	"github.com/queenlite/queen/internal/leakcheck"
)

// TestMain fails the package if a test left a goroutine running: a
// client's Close must end its consume loops and requests.
func TestMain(m *testing.M) { leakcheck.Main(m, nil) }
