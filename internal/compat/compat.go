// Package compat reaches the queue settings of Queen's API that a
// queen.QueueConfig carries without showing them to applications: the
// broker stores them and reports them back, and nothing else reads them.
// Package httpapi accepts and answers them on the wire, package remote
// sends and reads them, and the console shows them. Package queen sets
// Of and Set when it is initialised.
package compat

import "time"

// QueueFields are Queen's queue settings that do nothing here: Queen's
// ttl, deadLetterQueue, dlqAfterMaxRetries and retentionEnabled. The
// broker always dead-letters, and runs retention whenever its duration is
// set.
type QueueFields struct {
	TTL                time.Duration // 3600 s in a default configuration
	DeadLetterQueue    bool
	DLQAfterMaxRetries bool
	RetentionEnabled   bool
}

// Of returns the fields cfg (a *queen.QueueConfig) carries.
var Of func(cfg any) QueueFields

// Set makes cfg (a *queen.QueueConfig) carry f.
var Set func(cfg any, f QueueFields)
