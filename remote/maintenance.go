package remote

import (
	"context"
	"net/http"
)

// MaintenanceMode reports whether the server's maintenance mode is on
// (GET /api/v1/system/maintenance, an admin route). Queen's server has two
// switches, one for pushes and one for pops; the mode is on when either
// is.
func (c *Client) MaintenanceMode(ctx context.Context) (bool, error) {
	var out struct {
		Push bool `json:"maintenanceMode"`
		Pop  bool `json:"popMaintenanceMode"`
	}
	r := &request{op: "maintenance", method: http.MethodGet, path: "/api/v1/system/maintenance", safe: true}
	if err := c.call(ctx, r, &out); err != nil {
		return false, err
	}
	return out.Push || out.Pop, nil
}

// SetMaintenanceMode turns the server's maintenance mode on or off, as
// [queen.Broker.SetMaintenanceMode] does in process: while it is on,
// pushes are kept and pops deliver nothing. On Queen's server, whose push
// and pop switches are separate, it turns both. Repeating it is harmless.
func (c *Client) SetMaintenanceMode(ctx context.Context, on bool) error {
	paths := []string{"/api/v1/system/maintenance"}
	if c.serverKind(ctx) == ServerQueen {
		paths = append(paths, "/api/v1/system/maintenance/pop")
	}
	for _, p := range paths {
		r := &request{op: "maintenance", method: http.MethodPost, path: p, body: map[string]bool{"enabled": on}, safe: true}
		if err := c.call(ctx, r, nil); err != nil {
			return err
		}
	}
	return nil
}
