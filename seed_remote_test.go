package queen_test

import (
	"net/http/httptest"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// clientOf builds the client a seed snippet runs on, from the broker the
// test set up and checks.
type clientOf func(t *testing.T, b *queen.Broker) queen.Client

// eachClient runs fn as two subtests: "broker", where the client is the
// embedded broker itself, and "remote", where it is a remote.Client of
// the broker served by httpapi on an httptest server.
func eachClient(t *testing.T, parallel bool, fn func(t *testing.T, over clientOf)) {
	for _, c := range []struct {
		name string
		of   clientOf
	}{
		{"broker", func(_ *testing.T, b *queen.Broker) queen.Client { return b }},
		{"remote", dialServed},
	} {
		t.Run(c.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			fn(t, c.of)
		})
	}
}

// dialServed serves b with httpapi and dials it; both end with the test.
func dialServed(t *testing.T, b *queen.Broker) queen.Client {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewServer(httpapi.New(b, &httpapi.Options{Shutdown: stop}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	c, err := remote.Dial(srv.URL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
