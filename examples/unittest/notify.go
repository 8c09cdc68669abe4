// Package unittest shows a package whose code takes a *queen.Broker and
// whose unit tests open an in-memory broker in one line.
package unittest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/queenlite/queen"
)

// Notifier queues e-mails for a mailer worker.
type Notifier struct {
	Broker *queen.Broker
}

// Welcome queues a welcome e-mail for a user. Queueing it twice for the same
// user is harmless: the transaction id makes the second push a duplicate.
func (n *Notifier) Welcome(ctx context.Context, userID, email string) error {
	body, err := json.Marshal(map[string]string{"template": "welcome", "to": email})
	if err != nil {
		return err
	}
	res, err := n.Broker.Push(ctx, []queen.PushItem{{Queue: "emails", Partition: userID, TransactionID: "welcome-" + userID, Payload: body}})
	if err != nil {
		return err
	}
	if res[0].Status == queen.PushFailed {
		return fmt.Errorf("queue welcome e-mail: %w", res[0].Err)
	}
	return nil
}
