package queen_test

// Each Go snippet of the "pop and consume" seed, kept as written there
// except for the client's construction, with assertions of what the seed
// says it does. Each runs twice (see eachClient): with client the
// embedded broker, and with client a remote.Client of that broker served
// by httpapi, the one-line change that takes an application out of its
// process. Inside each test, log
// and fmt are local stand-ins, so the snippets' log.Fatal and fmt.Println
// fail the test and record what was printed.

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/queentest"
	"github.com/stretchr/testify/require"
)

// snippetLog stands in for package log: Fatal fails the test.
type snippetLog struct{ t testing.TB }

func (l snippetLog) Fatal(v ...any) {
	l.t.Helper()
	l.t.Fatal(v...)
}

// snippetPrinter stands in for package fmt: Println records its line.
type snippetPrinter struct {
	mu    sync.Mutex
	lines []string
}

func (p *snippetPrinter) Println(a ...any) {
	p.mu.Lock()
	p.lines = append(p.lines, strings.TrimSuffix(fmt.Sprintln(a...), "\n"))
	p.mu.Unlock()
}

func (p *snippetPrinter) printed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// seedClock returns a broker whose clock reads 2026-10-21T12:00:00Z, the
// day before the seed's timestamps.
func seedClock(t *testing.T) (*queen.Broker, *queentest.Clock) {
	b, clock := clocked(t, nil)
	clock.Set(time.Date(2026, 10, 21, 12, 0, 0, 0, time.UTC)) // the seed's own dates, whatever QUEENTEST_EPOCH says
	return b, clock
}

func TestSeed_QueueModeEachLimit(t *testing.T) {
	t.Parallel()
	eachClient(t, true, func(t *testing.T, over clientOf) {
		broker := queentest.NewBroker(t, nil)
		pushTo(t, broker, "orders", "Default", `{"id":1}`, `{"id":2}`)
		client, ctx, log, fmt := over(t, broker), context.Background(), snippetLog{t}, &snippetPrinter{}
		var err error

		err = client.Queue("orders").
			Each().   // the handler gets one message at a time
			Limit(1). // stop after one message; a worker leaves this out
			Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
				fmt.Println(msg.Data) // acked when this returns nil, retried on an error
				return nil
			}).
			Execute(ctx)
		if err != nil {
			log.Fatal(err)
		}

		require.Equal(t, []string{"map[id:1]"}, fmt.printed())
		c := cursorOf(t, broker, "orders", "Default", "")
		require.EqualValues(t, 1, c.Offset, "acked, and only one taken")
		require.Empty(t, c.LeaseID)
	})
}

func TestSeed_GroupWithHandlerAcks(t *testing.T) {
	t.Parallel()
	eachClient(t, true, func(t *testing.T, over clientOf) {
		broker := queentest.NewBroker(t, nil)
		cfg := queen.DefaultQueueConfig()
		cfg.RetryLimit, cfg.RetryDelay = 1, 0
		_, err := broker.ConfigureQueue(context.Background(), "orders", cfg)
		require.NoError(t, err)
		// Pushed before the group exists: SubscriptionModeAll still reads them.
		pushTo(t, broker, "orders", "Default", `{"total":30}`, `{"total":0}`)
		client, ctx, log := over(t, broker), context.Background(), snippetLog{t}

		run := func() {
			err = client.Queue("orders").
				Group("billing").                            // every group gets every message
				SubscriptionMode(queen.SubscriptionModeAll). // a new group starts at the tail unless told otherwise
				Batch(100).                                  // up to 100 messages per pop...
				Partitions(10).                              // ...from up to 10 partitions
				RenewLease(true, 2000).                      // heartbeat every 2 s while the handler runs
				AutoAck(false).                              // the handler decides the outcome
				Each().
				Limit(1).
				Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
					ok := msg.Data["total"].(float64) > 0
					_, err := client.Ack(ctx, msg, ok, queen.AckOptions{ConsumerGroup: "billing"})
					return err
				}).
				Execute(ctx)
			if err != nil {
				log.Fatal(err)
			}
		}

		run() // total 30: completed
		c := cursorOf(t, broker, "orders", "Default", "billing")
		require.EqualValues(t, 1, c.Offset)
		require.Empty(t, c.LeaseID, "the rest of the pop was given back")

		run() // total 0: failed, one retry spent, it comes back
		c = cursorOf(t, broker, "orders", "Default", "billing")
		require.EqualValues(t, 1, c.Offset)
		require.Equal(t, 1, c.Retries)

		run() // failed again with no retry left: dead-lettered
		c = cursorOf(t, broker, "orders", "Default", "billing")
		require.EqualValues(t, 2, c.Offset)
		dl, err := broker.DeadLetters(ctx, queen.LetterFilter{Queue: "orders", ConsumerGroup: "billing"})
		require.NoError(t, err)
		require.Len(t, dl.Letters, 1)
		require.JSONEq(t, `{"total":0}`, string(dl.Letters[0].Payload))
	})
}

