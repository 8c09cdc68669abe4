package queen

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// A broker holds a partition per partition of every queue and a cursor per
// partition a group read: a million of each is a normal load, so their
// sizes are held to their Go size classes.
func TestSizes_PartitionAndCursor(t *testing.T) {
	t.Parallel()
	require.LessOrEqual(t, unsafe.Sizeof(partition{}), uintptr(80))
	require.LessOrEqual(t, unsafe.Sizeof(cursor{}), uintptr(96))
}
