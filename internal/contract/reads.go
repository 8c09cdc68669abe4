package contract

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/queenlite/queen"
	"github.com/stretchr/testify/require"
)

// Positions: GroupPositions, SetPosition and a transaction's positions
// (Queen 2.x's). A backend lacking Offsets lacks them too: a position is
// an offset.
const Positions Feature = "group positions"

// FetchByOffset covers FetchPartitions and OffsetForTime (Queen 2.x's
// reads by offset) as it covers Fetch.

// unsupportedPositions is unsupported for Positions, which a backend
// lacking Offsets lacks too.
func (e *env) unsupportedPositions(err error) {
	e.t.Helper()
	if e.has(Positions) && e.has(Offsets) {
		return
	}
	why := e.b.Lacks[Positions]
	if why == "" {
		why = e.b.Lacks[Offsets]
	}
	require.ErrorIs(e.t, err, queen.ErrUnsupported, "%s lacks %s", e.b.Server, Positions)
	e.t.Skipf("unsupported: %s (%s): %v", Positions, why, err)
}

// testFetchPartitions: several partitions read by offset in one call,
// each with its bounds or its refusal; a waiting fetch is woken by a
// push, and one that finds a refusal does not wait.
func testFetchPartitions(e *env) {
	t := e.t
	a := e.push("fp", "a", numbered(3)...)
	e.push("fp", "b", `{"n":10}`, `{"n":11}`)
	reads, err := e.c.FetchPartitions(e.ctx, queen.FetchRequest{Partitions: []queen.FetchPartition{
		{Queue: "fp", Partition: "a", Offset: 1},
		{Queue: "fp", Partition: "b", MaxBytes: 1},
		{Queue: "nothing", Partition: "a"},
		{Queue: "fp", Partition: "b", Offset: 3},
		{Queue: "fp", Partition: "never"},
		{Queue: "fp", Partition: "b", Offset: 2},
	}})
	e.unsupported(FetchByOffset, err)
	require.NoError(t, err)
	require.Len(t, reads, 6)

	r := reads[0]
	require.Equal(t, "fp", r.Queue)
	require.Equal(t, "a", r.Partition)
	require.NoError(t, r.Err)
	require.EqualValues(t, 3, r.HighWatermark)
	require.EqualValues(t, 0, r.LogStartOffset)
	require.Len(t, r.Records, 2)
	for i, rec := range r.Records {
		require.EqualValues(t, i+1, rec.Offset)
		require.Equal(t, a[i+1].TransactionID, rec.TransactionID)
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i+1), string(rec.Payload))
		if e.frozen() {
			require.Equal(t, e.clock.Now().UTC().Truncate(time.Microsecond), rec.CreatedAt.UTC())
		}
	}

	require.Len(t, reads[1].Records, 1, "the first record is given past MaxBytes, no more")
	require.JSONEq(t, `{"n":10}`, string(reads[1].Records[0].Payload))
	require.EqualValues(t, 2, reads[1].HighWatermark)

	require.Equal(t, "nothing", reads[2].Queue)
	require.ErrorIs(t, reads[2].Err, queen.ErrNotFound)
	require.Empty(t, reads[2].Records)

	require.ErrorIs(t, reads[3].Err, queen.ErrOffsetOutOfRange)
	require.EqualValues(t, 2, reads[3].HighWatermark, "the bounds come with the refusal")
	require.EqualValues(t, 0, reads[3].LogStartOffset)
	require.Empty(t, reads[3].Records)

	require.NoError(t, reads[4].Err, "a partition never written is an empty log")
	require.Empty(t, reads[4].Records)
	require.EqualValues(t, 0, reads[4].HighWatermark)

	require.NoError(t, reads[5].Err, "the high watermark is a valid offset")
	require.Empty(t, reads[5].Records)
	require.EqualValues(t, 2, reads[5].HighWatermark)

	// Nothing about groups changed.
	groups, err := e.c.ListGroups(e.ctx, queen.GroupFilter{})
	require.NoError(t, err)
	require.Empty(t, groups, "a read by offset makes no group")

	// A refusal ends a wait at once.
	start := time.Now()
	reads, err = e.c.FetchPartitions(e.ctx, queen.FetchRequest{MaxWait: 25 * time.Second, Partitions: []queen.FetchPartition{
		{Queue: "fp", Partition: "wait"}, {Queue: "nothing"}}})
	require.NoError(t, err)
	require.ErrorIs(t, reads[1].Err, queen.ErrNotFound)
	require.Less(t, time.Since(start), within)

	// A waiting fetch is woken by a push. Its wait outlasts the bound
	// below: only a push can end it in time. The push may land before
	// the fetch reaches the broker; it then finds the record at once.
	type answer struct {
		reads []queen.PartitionRead
		err   error
	}
	got := make(chan answer, 1)
	go func() {
		reads, err := e.c.FetchPartitions(e.ctx, queen.FetchRequest{MaxWait: 25 * time.Second, Partitions: []queen.FetchPartition{
			{Queue: "fp", Partition: "a", Offset: 3}, {Queue: "fp", Partition: "wait"}}})
		got <- answer{reads, err}
	}()
	e.push("fp", "wait", `{"n":7}`)
	select {
	case ans := <-got:
		require.NoError(t, ans.err)
		require.Len(t, ans.reads, 2)
		require.Empty(t, ans.reads[0].Records)
		require.Len(t, ans.reads[1].Records, 1)
		require.JSONEq(t, `{"n":7}`, string(ans.reads[1].Records[0].Payload))
		require.EqualValues(t, 1, ans.reads[1].HighWatermark)
	case <-time.After(within):
		t.Fatal("the waiting fetch was not woken by the push")
	}

	// Invalid input is refused before anything is read.
	_, err = e.c.FetchPartitions(e.ctx, queen.FetchRequest{Partitions: []queen.FetchPartition{{Queue: "fp", Offset: -1}}})
	require.ErrorIs(t, err, queen.ErrInvalidArgument)
}

