// Package modelgen draws the operations of the model-based tests: the
// sequential model test (internal/modeltest), which checks a broker
// against a reference model, and remote's differential test, which runs
// each operation on three backends and compares their answers. Both draw
// their sequences, their pops and their payloads here, so they exercise
// the broker with one distribution.
//
// An operation is a kind and a seed: its parameters are drawn from the
// seed when it runs, against what the run holds then, so an operation
// keeps a meaning when a shrinker removes the ones before it.
package modelgen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/queenlite/queen"
)

// Kind is an operation.
type Kind int

// The operations. A suite runs the kinds its Weights give a weight.
const (
	Push            Kind = iota // Broker.Push of a few items
	PushBuilder                 // a push through the QueueBuilder
	PushLarge                   // a push of one large payload
	Pop                         // a pop of one queue (see Space.Pop)
	PopBuilder                  // a pop through the QueueBuilder
	Discover                    // a pop by namespace and task
	Ack                         // acks of part or all of an earlier pop
	AckOne                      // one ack
	Abandon                     // forget an earlier pop without settling it
	Renew                       // renew an earlier pop's lease
	RenewMsg                    // renew through a message
	Txn                         // a transaction of pushes and acks
	Advance                     // move the clock
	Maintain                    // a maintenance run
	SeekGroup                   // seek a group in every partition
	SeekPartition               // seek a group in one partition
	SetSubscription             // move where a group starts
	DeleteGroup                 // delete a consumer group
	DeleteMessage               // delete one message
	DeleteQueue                 // delete a queue
	Configure                   // configure a queue
	Describe                    // describe a queue
	Stats                       // a queue's stats
	ListQueues                  // list the queues
	ListGroups                  // list the consumer groups
	Fetch                       // read messages without a lease
	FetchPartitions             // read messages of named partitions
	Positions                   // a group's positions
	GetMessage                  // read one message and its status
	ListMessages                // list messages
	DeadLetters                 // list dead letters
	Parked                      // list parked messages
	Replay                      // replay a dead letter or a parked message
	ReplayDead                  // replay a dead letter
	ReplayParked                // replay a parked message
	DeleteLetter                // delete a dead letter or a parked message
	DeleteDead                  // delete a dead letter
	DeleteParked                // delete a parked message
	Trace                       // record a trace
	TraceRead                   // read traces
	WaitStart                   // start a waiting pop
	WaitCancel                  // cancel a waiting pop
	Reopen                      // close the broker and open it again
	Verify                      // compare everything that can be listed
	Misc                        // the remaining read calls
	Invalid                     // calls with invalid arguments
	MaintenanceMode             // turn maintenance mode on or off
	NumKinds
)

var kindNames = [NumKinds]string{"push", "pushBuilder", "pushLarge", "pop", "popBuilder", "discover", "ack", "ackOne",
	"abandon", "renew", "renewMsg", "txn", "advance", "maintain", "seekGroup", "seekPartition", "setSubscription",
	"deleteGroup", "deleteMessage", "deleteQueue", "configure", "describe", "stats", "listQueues", "listGroups", "fetch",
	"fetchPartitions", "positions", "getMessage", "listMessages", "deadLetters", "parked", "replay", "replayDead",
	"replayParked", "deleteLetter", "deleteDead", "deleteParked", "trace", "traceRead", "waitStart", "waitCancel",
	"reopen", "verify", "misc", "invalid", "maintenanceMode"}

// String is the kind's name, as the suites count and print it.
func (k Kind) String() string { return kindNames[k] }

// Weights are the relative frequencies of the kinds a suite runs. A kind
// of weight 0 is never drawn.
type Weights [NumKinds]int

// Op is one operation of a sequence.
type Op struct {
	Kind Kind
	Seed uint64
}

// Rand is the source of op's parameters.
func (o Op) Rand() *rand.Rand { return rand.New(rand.NewPCG(o.Seed, uint64(o.Kind))) }

