// Package mailer is a small service of an application: it queues e-mails
// in an embedded queen broker and sends them from a worker, retrying a
// failed send a minute later. Its tests (mailer_test.go) use
// github.com/queenlite/queen/queentest to check what happens when a
// worker hangs and when a send fails, without sleeping.
package mailer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/queenlite/queen"
)

// Queue is the queue the e-mails wait in.
const Queue = "emails"

// Lease is how long a worker holds an e-mail before another worker may
// take it over: a worker that hangs or dies loses it then.
const Lease = 30 * time.Second

// RetryDelay is how long a failed send waits before the next attempt.
const RetryDelay = time.Minute

// Attempts is how many sends an e-mail gets before it is dead-lettered.
const Attempts = 5

// Email is one message to send.
type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// Sender delivers an e-mail (an SMTP client in production).
type Sender interface {
	Send(ctx context.Context, e Email) error
}

// Service queues e-mails and sends them.
type Service struct {
	b      *queen.Broker
	sender Sender
}

// New returns a Service storing its e-mails in b and sending them with
// sender.
func New(b *queen.Broker, sender Sender) *Service {
	return &Service{b: b, sender: sender}
}

// Enqueue queues e, once per id: queueing the same id again is harmless.
func (s *Service) Enqueue(ctx context.Context, id string, e Email) error {
	payload, err := json.Marshal(e)
	if err != nil {
		return err
	}
	res, err := s.b.Push(ctx, []queen.PushItem{{Queue: Queue, Partition: e.To, TransactionID: id, Payload: payload}})
	if err != nil {
		return err
	}
	if res[0].Err != nil {
		return fmt.Errorf("mailer: queue %s: %w", id, res[0].Err)
	}
	return nil
}

// Start starts a worker sending queued e-mails until ctx ends. A process
// runs one or more.
func (s *Service) Start(ctx context.Context) (*queen.Consumer, error) {
	c := s.b.Queue(Queue).
		Lease(Lease).
		RetryPolicy(queen.FixedRetry(Attempts, RetryDelay)).
		Consume(ctx, s.handle)
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *Service) handle(ctx context.Context, msg *queen.Message) error {
	var e Email
	if err := json.Unmarshal(msg.Payload, &e); err != nil {
		return queen.Park(err) // not an e-mail: kept aside for a human
	}
	return s.sender.Send(ctx, e)
}
