// Package wire holds the JSON forms that package httpapi serves and
// package remote reads, written once so the two cannot drift apart.
package wire

import (
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/compat"
)

// QueueOptions is a queue's configuration in Queen's units: seconds,
// except retryDelay in milliseconds.
type QueueOptions struct {
	Priority                  int   `json:"priority"`
	LeaseTime                 int64 `json:"leaseTime"`
	RetryLimit                int   `json:"retryLimit"`
	RetryDelay                int64 `json:"retryDelay"`
	MaxSize                   int   `json:"maxSize"`
	TTL                       int64 `json:"ttl"`
	DeadLetterQueue           bool  `json:"deadLetterQueue"`
	DLQAfterMaxRetries        bool  `json:"dlqAfterMaxRetries"`
	DelayedProcessing         int64 `json:"delayedProcessing"`
	WindowBuffer              int64 `json:"windowBuffer"`
	RetentionSeconds          int64 `json:"retentionSeconds"`
	CompletedRetentionSeconds int64 `json:"completedRetentionSeconds"`
	RetentionEnabled          bool  `json:"retentionEnabled"`
	EncryptionEnabled         bool  `json:"encryptionEnabled"`
	MaxWaitTimeSeconds        int64 `json:"maxWaitTimeSeconds"`
}

// Seconds is d in whole seconds, rounded down.
func Seconds(d time.Duration) int64 { return int64(d / time.Second) }

// Millis is d in whole milliseconds, rounded down.
func Millis(d time.Duration) int64 { return int64(d / time.Millisecond) }

// OptionsOf is c in Queen's units.
func OptionsOf(c *queen.QueueConfig) QueueOptions {
	q := compat.Of(c)
	return QueueOptions{
		Priority: c.Priority, LeaseTime: Seconds(c.LeaseTime), RetryLimit: c.RetryLimit, RetryDelay: Millis(c.RetryDelay),
		MaxSize: c.MaxSize, TTL: Seconds(q.TTL), DeadLetterQueue: q.DeadLetterQueue, DLQAfterMaxRetries: q.DLQAfterMaxRetries,
		DelayedProcessing: Seconds(c.DelayedProcessing), WindowBuffer: Seconds(c.WindowBuffer),
		RetentionSeconds: Seconds(c.Retention), CompletedRetentionSeconds: Seconds(c.CompletedRetention),
		RetentionEnabled: q.RetentionEnabled, EncryptionEnabled: c.EncryptionEnabled, MaxWaitTimeSeconds: Seconds(c.MaxWaitTime),
	}
}

// Config is the queue configuration o describes, labelled namespace and
// task.
func (o *QueueOptions) Config(namespace, task string) queen.QueueConfig {
	c := queen.QueueConfig{
		LeaseTime: time.Duration(o.LeaseTime) * time.Second, RetryLimit: o.RetryLimit,
		RetryDelay: time.Duration(o.RetryDelay) * time.Millisecond, MaxSize: o.MaxSize,
		DelayedProcessing: time.Duration(o.DelayedProcessing) * time.Second, WindowBuffer: time.Duration(o.WindowBuffer) * time.Second,
		Retention: time.Duration(o.RetentionSeconds) * time.Second, CompletedRetention: time.Duration(o.CompletedRetentionSeconds) * time.Second,
		MaxWaitTime: time.Duration(o.MaxWaitTimeSeconds) * time.Second, Priority: o.Priority, EncryptionEnabled: o.EncryptionEnabled,
		Namespace: namespace, Task: task,
	}
	compat.Set(&c, compat.QueueFields{TTL: time.Duration(o.TTL) * time.Second, DeadLetterQueue: o.DeadLetterQueue,
		DLQAfterMaxRetries: o.DLQAfterMaxRetries, RetentionEnabled: o.RetentionEnabled})
	return c
}