// testOffsetForTime: the first offset pushed at or after a time.
func testOffsetForTime(e *env) {
	t := e.t
	_, err := e.c.OffsetForTime(e.ctx, "ot", "", time.Now())
	e.unsupported(FetchByOffset, err)
	require.ErrorIs(t, err, queen.ErrNotFound, "an unknown queue")

	t0 := e.clock.Now()
	e.push("ot", "", numbered(2)...)
	e.advance(time.Hour)
	t1 := e.clock.Now()
	e.push("ot", "", `{"n":2}`)
	e.advance(time.Hour)

	got, err := e.c.OffsetForTime(e.ctx, "ot", "", t0.Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, queen.TimeOffset{Found: true, Offset: 0, At: t0.UTC().Truncate(time.Microsecond), HighWatermark: 3}, utcOffset(got),
		"before the log: its start")
	got, err = e.c.OffsetForTime(e.ctx, "ot", queen.DefaultPartition, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, queen.TimeOffset{Found: true, Offset: 2, At: t1.UTC().Truncate(time.Microsecond), HighWatermark: 3}, utcOffset(got))
	got, err = e.c.OffsetForTime(e.ctx, "ot", "", t1)
	require.NoError(t, err)
	require.EqualValues(t, 2, got.Offset, "at the time itself")
	got, err = e.c.OffsetForTime(e.ctx, "ot", "", t1.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, queen.TimeOffset{HighWatermark: 3}, got, "nothing that late: start at the high watermark")
	got, err = e.c.OffsetForTime(e.ctx, "ot", "never", t0)
	require.NoError(t, err)
	require.Equal(t, queen.TimeOffset{}, got, "a partition never written")
}

func utcOffset(o queen.TimeOffset) queen.TimeOffset {
	o.At = o.At.UTC()
	return o
}

// position reads one position of group.
func (e *env) position(group, queue, partition string) queen.Position {
	e.t.Helper()
	got, err := e.c.GroupPositions(e.ctx, group, []queen.PartitionRef{{Queue: queue, Partition: partition}})
	require.NoError(e.t, err)
	require.Len(e.t, got, 1)
	return got[0]
}

