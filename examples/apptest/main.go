// Command apptest is an application that embeds a queen broker: it queues
// e-mails with its mailer service, sends them from a worker, and serves
// the broker's Prometheus metrics on /metrics. It is its own Go module,
// as an application using queen would be; its tests use the public test
// kit github.com/queenlite/queen/queentest.
//
//	go run . -dir /tmp/apptest -addr 127.0.0.1:8080
//	curl -s -X POST 'localhost:8080/signup?email=ada@example.com'
//	curl -s localhost:8080/metrics | grep queen_
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"example.com/apptest/mailer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/contrib/queenprom"
)

func main() {
	dir := flag.String("dir", "apptest-data", "directory of the broker's files")
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*dir, *addr, logger); err != nil {
		logger.Error("stopped", "err", err)
		os.Exit(1)
	}
}

func run(dir, addr string, logger *slog.Logger) error {
	obs, err := queenprom.NewObserver(nil)
	if err != nil {
		return err
	}
	b, err := queen.Open(dir, &queen.Options{Logger: logger, Observer: obs})
	if err != nil {
		return err
	}
	defer b.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	svc := mailer.New(b, logSender{logger})
	if _, err := svc.Start(ctx); err != nil {
		return err
	}
	h, err := newHandler(b, obs, svc)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newHandler serves the application's routes and the broker's metrics.
// obs, when not nil, is the Observer the broker was opened with.
func newHandler(b *queen.Broker, obs *queenprom.Observer, svc *mailer.Service) (http.Handler, error) {
	c, err := queenprom.NewCollector(b, &queenprom.Options{Observer: obs})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("POST /signup", func(w http.ResponseWriter, r *http.Request) {
		to := r.URL.Query().Get("email")
		if to == "" {
			http.Error(w, "email is required", http.StatusBadRequest)
			return
		}
		err := svc.Enqueue(r.Context(), "welcome-"+to, mailer.Email{To: to, Subject: "Welcome"})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	return mux, nil
}

// logSender "sends" e-mails to the log.
type logSender struct{ log *slog.Logger }

func (s logSender) Send(ctx context.Context, e mailer.Email) error {
	s.log.Info("e-mail sent", "to", e.To, "subject", e.Subject)
	return nil
}
