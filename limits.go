package queen

import "time"

// This file holds the broker's limits and defaults: the largest request
// each call takes, the bounds of the options, and the value a zero field
// stands for.

// MaxNameLen is the longest queue, partition, group, namespace, task or
// transactionId, in bytes.
const MaxNameLen = 255

// MaxPushItems is the most items one [Broker.Push] call takes, as a pop
// returns at most [MaxBatch] messages and an ack batch takes at most
// [MaxAckItems]. A longer push is refused whole with [ErrTooLarge]; over
// HTTP it is a 413. The cap bounds the memory one push takes (its items,
// results, storage writes and reply) whatever their size.
const MaxPushItems = 10000

// Payload limits. Badger refuses any value longer than its value-log file
// (64 MiB as [Open] configures it) and, in memory, where there is no value
// log, any value longer than its value threshold (at most 1 MiB) or than
// one batch (15 % of the memtable, which Options.MemoryBudget sizes). A stored message
// is its payload plus a header, and its dead-letter or parked copy adds
// the error text and names (at most a few tens of KiB, JSON-escaped), so
// both limits keep 64 KiB of room. A broker on a database opened by the
// caller ([OpenDB]) derives the same limits from that database's options.
// The HTTP API caps request bodies below these (16 MiB by default).
const (
	// MaxPayload is the largest payload a broker stores on disk.
	MaxPayload = 64<<20 - payloadRoom
	// MaxInMemoryPayload is the largest payload an in-memory broker stores
	// with an Options.MemoryBudget of 64 MiB or more; smaller budgets
	// store less (see [Broker.PayloadLimit]).
	MaxInMemoryPayload = 1<<20 - payloadRoom

	payloadRoom = 64 << 10
)

// Limits of a pop, a lease and a renewal. A value above one is refused
// with an [*ArgumentError] naming the limit; over HTTP, package httpapi
// clamps batch, partitions and timeout to them instead, as Queen's wire
// contract says (see Limits in the package documentation).
const (
	// MaxBatch is the most messages one pop returns ([PopRequest].Batch).
	MaxBatch = 10000
	// MaxPartitions is the most partitions one pop claims
	// ([PopRequest].Partitions).
	MaxPartitions = 64
	// MaxPopTimeout is the longest a waiting pop waits
	// ([PopRequest].Timeout).
	MaxPopTimeout = 60 * time.Second
	// MaxLease is the longest lease: of a pop ([PopRequest].Lease), a
	// queue ([QueueConfig].LeaseTime) or a renewal ([Broker.RenewLease]).
	MaxLease = 365 * 24 * time.Hour
)

// Defaults of a lease and of a waiting pop. A queue's lease time depends
// on what created it, as on Queen's server: a push to an unknown queue
// creates it with DefaultLeaseTime, the short lease Queen 2.x gives a
// queue a producer made on the fly, before anyone configured it;
// [Broker.ConfigureQueue] without a LeaseTime gives
// DefaultConfiguredLeaseTime, the default of Queen's queue configuration,
// so that a queue configured here and one configured on Queen's server
// report the same leaseTime.
const (
	// DefaultLeaseTime is the lease time of a queue created by a push. It
	// is also the lease of a pop that sets none from a queue whose
	// LeaseTime is zero, of a discovery pop that sets none, and of a lease
	// renewal by a zero duration.
	DefaultLeaseTime = 60 * time.Second
	// DefaultConfiguredLeaseTime is the lease time of a queue configured
	// with a zero [QueueConfig].LeaseTime (see [DefaultQueueConfig]).
	DefaultConfiguredLeaseTime = 300 * time.Second
	// DefaultPopTimeout is how long a waiting pop waits when its
	// [PopRequest].Timeout is zero.
	DefaultPopTimeout = 30 * time.Second
)

// MaxAckItems is the most items one [Broker.AckBatch] call takes (a pop
// returns at most 10000 messages).
const MaxAckItems = 10000

// MaxTxOps is the most operations one [Broker.ExecTransaction] call takes,
// as [MaxPushItems] bounds a push. A longer transaction is refused whole
// with [ErrTooLarge]; over HTTP it is a 413. A smaller one may still be
// too large for one storage transaction (see [ErrTooLarge]).
const MaxTxOps = 10000

// Limits of [Broker.FetchPartitions] and [Broker.OffsetForTime]'s wire
// form, as in Queen 2.x. A request above one is an [*ArgumentError].
const (
	// MaxFetchPartitions is the most partitions one FetchPartitions call
	// reads.
	MaxFetchPartitions = 1024
	// MaxFetchWait bounds [FetchRequest].MaxWait.
	MaxFetchWait = 30 * time.Second
	// DefaultFetchBytes is a partition's byte budget when
	// [FetchPartition].MaxBytes is zero.
	DefaultFetchBytes = 1 << 20
	// MaxFetchBytes bounds [FetchPartition].MaxBytes.
	MaxFetchBytes = 8 << 20
	// MaxFetchRecords is the most records one partition gives one call.
	MaxFetchRecords = 10000
)

// Bounds of a [PartitionFilter]'s Limit.
const (
	// DefaultPartitionPage is the page size of a filter that sets none.
	DefaultPartitionPage = 100
	// MaxPartitionPage is the largest page [Broker.ListPartitions] returns.
	MaxPartitionPage = 1000
)

// Limits of positions, as in Queen 2.x.
const (
	// MaxPositionMetadata is the most bytes of [Position].Metadata.
	MaxPositionMetadata = 4096
	// MaxPositionReads is the most partitions one [Broker.GroupPositions]
	// call names.
	MaxPositionReads = 65536
)

// Memory budgets (see Options.MemoryBudget).
const (
	// DefaultMemoryBudget is a broker's budget on disk: 8 MiB memtables,
	// one queued for flushing, and no block cache; a peak RSS near
	// 210 MiB pushing and draining 300,000 messages of 256 B, about 60 MiB
	// of it anonymous and the rest pages of Badger's memory-mapped files
	// (see docs/memory.md). Sized for a broker embedded in a larger process.
	DefaultMemoryBudget = 64 << 20
	// DefaultInMemoryBudget is the budget of an in-memory broker (tests):
	// a 1 MiB memtable, about 1.4 MiB of heap per idle broker. Payloads
	// are then limited to 91,750 bytes (see [Broker.PayloadLimit]); a budget
	// of 64 MiB or more stores up to [MaxInMemoryPayload].
	DefaultInMemoryBudget = 8 << 20
	// MinMemoryBudget is the smallest budget Open accepts.
	MinMemoryBudget = 8 << 20
	// MaxMemoryBudget is the largest budget Open accepts. Memtables stop
	// growing at 1 GiB (four of 64 MiB, five, Badger's default, from
	// about 1.3 GiB); larger budgets change nothing more.
	MaxMemoryBudget = 1 << 40
)

// Bounds and default of [Options.AckSyncDelay].
const (
	// MinAckSyncDelay is the shortest AckSyncDelay Open accepts.
	MinAckSyncDelay = time.Millisecond
	// MaxAckSyncDelay is the longest AckSyncDelay Open accepts.
	MaxAckSyncDelay = 10 * time.Second
	// DefaultAckSyncDelay is the AckSyncDelay of Options that set none.
	DefaultAckSyncDelay = 100 * time.Millisecond
)