// testPositions: positions read, set with metadata, forgotten, refused
// past the high watermark; a set releases the group's lease there.
func testPositions(e *env) {
	t := e.t
	_, err := e.c.GroupPositions(e.ctx, "g", nil)
	e.unsupportedPositions(err)
	require.NoError(t, err)

	e.push("pos", "", numbered(5)...)
	g := e.c.Queue("pos").Group("g").SubscriptionMode(queen.SubscriptionModeAll)
	e.ackAll(e.pop(g.Batch(2)))
	require.Equal(t, queen.Position{Group: "g", Queue: "pos", Partition: queen.DefaultPartition, Offset: 2},
		e.position("g", "pos", ""))
	none := e.position("nobody", "pos", "")
	require.EqualValues(t, queen.NoOffset, none.Offset, "a group that never popped")
	require.EqualValues(t, queen.NoOffset, e.position("g", "pos", "elsewhere").Offset, "a partition that does not exist")
	require.EqualValues(t, queen.NoOffset, e.position("g", "nothing", "").Offset, "a queue that does not exist")

	// Set with metadata, read back, and read from.
	require.NoError(t, e.c.SetPosition(e.ctx, queen.Position{Group: "g", Queue: "pos", Offset: 4, Metadata: "checkpoint 7"}))
	require.Equal(t, queen.Position{Group: "g", Queue: "pos", Partition: queen.DefaultPartition, Offset: 4, Metadata: "checkpoint 7"},
		e.position("g", "pos", queen.DefaultPartition))
	msgs := e.pop(g.Batch(10))
	require.Len(t, msgs, 1)
	require.Equal(t, 4, nOf(msgs[0]))
	e.ackAll(msgs)
	all, err := e.c.GroupPositions(e.ctx, "g", nil)
	require.NoError(t, err)
	require.Equal(t, []queen.Position{{Group: "g", Queue: "pos", Partition: queen.DefaultPartition, Offset: 5, Metadata: "checkpoint 7"}},
		all, "acks move the position and keep its metadata")

	// Forgetting goes back to the group's start point (mode all: 0) and
	// drops the metadata.
	require.NoError(t, e.c.SetPosition(e.ctx, queen.Position{Group: "g", Queue: "pos", Forget: true}))
	require.Equal(t, queen.Position{Group: "g", Queue: "pos", Partition: queen.DefaultPartition, Offset: 0},
		e.position("g", "pos", ""))
	require.NoError(t, e.c.SetPosition(e.ctx, queen.Position{Group: "g", Queue: "pos", Partition: "elsewhere", Forget: true}),
		"forgetting where nothing is changes nothing")

	// Refusals.
	err = e.c.SetPosition(e.ctx, queen.Position{Group: "g", Queue: "pos", Offset: 6})
	require.ErrorIs(t, err, queen.ErrOffsetOutOfRange, "past the high watermark")
	require.NoError(t, e.c.SetPosition(e.ctx, queen.Position{Group: "g", Queue: "pos", Offset: 5}), "the high watermark itself")
	require.ErrorIs(t, e.c.SetPosition(e.ctx, queen.Position{Group: "g", Queue: "nothing", Offset: 0}), queen.ErrNotFound)
	require.ErrorIs(t, e.c.SetPosition(e.ctx, queen.Position{Group: "g", Queue: "pos", Partition: "elsewhere"}), queen.ErrNotFound)
	require.ErrorIs(t, e.c.SetPosition(e.ctx, queen.Position{Group: "g", Queue: "pos", Offset: -1}), queen.ErrInvalidArgument)
	require.EqualValues(t, 5, e.position("g", "pos", "").Offset, "refusals changed nothing")

	// The queue-mode group by its empty name.
	e.ackAll(e.pop(e.c.Queue("pos").Batch(1)))
	qm := e.position("", "pos", "")
	require.Equal(t, queen.QueueModeGroup, qm.Group)
	require.EqualValues(t, 1, qm.Offset)

	// A set releases the group's live lease on the partition: acks under
	// it are refused, and the messages come again from the set position.
	h := e.c.Queue("pos").Group("h").SubscriptionMode(queen.SubscriptionModeAll)
	leased := e.pop(h.Batch(3))
	require.Len(t, leased, 3)
	require.NoError(t, e.c.SetPosition(e.ctx, queen.Position{Group: "h", Queue: "pos", Offset: 1}))
	_, err = e.c.Ack(e.ctx, leased[1], true, queen.AckOptions{})
	require.ErrorIs(t, err, queen.ErrLeaseExpired, "the lease was released by the set")
	again := e.pop(h.Batch(10))
	require.Len(t, again, 4)
	require.Equal(t, 1, nOf(again[0]), "from the set position")
	e.ackAll(again)
	require.EqualValues(t, 5, e.position("h", "pos", "").Offset)

	// A group's first contact may be a set: it is made by it.
	require.NoError(t, e.c.SetPosition(e.ctx, queen.Position{Group: "fresh", Queue: "pos", Offset: 3, Metadata: "imported"}))
	require.Equal(t, queen.Position{Group: "fresh", Queue: "pos", Partition: queen.DefaultPartition, Offset: 3, Metadata: "imported"},
		e.position("fresh", "pos", ""))
	msgs = e.pop(e.c.Queue("pos").Group("fresh").Batch(10))
	require.Len(t, msgs, 2)
	require.Equal(t, 3, nOf(msgs[0]))

	// The queue-mode group made by a set, named as the wire names it:
	// like a queue-mode pop, it starts at the first message of every
	// other partition, whatever the default subscription mode.
	e.push("posqm", "a", numbered(2)...)
	e.push("posqm", "b", numbered(2)...)
	require.NoError(t, e.c.SetPosition(e.ctx, queen.Position{Group: queen.QueueModeGroup, Queue: "posqm", Partition: "a", Offset: 1}))
	require.EqualValues(t, 0, e.position("", "posqm", "b").Offset, "the other partition from its start")
	msgs = e.pop(e.c.Queue("posqm").Partition("b").Batch(10))
	require.Len(t, msgs, 2, "nothing skipped")
}

