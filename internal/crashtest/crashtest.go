// Package crashtest kills a broker process at random moments and checks
// what survives. The child program (./child) runs producers, consumers
// that ack with every status, dead-letter replays, retention, a consumer
// that acks its input and pushes its output in one transaction, an
// auto-ack group and a conflating group, and a second transactional
// consumer whose output queue is full more often than not (its refused
// transactions must leave nothing behind), against a Badger directory,
// and logs each operation that returned success; the
// test (crash_test.go) SIGKILLs it, reopens the directory and checks the
// log against what the broker holds. In its -loop mode the child runs a
// consume loop over a backlog instead (loop_test.go; its lines are listed
// in child/loop.go).
//
// The log is the contract between the two processes. Every line is one
// write(2) to a file opened with O_APPEND, made after the call returned
// (or, for intents, before it was made), so after a SIGKILL the kernel
// still has every line the child wrote: a line in the log is a call that
// returned success. fsync is not needed for that (the parent never loses
// power); the broker's own fsync is what the test checks.
//
// Lines (fields separated by one space):
//
//	push QUEUE PARTITION TXID OFFSET       a pushed (or duplicate) message
//	intent GROUP PARTITION OFFSET STATUS   an ack about to be sent
//	ack GROUP PARTITION OFFSET STATUS DEST an ack that returned success; DEST is dl, pk or -
//	cursor GROUP PARTITION OFFSET          the group's cursor is at least OFFSET
//	replay PARTITION TXID OFFSET SRCOFF    a dead letter of SRCOFF replayed at OFFSET
//	refused PARTITION OFFSET               a transaction acking up to OFFSET was refused (queue full)
//	ready ROUND                            the child is running
//	ERR TEXT                               the child saw a broken promise
package crashtest

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
)

// Queues and partitions the child uses.
const (
	WorkQueue   = "work"   // producers, consumers, dead letters
	RetainQueue = "retain" // producers and retention, no consumers
	TxQueue     = "txin"   // read by a consumer that acks and pushes in one transaction
	OutQueue    = "txout"  // what that consumer pushes: "out:<input transactionId>"
	NamedGroup  = "g1"

	AutoQueue     = "auto" // read by an auto-ack group and a conflating group
	AutoGroup     = "ag"   // pops with CommitOnDelivery
	ConflateGroup = "cg"   // conflates: receives the newest message of a partition
	CapIn         = "capin"
	CapOut        = "capout" // MaxSize CapMax, drained slowly: transactions into it are refused
	CapMax        = 2

	LoopQueue = "loop" // the child's -loop mode: a backlog read by a consume loop
	LoopGroup = "g"
)

// WorkPartitions and RetainPartitions name the partitions of each queue.
var (
	WorkPartitions   = []string{"p0", "p1", "p2", "p3", "p4", "p5"}
	RetainPartitions = []string{"r0", "r1", "r2"}
	TxPartitions     = []string{"t0", "t1", "t2"}
	AutoPartitions   = []string{"a0", "a1"}
	CapPartitions    = []string{"c0", "c1"}
	LoopPartitions   = []string{"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7"}
)

// Payload is the payload the child pushes for txid: deterministic, so the
// parent can check every stored byte. Most are small; about one in 400 is
// 1.2 MB, large enough for Badger to keep it in the value log.
func Payload(txid string) []byte {
	h := fnv.New64a()
	h.Write([]byte(txid))
	n := h.Sum64()
	pad := int(n % 300)
	if n%400 == 7 {
		pad = 1200 << 10
	}
	return []byte(fmt.Sprintf(`{"tx":%q,"n":%d,"pad":"%s"}`, txid, n%1000, strings.Repeat("x", pad)))
}

// Line is one parsed log line.
type Line struct {
	Kind   string
	Fields []string
}

// Int returns field i as an integer.
func (l Line) Int(i int) int64 {
	n, err := strconv.ParseInt(l.Fields[i], 10, 64)
	if err != nil {
		panic(fmt.Sprintf("crashtest: bad log line %s %v", l.Kind, l.Fields))
	}
	return n
}

// ReadLog parses the log at path. A last line without its newline (a
// write cut by the kill) is dropped.
func ReadLog(path string) ([]Line, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := strings.LastIndexByte(string(data), '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var out []Line
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		out = append(out, Line{Kind: f[0], Fields: f[1:]})
	}
	return out, sc.Err()
}
