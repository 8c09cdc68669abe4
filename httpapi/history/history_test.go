package history_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi/history"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

// fakeProcess counts CPU time up by user and sys on every read.
type fakeProcess struct {
	user, sys time.Duration
	rss       int64
	now       history.Process
}

func (f *fakeProcess) read() history.Process {
	f.now.CPUUser += f.user
	f.now.CPUSystem += f.sys
	f.now.RSS = f.rss
	return f.now
}

// rig is a broker on a fake clock that starts on the hour, and a Recorder
// of it sampling every 10 s.
type rig struct {
	b     *queen.Broker
	clock *queentest.Clock
	rec   *history.Recorder
	start time.Time
}

func newRig(t *testing.T, opts *history.Options) *rig {
	t.Helper()
	start := itest.Epoch().Truncate(time.Hour)
	clock := queentest.NewClock(start)
	b := queentest.NewBroker(t, &queen.Options{Clock: clock})
	o := history.Options{Interval: 10 * time.Second}
	if opts != nil {
		o = *opts
	}
	if o.Process == nil {
		o.Process = (&fakeProcess{}).read
	}
	rec := history.New(b, &o)
	t.Cleanup(func() { require.NoError(t, rec.Close()) })
	return &rig{b: b, clock: clock, rec: rec, start: start}
}

