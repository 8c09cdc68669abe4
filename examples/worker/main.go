// Command worker is a queen worker: it opens a broker on disk, consumes a
// queue with four handlers at once, and stops cleanly on SIGTERM or
// Ctrl-C, giving back whatever it had taken but not started.
//
//	go run ./examples/worker -dir /tmp/queen-worker -seed 20
//
// With -remote it embeds nothing and works against a server instead
// (cmd/queen, or Queen's own server): several workers, in several
// processes or on several machines, then share the queue. Only the
// construction of the client differs:
//
//	go run ./cmd/queen -data /tmp/queen-server &
//	go run ./examples/worker -remote http://localhost:6632 -seed 20
//
// -seed pushes that many tasks first, so there is something to do. A task
// whose payload has "fail": true is retried with backoff and then
// dead-lettered; one with "schema" other than 1 is parked.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/remote"
)

func main() {
	dir := flag.String("dir", "queen-worker-data", "directory of the broker's files")
	seed := flag.Int("seed", 0, "tasks to push before consuming")
	idle := flag.Duration("idle", 0, "stop after this long with nothing to do (0: never)")
	url := flag.String("remote", "", "URL of a queen server to work against instead of embedding a broker")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*dir, *url, *seed, *idle, logger); err != nil {
		logger.Error("worker stopped", "err", err)
		os.Exit(1)
	}
}

// connect returns the embedded broker, or a client of the server at url:
// the one line that differs between one process and many.
func connect(dir, url string, logger *slog.Logger) (queen.Client, error) {
	if url != "" {
		return remote.Dial(url, &remote.Options{Logger: logger, DrainTimeout: 10 * time.Second})
	}
	return queen.Open(dir, &queen.Options{Logger: logger, DrainTimeout: 10 * time.Second})
}

func run(dir, url string, seed int, idle time.Duration, logger *slog.Logger) error {
	b, err := connect(dir, url, logger)
	if err != nil {
		return err
	}
	defer b.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	for i := range seed {
		task := map[string]any{"id": i, "schema": 1, "fail": i%7 == 6}
		if i%10 == 9 {
			task["schema"] = 2
		}
		// One partition per customer: order holds per customer, and four
		// customers are worked on at once.
		_, err := b.Queue("tasks").Partition(fmt.Sprintf("customer-%d", i%5)).Push(ctx, task)
		if err != nil {
			return err
		}
	}

	err = b.Queue("tasks").
		Group("workers").
		SubscriptionMode(queen.SubscriptionModeAll).
		Concurrency(4).
		RenewLeaseEvery(10*time.Second).
		Idle(idle).
		RetryPolicy(queen.ExponentialRetry(3, 100*time.Millisecond, 2*time.Second)).
		Each().
		Consume(ctx, handle).
		OnSettled(func(s queen.Settlement) {
			if s.Handled {
				logger.Info("task settled", "partition", s.Message.Partition, "offset", s.Message.Offset,
					"outcome", s.Outcome, "attempt", s.Message.DeliveryAttempt)
			}
		}).
		Execute(ctx) // returns nil once SIGTERM has been handled and the drain finished
	if err != nil {
		return err
	}
	logger.Info("worker stopped cleanly")
	return nil
}

var errFlaky = errors.New("downstream service unavailable")

func handle(ctx context.Context, msg *queen.Message) error {
	if msg.Data["schema"] != 1.0 {
		return queen.Park(fmt.Errorf("schema %v is unknown to this worker", msg.Data["schema"]))
	}
	if msg.Data["fail"] == true {
		return errFlaky // retried by the policy, then dead-lettered
	}
	select { // some work, which a stop does not interrupt
	case <-time.After(time.Duration(rand.IntN(50)) * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