// Sequence draws n operations from seed, each kind as often as w says.
func (w *Weights) Sequence(seed uint64, n int) []Op {
	rng := rand.New(rand.NewPCG(seed, 0x5e9))
	total := 0
	for _, x := range w {
		total += x
	}
	ops := make([]Op, n)
	for i := range ops {
		x := rng.IntN(total)
		k := Kind(0)
		for x >= w[k] {
			x -= w[k]
			k++
		}
		ops[i] = Op{Kind: k, Seed: rng.Uint64()}
	}
	return ops
}

// Pool is a set of names to draw from: a name listed twice is drawn twice
// as often.
type Pool []string

// Pick draws a name.
func (p Pool) Pick(r *rand.Rand) string { return p[r.IntN(len(p))] }

// ConflationGroup is the group a Space's pops read with conflation.
const ConflationGroup = "cf"

// Space is what a suite's operations draw from: its queues, partitions
// and groups, and the instants a new group may start at.
type Space struct {
	Queues, Partitions, Groups Pool
	// Past draws an instant for SubscriptionFrom: one a message was
	// pushed at, now, or before everything.
	Past func(r *rand.Rand) time.Time
}

// Pop draws a pop of one of the space's queues: its group, batch and
// partition count, then what target sets (the partition it names, or a
// namespace instead of the queue; nil sets nothing), then the lease, the
// delivery mode (conflation for ConflationGroup, otherwise now and then
// commit on delivery; conflation with commit on delivery, which is
// refused, 1 in 30) and, for a named group, where it starts if new.
func (s *Space) Pop(r *rand.Rand, target func(*queen.PopRequest)) queen.PopRequest {
	req := queen.PopRequest{Queue: s.Queues.Pick(r), Group: s.Groups.Pick(r), Batch: r.IntN(8), Partitions: r.IntN(4)}
	if target != nil {
		target(&req)
	}
	switch r.IntN(5) {
	case 0:
		req.Lease = 5 * time.Second
	case 1:
		req.Lease = 40 * time.Second
	case 2:
		req.Lease = 120 * time.Second
	}
	if req.Group == ConflationGroup {
		req.Conflation = true
		req.CommitOnDelivery = r.IntN(30) == 0 // refused
	} else if r.IntN(7) == 0 {
		req.CommitOnDelivery = true
	}
	if req.Group != "" {
		switch r.IntN(4) {
		case 0:
			req.SubscriptionMode = queen.SubscriptionModeNew
		case 1:
			req.SubscriptionMode = queen.SubscriptionModeAll
		case 2:
			req.SubscriptionFrom = s.Past(r)
		}
	}
	return req
}

// Payload draws a JSON value: a number, nothing (stored as null), a
// string, an array, an object with escapes, one with whitespace and <, >,
// & (kept byte for byte), or an object of random values.
func Payload(r *rand.Rand) json.RawMessage {
	switch r.IntN(12) {
	case 0:
		return json.RawMessage(strconv.Itoa(r.IntN(100)))
	case 1:
		return nil
	case 2:
		return json.RawMessage(`"s` + strconv.Itoa(r.IntN(100)) + `"`)
	case 3:
		return json.RawMessage(`[1,{"a":null},true,-2.5e3]`)
	case 4:
		return json.RawMessage(`{"u":"\u00e9\n","e":""}`)
	case 5:
		return json.RawMessage(`[1, {"a" : "<&>"}]`)
	}
	return json.RawMessage(fmt.Sprintf(`{"k":%d,"v":"%x"}`, r.IntN(1000), r.Uint32()))
}

// GoPayload writes payload p as Go code for a reproducer; a payload over
// 200 bytes as a call of the reproducer's big(n).
func GoPayload(p []byte) string {
	switch {
	case p == nil:
		return "nil"
	case len(p) > 200:
		return fmt.Sprintf("big(%d)", len(p))
	}
	return "json.RawMessage(" + strconv.Quote(string(p)) + ")"
}
