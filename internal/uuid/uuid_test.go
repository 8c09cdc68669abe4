package uuid

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewV7_IsOrderedAndWellFormed(t *testing.T) {
	t.Parallel()
	now := time.Now()
	prev := NewV7At(now).String()
	for i := 0; i < 10000; i++ {
		u := NewV7At(now)
		s := u.String()
		require.Greater(t, s, prev, "ids must increase within one millisecond")
		require.Equal(t, byte(0x70), u[6]&0xf0, "version 7")
		require.Equal(t, byte(0x80), u[8]&0xc0, "variant 10")
		p, ok := Parse(s)
		require.True(t, ok)
		require.Equal(t, u, p)
		prev = s
	}
}

func TestParse_Rejects(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "x", "0190aaaa-bbbb-7ccc-8ddd-eeeeffff000", "0190aaaa-bbbb-7ccc-8ddd-eeeeffff000g", "0190aaaab-bbb-7ccc-8ddd-eeeeffff0000"} {
		require.False(t, Valid(s), s)
	}
	require.True(t, Valid(NewV4().String()))
	require.True(t, Valid("0190AAAA-BBBB-7CCC-8DDD-EEEEFFFF0000"))
}
