package remote

import (
	"context"
	"fmt"
	"net/http"

	"github.com/queenlite/queen"
)

// Queen's server applies the items of an ack batch one by one, each
// completed one setting its group's cursor to that message, so a batch
// [completed m1, failed m2, completed m3] of one partition leaves the
// cursor past m2: m2 is never delivered again nor dead-lettered (wire
// contract, Part C). A broker stops the cursor before m2 instead, and
// delivers m2 and m3 again (m2 spent one retry). queenAcks gets the
// broker's outcome from that server by never sending a completed ack
// behind a failed or retry one of the same partition and group: per
// (partition, group), in the order given, it sends the acks before the
// first failed or retry one together, then that one alone. When the lone
// ack dead-lettered its message (no retry budget left) or was refused, the
// rest of that partition's acks go on the same way; when it gave the
// batch back, the rest are not sent and are reported as a broker reports
// them (accepted, changing nothing: they are delivered again). Items of
// different groups go in different batches, because that server reads a
// batch's group once for all of its items.

// comesBack reports an ack status that gives the batch back from its
// message on (a failed ack with budget left, or retry).
func comesBack(st string) bool {
	return st == string(queen.AckFailed) || st == string(queen.AckRetry)
}

// queenAcks sends wire (the items, in order) to Queen's server as
// described above and returns one result per item.
func (c *Client) queenAcks(ctx context.Context, wire []ackJSON) ([]ackResultJSON, error) {
	type lane struct{ todo []int }
	var lanes []*lane
	byKey := map[[2]string]*lane{}
	for i := range wire {
		k := [2]string{wire[i].PartitionID, wire[i].ConsumerGroup}
		l := byKey[k]
		if l == nil {
			l = &lane{}
			byKey[k] = l
			lanes = append(lanes, l)
		}
		l.todo = append(l.todo, i)
	}
	out := make([]ackResultJSON, len(wire))
	for {
		var together, alone []int
		after := map[int]*lane{} // a lone item's lane, for what follows it
		for _, l := range lanes {
			j := 0
			for j < len(l.todo) && !comesBack(wire[l.todo[j]].Status) {
				j++
			}
			together = append(together, l.todo[:j]...)
			if j < len(l.todo) {
				alone = append(alone, l.todo[j])
				after[l.todo[j]] = l
				l.todo = l.todo[j+1:]
			} else {
				l.todo = nil
			}
		}
		if len(together) == 0 && len(alone) == 0 {
			return out, nil
		}
		if err := c.sendAcks(ctx, wire, together, out); err != nil {
			return nil, err
		}
		for _, i := range alone {
			if err := c.sendAcks(ctx, wire, []int{i}, out); err != nil {
				return nil, err
			}
			if r := &out[i]; r.Success && !r.DLQ { // the batch came back: the rest of the lane with it
				l := after[i]
				for _, k := range l.todo {
					out[k] = ackResultJSON{TransactionID: wire[k].TransactionID, Success: true, QueueName: r.QueueName,
						PartitionName: r.PartitionName}
				}
				l.todo = nil
			}
		}
	}
}

// sendAcks sends the items at idx, one request per consumer group, and
// puts their results in out.
func (c *Client) sendAcks(ctx context.Context, wire []ackJSON, idx []int, out []ackResultJSON) error {
	var groups []string
	byGroup := map[string][]int{}
	for _, i := range idx {
		g := wire[i].ConsumerGroup
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], i)
	}
	for _, g := range groups {
		part := make([]ackJSON, len(byGroup[g]))
		for j, i := range byGroup[g] {
			part[j] = wire[i]
		}
		res, err := c.postAcks(ctx, part)
		if err != nil {
			return err
		}
		for j, i := range byGroup[g] {
			out[i] = res[j]
		}
	}
	return nil
}

// postAcks sends one ack request: POST /api/v1/ack for one item, else
// /api/v1/ack/batch with the group (when all items name the same one) at
// the top, where Queen's server reads it.
func (c *Client) postAcks(ctx context.Context, wire []ackJSON) ([]ackResultJSON, error) {
	var out []ackResultJSON
	var err error
	if len(wire) == 1 {
		err = c.call(ctx, &request{op: "ack", method: http.MethodPost, path: "/api/v1/ack", body: wire[0]}, &out)
	} else {
		body := map[string]any{"acknowledgments": wire}
		if g := wire[0].ConsumerGroup; g != "" && sameGroup(wire) {
			body["consumerGroup"] = g
		}
		err = c.call(ctx, &request{op: "ack", method: http.MethodPost, path: "/api/v1/ack/batch", body: body}, &out)
	}
	if err != nil {
		return nil, err
	}
	if len(out) != len(wire) {
		return nil, &TransportError{Op: "ack", URL: c.base.Redacted(), Err: fmt.Errorf("%d results for %d items", len(out), len(wire))}
	}
	return out, nil
}

func sameGroup(w []ackJSON) bool {
	for i := range w {
		if w[i].ConsumerGroup != w[0].ConsumerGroup {
			return false
		}
	}
	return true
}

// failedInTx refuses, for Queen's server, a transaction with an ack of
// status failed or retry. That server dead-letters a failed ack in a
// transaction at once, whatever retry budget is left, and aborts a
// transaction holding a retry ack ("Unknown error"); a later ack of the
// same partition fails under the lease a failed one released. Settle
// such messages with [Client.AckBatch] instead.
func failedInTx(ops []queen.TxOp) error {
	for i, o := range ops {
		if o.Ack != nil && comesBack(string(o.Ack.Status)) {
			return fmt.Errorf("%w: an ack of status %s in a transaction (ops[%d]) on Queen's server, which dead-letters a failed one at once and aborts on a retry one: use AckBatch",
				queen.ErrUnsupported, o.Ack.Status, i)
		}
	}
	return nil
}
