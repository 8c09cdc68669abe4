package queen

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A transaction whose writes do not fit in one storage transaction is
// ErrTooLarge and writes nothing: too many operations even if their bytes
// would fit, or too many bytes even if the operations would.
func TestTxn_TooLargeForOneStorageTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open("", &Options{InMemory: true})
	require.NoError(t, err)
	defer b.Close()
	tiny := func(i int) TxOp {
		return TxOp{Push: &PushItem{Queue: "many", TransactionID: "t" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), Payload: []byte(`1`)}}
	}
	estimate := func(ops []TxOp) (size, count int) {
		return (&writeReq{push: &pushReq{items: pushItemsOf(ops)}}).estimate(b.lim.valueThreshold)
	}
	n := (b.lim.maxOps-4)/2 + 1 // one push more than the operations allow
	var ops []TxOp
	for i := range n {
		ops = append(ops, tiny(i))
	}
	size, count := estimate(ops)
	require.Greater(t, count, b.lim.maxOps)
	require.LessOrEqual(t, size, b.lim.maxBytes, "only the operations are too many")
	_, err = b.ExecTransaction(ctx, ops)
	require.ErrorIs(t, err, ErrTooLarge)

	big := make([]byte, b.maxPayload)
	big[0], big[len(big)-1] = '"', '"'
	for i := 1; i < len(big)-1; i++ {
		big[i] = 'x'
	}
	ops, size = nil, 0
	for size <= b.lim.maxBytes {
		ops = append(ops, TxOp{Push: &PushItem{Queue: "fat", Payload: big}})
		size, count = estimate(ops)
	}
	require.LessOrEqual(t, count, b.lim.maxOps, "only the bytes are too many")
	require.Greater(t, size, b.lim.maxBytes)
	_, err = b.ExecTransaction(ctx, ops)
	require.ErrorIs(t, err, ErrTooLarge)

	for _, q := range []string{"many", "fat"} {
		_, err := b.DescribeQueue(ctx, q)
		require.ErrorIs(t, err, ErrNotFound, "%s: nothing written", q)
	}
}

// pushItemsOf lists the pushes of ops.
func pushItemsOf(ops []TxOp) []PushItem {
	var out []PushItem
	for _, o := range ops {
		if o.Push != nil {
			out = append(out, *o.Push)
		}
	}
	return out
}
