package main

import "fmt"

func ctlMaintenance(x *ctl, args []string) error {
	fs := x.flags("", "[on|off]", "Shows maintenance mode, or turns it on or off. While it is on, pushes are\nkept and pops deliver nothing; turning it off delivers what was pushed\nmeanwhile. Needs an admin token where tokens are checked.")
	pos, err := x.positional(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 1:
		return usagef("unexpected argument %q", pos[1])
	case len(pos) == 1 && pos[0] != "on" && pos[0] != "off":
		return usagef("maintenance takes on or off, not %q", pos[0])
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		if err := c.SetMaintenanceMode(x.ctx, pos[0] == "on"); err != nil {
			return err
		}
	}
	on, err := c.MaintenanceMode(x.ctx)
	if err != nil {
		return err
	}
	if x.json {
		return x.printJSON(struct {
			Maintenance bool `json:"maintenance"`
		}{on})
	}
	state := "off"
	if on {
		state = "on"
	}
	_, err = fmt.Fprintln(x.stdout, "maintenance mode is", state)
	return err
}
