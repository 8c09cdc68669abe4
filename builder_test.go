package queen_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

func TestQueueBuilder_MethodsReturnCopies(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	pushTo(t, b, "q", "Default", numbered(10)...)
	base := b.Queue("q").Autopilot(false).Wait(false)
	big := base.Batch(5)
	msgs, err := base.Pop(context.Background())
	require.NoError(t, err)
	require.Len(t, msgs, 1, "base is not changed by deriving big")
	_, err = b.Ack(context.Background(), msgs[0], true, queen.AckOptions{})
	require.NoError(t, err)
	msgs, err = big.Pop(context.Background())
	require.NoError(t, err)
	require.Len(t, msgs, 5)
}

func TestQueueBuilder_InvalidOptions(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	ctx := context.Background()
	for field, qb := range map[string]*queen.QueueBuilder{
		"QueueBuilder.Batch":            b.Queue("q").Batch(-1),
		"QueueBuilder.Partitions":       b.Queue("q").Partitions(-1),
		"QueueBuilder.TimeoutMillis":    b.Queue("q").TimeoutMillis(-1),
		"QueueBuilder.LeaseSeconds":     b.Queue("q").LeaseSeconds(-1),
		"QueueBuilder.RenewLease":       b.Queue("q").RenewLease(true, 0),
		"QueueBuilder.Limit":            b.Queue("q").Limit(-1),
		"QueueBuilder.IdleMillis":       b.Queue("q").IdleMillis(-1),
		"QueueBuilder.Timeout":          b.Queue("q").Timeout(-time.Second),
		"QueueBuilder.Lease":            b.Queue("q").Lease(-time.Second),
		"QueueBuilder.RenewLeaseEvery":  b.Queue("q").RenewLeaseEvery(-time.Second),
		"QueueBuilder.Idle":             b.Queue("q").Idle(-time.Second),
		"QueueBuilder.Concurrency":      b.Queue("q").Concurrency(0),
		"QueueBuilder.DrainTimeout":     b.Queue("q").DrainTimeout(-1),
		"QueueBuilder.FromOffset":       b.Queue("q").FromOffset(-1),
		"QueueBuilder.SubscriptionFrom": b.Queue("q").Group("g").SubscriptionFrom("yesterday"),
		"QueueBuilder.Conflation":       b.Queue("q").Group("g").Conflation(true).CommitOnDelivery(true),
		"QueueBuilder.Queue":            b.Queue(""),
	} {
		_, err := qb.Wait(false).Pop(ctx)
		var ae *queen.ArgumentError
		require.ErrorAs(t, err, &ae, field)
		require.Equal(t, field, ae.Field)
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
		err = qb.Consume(ctx, func(context.Context, *queen.Message) error { return nil }).Execute(ctx)
		require.ErrorIs(t, err, queen.ErrInvalidArgument, field)
	}
	// Counts of milliseconds or seconds past the longest Duration are
	// refused, not wrapped around to a negative or short one.
	for field, qb := range map[string]*queen.QueueBuilder{
		"QueueBuilder.TimeoutMillis": b.Queue("q").TimeoutMillis(math.MaxInt),
		"QueueBuilder.LeaseSeconds":  b.Queue("q").LeaseSeconds(math.MaxInt),
		"QueueBuilder.RenewLease":    b.Queue("q").RenewLease(true, math.MaxInt),
		"QueueBuilder.IdleMillis":    b.Queue("q").IdleMillis(math.MaxInt),
	} {
		_, err := qb.Wait(false).Pop(ctx)
		var ae *queen.ArgumentError
		require.ErrorAs(t, err, &ae, field)
		require.Equal(t, field, ae.Field)
	}
	_, err := b.Queue("q").Batch(-1).Push(ctx, 1)
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	_, err = b.Queue("q").Batch(-1).Fetch(ctx, []string{"Default"})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

func TestQueueBuilder_DurationForms(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	q := b.Queue("q")
	durations := func(qb *queen.QueueBuilder) [4]time.Duration {
		a, b, c, d := queen.BuilderDurations(qb)
		return [4]time.Duration{a, b, c, d}
	}
	require.Equal(t, [4]time.Duration{}, durations(q), "timeout and lease default to 0 (30 s, the queue's), no renewal, no idle stop")

	// Each Duration form sets its option, as its seed-shaped twin does.
	goForm := q.Timeout(1500 * time.Millisecond).Lease(90 * time.Second).RenewLeaseEvery(2 * time.Second).Idle(time.Minute)
	seedForm := q.TimeoutMillis(1500).LeaseSeconds(90).RenewLease(true, 2000).IdleMillis(60000)
	want := [4]time.Duration{1500 * time.Millisecond, 90 * time.Second, 2 * time.Second, time.Minute}
	require.Equal(t, want, durations(goForm))
	require.Equal(t, want, durations(seedForm))

	// Both forms set one option: the last call wins, either way round.
	require.Equal(t, [4]time.Duration{time.Second, 5 * time.Second, 3 * time.Second, 7 * time.Millisecond},
		durations(goForm.TimeoutMillis(1000).LeaseSeconds(5).RenewLease(true, 3000).IdleMillis(7)))
	require.Equal(t, [4]time.Duration{2 * time.Second, 4 * time.Second, time.Second, time.Hour},
		durations(seedForm.Timeout(2*time.Second).Lease(4*time.Second).RenewLeaseEvery(time.Second).Idle(time.Hour)))

	// Zero turns renewal off in both forms.
	require.Zero(t, durations(goForm.RenewLease(false, 0))[2])
	require.Zero(t, durations(seedForm.RenewLeaseEvery(0))[2])

	// A lease under a second is refused, as the broker and Queen refuse it,
	// by the call that finishes the chain, naming the option.
	_, err := q.Lease(500 * time.Millisecond).Wait(false).Pop(context.Background())
	var ae *queen.ArgumentError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "QueueBuilder.Lease", ae.Field)
	require.Contains(t, ae.Error(), "500ms")
}

