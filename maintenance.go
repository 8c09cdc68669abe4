package queen

import "context"

// SetMaintenanceMode turns maintenance mode on or off, as Queen's
// maintenance switch does for its clients: while it is on, pushes, acks,
// lease renewals, transactions and every read are served as usual, but
// pops hand out nothing. A pop without Wait returns an empty result at
// once; a waiting pop keeps waiting (until its timeout) and takes nothing,
// including a pop that was already waiting when the mode was turned on.
// Turning the mode off wakes every waiting pop, and the messages pushed
// meanwhile are delivered as if they had just arrived, each once per group.
// Leases handed out before the mode was turned on run their course.
//
// The switch is stored: a broker opened again, or restored from a
// backup, starts with it as it was. It returns once the switch is
// written (fsynced unless [Options.Durability] is [SyncNever]); ctx ends
// that wait, not the switch. After Close it returns [ErrClosed].
func (b *Broker) SetMaintenanceMode(ctx context.Context, on bool) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if err := b.lockUsable(); err != nil {
		return err
	}
	// Set under b.mu, which pops hold while they claim: once this
	// returns, no pop claims anything until the mode is turned off.
	if was := b.maint.Swap(on); was && !on {
		for _, q := range b.queues {
			for _, g := range q.groups {
				g.wakeAll()
			}
		}
	}
	done := b.w.submit([]command{settingOp(settingMaintenance, on)})
	b.mu.Unlock()
	return waitCtx(ctx, done)
}

// MaintenanceMode reports whether maintenance mode is on (see
// [Broker.SetMaintenanceMode]).
func (b *Broker) MaintenanceMode() bool { return b.maint.Load() }
