package modeltest_test

import (
	"testing"

	"github.com/queenlite/queen/internal/leakcheck"
)

// TestMain fails the package if a goroutine a model run started (a
// broker's writer, timer or maintenance goroutine, a waiting pop) is still
// running after every test ended.
func TestMain(m *testing.M) { leakcheck.Main(m, nil) }
