// Package testhook lets tests of any package of the module see inside a
// broker, without widening the public API. Package queen sets the hooks
// when it is initialised; internal/queentest wraps them for tests.
package testhook

// Waiting returns the number of pops waiting in the broker b (a
// *queen.Broker), waiting for messages or for their queue to appear.
var Waiting func(b any) int
