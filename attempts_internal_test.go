package queen

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAttempts_CountsEveryDelivery(t *testing.T) {
	t.Parallel()
	a := &attempts{}
	counts := func(from, to int64) []int32 {
		var out []int32
		for o := from; o < to; o++ {
			out = append(out, a.get(o))
		}
		return out
	}
	a.deliver(0, 3) // 0 1 2 once
	require.Equal(t, []int32{1, 1, 1, 0}, counts(0, 4))
	a.deliver(1, 2) // cursor at 1, smaller batch
	require.Equal(t, []int32{2, 1}, counts(1, 3))
	a.deliver(1, 5) // bigger batch reaching new offsets
	require.Equal(t, []int32{3, 2, 1, 1}, counts(1, 5))
	a.deliver(4, 6) // the cursor passed 1..3
	require.Equal(t, []int32{2, 1}, counts(4, 6))
	a.deliver(10, 11) // everything before was settled
	require.Equal(t, []int32{1}, counts(10, 11))
	require.Equal(t, int32(0), a.get(11))
	a.deliver(8, 12) // a seek back before the known runs
	require.Equal(t, []int32{1, 1, 2, 1}, counts(8, 12))
}
