package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
)

// Scenario 8 runs the same push and pop/ack through httpapi on a loopback
// listener with a plain net/http client (keep-alive, one connection per
// worker), against the same calls in process (system "queen", kinds
// httppush and httppop).

type httpEnv struct {
	b      *qb
	srv    *http.Server
	base   string
	client *http.Client
}

func httpStart(j *Job) (*httpEnv, error) {
	b, err := queenOpen(j, j.Sync)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		return nil, err
	}
	srv := &http.Server{Handler: httpapi.New(b.Broker, nil), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	conns := max(j.Producers, j.Consumers, 1)
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute}
	return &httpEnv{b: b, srv: srv, base: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr, Timeout: time.Minute}}, nil
}

func (e *httpEnv) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.srv.Shutdown(ctx)
	return e.b.Close()
}

// do sends a request and decodes a JSON reply into out (when out is not
// nil and the status is not 204). It returns the status.
func (e *httpEnv) do(method, path string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func runHTTP(j *Job) (Result, error) {
	switch j.Kind {
	case "httppush":
		return httpPush(j)
	case "httppop":
		return httpPopAck(j)
	}
	return Result{}, fmt.Errorf("http: unknown kind %q", j.Kind)
}

type httpPushResult struct {
	Status    string `json:"status"`
	Offset    *int64 `json:"offset"`
	Partition string `json:"partition"`
	Error     string `json:"error"`
}

func httpPush(j *Job) (Result, error) {
	e, err := httpStart(j)
	if err != nil {
		return Result{}, err
	}
	names := partNames("p", j.Partitions)
	payload := fixedPayload(j.Payload)
	prof := startProfile(j)
	p, err := produce(j, func(w, lo, hi int) error {
		var body bytes.Buffer
		body.WriteString(`{"items":[`)
		for i := lo; i < hi; i++ {
			if i > lo {
				body.WriteByte(',')
			}
			body.WriteString(`{"queue":"` + benchQueue + `","partition":"` + names[i%len(names)] + `","payload":`)
			body.Write(payload)
			body.WriteByte('}')
		}
		body.WriteString(`]}`)
		var out []httpPushResult
		if _, err := e.do("POST", "/api/v1/push", body.Bytes(), &out); err != nil {
			return err
		}
		if len(out) != hi-lo {
			return fmt.Errorf("push: %d results for %d items", len(out), hi-lo)
		}
		for k := range out {
			if out[k].Status != string(queen.PushQueued) || out[k].Offset == nil {
				return fmt.Errorf("push item %d: %s %s", k, out[k].Status, out[k].Error)
			}
		}
		return nil
	})
	prof.stop()
	qs, serr := e.b.QueueStats(context.Background(), benchQueue)
	if cerr := e.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, err
	}
	if serr != nil || qs.Messages != p.n {
		return Result{}, fmt.Errorf("verify: queue holds %v messages (%v), pushed %d", qs, serr, p.n)
	}
	return p.result(), nil
}

type httpPopReply struct {
	LeaseID  string `json:"leaseId"`
	Messages []struct {
		TransactionID   string          `json:"transactionId"`
		PartitionID     string          `json:"partitionId"`
		Partition       string          `json:"partition"`
		LeaseID         string          `json:"leaseId"`
		ConsumerGroup   string          `json:"consumerGroup"`
		Offset          int64           `json:"offset"`
		DeliveryAttempt int             `json:"deliveryAttempt"`
		Data            json.RawMessage `json:"data"`
	} `json:"messages"`
}

type httpAckResult struct {
	Success bool    `json:"success"`
	Error   *string `json:"error"`
}

// preloadBacklog pushes j.N messages in process, untimed.
func preloadBacklog(b *queen.Broker, j *Job) error {
	pre := *j
	pre.Producers, pre.Batch, pre.MaxTime = 2, 1000, 0
	payload := fixedPayload(j.Payload)
	_, err := queenPushAll(context.Background(), b, &pre, partNames("p", j.Partitions), func(int) []byte { return payload })
	return err
}

