package modeltest_test

import (
	"context"

	itest "github.com/queenlite/queen/internal/queentest"
)

var bg = context.Background()

// The calls most tests make, failing the test on an error (see
// internal/queentest).
var (
	pushN      = itest.PushN
	pop        = itest.Pop
	ackItems   = itest.AckItems
	ack        = itest.Ack
	offsets    = itest.Offsets
	attemptsOf = itest.AttemptsOf
)