func TestSeed_ConsumeBatch(t *testing.T) {
	t.Parallel()
	eachClient(t, true, func(t *testing.T, over clientOf) {
		broker := queentest.NewBroker(t, nil)
		pushTo(t, broker, "events", "Default", numbered(1000)...)
		client, ctx, log, fmt := over(t, broker), context.Background(), snippetLog{t}, &snippetPrinter{}
		var err error

		err = client.Queue("events").
			Group("archiver").
			SubscriptionMode(queen.SubscriptionModeAll).
			Batch(100). // up to 100 messages per call
			Limit(1000).
			// ConsumeBatch, not Consume: the handler gets the whole batch
			ConsumeBatch(ctx, func(ctx context.Context, messages []*queen.Message) error {
				fmt.Println("archiving", len(messages))
				return nil // all acked if it returns nil, all nacked if it returns an error
			}).
			Execute(ctx)
		if err != nil {
			log.Fatal(err)
		}

		total := 0
		for _, line := range fmt.printed() {
			var n int
			_, err := fmtSscanf(line, "archiving %d", &n)
			require.NoError(t, err)
			require.LessOrEqual(t, n, 100)
			total += n
		}
		require.Equal(t, 1000, total, "stopped at the limit")
		require.EqualValues(t, 1000, cursorOf(t, broker, "events", "Default", "archiver").Offset)
	})
}

// fmtSscanf reaches package fmt from tests where fmt is the stand-in.
var fmtSscanf = fmt.Sscanf

var errPermanent = errors.New("mailbox does not exist")

func TestSeed_HandlerDecidesEveryAnswer(t *testing.T) {
	t.Parallel()
	eachClient(t, true, func(t *testing.T, over clientOf) {
		broker, clock := clocked(t, nil)
		pushTo(t, broker, "emails", "Default", `{"to":"nobody@example.com"}`, `{"to":"flaky@example.com"}`)
		var mu sync.Mutex
		tries := map[string]int{}
		sendEmail := func(data map[string]any) error {
			mu.Lock()
			defer mu.Unlock()
			to := data["to"].(string)
			tries[to]++
			switch {
			case to == "nobody@example.com":
				return errPermanent
			case tries[to] == 1:
				return errors.New("smtp timeout")
			}
			return nil
		}
		client, ctx, log := over(t, broker), context.Background(), snippetLog{t}
		var err error

		run := func() {
			err = client.Queue("emails").
				Group("mailer").
				SubscriptionMode(queen.SubscriptionModeAll).
				AutoAck(false). // the client stops acking: the handler gives every answer
				Each().
				Limit(1).
				Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
					opts := queen.AckOptions{ConsumerGroup: "mailer"}
					err := sendEmail(msg.Data)
					switch {
					case err == nil:
						_, err = client.Ack(ctx, msg, true, opts)
					case errors.Is(err, errPermanent): // trying again cannot help
						// Ack takes no dlq status: a transaction carries it, without the error text.
						_, err = client.Transaction().Ack(msg, "dlq", opts).Commit(ctx)
					default:
						opts.Error = err.Error()
						_, err = client.Ack(ctx, msg, false, opts) // failed: back after retryDelay
					}
					return err
				}).
				Execute(ctx)
			if err != nil {
				log.Fatal(err)
			}
		}

		run() // permanent: dead-lettered through the transaction
		dl, err := broker.DeadLetters(ctx, queen.LetterFilter{Queue: "emails"})
		require.NoError(t, err)
		require.Len(t, dl.Letters, 1)
		require.JSONEq(t, `{"to":"nobody@example.com"}`, string(dl.Letters[0].Payload))
		require.Equal(t, "Unknown error", dl.Letters[0].Error, "the transaction carries no error text")

		run() // transient: failed, one retry spent
		c := cursorOf(t, broker, "emails", "Default", "mailer")
		require.EqualValues(t, 1, c.Offset)
		require.Equal(t, 1, c.Retries)
		require.EqualValues(t, 1, broker.Counters().Acked[queen.AckFailed])

		// Back after the queue's retryDelay (1 s for a push-created queue).
		clock.Advance(time.Second)
		run()
		c = cursorOf(t, broker, "emails", "Default", "mailer")
		require.EqualValues(t, 2, c.Offset)
		require.Equal(t, 2, tries["flaky@example.com"])
	})
}