// testTransactionPositions: a position rides a transaction with an ack
// and a push, all or nothing.
func testTransactionPositions(e *env) {
	t := e.t
	_, err := e.c.GroupPositions(e.ctx, "g", nil)
	e.unsupportedPositions(err)

	e.push("tp", "", numbered(3)...)
	msgs := e.pop(e.c.Queue("tp").Batch(1))
	require.Len(t, msgs, 1)

	// Refused whole: the position is past the high watermark.
	res, err := e.c.ExecTransaction(e.ctx, []queen.TxOp{
		{Ack: &queen.AckItem{TransactionID: msgs[0].TransactionID, PartitionID: msgs[0].PartitionID, LeaseID: msgs[0].LeaseID,
			Status: queen.AckCompleted}},
		{Push: &queen.PushItem{Queue: "tp-out", Payload: json.RawMessage(`{"n":9}`)}},
		{Position: &queen.Position{Group: "g", Queue: "tp", Offset: 99, Metadata: "x"}},
	})
	require.ErrorIs(t, err, queen.ErrTransactionAborted)
	require.ErrorIs(t, err, queen.ErrOffsetOutOfRange)
	var te *queen.TransactionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 2, te.Index)
	require.Equal(t, "position", te.Op)
	require.NotNil(t, res)
	require.Empty(t, e.pop(e.c.Queue("tp-out")), "nothing pushed")
	require.EqualValues(t, queen.NoOffset, e.position("g", "tp", "").Offset, "no position set, no group made")
	require.Empty(t, e.pop(e.c.Queue("tp")), "the acked message is still leased, the others behind it")

	// Refused whole: an unknown queue, the position first.
	_, err = e.c.ExecTransaction(e.ctx, []queen.TxOp{
		{Position: &queen.Position{Group: "g", Queue: "nothing", Offset: 0}},
		{Ack: &queen.AckItem{TransactionID: msgs[0].TransactionID, PartitionID: msgs[0].PartitionID, LeaseID: msgs[0].LeaseID,
			Status: queen.AckCompleted}},
	})
	require.ErrorIs(t, err, queen.ErrNotFound)
	require.ErrorAs(t, err, &te)
	require.Equal(t, 0, te.Index)
	require.Equal(t, "position", te.Op)

	// Applied whole.
	res, err = e.c.ExecTransaction(e.ctx, []queen.TxOp{
		{Position: &queen.Position{Group: "g", Queue: "tp", Offset: 2, Metadata: "m"}},
		{Ack: &queen.AckItem{TransactionID: msgs[0].TransactionID, PartitionID: msgs[0].PartitionID, LeaseID: msgs[0].LeaseID,
			Status: queen.AckCompleted}},
		{Push: &queen.PushItem{Queue: "tp-out", Payload: json.RawMessage(`{"n":9}`)}},
	})
	require.NoError(t, err)
	require.Len(t, res.Results, 3)
	require.Equal(t, &queen.Position{Group: "g", Queue: "tp", Partition: queen.DefaultPartition, Offset: 2, Metadata: "m"}, res.Results[0].Position)
	require.True(t, res.Results[1].Ack.Success)
	require.Equal(t, queen.PushQueued, res.Results[2].Push.Status)
	require.Equal(t, queen.Position{Group: "g", Queue: "tp", Partition: queen.DefaultPartition, Offset: 2, Metadata: "m"},
		e.position("g", "tp", ""))
	require.EqualValues(t, 1, e.position("", "tp", "").Offset, "the ack moved the queue-mode group")
	out := e.pop(e.c.Queue("tp-out"))
	require.Len(t, out, 1)
	require.Equal(t, 9, nOf(out[0]))
}