func httpPopAck(j *Job) (Result, error) {
	e, err := httpStart(j)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	if err := preloadBacklog(e.b.Broker, j); err != nil {
		return Result{}, fmt.Errorf("preload: %w", err)
	}
	group := "http-" + j.Tag
	oc := newOffsetChecker()
	popPath := "/api/v1/pop/queue/" + benchQueue + "?consumerGroup=" + group + "&batch=" + strconv.Itoa(j.Batch) + "&wait=true&timeout=100&subscriptionMode=all"
	var done atomic.Int64
	var lt lastTime
	var once sync.Once
	var firstErr error
	var failed, capped atomic.Bool
	fail := func(err error) { once.Do(func() { firstErr = err; failed.Store(true) }) }
	end := deadline(j)
	prof := startProfile(j)
	start := time.Now()
	var wg sync.WaitGroup
	for range max(j.Consumers, 1) {
		wg.Go(func() {
			msgs := make([]*queen.Message, 0, j.Batch)
			var body bytes.Buffer
			for done.Load() < int64(j.N) && !failed.Load() {
				if time.Now().After(end) {
					capped.Store(true)
					return
				}
				var rep httpPopReply
				st, err := e.do("GET", popPath, nil, &rep)
				if err != nil {
					fail(err)
					return
				}
				if st == http.StatusNoContent || len(rep.Messages) == 0 {
					continue
				}
				msgs = msgs[:0]
				body.Reset()
				body.WriteString(`{"consumerGroup":"` + group + `","acknowledgments":[`)
				for i, m := range rep.Messages {
					msgs = append(msgs, &queen.Message{ConsumerGroup: m.ConsumerGroup, Partition: m.Partition, Offset: m.Offset, DeliveryAttempt: m.DeliveryAttempt})
					if i > 0 {
						body.WriteByte(',')
					}
					body.WriteString(`{"transactionId":"` + m.TransactionID + `","partitionId":"` + m.PartitionID + `","leaseId":"` + m.LeaseID + `","status":"completed"}`)
				}
				body.WriteString(`]}`)
				if err := oc.check(msgs); err != nil {
					fail(err)
					return
				}
				var acks []httpAckResult
				if _, err := e.do("POST", "/api/v1/ack/batch", body.Bytes(), &acks); err != nil {
					fail(err)
					return
				}
				if len(acks) != len(rep.Messages) {
					fail(fmt.Errorf("ack: %d results for %d items", len(acks), len(rep.Messages)))
					return
				}
				for k := range acks {
					if !acks[k].Success {
						fail(fmt.Errorf("ack item %d refused: %v", k, acks[k].Error))
						return
					}
				}
				lt.note(time.Now())
				done.Add(int64(len(acks)))
			}
		})
	}
	wg.Wait()
	prof.stop()
	if firstErr != nil {
		return Result{}, firstErr
	}
	r := Result{Msgs: done.Load(), Seconds: lt.get().Sub(start).Seconds(), Capped: capped.Load()}
	if !r.Capped {
		if err := verifyDrained(context.Background(), e.b.Broker, []string{group}); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}

// queenPopAck is the in-process counterpart of httpPopAck.
func queenPopAck(j *Job) (Result, error) {
	b, err := queenOpen(j, j.Sync)
	if err != nil {
		return Result{}, err
	}
	defer b.Close()
	if err := preloadBacklog(b.Broker, j); err != nil {
		return Result{}, fmt.Errorf("preload: %w", err)
	}
	group := "http-" + j.Tag
	oc := newOffsetChecker()
	prof := startProfile(j)
	start := time.Now()
	qc := &queenConsumer{b: b.Broker, group: group, workers: j.Consumers, batch: j.Batch, partitions: 1, target: int64(j.N), end: deadline(j), check: oc.check}
	n, last, capped, err := qc.run(context.Background())
	prof.stop()
	if err != nil {
		return Result{}, err
	}
	r := Result{Msgs: n, Seconds: last.Sub(start).Seconds(), Capped: capped}
	if !capped {
		if err := verifyDrained(context.Background(), b.Broker, []string{group}); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}