func TestSeed_Conflation(t *testing.T) {
	t.Parallel()
	eachClient(t, true, func(t *testing.T, over clientOf) {
		broker := queentest.NewBroker(t, nil)
		pushTo(t, broker, "prices", "A-1", `{"sku":"A-1","price":10}`, `{"sku":"A-1","price":11}`, `{"sku":"A-1","price":12}`)
		client, ctx, log, fmt := over(t, broker), context.Background(), snippetLog{t}, &snippetPrinter{}

		newest, err := client.Queue("prices").
			Group("repricer").
			SubscriptionMode(queen.SubscriptionModeAll).
			Conflation(true). // only the newest message of each partition
			Wait(false).
			Pop(ctx)
		if err != nil {
			log.Fatal(err)
		}
		latest := newest[0]
		fmt.Println(latest.Data) // map[price:12 sku:A-1]: 10 and 11 are skipped
		_, err = client.Ack(ctx, latest, true, queen.AckOptions{ConsumerGroup: "repricer"})
		if err != nil {
			log.Fatal(err)
		}

		require.Len(t, newest, 1)
		require.Equal(t, []string{"map[price:12 sku:A-1]"}, fmt.printed())
		again, err := client.Queue("prices").Group("repricer").Wait(false).Pop(ctx)
		require.NoError(t, err)
		require.Empty(t, again, "10 and 11 are never delivered to the group")
		require.EqualValues(t, 3, cursorOf(t, broker, "prices", "A-1", "repricer").Offset)
	})
}

func TestSeed_CommitOnDelivery(t *testing.T) {
	t.Parallel()
	eachClient(t, true, func(t *testing.T, over clientOf) {
		broker := queentest.NewBroker(t, nil)
		pushTo(t, broker, "metrics", "Default", numbered(3)...)
		client, ctx, log := over(t, broker), context.Background(), snippetLog{t}

		readings, err := client.Queue("metrics").
			Group("live-chart").
			SubscriptionMode(queen.SubscriptionModeAll).
			CommitOnDelivery(true). // the cursor moves as they are handed out: no ack
			Batch(100).
			Wait(false).
			Pop(ctx)
		if err != nil {
			log.Fatal(err)
		}

		require.Len(t, readings, 3)
		for _, r := range readings {
			require.Empty(t, r.LeaseID, "no lease")
		}
		c := cursorOf(t, broker, "metrics", "Default", "live-chart")
		require.EqualValues(t, 3, c.Offset, "nothing to ack")
		more, err := client.Queue("metrics").Group("live-chart").Wait(false).Pop(ctx)
		require.NoError(t, err)
		require.Empty(t, more)
	})
}

func TestSeed_RunningForReal(t *testing.T) {
	eachClient(t, false, func(t *testing.T, over clientOf) {
		// Not parallel: it signals its own process.
		broker := queentest.NewBroker(t, nil)
		const tasks = 12
		for i := range 6 {
			pushTo(t, broker, "tasks", fmt.Sprintf("p%d", i), numbered(tasks/6)...)
		}
		var mu sync.Mutex
		done := 0
		runTask := func(data map[string]any) error {
			mu.Lock()
			defer mu.Unlock()
			if done++; done == tasks { // all done: a deploy stops the worker
				go func() { _ = syscall.Kill(syscall.Getpid(), syscall.SIGTERM) }()
			}
			return nil
		}
		client, log := over(t, broker), snippetLog{t}
		ctx := context.Background()

		func() {
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM) // a deploy stops it cleanly
			defer stop()

			err := client.Queue("tasks").
				Group("workers").
				SubscriptionMode(queen.SubscriptionModeAll).
				Concurrency(4).          // four handlers at once, on four partitions
				RenewLease(true, 10000). // long tasks keep their lease alive
				IdleMillis(60000).       // or stop after a minute with nothing to do
				Each().
				Consume(ctx, func(ctx context.Context, task *queen.Message) error {
					return runTask(task.Data)
				}).
				Execute(ctx) // returns once ctx is cancelled
			if err != nil {
				log.Fatal(err)
			}
		}()

		require.Equal(t, tasks, done)
		groups, err := broker.ListGroups(ctx, queen.GroupFilter{Group: "workers"})
		require.NoError(t, err)
		require.Zero(t, groups[0].Lag)
		require.Zero(t, groups[0].ActiveLeases)
	})
}

