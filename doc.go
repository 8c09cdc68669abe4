// Package queen is an embedded, in-process message broker with the
// semantics of Queen MQ: partitioned queues, consumer groups, leases,
// retries, dead letters, replay and reads by offset, stored in Badger.
//
// Open a broker on a directory (or in memory for tests), push messages and
// pop them under a lease, then ack them:
//
//	b, err := queen.Open("./data", nil)
//	...
//	b.Push(ctx, []queen.PushItem{{Queue: "orders", Partition: "customer-42", Payload: body}})
//	res, err := b.Pop(ctx, queen.PopRequest{Queue: "orders", Group: "billing", Wait: true})
//	for _, m := range res.Messages { ... }
//	b.AckBatch(ctx, acks)
//
// The package github.com/queenlite/queen/httpapi serves the same broker over
// Queen's HTTP API.
//
// # Concepts
//
// A queue is a set of partitions. A partition is an ordered log: every
// message gets the next integer offset of its partition (from 0, in commit
// order, never reused) and a transactionId that is unique in the partition,
// so pushing the same message twice is detected and reported as a
// duplicate. Partitions are created by their first push and cost little
// while idle; use one per entity whose events must stay in order.
//
// A consumer group reads a queue with one cursor per partition: the lowest
// offset it has not settled. Cursors are made as the group reads (until
// then the group stands at its start point in the partition), so a group
// joining a queue of a million partitions costs little. Every group sees
// every message; workers of one
// group share them. A pop with no group uses the queue-mode group
// [QueueModeGroup], a plain work queue. A new named group starts where
// [PopRequest.SubscriptionMode] or [PopRequest.SubscriptionFrom] says at its
// first pop (by default after the messages that exist then), and keeps that
// start point.
//
// A pop leases a batch of one partition (or of several with
// [PopRequest.Partitions], all under one lease id) to one worker of the
// group. No other worker of that group gets the partition until every
// message of the batch is settled, the lease is given back, or it expires;
// this is what keeps each partition in order while many workers run. Leases
// are renewed with [Broker.RenewLease]. When a lease expires the batch is
// delivered again from the cursor with [Message.DeliveryAttempt] one higher.
//
// An ack settles messages ([AckCompleted], [AckDLQ], [AckPark]) or gives
// them back ([AckRetry], or [AckFailed] while the (partition, group) retry
// budget lasts; the partition then waits the queue's RetryDelay). In one
// batch the cursor moves only through the leading run of settled messages.
// Messages a group gives up on go to the dead-letter store with their
// payload, error text, retry count and group, until they are replayed
// ([Broker.ReplayDeadLetter] appends a copy to the partition, seen by every
// group) or deleted. Parked messages are a separate store for messages
// nothing can read.
//
// A group created with [PopRequest.Conflation] gets only the newest message
// of each partition. [Broker.SeekGroup] moves a group to a time or to the
// end, releasing its leases. [Broker.Fetch] reads a partition by offset with
// no group, lease or ack.
//
// # Delivery semantics
//
// Delivery is at-least-once: an expired lease, a give-back or a restart
// delivers a message again, so handlers should be idempotent (a
// [Broker.Transaction] that acks the input and pushes the output, with
// transactionId dedup, gives effectively-once hand-off between stages).
// [PopRequest.CommitOnDelivery] (the wire's autoAck=true) is
// at-most-once; the builder's [QueueBuilder.AutoAck] is not (the consume
// loop acks after the handler). Within a group, a partition's messages
// are delivered in offset order and a settled message is never
// delivered to that group again (unless a seek moves the group back). Lease
// expiry never spends the retry budget, so a message that crashes its
// worker process every time comes back forever.
//
// # Storage and durability
//
// Everything lives in one Badger database. A partition's messages are one
// contiguous key range ordered by offset; cursors, group start points and
// dead letters are small records. One goroutine writes: concurrent pushes,
// acks and other writes share a Badger transaction and one fsync (group
// commit). [Options.Durability] says what a successful call survives:
//
//   - [SyncEveryCommit] (default): the call returns after fsync. It survives
//     kill -9 and power loss.
//   - [SyncNever]: the call returns after the write reached Badger's
//     memory-mapped log. It survives kill -9 (the kernel still has the
//     pages) but a power loss or kernel crash can lose the last writes;
//     what is lost is lost whole per call (a push or an ack is never half
//     applied).
//   - [SyncPushes]: pushes, transactions and every write that creates or
//     removes records return after fsync, as under SyncEveryCommit; acks
//     and cursor moves return once in the log and are fsynced in the
//     background within [Options.AckSyncDelay] (100 ms by default). It
//     survives kill -9 whole; a power loss keeps every confirmed message
//     but can undo the last acks, whose messages are then delivered again.
//
// In every mode, leases live in memory: after a restart no lease exists, so
// every batch that was out is delivered again at once, and delivery-attempt
// counting restarts at 1 for it. Cursors, retry counters, group start
// points, dead letters, parked messages and dedup entries are durable.
// Retry delays are not: a partition waiting out its RetryDelay is served at
// once after a restart. Maintenance mode is stored too.
//
// [Broker.Backup] writes a consistent copy of the store while the broker
// serves (full, or an increment since an earlier backup), [Restore]
// rebuilds a store from it, and [Inspect] reports on a closed store. A
// store records its format ([StoreFormat]); [Open] upgrades an older one
// in place and refuses a newer one with [ErrIncompatibleStore].
//
// [Options.InMemory] keeps everything in memory, for tests. Package
// [github.com/queenlite/queen/queentest] opens such a broker for one test,
// with a fake [Clock] that moves leases and retry delays without sleeping.
//
// # Limits
//
// Every cap, and what a value above it does. In Go (a [Broker], a remote
// client, the [QueueBuilder]) a value out of range is refused with an
// [*ArgumentError] naming the field and the limit (a payload too large,
// and a push or transaction of too many items, with [ErrTooLarge]), except
// page sizes, which cap a page (the result
// says where to read on). Over HTTP (package
// httpapi) batch, partitions and timeout are clamped, as Queen's wire
// contract says, so that Queen's clients keep working whatever they send;
// everything else out of range is a 400 naming the limit. Negative numbers
// are refused everywhere.
//
//	value                          cap                          Go        HTTP
//	PopRequest.Batch, batch        1..10000 (MaxBatch), 0 is 1  refuses   clamps
//	PopRequest.Partitions          1..64 (MaxPartitions)        refuses   clamps
//	PopRequest.Timeout, timeout    60 s (MaxPopTimeout),        refuses   clamps
//	                               0 is 30 s
//	PopRequest.Lease, leaseSeconds 1 s..365 days (MaxLease)     refuses   refuses
//	RenewLease d, extend seconds   365 days (MaxLease)          refuses   refuses
//	QueueConfig.LeaseTime          1 s..365 days (MaxLease)     refuses   refuses
//	other configure numbers        2^30 (s, ms or count)        -         refuses
//	AckBatch items                 10000 (MaxAckItems)          refuses   refuses
//	Push items                     10000 (MaxPushItems)         refuses   refuses (413)
//	ExecTransaction operations     10000 (MaxTxOps)             refuses   refuses (413)
//	(each item of a push op counts)
//	names (queue, partition,       255 bytes (MaxNameLen)       refuses   refuses
//	group, transactionId, labels)
//	payload                        MaxPayload, less in memory   refuses   refuses (413)
//	                               ([Broker.PayloadLimit])
//	request body                   16 MiB (MaxBodyBytes)        -         refuses (413)
//	page sizes (Fetch, dead        1000                         clamps    clamps
//	letters, parked, messages,
//	traces)
//	list offsets                   2^31-1                       -         clamps
//	minLagSeconds                  2^30                         -         clamps
//	httpapi DefaultBatch,          10000, 60 s                  -         clamps
//	DefaultTimeout
//
// The clamps of the wire follow Queen's contract: a pop waits at most 60 s
// and claims at most 64 partitions, and a batch is at most 10000 messages.
// Queen's clients send batch=1&timeout=30000 by default (wait=true in their
// consume loops), well inside them; a larger value still pops, as it does
// on Queen's own server, which has no caps.
//
// # Concurrency
//
// Every method of [Broker] is safe for concurrent use. Methods that touch
// storage or can wait take a [context.Context]; a write whose context ends
// early may still be applied. [Broker.Close] ends waiting pops with
// [ErrClosed] and stops every goroutine the broker started.
package queen
