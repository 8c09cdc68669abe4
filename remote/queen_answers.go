package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/queenlite/queen"
)

// This file reads the answers in which Queen's own server differs from
// cmd/queen in what they mean, not only in their shape (wire contract,
// Part C): errors sent with 200, a lease that ignores the pop's, counts
// from a table refreshed in the background, and a transaction stopped by
// the database's statement timeout.

// errorIn reports an error that an answer sent with 200 carries, as
// Queen's server answers an unknown queue ({"error":"Queue not found"}) or
// partition ({"success":false,"error":"Partition not found"}). It is nil
// for an answer that reports no error. notFound names the one error text
// that means the thing asked for does not exist.
func errorIn(op string, body []byte, notFound string) error {
	var eb struct {
		Success *bool           `json:"success"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &eb) != nil {
		return nil // not an object: the caller decodes what it expects
	}
	var text string
	if len(eb.Error) > 0 && string(eb.Error) != "null" {
		if json.Unmarshal(eb.Error, &text) != nil {
			text = string(eb.Error)
		}
	}
	switch {
	case text == "" && (eb.Success == nil || *eb.Success):
		return nil
	case text == notFound:
		return fmt.Errorf("%w: %s", queen.ErrNotFound, text)
	case text == "":
		text = "refused, with no reason given"
	}
	return &ServerError{Op: op, StatusCode: http.StatusOK, Message: text}
}

// refreshStats asks Queen's server to bring its stats table up to date
// (POST /api/v1/stats/refresh), so that the counts read next are those of
// now, not of its last background pass (every 10 s, a full one every 2
// min). While another server over the same database runs its own pass the
// refresh, or its partition step, is skipped: that pass is awaited (a few
// short waits) and the refresh asked again, and one that never runs is an
// error matching [queen.ErrUnavailable], never counts that may be old. A
// refresh skipped for another reason (package httpapi answers so: its
// counts are live) needs no waiting. The route is one of Queen's admin
// routes: a token without that right gets a [*ServerError] 403.
func (c *Client) refreshStats(ctx context.Context) error {
	type skip struct {
		Skipped bool   `json:"skipped"`
		Reason  string `json:"reason"`
	}
	wait := 20 * time.Millisecond
	for try := 0; ; try++ {
		var out struct {
			skip
			Partition skip `json:"partition"`
		}
		r := &request{op: "refresh stats", method: http.MethodPost, path: "/api/v1/stats/refresh", body: map[string]any{}, safe: true}
		if err := c.call(ctx, r, &out); err != nil {
			return err
		}
		busy := out.Skipped && strings.HasPrefix(out.Reason, "another_instance") || out.Partition.Skipped
		if !busy {
			return nil
		}
		if try == 5 {
			return fmt.Errorf("%w: queen: remote refresh stats: Queen's server skipped the refresh six times (%s): its counts would be stale",
				queen.ErrUnavailable, firstOf(out.Reason, out.Partition.Reason))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		wait *= 2
	}
}

// queueLease is the lease Queen's server gives the pops of queue: the
// queue's LeaseTime, in whole seconds. found is false for a queue it does
// not know (yet).
func (c *Client) queueLease(ctx context.Context, queue string) (secs int64, found bool, err error) {
	s, err := c.statusQueue(ctx, queue)
	if isNotFound(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return s.Queue.Config.LeaseTime, true, nil
}

// leaseSecs is a pop's Lease as it travels: whole seconds, rounded up.
func leaseSecs(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// errShorterLease is the answer to a pop whose Lease is shorter than the
// lease Queen's server would give.
func errShorterLease(asked, queue int64) error {
	return fmt.Errorf("%w: a pop Lease of %ds on Queen's server, which leases for the queue's LeaseTime (%ds) and never shortens a lease: configure the queue's LeaseTime instead",
		queen.ErrUnsupported, asked, queue)
}

// leasePlan is what a pop with a Lease needs on Queen's server, which
// ignores a pop's leaseSeconds and leases for the queue's LeaseTime: asked
// is the pop's Lease and have the queue's, in whole seconds (found false
// while the queue did not exist).
type leasePlan struct {
	asked, have int64
	found       bool
}

// planLease checks, before a pop, that the lease Queen's server will give
// can become the one asked: a longer Lease is reached by extending the
// lease right after the pop, a shorter one cannot be (an extension never
// shortens it), so that pop is [queen.ErrUnsupported] and nothing is
// popped. A discovery pop (no queue) names no queue to ask about:
// [queen.ErrUnsupported] too.
func (c *Client) planLease(ctx context.Context, req *queen.PopRequest) (*leasePlan, error) {
	if req.Queue == "" {
		return nil, fmt.Errorf("%w: a pop Lease without a queue on Queen's server, which leases for the queue's LeaseTime", queen.ErrUnsupported)
	}
	p := &leasePlan{asked: leaseSecs(req.Lease)}
	var err error
	if p.have, p.found, err = c.queueLease(ctx, req.Queue); err != nil {
		return nil, err
	}
	if p.found && p.have > p.asked {
		return nil, errShorterLease(p.asked, p.have)
	}
	return p, nil
}

// fitLease gives the messages of res the lease of p, after the pop: it
// extends the lease when the queue's is shorter. A queue that did not
// exist before the pop is asked about now; when its lease is longer than
// asked, the messages are given back (status retry, which spends no
// retry budget) and the pop is [queen.ErrUnsupported].
func (c *Client) fitLease(ctx context.Context, p *leasePlan, res *queen.PopResult) (*queen.PopResult, error) {
	if !p.found {
		var err error
		if p.have, p.found, err = c.queueLease(ctx, res.Queue); err != nil {
			return nil, err
		}
		if p.have > p.asked {
			return nil, c.giveBack(ctx, res, errShorterLease(p.asked, p.have))
		}
	}
	if p.have < p.asked {
		if _, err := c.RenewLease(ctx, res.LeaseID, time.Duration(p.asked)*time.Second); err != nil {
			return nil, fmt.Errorf("queen: remote pop: extending the lease to the pop's %ds on Queen's server: %w", p.asked, err)
		}
	}
	return res, nil
}

// giveBack returns a pop's messages (status retry) and then reports why.
func (c *Client) giveBack(ctx context.Context, res *queen.PopResult, why error) error {
	items := make([]queen.AckItem, len(res.Messages))
	for i, m := range res.Messages {
		items[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: m.ConsumerGroup,
			Status: queen.AckRetry}
	}
	if _, err := c.AckBatch(ctx, items); err != nil {
		return fmt.Errorf("%w (and giving the messages back failed: they return when the queue's lease runs out: %v)", why, err)
	}
	return why
}

// statementTimeout rewrites the answer of a transaction that Queen's
// database stopped at its statement timeout (PostgreSQL's
// statement_timeout: 30 s in Queen's default setup) so that it says so.
// Nothing of the transaction was applied. It is mostly a transaction too
// large for that server: 10,000 pushes took longer than 30 s on a 2-core
// machine where 5,000 took 8 s.
func statementTimeout(reason string) (string, bool) {
	if !strings.Contains(reason, "statement timeout") {
		return reason, false
	}
	return "Queen's database stopped the transaction at its statement timeout, so nothing of it was applied " +
		"(split it into smaller transactions): " + strings.TrimSpace(reason), true
}

// liveCounts makes the counts read next those of now: on Queen's server
// it refreshes the stats table they come from (see refreshStats); other
// servers count as they answer.
func (c *Client) liveCounts(ctx context.Context) error {
	if c.serverKind(ctx) != ServerQueen {
		return nil
	}
	return c.refreshStats(ctx)
}