func TestQueueBuilder_PushPayloadIDs(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		ctx := context.Background()
		const trace = "0190b5a4-7c1e-7d3a-9f00-000000000001"
		res, err := b.Queue("orders").Push(ctx,
			queen.Payload{Data: map[string]any{"n": 0}, TransactionID: "order-1", TraceID: trace},
			map[string]any{"n": 1},
			&queen.Payload{Data: json.RawMessage(`{"n":2}`), TransactionID: "order-2"},
		)
		require.NoError(t, err)
		require.Len(t, res, 3)
		require.Equal(t, "order-1", res[0].TransactionID)
		require.NotEmpty(t, res[1].TransactionID, "generated")
		require.Equal(t, "order-2", res[2].TransactionID)

		// The same transaction id again: no second message.
		again, err := b.Queue("orders").Push(ctx, queen.Payload{Data: map[string]any{"n": 9}, TransactionID: "order-1"})
		require.NoError(t, err)
		require.Equal(t, queen.PushDuplicate, again[0].Status)
		require.Equal(t, res[0].MessageID, again[0].MessageID)

		msgs, err := b.Queue("orders").Batch(10).Wait(false).Pop(ctx)
		require.NoError(t, err)
		require.Len(t, msgs, 3, "the duplicate was not stored")
		require.Equal(t, 0, dataN(msgs[0]), "the first push wins")
		require.Equal(t, "order-1", msgs[0].TransactionID)
		require.Equal(t, trace, msgs[0].TraceID)
		require.Empty(t, msgs[1].TraceID)
		require.Equal(t, `{"n":2}`, string(msgs[2].Payload), "Data is encoded as any payload")

		_, err = b.Queue("orders").Push(ctx, (*queen.Payload)(nil))
		require.ErrorIs(t, err, queen.ErrInvalidArgument)
		_, err = b.Queue("orders").Push(ctx, queen.Payload{Data: func() {}})
		require.ErrorIs(t, err, queen.ErrInvalidArgument, "not encodable")
		_, err = b.Queue("orders").Push(ctx, queen.Payload{Data: 1, TransactionID: strings.Repeat("x", 256)})
		require.ErrorIs(t, err, queen.ErrInvalidArgument, "too long")
	})
}

