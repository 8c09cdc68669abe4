package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/remote"
)

// Scenario 11 is package remote, one goroutine, against cmd/queen (system
// "server", in its own process on the row's durability) and, when
// QUEEN_REAL_URL names one, against Queen MQ's own server (system
// "queen-mq": its C++ server on PostgreSQL, durable on its own terms):
//
//   - "remote-push": j.N pushes of one message each;
//   - "remote-drain": j.N messages pushed untimed (1,000 a call), then
//     drained by Pop of j.Batch and one AckBatch per pop.
//
// Each round uses its own queue, so Queen's server needs no emptying
// between rounds. The drain checks that every message came once.

// queenMQ is the system of Queen's own server.
const queenMQ = "queen-mq"

func runRemoteJob(j *Job) (Result, error) {
	var base string
	switch j.System {
	case "server":
		e, err := httpStart(j, nil, nil)
		if err != nil {
			return Result{}, err
		}
		defer e.close()
		base = e.base
	case queenMQ:
		if base = os.Getenv("QUEEN_REAL_URL"); base == "" {
			return Result{}, fmt.Errorf("system %s: QUEEN_REAL_URL is not set", queenMQ)
		}
	default:
		return Result{}, fmt.Errorf("scenario 11: unknown system %q", j.System)
	}
	c, err := remote.Dial(base, nil)
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	ctx := context.Background()
	queue := fmt.Sprintf("bench-remote-%s-%s-%d", j.Kind, j.Tag, time.Now().UnixNano())
	payload := json.RawMessage(fixedPayload(j.Payload))
	if j.Kind == "remote-push" {
		return remotePush(ctx, c, j, queue, payload)
	}
	return remoteDrain(ctx, c, j, queue, payload)
}

func remotePush(ctx context.Context, c *remote.Client, j *Job, queue string, payload json.RawMessage) (Result, error) {
	item := []queen.PushItem{{Queue: queue, Payload: payload}}
	start := time.Now()
	var res Result
	for res.Msgs < int64(j.N) {
		if time.Since(start) > j.MaxTime {
			res.Capped = true
			break
		}
		out, err := c.Push(ctx, item)
		if err != nil {
			return Result{}, err
		}
		if out[0].Status != queen.PushQueued {
			return Result{}, fmt.Errorf("push %d: %s: %v", res.Msgs, out[0].Status, out[0].Err)
		}
		res.Msgs++
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

func remoteDrain(ctx context.Context, c *remote.Client, j *Job, queue string, payload json.RawMessage) (Result, error) {
	items := make([]queen.PushItem, 0, 1000)
	for i := range j.N {
		items = append(items, queen.PushItem{Queue: queue, Payload: payload})
		if len(items) == cap(items) || i == j.N-1 {
			if _, err := c.Push(ctx, items); err != nil {
				return Result{}, fmt.Errorf("preload: %w", err)
			}
			items = items[:0]
		}
	}
	seen := make(map[string]bool, j.N)
	req := queen.PopRequest{Queue: queue, Batch: j.Batch, Wait: true, Timeout: time.Second}
	start := time.Now()
	var res Result
	for len(seen) < j.N {
		if time.Since(start) > j.MaxTime {
			res.Capped = true
			break
		}
		p, err := c.Pop(ctx, req)
		if err != nil {
			return Result{}, err
		}
		acks := make([]queen.AckItem, len(p.Messages))
		for i, m := range p.Messages {
			if seen[m.ID] {
				return Result{}, fmt.Errorf("message %s delivered twice", m.ID)
			}
			seen[m.ID] = true
			acks[i] = queen.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID}
		}
		if len(acks) == 0 {
			continue
		}
		out, err := c.AckBatch(ctx, acks)
		if err != nil {
			return Result{}, err
		}
		for i, r := range out {
			if !r.Success {
				return Result{}, fmt.Errorf("ack %d: %v", i, r.Err)
			}
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.Msgs = int64(len(seen))
	return res, nil
}
