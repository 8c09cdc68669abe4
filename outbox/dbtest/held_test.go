package dbtest

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/outbox"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// TestRelay_HeldRowBlocksNothing: a payload the broker refuses as too
// large (the outbox was told a higher limit) is refused with the whole
// push call; the relay finds the row, holds it, and relays the rest: the
// other partitions and the later rows of its own.
func TestRelay_HeldRowBlocksNothing(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		b := queentest.NewBroker(t, nil)
		log := newEventLog()
		ob := newOutbox(t, d, b, outbox.Options{PayloadLimit: queen.MaxPayload, Observer: log})
		big := queen.PushItem{Queue: "orders", Partition: "p", Payload: []byte(`"` + string(bytes.Repeat([]byte("x"), b.PayloadLimit())) + `"`)}
		var items []queen.PushItem
		for i := range 6 {
			items = append(items, seqItem("orders", "q", i))
			if i == 2 {
				items = append(items, big)
			} else {
				items = append(items, seqItem("orders", "p", i))
			}
		}
		enqueue(t, d, ob, items...)
		startRelay(t, ob)
		waitStored(t, b, "orders", "q", seq(6))
		waitStored(t, b, "orders", "p", []int{0, 1, 3, 4, 5})
		waitStats(t, ob, outbox.Stats{Held: 1, Relayed: 11})
		held, err := ob.Held(context.Background(), 0, 0)
		require.NoError(t, err)
		require.Len(t, held, 1)
		require.Equal(t, "p", held[0].Item.Partition)
		require.Equal(t, big.Payload, held[0].Item.Payload)
		require.NotEmpty(t, held[0].Item.TransactionID)
		require.Contains(t, held[0].Error, "too large")
		require.Equal(t, []queen.Event{{Kind: queen.EventOutboxHeld, Queue: "orders", Count: 1}}, log.of(queen.EventOutboxHeld))
		require.NoError(t, ob.DeleteHeld(context.Background(), held[0].ID))
		require.ErrorIs(t, ob.DeleteHeld(context.Background(), held[0].ID), queen.ErrNotFound)
		require.ErrorIs(t, ob.RequeueHeld(context.Background(), held[0].ID), queen.ErrNotFound)
		require.Equal(t, outbox.Stats{Relayed: 11}, stats(t, ob))
	})
}

// TestRelay_HeldRowRequeued: a queue the broker refuses each item of (an
// encrypted queue on a broker opened without its key) has its rows held
// while another queue flows; once the queue is deleted (the next push
// creates it anew), the held rows are requeued and delivered, with their
// TransactionIDs.
func TestRelay_HeldRowRequeued(t *testing.T) {
	eachDB(t, func(t *testing.T, d *database) {
		ctx := context.Background()
		dir := filepath.Join(t.TempDir(), "broker")
		key := bytes.Repeat([]byte{7}, 32)
		kb, err := queen.Open(dir, &queen.Options{EncryptionKey: key})
		require.NoError(t, err)
		cfg := queen.DefaultQueueConfig()
		cfg.EncryptionEnabled = true
		_, err = kb.ConfigureQueue(ctx, "secret", cfg)
		require.NoError(t, err)
		require.NoError(t, kb.Close())
		b, err := queen.Open(dir, nil)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })

		ob := newOutbox(t, d, b, outbox.Options{})
		enqueue(t, d, ob, seqItem("secret", "s", 0), seqItem("orders", "o", 0), seqItem("secret", "s", 1), seqItem("orders", "o", 1))
		startRelay(t, ob)
		waitStored(t, b, "orders", "o", seq(2))
		waitFor(t, "two rows held", func() bool { return stats(t, ob).Held == 2 })
		held, err := ob.Held(ctx, 0, 1)
		require.NoError(t, err)
		require.Len(t, held, 1)
		next, err := ob.Held(ctx, held[0].ID, 10)
		require.NoError(t, err)
		require.Len(t, next, 1)
		held = append(held, next...)
		require.Contains(t, held[0].Error, "EncryptionKey")

		_, err = b.DeleteQueue(ctx, "secret")
		require.NoError(t, err)
		for _, h := range held {
			require.NoError(t, ob.RequeueHeld(ctx, h.ID))
		}
		waitStored(t, b, "secret", "s", seq(2))
		res, err := b.Fetch(ctx, "secret", "s", 0, 10)
		require.NoError(t, err)
		require.Equal(t, held[0].Item.TransactionID, res.Records[0].TransactionID)
		waitStats(t, ob, outbox.Stats{Relayed: 4})
	})
}