func (r *rig) push(t *testing.T, queue, partition string, n int) {
	t.Helper()
	items := make([]queen.PushItem, n)
	for i := range items {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	_, err := r.b.Push(bg, items)
	require.NoError(t, err)
}

func (r *rig) popAck(t *testing.T, queue string, n int, st queen.AckStatus) {
	t.Helper()
	res, err := r.b.Pop(bg, queen.PopRequest{Queue: queue, Batch: n})
	require.NoError(t, err)
	require.Len(t, res.Messages, n)
	items := make([]queen.AckItem, n)
	for i, m := range res.Messages {
		items[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: st}
	}
	out, err := r.b.AckBatch(bg, items)
	require.NoError(t, err)
	for _, a := range out {
		require.True(t, a.Success, "%v", a.Err)
	}
}

func (r *rig) sample(t *testing.T) {
	t.Helper()
	require.NoError(t, r.rec.Sample(bg))
}

// TestRecorder_Figures: 100 pushes, then 40 pops 10 s after them (30
// acked completed, 10 failed), read over two samples 10 s apart, give 5
// pushes per second over the 20 s, 2 pops and acks per second, 10 s of
// lag, and the queue's state at the end.
func TestRecorder_Figures(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	cfg := queen.DefaultQueueConfig()
	cfg.RetryLimit = 0
	_, err := r.b.ConfigureQueue(bg, "orders", cfg)
	require.NoError(t, err)

	r.sample(t) // the baseline: records nothing
	require.Empty(t, r.rec.Samples(time.Time{}, time.Time{}))
	r.push(t, "orders", "p1", 100)
	r.clock.Advance(10 * time.Second)
	r.sample(t)
	r.popAck(t, "orders", 30, queen.AckCompleted)
	r.popAck(t, "orders", 10, queen.AckFailed)
	r.clock.Advance(10 * time.Second)
	r.sample(t)

	samples := r.rec.Samples(time.Time{}, time.Time{})
	require.Len(t, samples, 2)
	require.Equal(t, r.start.Add(10*time.Second), samples[0].At)
	require.Equal(t, 10*time.Second, samples[0].Elapsed)
	require.EqualValues(t, 100, samples[0].Totals.Pushed)
	require.Zero(t, samples[0].Totals.Popped)
	require.EqualValues(t, 40, samples[1].Totals.Popped)
	require.EqualValues(t, 40, samples[1].Totals.Acked)
	require.EqualValues(t, 10, samples[1].Totals.AckFailed)
	require.EqualValues(t, 10, samples[1].Totals.DeadLettered, "failed with no retries left")
	q, ok := samples[0].Queue("orders")
	require.True(t, ok)
	require.EqualValues(t, 1, q.PartitionsCreated)
	require.EqualValues(t, 1, samples[0].Totals.PartitionsCreated)

	buckets := r.rec.Series(r.start, r.start.Add(time.Minute), time.Minute)
	require.Len(t, buckets, 1)
	bk := buckets[0]
	require.Equal(t, r.start, bk.Start)
	require.Equal(t, 20*time.Second, bk.Elapsed)
	require.Equal(t, 2, bk.Samples)
	require.InDelta(t, 5.0, bk.PerSecond(bk.Totals.Pushed), 1e-9)
	require.InDelta(t, 2.0, bk.PerSecond(bk.Totals.Popped), 1e-9)
	require.InDelta(t, 2.0, bk.PerSecond(bk.Totals.Acked), 1e-9)
	require.EqualValues(t, 40, bk.Totals.LagCount)
	require.EqualValues(t, 1, bk.Totals.PushBatches)
	require.EqualValues(t, 2, bk.Totals.PopBatches)
	require.EqualValues(t, 2, bk.Totals.AckBatches)
	require.Equal(t, 10*time.Second, bk.Totals.AvgLag())
	require.Equal(t, 10*time.Second, bk.Totals.LagMax)

	q, ok = bk.Queue("orders")
	require.True(t, ok)
	require.EqualValues(t, 100, q.Pushed)
	require.EqualValues(t, 40, q.Popped)
	require.EqualValues(t, 10, q.AckFailed)
	require.Equal(t, 10*time.Second, q.AvgLag())
	require.EqualValues(t, 100, q.State.Messages)
	require.EqualValues(t, 60, q.State.Pending)
	require.EqualValues(t, 10, q.State.DeadLetters)
	require.Equal(t, 2, q.State.Partitions, "Default, made with the queue, and p1")
}

// TestRecorder_Series buckets samples by the span holding the middle of
// their interval, and leaves out what is outside (from, to].
func TestRecorder_Series(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	r.sample(t)
	for i := 1; i <= 9; i++ { // samples at 10 s, 20 s, ... 90 s
		r.push(t, "q", "p", i)
		r.clock.Advance(10 * time.Second)
		r.sample(t)
	}
	buckets := r.rec.Series(r.start, r.start.Add(time.Hour), time.Minute)
	require.Len(t, buckets, 2)
	require.Equal(t, 6, buckets[0].Samples, "10 s … 60 s: the one at 60 s covers 50–60 s")
	require.EqualValues(t, 1+2+3+4+5+6, buckets[0].Totals.Pushed)
	require.Equal(t, r.start.Add(time.Minute), buckets[1].Start)
	require.EqualValues(t, 7+8+9, buckets[1].Totals.Pushed)

	got := r.rec.Series(r.start.Add(20*time.Second), r.start.Add(40*time.Second), 0)
	require.Len(t, got, 2, "width 0 is the interval; from is excluded, to included")
	require.EqualValues(t, 3, got[0].Totals.Pushed)
	require.EqualValues(t, 4, got[1].Totals.Pushed)
	require.Equal(t, 10*time.Second, got[0].Width)
}

// TestRecorder_Bounded keeps Window/Interval samples, the newest, and at
// most MaxQueues queues a sample (the first by name), while the totals
// count every queue.
func TestRecorder_Bounded(t *testing.T) {
	t.Parallel()
	r := newRig(t, &history.Options{Interval: 10 * time.Second, Window: 30 * time.Second, MaxQueues: 2})
	require.Equal(t, 3, r.rec.Capacity())
	r.sample(t)
	for i := 1; i <= 5; i++ {
		r.push(t, "c", "p", i)
		r.push(t, "a", "p", 1)
		r.push(t, "b", "p", 1)
		r.clock.Advance(10 * time.Second)
		r.sample(t)
	}
	s := r.rec.Samples(time.Time{}, time.Time{})
	require.Len(t, s, 3)
	require.Equal(t, r.start.Add(30*time.Second), s[0].At, "the two oldest were dropped")
	require.EqualValues(t, 3+2, s[0].Totals.Pushed)
	require.Len(t, s[2].Queues, 2)
	require.Equal(t, "a", s[2].Queues[0].Name)
	require.Equal(t, "b", s[2].Queues[1].Name)
	_, ok := s[2].Queue("c")
	require.False(t, ok)
	require.EqualValues(t, 5+1+1, s[2].Totals.Pushed, "c counts in the totals")
	latest, ok := r.rec.Latest()
	require.True(t, ok)
	require.Equal(t, s[2].At, latest.At)
}

// TestRecorder_QueueMadeAgain: a queue deleted and made again between two
// samples counts from zero, not negatively; its partitions count as
// deleted and created.
func TestRecorder_QueueMadeAgain(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	r.push(t, "q", "p", 5)
	r.sample(t)
	_, err := r.b.DeleteQueue(bg, "q")
	require.NoError(t, err)
	r.push(t, "q", "p", 2)
	r.clock.Advance(10 * time.Second)
	r.sample(t)
	s, ok := r.rec.Latest()
	require.True(t, ok)
	q, _ := s.Queue("q")
	require.EqualValues(t, 2, q.Pushed)
	require.EqualValues(t, 2, s.Totals.Pushed)

	_, err = r.b.DeleteQueue(bg, "q")
	require.NoError(t, err)
	r.clock.Advance(10 * time.Second)
	r.sample(t)
	s, _ = r.rec.Latest()
	require.Empty(t, s.Queues)
	require.EqualValues(t, 1, s.Totals.PartitionsDeleted, "the deleted queue's partition")

	// Pushes to a queue deleted before the next sample still count in the
	// totals (the broker's own), though the queue and its counters are gone.
	r.push(t, "gone", "p", 3)
	_, err = r.b.DeleteQueue(bg, "gone")
	require.NoError(t, err)
	r.clock.Advance(10 * time.Second)
	r.sample(t)
	s, _ = r.rec.Latest()
	require.Empty(t, s.Queues)
	require.EqualValues(t, 3, s.Totals.Pushed)
}

// TestRecorder_WaitingPops samples the long-polls waiting on each queue
// and averages them over a bucket.
func TestRecorder_WaitingPops(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	r.push(t, "q", "p", 1)
	r.sample(t)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.b.Pop(ctx, queen.PopRequest{Queue: "q", Partition: "other", Wait: true, Timeout: time.Minute})
	}()
	itest.AwaitWaiting(t, r.b, 1)
	r.clock.Advance(10 * time.Second)
	r.sample(t)
	cancel()
	<-done
	r.clock.Advance(10 * time.Second)
	r.sample(t)
	s := r.rec.Samples(time.Time{}, time.Time{})
	q0, _ := s[0].Queue("q")
	q1, _ := s[1].Queue("q")
	require.Equal(t, 1.0, q0.WaitingPops)
	require.Zero(t, q1.WaitingPops)
	b := r.rec.Series(time.Time{}, time.Time{}, time.Minute)
	require.Len(t, b, 1)
	q, _ := b[0].Queue("q")
	require.Equal(t, 0.5, q.WaitingPops, "the mean of 1 and 0")
}