func TestQueueBuilder_PushAndPop(t *testing.T) {
	t.Parallel()
	itest.Run(t, nil, func(t *testing.T, b *queen.Broker) {
		ctx := context.Background()
		res, err := b.Queue("orders").Partition("customer-42").Push(ctx,
			map[string]any{"total": 12.5},
			json.RawMessage(`{ "total" :  3 }`),
			[]byte(`[1,2,3]`),
			"plain text",
		)
		require.NoError(t, err)
		require.Len(t, res, 4)
		for i, r := range res {
			require.Equal(t, queen.PushQueued, r.Status)
			require.Equal(t, "customer-42", r.Partition)
			require.EqualValues(t, i, r.Offset)
		}
		_, err = b.Queue("orders").Push(ctx, func() {})
		require.ErrorIs(t, err, queen.ErrInvalidArgument, "not encodable")

		msgs, err := b.Queue("orders").Partition("customer-42").Batch(10).Wait(false).Pop(ctx)
		require.NoError(t, err)
		require.Len(t, msgs, 4)
		require.Equal(t, map[string]any{"total": 12.5}, msgs[0].Data)
		require.Equal(t, `{ "total" :  3 }`, string(msgs[1].Payload), "byte for byte")
		require.Equal(t, 3.0, msgs[1].Data["total"])
		require.Nil(t, msgs[2].Data, "not an object")
		require.Equal(t, `"plain text"`, string(msgs[3].Payload))
		require.NotEmpty(t, msgs[0].LeaseID)

		empty, err := b.Queue("nothing-here").Wait(false).Pop(ctx)
		require.NoError(t, err)
		require.Empty(t, empty)
	})
}

func TestQueueBuilder_PopOptions(t *testing.T) {
	t.Parallel()
	b, clock := clocked(t, nil)
	ctx := context.Background()
	pushTo(t, b, "events", "Default", `{"n":0}`)
	clock.Advance(time.Hour)
	pushTo(t, b, "events", "Default", `{"n":1}`)

	// SubscriptionFrom and SubscriptionMode decide where new groups start.
	from := clock.Now().Add(-time.Minute).Format(time.RFC3339)
	msgs, err := b.Queue("events").Group("recent").SubscriptionFrom(from).Batch(5).Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, 1, dataN(msgs[0]))
	msgs, err = b.Queue("events").Group("new").SubscriptionFrom("now").Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Empty(t, msgs)
	msgs, err = b.Queue("events").Group("all").SubscriptionMode(queen.SubscriptionModeAll).Batch(5).Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 2)

	// LeaseSeconds sets the lease; Wait with TimeoutMillis waits, briefly.
	msgs, err = b.Queue("events").Group("leased").SubscriptionMode(queen.SubscriptionModeAll).Autopilot(false).LeaseSeconds(5).Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	clock.Advance(6 * time.Second)
	_, err = b.Ack(ctx, msgs[0], true, queen.AckOptions{})
	require.ErrorIs(t, err, queen.ErrLeaseExpired)
	msgs, err = b.Queue("empty").TimeoutMillis(1).Pop(ctx)
	require.NoError(t, err)
	require.Empty(t, msgs)

	// CommitOnDelivery: no lease, nothing to ack, the cursor moved.
	msgs, err = b.Queue("events").Group("live").SubscriptionMode(queen.SubscriptionModeAll).CommitOnDelivery(true).Batch(5).Wait(false).Pop(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.Empty(t, msgs[0].LeaseID)
	require.EqualValues(t, 2, cursorOf(t, b, "events", "Default", "live").Offset)
}

func TestQueueBuilder_Fetch(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	ctx := context.Background()
	pushTo(t, b, "orders", "customer-42", numbered(5)...)
	pushTo(t, b, "orders", "customer-7", `{"n":0}`)
	read, err := b.Queue("orders").Fetch(ctx, []string{"customer-42", "customer-7"})
	require.NoError(t, err)
	require.Len(t, read["customer-42"].Records, 5)
	require.Len(t, read["customer-7"].Records, 1)
	for i, r := range read["customer-42"].Records {
		require.EqualValues(t, i, r.Offset)
	}
	page, err := b.Queue("orders").FromOffset(1).Batch(2).Fetch(ctx, []string{"customer-42"})
	require.NoError(t, err)
	rec := page["customer-42"].Records
	require.Len(t, rec, 2)
	require.EqualValues(t, 1, rec[0].Offset)
	require.Equal(t, `{"n":1}`, string(rec[0].Payload))
	require.EqualValues(t, 3, page["customer-42"].NextOffset)
	_, err = b.Queue("orders").Fetch(ctx, []string{"nobody"})
	require.ErrorIs(t, err, queen.ErrNotFound)
}

