// Package remote is a [queen.Client] over HTTP: the same Go API as an
// embedded [queen.Broker], served by another process. It talks to
// cmd/queen, to any server mounting package httpapi, or to Queen MQ's own
// server (which scales out over PostgreSQL). Moving an application from
// one process to several is one changed line:
//
//	b, err := queen.Open(dir, nil)                  // embedded
//	c, err := remote.Dial("http://queen:6632", nil) // shared by processes
//
// Both are a [queen.Client]: the builder ([Client.Queue]), the consume loop
// with its outcomes, retry policies, concurrency, lease renewal and
// bounded drain, transactions ([Client.Transaction]) and [queen.Admin] are
// the same code, written once in package queen.
//
// # Errors
//
// Answers map back to package queen's sentinels: a 404 to
// [queen.ErrNotFound] ([queen.ErrGroupNotFound] for "Consumer group not
// found"), a refused lease to [queen.ErrLeaseExpired], a refused ack item
// to the error the broker gives it (see [queen.AckResult].Err), a 400 to
// an [*queen.ArgumentError] naming the field the server named, a 413 to
// [queen.ErrTooLarge], a full queue to [queen.ErrQueueFull], an aborted
// transaction to a [*queen.TransactionError]. Every call after
// [Client.Close] returns [queen.ErrClosed]. A request that got no usable
// answer (connection refused, deadline passed, a body that is not the
// API's) is a [*TransportError] wrapping the cause; an error answer no
// sentinel stands for (a 500, a 401 or 403) is a [*ServerError]. Neither is
// ever turned into an empty result. Transport errors and 5xx answers also
// match [queen.ErrUnavailable]: the server is out of reach or going away
// for now, and a consume loop pops again (with back-off) instead of
// stopping. A call whose ctx ends returns ctx's
// error at once, aborting the request in flight.
//
// # Retries
//
// A request that could not be sent at all (the connection was refused) is
// tried again for every call. A network failure after sending, or a 5xx
// answer, is tried again only for calls that are safe to repeat:
//
//   - Push: the client gives every item without one a transactionId
//     (UUIDv7) before the first try, so a repeated push is deduplicated;
//     an item a lost answer had already stored then reports
//     [queen.PushDuplicate] with the message's id.
//   - Pop: a pop whose answer was lost leaves a lease nobody holds; its
//     messages come back when it runs out, as after a crash.
//   - RenewLease and Renew: the expiry is the later of the two.
//   - ConfigureQueue (it replaces the whole configuration), DeleteQueue,
//     SeekGroup, SeekPartition, DeleteGroup, SetGroupSubscription, and
//     ReplayDeadLetter and ReplayParked (the copy is deduplicated by its
//     transactionId: a repeat reports Duplicate).
//   - Every read: DescribeQueue, Fetch, DeadLetters, ParkedMessages,
//     QueueStats, ListQueues, ListGroups, Ping.
//
// Ack, AckBatch, ExecTransaction, DeleteDeadLetter and DeleteParked are
// not repeated: a lost answer is a [*TransportError], and the caller
// decides (an unsettled message comes back when its lease runs out).
//
// # Several servers
//
// A Queen deployment scales out as several stateless servers over one
// PostgreSQL database; a client can be given all of them, as a
// comma-separated list (the form of a QUEEN_URL variable) or in
// [Options].URLs:
//
//	c, err := remote.Dial("http://q1:6632,http://q2:6632,http://q3:6632", nil)
//
// Pops go where Queen's other SDKs send them, so that the replicas of one
// group polling one partition, whatever their language, meet on one server
// and do not contend for the partition's lease across servers. A pop's
// affinity key is "queue:partition:group": "*" for a pop of no named
// partition (the Default partition is keyed "*" too, as Queen's SDKs do),
// and __QUEUE_MODE__ for no group. A push whose items share one queue and
// partition is keyed as that lane's queue-mode pop; every other call (a
// push of several lanes, acks, renewals, transactions, admin calls) goes
// round-robin over the healthy servers. Acks and renewals of a lease taken
// through one server may go to any other: the servers share the storage,
// and the lease is in it (as it is for several httpapi handlers of one
// [queen.Broker]). Do not list servers that do not share one storage, such
// as two cmd/queen processes with their own data directories: each would
// see only what was sent to it (see docs/cluster.md, Deployments).
//
// The client checks it: GET /health of cmd/queen (of any httpapi server
// in front of a [queen.Broker]) names the store behind it (storeId,
// [queen.Facts].StoreID), and the first time a call other than a read (a
// push, an ack, a renewal, a transaction, a configuration change, a
// delete, a seek, a replay: any request but a GET) is routed to a server,
// the client asks that server its /health first. The first store a server
// of the list names is the list's store (the /health the client asks
// once to learn the server's kind is that server's answer too); a call
// routed to a
// server naming another one is refused, then and for the life of the
// client, with a [*StoreMismatchError] (matching [ErrMixedStores]) that
// names both servers and both stores, and nothing of it is sent to that
// server. Calls routed to the servers of the list's store go on as
// before: nothing is stored where this client's pops would never look,
// and every call that would have gone to the other store says why it did
// not. A server out of reach is asked when it answers again, before any
// such call goes to it; one whose /health names no store (Queen's server,
// whose servers share a database, or a server that does not answer
// /health with JSON) is never refused. Reads, pops among them, are not
// checked (a pop takes what a store holds and strands nothing; acking
// what it took is checked), and a client of one server asks nothing more
// than before. Which store is the list's depends on which server answered
// first: list the fronts of one store, and read the error as "this list
// is wrong", not as a choice between the two.
//
// The ring: each server URL, without a trailing "/", gets
// [DefaultVirtualNodes] points (or [Options].VirtualNodes), at
// fnv1a(url + "#vnode" + i) for i = 0 … n−1, FNV-1a being the 32-bit hash
// of the UTF-8 bytes; the points are sorted by hash. A key goes to the
// server of the first point whose hash is at least fnv1a(key), or to that
// of the last point when none is (it does not wrap to the first). Vectors:
// fnv1a("") = 2166136261, fnv1a("a") = 0xe40c292c, fnv1a("foobar") =
// 0xbf9cf968, and over http://queen-1:6632, http://queen-2:6632 and
// http://queen-3:6632 with 128 points each:
//
//	orders:*:__QUEUE_MODE__  queen-3   (queen-3 down: queen-1)
//	orders:*:billing         queen-2   (queen-3 down: queen-2; queen-2 down: queen-1)
//	emails:*:__QUEUE_MODE__  queen-1
//	jobs:*:workers           queen-3   (queen-3 down: queen-1)
//	q145:*:__QUEUE_MODE__    queen-1   (above every point: the last one's)
//
// Health: a transport failure or a 5xx answer (other than a 501: the
// server lacks the route) takes the server off the ring, and the calls it would have served go to
// the next server on it; a 4xx or a 429 is an answer and changes nothing.
// The server comes back after [Options].ReadmitBackoff (1 s), doubled for
// each failure in a row up to ReadmitBackoffMax (30 s), measured on
// [Options].Clock, or at once when it answers a call; the calls in flight
// to it when it went down count as one failure. A repeatable call (see
// Retries) that failed on one server is retried on another at once; with
// no healthy server left it is sent, after the retry back-off, to the one
// due back first. A 503 with a Retry-After (seconds, or an HTTP date read
// on the client's clock, at most 5 minutes) keeps the server off the ring
// at least that long and, when no other server is healthy, makes a
// repeatable call wait that long: if its ctx would end first, the 503 is
// returned at once. A call that is not repeatable never waits.
// [Client.Servers] reports each server's health, [Client.ServerFor] where
// a key goes now, and [Client.BaseURL] the first server.
//
// # Queen's own server
//
// Queen's server answers some exchanges differently from cmd/queen (see
// the wire contract, Part C); the client accepts both. What that server
// lacks is refused with [queen.ErrUnsupported] rather than answered with
// wrong data: [Client.Fetch], replaying and deleting dead letters, the
// parked store (listing, replay, delete, and acks of status park),
// conflating pops, and seeking one partition to a time. Fields it does
// not send are zero: [queen.Message.Offset] and
// [queen.Message.DeliveryAttempt] (a [queen.RetryPolicy] then counts the
// attempts this process saw), [queen.PushResult.Offset],
// [queen.DeadLetter.ID] and Offset, [queen.LetterPage.Total], and the
// DefaultPartitionID and Groups of ListQueues' entries. It
// ignores an ack's Delay, so a retry policy's back-off does not hold the
// message back there. [queen.AckResult].Parked is what the server says
// (the ack's parked field), never guessed from the status sent: a server
// that does not send it (Queen's, or an httpapi older than the field)
// gives false. Queue counts (QueueStats, ListQueues) come from Queen's
// counters there: Messages is total, InFlight processing, and Pending
// pending + processing but never more than Messages, which is the
// broker's Pending unless several groups lease the same messages (the
// counters cannot say it then); cmd/queen sends the broker's own counts.
// Queen keeps those counters in a table it refreshes in the background, so
// QueueStats and ListQueues first ask it to refresh them: the counts are
// those of the call. Where Queen's answers mean something other than ours
// the client reads them for what they mean: an error sent with 200 (an
// unknown queue, an unknown partition's seek) is the error; a pop's Lease,
// which Queen ignores, is reached by extending the lease after the pop,
// or is [queen.ErrUnsupported] when shorter than the queue's LeaseTime; a
// batch ack mixing failed or retry items with completed ones, which Queen
// would apply so that the failed message is lost, is sent in parts (per
// partition and group: the acks before the first failed or retry one
// together, then that one alone, and none behind one that gave the batch
// back), so the retry budget and the dead-letter store behave as in
// process; a transaction with a failed or retry ack, which Queen would
// dead-letter at once or abort, is [queen.ErrUnsupported]. docs/remote.md
// lists what was measured against that server.
// The client learns which server it talks to from GET /health, once, when
// a call first depends on it, never from the shape of other answers;
// [Options.Server] can say it instead.
//
// # What the remote API does not carry
//
// A few answers are thinner than in process, on every server: the
// [queen.QueueInfo] of ConfigureQueue has no CreatedAt; ListQueues
// reports a queue's labels and Priority but not the rest of its Config;
// QueueStats has no per-partition cursors ([queen.PartitionStats].Cursors
// is nil); [queen.GroupStats] has no Consumed, LastAckAt or
// OldestPendingAt. Timestamps have millisecond precision, as Queen's
// admin answers write them, but for a message's CreatedAt in a pop or a
// fetch (microseconds): a lease's expiry, a dead or parked letter's
// CreatedAt and FailedAt, a queue's or partition's CreatedAt, a
// partition's LastPushAt, and a group's From and JoinedAt are the
// broker's truncated to the millisecond. Lease lengths travel in whole
// seconds, Queen's unit (pop leaseSeconds, queue leaseTime): a
// [queen.PopRequest].Lease between two seconds is rounded up to the next
// one (1.5 s leases for 2 s), where a Broker keeps it as given; a Lease or
// [queen.QueueConfig].LeaseTime under a second is refused with an
// [*queen.ArgumentError], as by a Broker. A consume loop learns that a
// message was settled by its handler only when the handler settled it
// through the same Client.
package remote
