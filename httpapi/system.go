package httpapi

import (
	"net/http"
	"sync"
)

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

// maintenance holds Queen's two maintenance flags, push and pop, over the
// broker's one switch: the broker is in maintenance mode while either is
// on. The flags follow the switch when something else turns it (the
// console, a Go caller): off clears both, on with neither set sets both.
type maintenance struct {
	mu        sync.Mutex
	push, pop bool
}

// flags returns the two flags, in step with the broker's switch. Under
// m.mu.
func (m *maintenance) flags(on bool) (push, pop bool) {
	switch {
	case !on:
		m.push, m.pop = false, false
	case !m.push && !m.pop:
		m.push, m.pop = true, true
	}
	return m.push, m.pop
}

// set turns one flag (pop or push) and the broker's switch with it.
func (h *handler) setMaintenanceFlag(r *http.Request, pop, on bool) (pushOn, popOn bool, err error) {
	m := &h.maint
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flags(h.b.MaintenanceMode())
	was := [2]bool{m.push, m.pop}
	if pop {
		m.pop = on
	} else {
		m.push = on
	}
	if err := h.b.SetMaintenanceMode(r.Context(), m.push || m.pop); err != nil {
		m.push, m.pop = was[0], was[1]
		return false, false, err
	}
	return m.push, m.pop, nil
}

// getMaintenance serves GET /api/v1/system/maintenance: Queen's two
// flags (see setMaintenance and setPopMaintenance). The broker buffers
// nothing: a push in maintenance mode is stored at once.
func (h *handler) getMaintenance(w http.ResponseWriter, r *http.Request) {
	h.maint.mu.Lock()
	push, pop := h.maint.flags(h.b.MaintenanceMode())
	h.maint.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"maintenanceMode": push, "popMaintenanceMode": pop, "bufferedMessages": 0, "bufferHealthy": true,
		"bufferStats": map[string]int{"pending": 0, "failed": 0},
	})
}

// setMaintenance serves POST /api/v1/system/maintenance {"enabled": bool}:
// Queen's push maintenance flag. While it or the pop flag is on, the
// broker is in maintenance mode (see [queen.Broker.SetMaintenanceMode]).
// Queen buffers pushes in this mode; this broker stores them and its pops
// deliver nothing until both flags are off, so a client sees the same:
// nothing pushed meanwhile is consumed until then, and all of it after
// (Queen's pops still deliver what was stored before; here they wait
// too). A pop without wait answers 204 at once; a long-poll keeps waiting
// until the mode ends or its timeout passes (Queen answers 204 at once,
// which sends polling clients round in a tight loop).
func (h *handler) setMaintenance(w http.ResponseWriter, r *http.Request) {
	on, err := h.readEnabled(w, r)
	var push, pop bool
	if err == nil {
		push, pop, err = h.setMaintenanceFlag(r, false, on)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"maintenanceMode": push, "popMaintenanceMode": pop, "bufferedMessages": 0, "bufferHealthy": true,
		"message": maintenanceText(push || pop),
	})
}

// getPopMaintenance serves GET /api/v1/system/maintenance/pop.
func (h *handler) getPopMaintenance(w http.ResponseWriter, r *http.Request) {
	h.maint.mu.Lock()
	push, pop := h.maint.flags(h.b.MaintenanceMode())
	h.maint.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"popMaintenanceMode": pop, "message": maintenanceText(push || pop)})
}

// setPopMaintenance serves POST /api/v1/system/maintenance/pop
// {"enabled": bool}: Queen's pop maintenance flag (pops deliver nothing),
// which this broker's maintenance mode is, while the flag or the push
// flag is on.
func (h *handler) setPopMaintenance(w http.ResponseWriter, r *http.Request) {
	on, err := h.readEnabled(w, r)
	var push, pop bool
	if err == nil {
		push, pop, err = h.setMaintenanceFlag(r, true, on)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"popMaintenanceMode": pop, "message": maintenanceText(push || pop)})
}
