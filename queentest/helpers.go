package queentest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/queenlite/queen"
)

// WaitTimeout bounds, in real time, how long [WaitDrained] and
// [WaitOutcome] wait before they fail the test.
const WaitTimeout = 10 * time.Second

// waitTimeout is WaitTimeout; the package's own tests shorten it.
var waitTimeout = WaitTimeout

// pollTick is how often the wait helpers look at the broker again.
const pollTick = 2 * time.Millisecond

// WaitDrained waits until consumer group has nothing left to do on queue:
// no message it has not settled (acked, dead-lettered or parked), none
// under its lease. An empty group is the queue-mode group, as in
// [queen.PopRequest]. A group that has not joined the queue yet is drained
// only while the queue holds no message (or does not exist).
//
// It polls the group's statistics every few milliseconds and fails the
// test after [WaitTimeout]. It waits on real time, never moves a fake
// clock: a message waiting for a retry delay or a delayed-processing time
// is not drained until the test advances the clock past it.
func WaitDrained(tb testing.TB, b *queen.Broker, queue, group string) {
	tb.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		done, state, err := drained(b, queue, group)
		if err != nil {
			tb.Fatalf("queentest: WaitDrained(%q, %q): %v", queue, group, err)
			return
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("queentest: WaitDrained(%q, %q): not drained after %s: %s", queue, group, waitTimeout, state)
			return
		}
		time.Sleep(pollTick)
	}
}

// drained reports whether group has nothing left on queue, and otherwise
// what is left.
func drained(b *queen.Broker, queue, group string) (bool, string, error) {
	ctx := context.Background()
	name := group
	if name == "" {
		name = queen.QueueModeGroup
	}
	groups, err := b.ListGroups(ctx, queen.GroupFilter{Group: name})
	if err != nil {
		return false, "", err
	}
	for _, g := range groups {
		if g.Queue == queue {
			return g.Lag == 0 && g.InFlight == 0, fmt.Sprintf("%d message(s) not settled, %d of them leased", g.Lag, g.InFlight), nil
		}
	}
	qs, err := b.QueueStats(ctx, queue)
	if errors.Is(err, queen.ErrNotFound) {
		return true, "", nil
	}
	if err != nil {
		return false, "", err
	}
	return qs.Messages == 0, fmt.Sprintf("the group has not joined the queue, which holds %d message(s)", qs.Messages), nil
}

// WaitOutcome waits until consume loops on b have finished at least n
// messages with outcome, counted since b opened over every queue and
// group (see [queen.Counters].Consumed). A test waits for
// [queen.OutcomeRetried] before it advances a fake clock by a retry
// delay, so the delay has been set (from the clock's time then) when the
// clock moves.
//
// It polls every few milliseconds and fails the test after
// [WaitTimeout].
func WaitOutcome(tb testing.TB, b *queen.Broker, outcome queen.Outcome, n int64) {
	tb.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		got := b.Counters().Consumed[outcome]
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("queentest: WaitOutcome(%q, %d): %d after %s", outcome, n, got, waitTimeout)
			return
		}
		time.Sleep(pollTick)
	}
}

// fetchLimit is the page size of the reads of [RequirePushed].
const fetchLimit = 1000

// RequirePushed fails the test unless queue holds exactly n messages, and
// returns them: partition by partition in name order, each partition's in
// offset (push) order. It reads what the queue stores, whether or not a
// group consumed it; messages removed by retention or
// [queen.Broker.DeleteMessage] are not counted. A queue that does not
// exist holds none.
func RequirePushed(tb testing.TB, b *queen.Broker, queue string, n int) []queen.Record {
	tb.Helper()
	if n < 0 {
		tb.Fatalf("queentest: RequirePushed(%q, %d): n must not be negative", queue, n)
		return nil
	}
	ctx := context.Background()
	qs, err := b.QueueStats(ctx, queue)
	if errors.Is(err, queen.ErrNotFound) {
		if n != 0 {
			tb.Fatalf("queentest: RequirePushed(%q): no such queue, want %d message(s)", queue, n)
		}
		return nil
	}
	if err != nil {
		tb.Fatalf("queentest: RequirePushed(%q): %v", queue, err)
		return nil
	}
	var out []queen.Record
	for _, p := range qs.Partitions {
		for from := int64(0); ; {
			res, err := b.Fetch(ctx, queue, p.Name, from, fetchLimit)
			if err != nil {
				tb.Fatalf("queentest: RequirePushed(%q): partition %q: %v", queue, p.Name, err)
				return nil
			}
			out = append(out, res.Records...)
			if len(res.Records) < fetchLimit {
				break
			}
			from = res.NextOffset
		}
	}
	if len(out) != n {
		tb.Fatalf("queentest: RequirePushed(%q): %d message(s), want %d%s", queue, len(out), n, describe(out))
		return nil
	}
	return out
}

// describe lists the first few payloads of recs for a failure message.
func describe(recs []queen.Record) string {
	if len(recs) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString(":")
	for i, r := range recs {
		if i == 5 {
			fmt.Fprintf(&sb, "\n\t… and %d more", len(recs)-i)
			break
		}
		p := string(r.Payload)
		if len(p) > 200 {
			p = p[:200] + "…"
		}
		fmt.Fprintf(&sb, "\n\toffset %d, transaction %q: %s", r.Offset, r.TransactionID, p)
	}
	return sb.String()
}

// DeadLetters returns the dead letters of queue (of every queue when
// queue is ""), oldest failure first: the messages a consumer group gave
// up on, with the error that ended them (see [queen.Broker.DeadLetters]).
// A broker error fails the test.
func DeadLetters(tb testing.TB, b *queen.Broker, queue string) []queen.DeadLetter {
	tb.Helper()
	var out []queen.DeadLetter
	for {
		page, err := b.DeadLetters(context.Background(), queen.LetterFilter{Queue: queue, Limit: fetchLimit, Offset: len(out)})
		if err != nil {
			tb.Fatalf("queentest: DeadLetters(%q): %v", queue, err)
			return nil
		}
		out = append(out, page.Letters...)
		if len(page.Letters) == 0 || len(out) >= page.Total {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
