package httpapi

import "net/http"

// maintenanceText is the message of the maintenance routes.
func maintenanceText(on bool) string {
	if on {
		return "Maintenance mode is on: pushes are stored, pops deliver nothing until it is turned off"
	}
	return "Maintenance mode is off: pops deliver"
}

// readEnabled reads the {"enabled": bool} body of the maintenance routes.
func (h *handler) readEnabled(w http.ResponseWriter, r *http.Request) (bool, error) {
	f, err := h.readBody(w, r)
	if err != nil {
		return false, err
	}
	if kind(f.raw("enabled")) != 't' {
		return false, badRequest("enabled (boolean) is required")
	}
	return f.boolean("enabled", false), nil
}

// getMaintenance serves GET /api/v1/system/maintenance. The broker has one
// switch for Queen's two modes (see setMaintenance), and buffers nothing:
// a push in maintenance mode is stored at once.
func (h *handler) getMaintenance(w http.ResponseWriter, r *http.Request) {
	on := h.b.MaintenanceMode()
	writeJSON(w, http.StatusOK, map[string]any{
		"maintenanceMode": on, "popMaintenanceMode": on, "bufferedMessages": 0, "bufferHealthy": true,
		"bufferStats": map[string]int{"pending": 0, "failed": 0},
	})
}

// setMaintenance serves POST /api/v1/system/maintenance {"enabled": bool}:
// it turns the broker's maintenance mode on or off (see
// [queen.Broker.SetMaintenanceMode]). Queen buffers pushes in this mode;
// this broker stores them and its pops deliver nothing until the mode is
// turned off, so a client sees the same: nothing pushed meanwhile is
// consumed until then, and all of it after. A pop without wait answers 204
// at once; a long-poll stays parked until the mode is turned off or its
// timeout passes (Queen answers 204 at once, which sends polling clients
// round in a tight loop).
func (h *handler) setMaintenance(w http.ResponseWriter, r *http.Request) {
	on, err := h.readEnabled(w, r)
	if err == nil {
		err = h.b.SetMaintenanceMode(r.Context(), on)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"maintenanceMode": on, "bufferedMessages": 0, "bufferHealthy": true, "message": maintenanceText(on),
	})
}

// getPopMaintenance serves GET /api/v1/system/maintenance/pop.
func (h *handler) getPopMaintenance(w http.ResponseWriter, r *http.Request) {
	on := h.b.MaintenanceMode()
	writeJSON(w, http.StatusOK, map[string]any{"popMaintenanceMode": on, "message": maintenanceText(on)})
}

// setPopMaintenance serves POST /api/v1/system/maintenance/pop
// {"enabled": bool}. It turns the same switch as setMaintenance: what
// Queen's pop maintenance mode does (pops deliver nothing) is what this
// broker's maintenance mode does to pops.
func (h *handler) setPopMaintenance(w http.ResponseWriter, r *http.Request) {
	on, err := h.readEnabled(w, r)
	if err == nil {
		err = h.b.SetMaintenanceMode(r.Context(), on)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"popMaintenanceMode": on, "message": maintenanceText(on)})
}
