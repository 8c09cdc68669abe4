package queen

import "fmt"

// CheckPush reports whether a broker would refuse items before writing
// anything, with the error [Broker.Push] gives: [ErrTooLarge] for more
// than [MaxPushItems] items or for a payload longer than payloadLimit
// bytes, and an [*ArgumentError] naming the field (PushItem[i].Queue, …)
// for a bad name, label or JSON payload. A payloadLimit of zero or less
// means [MaxPayload]; pass [Broker.PayloadLimit] to check against one
// broker. It does not change items, writes nothing and needs no broker:
// package outbox runs it when an item is enqueued, so that an item the
// broker would refuse is refused inside the application's transaction.
//
// Refusals that depend on a queue's state (a full queue, an encrypted
// queue on a broker without its key) are not checked: they are reported
// per item by Push.
func CheckPush(items []PushItem, payloadLimit int) error {
	if len(items) > MaxPushItems {
		return fmt.Errorf("%w: a push takes at most %d items (queen.MaxPushItems), not %d", ErrTooLarge, MaxPushItems, len(items))
	}
	if payloadLimit <= 0 {
		payloadLimit = MaxPayload
	}
	for i := range items {
		it := items[i] // normalize fills in defaults: on a copy
		if err := checkItem(i, &it, payloadLimit, ""); err != nil {
			return err
		}
	}
	return nil
}

// checkItem validates and normalizes item i: the rules of
// [PushItem.normalize] and the payload limit. where says which store the
// limit is for ("on disk", "in memory"), or nothing.
func checkItem(i int, it *PushItem, limit int, where string) error {
	if err := it.normalize(i); err != nil {
		return err
	}
	if len(it.Payload) > limit {
		if where != "" {
			where = " " + where
		}
		return fmt.Errorf("%w: PushItem[%d].Payload is %d bytes, the broker stores at most %d%s", ErrTooLarge, i, len(it.Payload), limit, where)
	}
	return nil
}