func TestSeed_ReadItAgain(t *testing.T) {
	t.Parallel()
	eachClient(t, true, func(t *testing.T, over clientOf) {
		broker, clock := seedClock(t)
		pushTo(t, broker, "orders", "Default", `{"id":"before"}`)
		clock.Advance(24 * time.Hour) // 2026-10-22T12:00
		pushTo(t, broker, "orders", "Default", `{"id":"after"}`)
		// An existing group is not moved by a new group's replay.
		old, err := broker.Queue("orders").Group("billing").SubscriptionMode(queen.SubscriptionModeAll).Batch(5).Wait(false).Pop(context.Background())
		require.NoError(t, err)
		require.Len(t, old, 2)
		client, ctx, log, fmt := over(t, broker), context.Background(), snippetLog{t}, &snippetPrinter{}

		err = client.Queue("orders").
			Group("audit").                           // a new group, with its own cursor
			SubscriptionFrom("2026-10-22T00:00:00Z"). // everything pushed from this time on
			Each().
			Limit(1).
			Consume(ctx, func(ctx context.Context, msg *queen.Message) error {
				fmt.Println("again:", msg.Data)
				return nil
			}).
			Execute(ctx)
		if err != nil {
			log.Fatal(err)
		}

		require.Equal(t, []string{"again: map[id:after]"}, fmt.printed())
		require.NotEmpty(t, cursorOf(t, broker, "orders", "Default", "billing").LeaseID, "billing is untouched")
	})
}

func TestSeed_Fetch(t *testing.T) {
	t.Parallel()
	eachClient(t, true, func(t *testing.T, over clientOf) {
		broker := queentest.NewBroker(t, nil)
		pushTo(t, broker, "orders", "customer-42", `{"event":"created"}`, `{"event":"paid"}`, `{"event":"shipped"}`)
		client, ctx, log, fmt := over(t, broker), context.Background(), snippetLog{t}, &snippetPrinter{}

		read, err := client.Queue("orders").Fetch(ctx, []string{"customer-42"}) // no group, lease or ack
		if err != nil {
			log.Fatal(err)
		}
		for _, record := range read["customer-42"].Records {
			fmt.Println(record.Offset, string(record.Payload))
		}

		require.Equal(t, []string{`0 {"event":"created"}`, `1 {"event":"paid"}`, `2 {"event":"shipped"}`}, fmt.printed())
		groups, err := broker.ListGroups(ctx, queen.GroupFilter{})
		require.NoError(t, err)
		require.Empty(t, groups, "no group was created")
	})
}

func TestSeed_Seek(t *testing.T) {
	t.Parallel()
	eachClient(t, true, func(t *testing.T, over clientOf) {
		broker, clock := seedClock(t)
		ctx := context.Background()
		pushTo(t, broker, "events", "Default", `{"n":0}`) // 2026-10-21
		clock.Advance(48 * time.Hour)                     // 2026-10-23
		pushTo(t, broker, "events", "Default", `{"n":1}`, `{"n":2}`)
		archiver := broker.Queue("events").Group("archiver").SubscriptionMode(queen.SubscriptionModeAll).Batch(10).Wait(false)
		readAll := func() []int {
			t.Helper()
			msgs, err := archiver.Pop(ctx)
			require.NoError(t, err)
			var ns []int
			for _, m := range msgs {
				ns = append(ns, dataN(m))
				_, err := broker.Ack(ctx, m, true, queen.AckOptions{ConsumerGroup: "archiver"})
				require.NoError(t, err)
			}
			return ns
		}
		require.Equal(t, []int{0, 1, 2}, readAll())
		require.Empty(t, readAll())
		client, log := over(t, broker), snippetLog{t}
		var err error

		_, err = client.Admin().SeekConsumerGroup(ctx, "archiver", "events",
			queen.SeekConsumerGroupOptions{Timestamp: "2026-10-22T00:00:00Z"})
		if err != nil {
			log.Fatal(err)
		}
		// the archiver group now reads again everything pushed since that time
		require.Equal(t, []int{1, 2}, readAll())

		_, err = client.Admin().SeekConsumerGroup(ctx, "archiver", "events",
			queen.SeekConsumerGroupOptions{ToEnd: true})
		if err != nil {
			log.Fatal(err)
		}
		// and now it skips everything it has not read yet
		pushTo(t, broker, "events", "Default", `{"n":3}`)
		_, err = client.Admin().SeekConsumerGroup(ctx, "archiver", "events",
			queen.SeekConsumerGroupOptions{ToEnd: true})
		require.NoError(t, err)
		require.Empty(t, readAll(), "the backlog is skipped")
		pushTo(t, broker, "events", "Default", `{"n":4}`)
		require.Equal(t, []int{4}, readAll())
	})
}