func TestBroker_Renew(t *testing.T) {
	t.Parallel()
	b, clock := clocked(t, nil)
	ctx := context.Background()
	pushTo(t, b, "q", "Default", `{}`) // a push-created queue leases for 60 s
	msgs, err := b.Queue("q").Wait(false).Pop(ctx)
	require.NoError(t, err)
	clock.Advance(50 * time.Second)
	until, err := b.Renew(ctx, msgs[0])
	require.NoError(t, err)
	require.Equal(t, clock.Now().Add(60*time.Second), until)
	clock.Advance(50 * time.Second)
	_, err = b.Ack(ctx, msgs[0], true, queen.AckOptions{})
	require.NoError(t, err)
	_, err = b.Renew(ctx, &queen.Message{})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

func TestAdmin(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	ctx := context.Background()
	admin := b.Admin()
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit = 0
	info, err := admin.ConfigureQueue(ctx, "jobs", cfg)
	require.NoError(t, err)
	require.Equal(t, "jobs", info.Name)
	got, err := admin.GetQueue(ctx, "jobs")
	require.NoError(t, err)
	require.Equal(t, info.ID, got.ID)

	pushTo(t, b, "jobs", "Default", `{"n":0}`, `{"n":1}`)
	err = b.Queue("jobs").Group("g").SubscriptionMode(queen.SubscriptionModeAll).Each().Limit(2).
		Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
			if dataN(msg) == 0 {
				return queen.Reject(errTest)
			}
			return queen.Park(errTest)
		}).Execute(ctx)
	require.NoError(t, err)

	dl, err := b.DeadLetters(ctx, queen.LetterFilter{Queue: "jobs"})
	require.NoError(t, err)
	require.Len(t, dl.Letters, 1)
	rep, err := b.ReplayDeadLetter(ctx, dl.Letters[0].ID)
	require.NoError(t, err)
	require.Equal(t, "dlq:"+dl.Letters[0].ID, rep.TransactionID)
	require.NoError(t, b.DeleteDeadLetter(ctx, dl.Letters[0].ID))
	require.ErrorIs(t, b.DeleteDeadLetter(ctx, dl.Letters[0].ID), queen.ErrNotFound)

	pk, err := b.ParkedMessages(ctx, queen.LetterFilter{Queue: "jobs"})
	require.NoError(t, err)
	require.Len(t, pk.Letters, 1)
	_, err = b.ReplayParked(ctx, pk.Letters[0].ID)
	require.NoError(t, err)
	require.NoError(t, b.DeleteParked(ctx, pk.Letters[0].ID))

	st, err := admin.QueueStats(ctx, "jobs")
	require.NoError(t, err)
	require.EqualValues(t, 4, st.Messages, "two pushed, two replayed")
	all, err := admin.ListQueues(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	groups, err := admin.ListConsumerGroups(ctx, "g")
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.EqualValues(t, 2, groups[0].Lag, "the replayed copies")

	res, err := admin.SeekConsumerGroup(ctx, "g", "jobs", queen.SeekConsumerGroupOptions{ToEnd: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.PartitionsUpdated)
	_, err = admin.SeekConsumerGroup(ctx, "g", "jobs", queen.SeekConsumerGroupOptions{Timestamp: "not a time"})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
	res, err = admin.SeekPartition(ctx, "g", "jobs", "Default", queen.SeekConsumerGroupOptions{Timestamp: "2000-01-01T00:00:00Z"})
	require.NoError(t, err)
	require.Zero(t, res.CursorMovedTo)
	n, err := admin.UpdateConsumerGroupSubscription(ctx, "g", time.Now())
	require.NoError(t, err)
	require.Zero(t, n, "the group has consumed")
	n, err = admin.DeleteConsumerGroup(ctx, "g", "jobs", true)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	existed, err := admin.DeleteQueue(ctx, "jobs")
	require.NoError(t, err)
	require.True(t, existed)
	_, err = admin.GetQueue(ctx, "jobs")
	require.ErrorIs(t, err, queen.ErrNotFound)
}

var errTest = errorString("test failure")

type errorString string

func (e errorString) Error() string { return string(e) }