// TestRecorder_Process takes CPU time as a difference and as a share of
// the time covered, and the newest resident memory.
func TestRecorder_Process(t *testing.T) {
	t.Parallel()
	p := &fakeProcess{user: 2 * time.Second, sys: time.Second, rss: 64 << 20}
	r := newRig(t, &history.Options{Interval: 10 * time.Second, Process: p.read})
	r.sample(t)
	r.clock.Advance(20 * time.Second) // a late sample: its interval is what passed
	r.sample(t)
	b := r.rec.Series(time.Time{}, time.Time{}, time.Minute)
	require.Len(t, b, 1)
	require.Equal(t, 20*time.Second, b[0].Elapsed)
	require.Equal(t, 2*time.Second, b[0].CPUUser)
	require.Equal(t, time.Second, b[0].CPUSystem)
	require.InDelta(t, 10.0, b[0].CPUPercent(b[0].CPUUser), 1e-9)
	require.InDelta(t, 5.0, b[0].CPUPercent(b[0].CPUSystem), 1e-9)
	require.EqualValues(t, 64<<20, b[0].RSS)
}

// queuesOnly is a client without Counters and QueueCounters, as a remote
// one is.
type queuesOnly struct{ queen.Client }

// TestRecorder_ClientWithoutCounters samples a client that only lists
// queues: states are filled, counts are zero.
func TestRecorder_ClientWithoutCounters(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	rec := history.New(queuesOnly{r.b}, &history.Options{Now: r.clock.Now, Process: (&fakeProcess{}).read})
	require.NoError(t, rec.Sample(bg))
	r.push(t, "q", "p", 3)
	r.clock.Advance(10 * time.Second)
	require.NoError(t, rec.Sample(bg))
	s, ok := rec.Latest()
	require.True(t, ok)
	require.Zero(t, s.Totals.Pushed)
	q, ok := s.Queue("q")
	require.True(t, ok)
	require.EqualValues(t, 3, q.State.Messages)
	require.Equal(t, 10*time.Second, s.Elapsed, "stamped with Options.Now")
}

