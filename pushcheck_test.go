package queen_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestCheckPush_RefusesWhatPushRefuses holds CheckPush to Push: for each
// item, both accept it, or both refuse it with the same sentinel and,
// for an argument, the same field.
func TestCheckPush_RefusesWhatPushRefuses(t *testing.T) {
	b := queentest.NewBroker(t, nil)
	limit := b.PayloadLimit()
	long := strings.Repeat("x", queen.MaxNameLen+1)
	cases := []struct {
		name string
		item queen.PushItem
		want error // nil: accepted
	}{
		{"a plain item", queen.PushItem{Queue: "q", Payload: []byte(`{"a":1}`)}, nil},
		{"defaults: partition, transaction id, null payload", queen.PushItem{Queue: "q"}, nil},
		{"no queue", queen.PushItem{Payload: []byte(`1`)}, queen.ErrInvalidArgument},
		{"a queue name too long", queen.PushItem{Queue: long}, queen.ErrInvalidArgument},
		{"a partition with a NUL", queen.PushItem{Queue: "q", Partition: "a\x00b"}, queen.ErrInvalidArgument},
		{"a transaction id not UTF-8", queen.PushItem{Queue: "q", TransactionID: "\xff"}, queen.ErrInvalidArgument},
		{"a trace id too long", queen.PushItem{Queue: "q", TraceID: long}, queen.ErrInvalidArgument},
		{"a payload not JSON", queen.PushItem{Queue: "q", Payload: []byte(`{`)}, queen.ErrInvalidArgument},
		{"a payload over the limit", queen.PushItem{Queue: "q", Payload: []byte(`"` + strings.Repeat("y", limit) + `"`)}, queen.ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items := []queen.PushItem{{Queue: "ok"}, tc.item}
			checkErr := queen.CheckPush(items, limit)
			_, pushErr := b.Push(context.Background(), items)
			if tc.want == nil {
				require.NoError(t, checkErr)
				require.NoError(t, pushErr)
				return
			}
			require.ErrorIs(t, checkErr, tc.want)
			require.ErrorIs(t, pushErr, tc.want)
			var ca, pa *queen.ArgumentError
			if errors.As(pushErr, &pa) {
				require.ErrorAs(t, checkErr, &ca)
				require.Equal(t, pa.Field, ca.Field)
			}
		})
	}
	t.Run("more items than MaxPushItems", func(t *testing.T) {
		items := make([]queen.PushItem, queen.MaxPushItems+1)
		require.ErrorIs(t, queen.CheckPush(items, 0), queen.ErrTooLarge)
	})
	t.Run("zero limit means MaxPayload", func(t *testing.T) {
		require.NoError(t, queen.CheckPush([]queen.PushItem{{Queue: "q", Payload: []byte(`"` + strings.Repeat("y", limit) + `"`)}}, 0))
	})
	t.Run("items are left as they were", func(t *testing.T) {
		items := []queen.PushItem{{Queue: "q"}}
		require.NoError(t, queen.CheckPush(items, 0))
		require.Equal(t, []queen.PushItem{{Queue: "q"}}, items)
	})
}
