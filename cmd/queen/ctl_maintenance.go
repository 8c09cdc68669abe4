package main

import "fmt"

func ctlMaintenance(x *ctl, args []string) error {
	fs := x.flags("", "[on|off]", "Shows maintenance mode, or turns it on or off. While it is on, pushes are\nkept and pops deliver nothing; turning it off delivers what was pushed\nmeanwhile. Needs an admin token where tokens are checked.")
	arg, err := x.optional(fs, args, "on or off")
	if err != nil {
		return err
	}
	if arg != "" && arg != "on" && arg != "off" {
		return usagef("maintenance takes on or off, not %q", arg)
	}
	c, err := x.remote()
	if err != nil {
		return err
	}
	if arg != "" {
		if err := c.SetMaintenanceMode(x.ctx, arg == "on"); err != nil {
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
