package console

// SetMatchPage sets the page size of "all matching" actions for a test
// and returns the function that restores it.
func SetMatchPage(n int) (restore func()) {
	old := matchPage
	matchPage = n
	return func() { matchPage = old }
}
