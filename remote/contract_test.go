package remote_test

import (
	"net/http/httptest"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/internal/contract"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// backends are the three a queen.Client comes in: a broker in memory, a
// broker on disk, and a remote client of a broker served by httpapi.
var backends = []contract.Backend{
	{Name: "memory", New: func(t *testing.T, clock queen.Clock) queen.Client {
		return queentest.NewBroker(t, &queen.Options{Clock: clock})
	}},
	{Name: "disk", New: func(t *testing.T, clock queen.Clock) queen.Client {
		return itest.OpenDir(t, t.TempDir(), &queen.Options{Clock: clock, Durability: queen.SyncNever})
	}},
	{Name: "remote", New: func(t *testing.T, clock queen.Clock) queen.Client {
		c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
		return c
	}},
}

// served starts an in-memory broker behind httpapi on an httptest server
// and dials it. Everything is closed when t ends.
func served(t testing.TB, opts *queen.Options, ropts *remote.Options) (*remote.Client, *queen.Broker) {
	t.Helper()
	b := queentest.NewBroker(t, opts)
	stop := make(chan struct{})
	srv := httptest.NewServer(httpapi.New(b, &httpapi.Options{Shutdown: stop}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	c, err := remote.Dial(srv.URL, ropts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, b
}

func TestContract(t *testing.T) {
	contract.Run(t, backends)
}
