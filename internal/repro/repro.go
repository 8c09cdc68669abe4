// Package repro serves the random-sequence tests of this module (the model
// test in the root package, the differential test in package remote): it
// shrinks a failing sequence of operations and prints queen values as Go
// literals, for the reproducer a failure prints as a test to paste.
package repro

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/queenlite/queen"
)

// Shrink removes operations from ops, a failing sequence, while it still
// fails: halves, quarters, ... then single operations, until no removal
// keeps it failing or budget is spent. fails runs a candidate and, when it
// fails the same way, returns it cut after its failing operation. Shrink
// returns the shortest failing sequence found and how many it ran.
func Shrink[T any](ops []T, budget time.Duration, fails func([]T) ([]T, bool)) ([]T, int) {
	cur := ops
	if budget <= 0 {
		return cur, 0
	}
	deadline := time.Now().Add(budget)
	tries := 0
	for progress := true; progress && time.Now().Before(deadline); {
		progress = false
		for chunk := max(len(cur)/2, 1); chunk >= 1 && time.Now().Before(deadline); chunk /= 2 {
			for i := 0; i < len(cur) && time.Now().Before(deadline); {
				cand := append(append([]T(nil), cur[:i]...), cur[min(len(cur), i+chunk):]...)
				tries++
				if next, ok := fails(cand); ok {
					cur, progress = next, true
					continue
				}
				i += chunk
			}
		}
	}
	return cur, tries
}

// Quote is s as a Go string literal.
func Quote(s string) string { return strconv.Quote(s) }

// Duration is d as a Go expression.
func Duration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%time.Second == 0:
		return fmt.Sprintf("%d * time.Second", d/time.Second)
	case d%time.Millisecond == 0:
		return fmt.Sprintf("%d * time.Millisecond", d/time.Millisecond)
	}
	return fmt.Sprintf("time.Duration(%d)", int64(d))
}

// PushItem is it as a Go composite literal (without its type), its payload
// written by payload.
func PushItem(it queen.PushItem, payload func([]byte) string) string {
	f := []string{"Queue: " + Quote(it.Queue)}
	if it.Partition != "" {
		f = append(f, "Partition: "+Quote(it.Partition))
	}
	if it.TransactionID != "" {
		f = append(f, "TransactionID: "+Quote(it.TransactionID))
	}
	if it.TraceID != "" {
		f = append(f, "TraceID: "+Quote(it.TraceID))
	}
	if it.Namespace != "" || it.Task != "" {
		f = append(f, "Namespace: "+Quote(it.Namespace), "Task: "+Quote(it.Task))
	}
	f = append(f, "Payload: "+payload(it.Payload))
	return "{" + strings.Join(f, ", ") + "}"
}

// PushItems is items as a Go []queen.PushItem literal.
func PushItems(items []queen.PushItem, payload func([]byte) string) string {
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = PushItem(it, payload)
	}
	return "[]queen.PushItem{" + strings.Join(s, ", ") + "}"
}

// PopRequest is req as a Go queen.PopRequest literal, its
// SubscriptionFrom written by at.
func PopRequest(req queen.PopRequest, at func(time.Time) string) string {
	var f []string
	add := func(cond bool, s string) {
		if cond {
			f = append(f, s)
		}
	}
	add(req.Queue != "", "Queue: "+Quote(req.Queue))
	add(req.Partition != "", "Partition: "+Quote(req.Partition))
	add(req.Namespace != "", "Namespace: "+Quote(req.Namespace))
	add(req.Task != "", "Task: "+Quote(req.Task))
	add(req.Group != "", "Group: "+Quote(req.Group))
	add(req.Batch != 0, fmt.Sprintf("Batch: %d", req.Batch))
	add(req.Partitions != 0, fmt.Sprintf("Partitions: %d", req.Partitions))
	add(req.Wait, "Wait: true")
	add(req.Timeout != 0, "Timeout: "+Duration(req.Timeout))
	add(req.Lease != 0, "Lease: "+Duration(req.Lease))
	add(req.CommitOnDelivery, "CommitOnDelivery: true")
	add(req.SubscriptionMode != "", "SubscriptionMode: "+Quote(string(req.SubscriptionMode)))
	add(!req.SubscriptionFrom.IsZero(), "SubscriptionFrom: "+at(req.SubscriptionFrom))
	add(req.Conflation, "Conflation: true")
	add(req.Autopilot, "Autopilot: true")
	return "queen.PopRequest{" + strings.Join(f, ", ") + "}"
}

// AckFields are the fields of it, other than its message's ids, as Go
// composite literal fields: LeaseID written as leaseExpr when that is not
// empty (else quoted, when set), then Group, Status, Error and Delay when
// set.
func AckFields(it queen.AckItem, leaseExpr string) []string {
	var f []string
	switch {
	case leaseExpr != "":
		f = append(f, "LeaseID: "+leaseExpr)
	case it.LeaseID != "":
		f = append(f, "LeaseID: "+Quote(it.LeaseID))
	}
	if it.Group != "" {
		f = append(f, "Group: "+Quote(it.Group))
	}
	if it.Status != "" {
		f = append(f, "Status: "+Quote(string(it.Status)))
	}
	if it.Error != "" {
		f = append(f, "Error: "+Quote(it.Error))
	}
	if it.Delay != 0 {
		f = append(f, "Delay: "+Duration(it.Delay))
	}
	return f
}
