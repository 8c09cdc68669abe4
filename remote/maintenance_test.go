package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

func TestMaintenanceMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ours", func(t *testing.T) {
		t.Parallel()
		b := queentest.NewBroker(t, nil)
		srv := httptest.NewServer(httpapi.New(b, nil))
		t.Cleanup(srv.Close)
		c, err := remote.Dial(srv.URL, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		on, err := c.MaintenanceMode(ctx)
		require.NoError(t, err)
		require.False(t, on)
		require.NoError(t, c.SetMaintenanceMode(ctx, true))
		require.True(t, b.MaintenanceMode())
		on, err = c.MaintenanceMode(ctx)
		require.NoError(t, err)
		require.True(t, on)
		require.NoError(t, c.SetMaintenanceMode(ctx, false))
		require.False(t, b.MaintenanceMode())
	})

	t.Run("Queen's two switches", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var posts []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				_, _ = w.Write([]byte(`{"maintenanceMode":false,"popMaintenanceMode":true,"bufferedMessages":0}`))
				return
			}
			var body struct {
				Enabled *bool `json:"enabled"`
			}
			require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
			require.NotNil(t, body.Enabled)
			mu.Lock()
			posts = append(posts, r.URL.Path+map[bool]string{true: " on", false: " off"}[*body.Enabled])
			mu.Unlock()
			_, _ = w.Write([]byte(`{"maintenanceMode":true}`))
		}))
		t.Cleanup(srv.Close)
		c, err := remote.Dial(srv.URL, &remote.Options{Server: remote.ServerQueen})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		on, err := c.MaintenanceMode(ctx)
		require.NoError(t, err)
		require.True(t, on, "either switch on is maintenance")
		require.NoError(t, c.SetMaintenanceMode(ctx, false))
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, []string{"/api/v1/system/maintenance off", "/api/v1/system/maintenance/pop off"}, posts)
	})

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":"admin role required"}`))
		}))
		t.Cleanup(srv.Close)
		c, err := remote.Dial(srv.URL, &remote.Options{Server: remote.ServerQueenLite})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		var se *remote.ServerError
		_, err = c.MaintenanceMode(ctx)
		require.True(t, errors.As(err, &se), "%v", err)
		require.Equal(t, http.StatusForbidden, se.StatusCode)
		require.True(t, errors.As(c.SetMaintenanceMode(ctx, true), &se))
	})
}