// TestRecorder_StartTicks takes a baseline at Start and a sample on each
// tick, and stops when the ticks end; Close waits for it.
func TestRecorder_StartTicks(t *testing.T) {
	t.Parallel()
	tick := make(chan time.Time)
	r := newRig(t, &history.Options{Interval: 10 * time.Second, Tick: tick})
	require.NoError(t, r.rec.Start())
	require.NoError(t, r.rec.Start(), "a second Start does nothing")
	tick <- time.Time{} // received once the baseline is read
	for i := 1; i <= 2; i++ {
		r.push(t, "q", "p", i)
		r.clock.Advance(10 * time.Second)
		tick <- time.Time{}
	}
	close(tick)
	require.NoError(t, r.rec.Close())
	s := r.rec.Samples(time.Time{}, time.Time{})
	require.Len(t, s, 3, "one sample a tick")
	var pushed int64
	for _, x := range s {
		pushed += x.Totals.Pushed
	}
	require.EqualValues(t, 1+2, pushed, "the pushes after the baseline, whichever sample saw them")
	require.ErrorIs(t, r.rec.Start(), history.ErrClosed)
	require.NoError(t, r.rec.Close(), "a second Close")
}

// TestRecorder_SampleError records nothing when the client fails.
func TestRecorder_SampleError(t *testing.T) {
	t.Parallel()
	clock := queentest.NewClock(itest.Epoch())
	b, err := queen.Open("", &queen.Options{InMemory: true, Clock: clock})
	require.NoError(t, err)
	rec := history.New(b, nil)
	require.NoError(t, rec.Sample(bg))
	require.NoError(t, b.Close())
	require.ErrorIs(t, rec.Sample(bg), queen.ErrClosed)
	require.Empty(t, rec.Samples(time.Time{}, time.Time{}))
}

// TestNew_Defaults: 10 s samples over an hour, and a floor on the
// interval.
func TestNew_Defaults(t *testing.T) {
	t.Parallel()
	b := queentest.NewBroker(t, nil)
	rec := history.New(b, nil)
	require.Equal(t, history.DefaultInterval, rec.Interval())
	require.Equal(t, 360, rec.Capacity())
	require.Equal(t, history.MinInterval, history.New(b, &history.Options{Interval: time.Millisecond}).Interval())
	require.Panics(t, func() { history.New(nil, nil) })
}
