package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/queenlite/queen"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
	"github.com/stretchr/testify/require"
)

// TestDifferential_Cases holds sequences where remote.Client and a Broker
// answered differently, each now a row named for what both answer (or
// for the documented difference between them). Each row gets a Broker and
// a remote.Client in front of another Broker, on one fake clock.
func TestDifferential_Cases(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client)
	}{
		// A PopRequest.Lease below one second is refused with an *ArgumentError
		// by both, remote.Client before sending (docs/limits.md: "Lease /
		// leaseSeconds: 1 s..365 days, Go: refused"). remote.Client rounds any
		// Lease up to whole seconds, where a Broker keeps it to the microsecond: a
		// documented difference (package doc, "What the remote API does not
		// carry"): the wire's leaseSeconds is Queen's unit, and Queen's server
		// would not honour a finer field.
		{"PopLeaseBelowASecondIsRefusedAndBetweenSecondsRoundedUp", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			for _, cl := range []queen.Client{b, c} {
				_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q1", Payload: json.RawMessage(`1`)}, {Queue: "q2", Payload: json.RawMessage(`1`)}})
				require.NoError(t, err)
			}

			t.Run("below a second", func(t *testing.T) {
				req := queen.PopRequest{Queue: "q1", Lease: 500 * time.Millisecond}
				_, berr := b.Pop(ctx, req)
				require.ErrorIs(t, berr, queen.ErrInvalidArgument, "Broker")
				_, cerr := c.Pop(ctx, req)
				require.ErrorIs(t, cerr, queen.ErrInvalidArgument, "remote.Client")
				require.Equal(t, berr.Error(), cerr.Error())
			})

			t.Run("between seconds", func(t *testing.T) {
				req := queen.PopRequest{Queue: "q2", Lease: 1500 * time.Millisecond}
				for _, cl := range []queen.Client{b, c} {
					res, err := cl.Pop(ctx, req)
					require.NoError(t, err)
					require.Len(t, res.Messages, 1)
				}
				clock.Advance(1600 * time.Millisecond) // past a 1.5 s lease, not past 2 s
				again := func(cl queen.Client) int {
					res, err := cl.Pop(ctx, queen.PopRequest{Queue: "q2"})
					require.NoError(t, err)
					return len(res.Messages)
				}
				require.Equal(t, 1, again(b), "Broker: the 1.5 s lease ran out")
				require.Equal(t, 0, again(c), "remote.Client: the lease was rounded up to 2 s (documented)")
				clock.Advance(500 * time.Millisecond) // past 2 s
				require.Equal(t, 1, again(c), "remote.Client: the 2 s lease ran out")
			})
		}},
		// A conflating group's pop that returns messages reports
		// PopResult.Conflating true.
		{"ConflatingPopReportsConflating", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			req := queen.PopRequest{Queue: "q", Group: "cf", Conflation: true, SubscriptionMode: queen.SubscriptionModeAll}
			for _, cl := range []queen.Client{b, c} {
				_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
				require.NoError(t, err)
				res, err := cl.Pop(ctx, req)
				require.NoError(t, err)
				require.Len(t, res.Messages, 1)
				require.True(t, res.Conflating, "%T", cl)
			}
		}},
		// ListQueues lists the queues by name, each with its DefaultPartitionID
		// and Groups.
		{"ListQueuesByNameWithDefaultPartitionAndGroups", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			for _, q := range []string{"a", "b"} { // b is the newest
				for _, cl := range []queen.Client{b, c} {
					_, err := cl.Push(ctx, []queen.PushItem{{Queue: q, Payload: json.RawMessage(`1`)}})
					require.NoError(t, err)
					_, err = cl.Pop(ctx, queen.PopRequest{Queue: q, Group: "g"})
					require.NoError(t, err)
				}
				clock.Advance(time.Second)
			}
			type entry struct {
				name      string
				defaultID bool
				groups    []string
			}
			list := func(cl queen.Client) []entry {
				qs, err := cl.ListQueues(ctx)
				require.NoError(t, err)
				var out []entry
				for _, q := range qs {
					out = append(out, entry{q.Name, q.DefaultPartitionID != "", q.Groups})
				}
				return out
			}
			want := []entry{{"a", true, []string{"g"}}, {"b", true, []string{"g"}}}
			require.Equal(t, want, list(b), "Broker")
			require.Equal(t, want, list(c), "remote.Client")
		}},
		// The ack results of ExecTransaction carry the Queue, the Partition and
		// LeaseReleased; after an abort, the acks before the refused operation
		// have empty results (nil Ack).
		{"TransactionAckResults", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {

			t.Run("committed", func(t *testing.T) {
				var got []queen.AckResult // without the transactionId, which differs
				for _, cl := range []queen.Client{b, c} {
					_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
					require.NoError(t, err)
					p, err := cl.Pop(ctx, queen.PopRequest{Queue: "q"})
					require.NoError(t, err)
					m := p.Messages[0]
					res, err := cl.ExecTransaction(ctx, []queen.TxOp{{Ack: &queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: p.LeaseID}}})
					require.NoError(t, err)
					a := res.Results[0].Ack
					got = append(got, queen.AckResult{Queue: a.Queue, Partition: a.Partition, Success: a.Success, Err: a.Err, LeaseReleased: a.LeaseReleased,
						DeadLettered: a.DeadLettered, Parked: a.Parked})
				}
				require.Equal(t, queen.AckResult{Queue: "q", Partition: queen.DefaultPartition, Success: true, LeaseReleased: true}, got[0], "Broker")
				require.Equal(t, got[0], got[1], "remote.Client")
			})

			t.Run("aborted", func(t *testing.T) {
				var got []*queen.AckResult
				for _, cl := range []queen.Client{b, c} {
					_, err := cl.ConfigureQueue(ctx, "full", queen.QueueConfig{MaxSize: 1})
					require.NoError(t, err)
					_, err = cl.Push(ctx, []queen.PushItem{{Queue: "full", Payload: json.RawMessage(`1`)}, {Queue: "r", Payload: json.RawMessage(`1`)}})
					require.NoError(t, err)
					p, err := cl.Pop(ctx, queen.PopRequest{Queue: "r"})
					require.NoError(t, err)
					m := p.Messages[0]
					res, err := cl.ExecTransaction(ctx, []queen.TxOp{
						{Ack: &queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: p.LeaseID}},
						{Push: &queen.PushItem{Queue: "full", Payload: json.RawMessage(`2`)}},
					})
					require.ErrorIs(t, err, queen.ErrQueueFull)
					require.NotNil(t, res)
					require.Len(t, res.Results, 2)
					got = append(got, res.Results[0].Ack)
				}
				require.Nil(t, got[0], "Broker: nothing gathered for the ack before the refused push")
				require.Equal(t, got[0], got[1], "remote.Client")
			})
		}},
		// SeekGroup, SeekPartition, SetGroupSubscription and DeleteGroup read the
		// empty group as queue mode ("As in PopRequest.Group, an empty group (or
		// QueueModeGroup) is the queue-mode group").
		{"EmptyGroupIsQueueMode", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			for _, cl := range []queen.Client{b, c} {
				_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
				require.NoError(t, err)
				_, err = cl.Pop(ctx, queen.PopRequest{Queue: "q"}) // queue mode joins q
				require.NoError(t, err)
			}
			calls := []struct {
				name string
				call func(cl queen.Client) error
			}{
				{"SeekGroup", func(cl queen.Client) error {
					_, err := cl.SeekGroup(ctx, "", "q", queen.SeekOptions{ToEnd: true})
					return err
				}},
				{"SeekPartition", func(cl queen.Client) error {
					_, err := cl.SeekPartition(ctx, "", "q", queen.DefaultPartition, queen.SeekOptions{ToEnd: true})
					return err
				}},
				{"SetGroupSubscription", func(cl queen.Client) error {
					_, err := cl.SetGroupSubscription(ctx, "", clock.Now())
					return err
				}},
				{"DeleteGroup", func(cl queen.Client) error {
					_, err := cl.DeleteGroup(ctx, "", "q", false)
					return err
				}},
			}
			for _, tc := range calls {
				t.Run(tc.name, func(t *testing.T) {
					require.NoError(t, tc.call(b), "Broker")
					require.NoError(t, tc.call(c), "remote.Client")
				})
			}
		}},
		// A transaction whose ack names a partition id that is not a UUID (one
		// no broker hands out) is refused with a *TransactionError wrapping
		// ErrNotFound, as other unknown ids are (dead letter and parked ids).
		{"TransactionAckOfAnIDNoBrokerIssuesIsNotFound", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			ops := []queen.TxOp{{Ack: &queen.AckItem{TransactionID: "t1", PartitionID: "missing"}}}
			for _, cl := range []queen.Client{b, c} {
				_, err := cl.ExecTransaction(ctx, ops)
				var te *queen.TransactionError
				require.True(t, errors.As(err, &te), "%T: %v", cl, err)
				require.ErrorIs(t, err, queen.ErrNotFound, "%T", cl)
			}
		}},
		// AckResult.Parked is set only where the item parked the message, not on
		// items that changed nothing: a repeat of an item in the same call, or an
		// item behind a message of its batch that comes back (that one is
		// delivered again).
		{"ParkedOnlyOnItemsThatParked", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			// parked acks the messages of one pop with statuses and returns
			// Parked of the last item.
			parked := func(t *testing.T, cl queen.Client, queue string, statuses ...queen.AckStatus) bool {
				_, err := cl.Push(ctx, []queen.PushItem{{Queue: queue, Payload: json.RawMessage(`1`)}, {Queue: queue, Payload: json.RawMessage(`2`)}})
				require.NoError(t, err)
				p, err := cl.Pop(ctx, queen.PopRequest{Queue: queue, Batch: 2})
				require.NoError(t, err)
				require.Len(t, p.Messages, 2)
				items := make([]queen.AckItem, len(statuses))
				for i, st := range statuses {
					m := p.Messages[min(i, 1)]
					if len(statuses) == 2 && statuses[0] == statuses[1] {
						m = p.Messages[0] // the same item twice
					}
					items[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: p.LeaseID, Status: st}
				}
				res, err := cl.AckBatch(ctx, items)
				require.NoError(t, err)
				last := res[len(res)-1]
				require.True(t, last.Success, "%T: %+v", cl, last)
				return last.Parked
			}
			t.Run("repeated item", func(t *testing.T) {
				require.False(t, parked(t, b, "q1", queen.AckPark, queen.AckPark), "Broker")
				require.False(t, parked(t, c, "q1", queen.AckPark, queen.AckPark), "remote.Client")
			})
			t.Run("behind a retry", func(t *testing.T) {
				require.False(t, parked(t, b, "q2", queen.AckRetry, queen.AckPark), "Broker")
				require.False(t, parked(t, c, "q2", queen.AckRetry, queen.AckPark), "remote.Client")
			})
		}},
		// A failed push item (ErrQueueFull) is reported with its PartitionID and
		// its TraceID.
		{"FailedPushItemKeepsPartitionAndTrace", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			const trace = "5f0c7e4a-1b2c-4d3e-8f90-a1b2c3d4e5f6"
			for _, cl := range []queen.Client{b, c} {
				_, err := cl.ConfigureQueue(ctx, "q", queen.QueueConfig{MaxSize: 1})
				require.NoError(t, err)
				res, err := cl.Push(ctx, []queen.PushItem{
					{Queue: "q", TransactionID: "t1", Payload: json.RawMessage(`1`)},
					{Queue: "q", TransactionID: "t2", TraceID: trace, Payload: json.RawMessage(`2`)},
				})
				require.NoError(t, err)
				require.Equal(t, queen.PushFailed, res[1].Status)
				require.ErrorIs(t, res[1].Err, queen.ErrQueueFull)
				require.Equal(t, res[0].PartitionID, res[1].PartitionID, "%T", cl)
				require.Equal(t, trace, res[1].TraceID, "%T", cl)
			}
		}},
		// A QueueConfig.LeaseTime below one second is refused with an
		// *ArgumentError (docs/limits.md: "QueueConfig.LeaseTime / leaseTime:
		// 1 s..365 days, Go: refused"): remote.Client, which sends durations in
		// whole seconds, refuses it before sending rather than send leaseTime 0,
		// which the server reads as "no lease time".
		{"ConfigureLeaseTimeBelowASecondIsRefused", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			cfg := queen.QueueConfig{LeaseTime: 100 * time.Millisecond}
			_, berr := b.ConfigureQueue(ctx, "q", cfg)
			require.ErrorIs(t, berr, queen.ErrInvalidArgument, "Broker")
			info, err := c.ConfigureQueue(ctx, "q", cfg)
			if err == nil {
				t.Logf("remote.Client configured a lease of %v", info.Config.LeaseTime)
			}
			require.ErrorIs(t, err, queen.ErrInvalidArgument, "remote.Client")
			require.Equal(t, berr.Error(), err.Error())
		}},
		// QueueStats and ListQueues count a message once in Pending ("never more
		// than Messages") while two groups hold it under leases.
		{"PendingWithSeveralGroupsLeasingIsAtMostMessages", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			for _, cl := range []queen.Client{b, c} {
				_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
				require.NoError(t, err)
				for _, g := range []string{"g1", "g2"} {
					p, err := cl.Pop(ctx, queen.PopRequest{Queue: "q", Group: g, SubscriptionMode: queen.SubscriptionModeAll})
					require.NoError(t, err)
					require.Len(t, p.Messages, 1)
				}
				qs, err := cl.QueueStats(ctx, "q")
				require.NoError(t, err)
				require.Equal(t, int64(1), qs.Messages, "%T", cl)
				require.Equal(t, int64(2), qs.InFlight, "%T", cl)
				require.Equal(t, int64(1), qs.Pending, "%T: Pending", cl)
				list, err := cl.ListQueues(ctx)
				require.NoError(t, err)
				require.Equal(t, int64(1), list[0].Pending, "%T: ListQueues Pending", cl)
			}
		}},
		// A payload travels byte for byte (PushItem.Payload: "stored byte for
		// byte", docs/limits.md: "stored and returned byte for byte"):
		// remote.Client and httpapi write payloads as they are (package
		// internal/verbatim), neither compacted nor with <, > and & escaped.
		{"PayloadByteForByte", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			payload := json.RawMessage(`[1, {"a" : "<&>"}]`)
			for _, cl := range []queen.Client{b, c} {
				_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: payload}})
				require.NoError(t, err)
				p, err := cl.Pop(ctx, queen.PopRequest{Queue: "q"})
				require.NoError(t, err)
				require.Len(t, p.Messages, 1)
				require.Equal(t, string(payload), string(p.Messages[0].Payload), "%T: popped", cl)
				f, err := cl.Fetch(ctx, "q", queen.DefaultPartition, 0, 1)
				require.NoError(t, err)
				require.Equal(t, string(payload), string(f.Records[0].Payload), "%T: fetched", cl)
			}
		}},
		// remote.Client's dead letters (as its queue and group descriptions)
		// carry their timestamps with millisecond precision, the wire's; a
		// Broker's to the microsecond. A documented difference (remote's package
		// doc): the wire is Queen's, whose admin answers write timestamps with
		// milliseconds ("2006-01-02T15:04:05.000Z", wire contract 1.6), and
		// Queen's clients and dashboard read them; only a message's CreatedAt in
		// a pop or a fetch has microseconds. The remote timestamps are the
		// broker's truncated to the millisecond, and nothing else differs.
		{"AdminTimestampsToTheMillisecond", func(t *testing.T, ctx context.Context, clock *queentest.Clock, b *queen.Broker, c *remote.Client) {
			clock.Advance(1500 * time.Microsecond)
			var letters [2]queen.DeadLetter
			for i, cl := range []queen.Client{b, c} {
				_, err := cl.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}})
				require.NoError(t, err)
				p, err := cl.Pop(ctx, queen.PopRequest{Queue: "q"})
				require.NoError(t, err)
				require.True(t, p.Messages[0].CreatedAt.Equal(clock.Now()), "%T: popped CreatedAt (microseconds)", cl)
				_, err = cl.Ack(ctx, p.Messages[0], false, queen.AckOptions{Status: queen.AckDLQ})
				require.NoError(t, err)
				page, err := cl.DeadLetters(ctx, queen.LetterFilter{Queue: "q"})
				require.NoError(t, err)
				require.Len(t, page.Letters, 1)
				letters[i] = page.Letters[0]
			}
			bl, rl := letters[0], letters[1]
			require.Equal(t, clock.Now(), bl.CreatedAt, "Broker: dead letter CreatedAt")
			require.Equal(t, clock.Now(), bl.FailedAt, "Broker: dead letter FailedAt")
			require.NotEqual(t, bl.CreatedAt, bl.CreatedAt.Truncate(time.Millisecond), "the clock is between two milliseconds")
			require.Equal(t, bl.CreatedAt.Truncate(time.Millisecond), rl.CreatedAt, "remote: dead letter CreatedAt")
			require.Equal(t, bl.FailedAt.Truncate(time.Millisecond), rl.FailedAt, "remote: dead letter FailedAt")
			// Nothing else differs but the ids each broker drew.
			bl.CreatedAt, bl.FailedAt = rl.CreatedAt, rl.FailedAt
			bl.ID, bl.MessageID, bl.TransactionID, bl.PartitionID = rl.ID, rl.MessageID, rl.TransactionID, rl.PartitionID
			require.Equal(t, bl, rl)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := itest.NewClock()
			b := queentest.NewBroker(t, &queen.Options{Clock: clock})
			c, _ := served(t, &queen.Options{Clock: clock}, &remote.Options{Clock: clock})
			tc.run(t, context.Background(), clock, b, c)
		})
	}
}
