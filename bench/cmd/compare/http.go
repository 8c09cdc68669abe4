package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
)

// Scenario 8 runs the same push and pop/ack through httpapi on a loopback
// listener with a plain net/http client (keep-alive, one connection per
// worker), against the same calls in process (system "queen", kinds
// httppush, httppop and httpone: one-message consumers that pop 1 and ack
// it through /api/v1/ack). Systems "server" and "server-base" run the
// same client against cmd/queen binaries in their own process (-queen-bin,
// -base-bin), each preloaded through its own HTTP API.

type httpEnv struct {
	b      *qb // the in-process broker; nil while a server process owns the data
	j      *Job
	srv    *http.Server
	proc   *exec.Cmd // system "server*": cmd/queen in its own process
	pprof  string    // its net/http/pprof address, when profiling
	cpu    chan error
	base   string
	client *http.Client
}

// isServer reports whether a system runs cmd/queen as its own process.
func isServer(system string) bool { return strings.HasPrefix(system, "server") }

// httpStart serves a broker with preload run on it first (untimed; nil for
// none): in this process through httpapi (system "http"), or through j.Bin
// (cmd/queen) started on the data directory (systems "server*"). A server
// is preloaded over its own HTTP API, so each binary writes its own store
// format: an older binary cannot read what this library writes.
func httpStart(j *Job, preload func(b *queen.Broker) error, httpPreload func(e *httpEnv) error) (*httpEnv, error) {
	conns := max(j.Producers, j.Consumers, 1)
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute}
	e := &httpEnv{j: j, client: &http.Client{Transport: tr, Timeout: time.Minute}}
	if isServer(j.System) {
		if err := e.startServer(); err != nil {
			return nil, err
		}
		if httpPreload != nil {
			if err := httpPreload(e); err != nil {
				e.close()
				return nil, fmt.Errorf("preload: %w", err)
			}
		}
		if e.pprof != "" {
			// The server's CPU profile over the measured phase (at most
			// MaxTime), fetched while the client runs.
			e.cpu = make(chan error, 1)
			secs := strconv.Itoa(max(1, int(j.MaxTime.Seconds()+0.999)))
			go func() { e.cpu <- e.fetch("/debug/pprof/profile?seconds="+secs, j.Profile+".server.cpu") }()
		}
		return e, nil
	}
	b, err := queenOpen(j, j.Sync)
	if err != nil {
		return nil, err
	}
	if preload != nil {
		if err := preload(b.Broker); err != nil {
			b.Close()
			return nil, fmt.Errorf("preload: %w", err)
		}
	}
	e.b = b
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		return nil, err
	}
	e.srv = &http.Server{Handler: httpapi.New(b.Broker, nil), ReadHeaderTimeout: 10 * time.Second}
	go e.srv.Serve(ln)
	e.base = "http://" + ln.Addr().String()
	return e, nil
}

// startServer starts j.Bin on a free loopback port and waits for /health.
func (e *httpEnv) startServer() error {
	if e.j.Bin == "" {
		return fmt.Errorf("system %s: no cmd/queen binary", e.j.System)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dur := "none"
	switch {
	case e.j.Sync && e.j.System == "server-pushes":
		dur = "pushes"
	case e.j.Sync:
		dur = "sync"
	}
	e.proc = exec.Command(e.j.Bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port), "-data", e.j.Dir, "-durability", dur, "-log-level", "warn")
	e.proc.Stdout, e.proc.Stderr = os.Stderr, os.Stderr
	if e.j.Profile != "" {
		// A binary built with -tags pprof serves net/http/pprof there.
		e.pprof = "127.0.0.1:" + strconv.Itoa(port+1)
		e.proc.Env = append(os.Environ(), "QUEEN_PPROF="+e.pprof)
	}
	if err := e.proc.Start(); err != nil {
		return err
	}
	e.base = "http://127.0.0.1:" + strconv.Itoa(port)
	for range 200 {
		if st, err := e.do("GET", "/health", nil, nil); err == nil && st == http.StatusOK {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.stopServer()
	return fmt.Errorf("%s did not answer /health on port %d", e.j.Bin, port)
}

// fetch saves a pprof profile of the server process (built with -tags
// pprof) to file.
func (e *httpEnv) fetch(path, file string) error {
	resp, err := http.Get("http://" + e.pprof + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof %s: %s (is the binary built with -tags pprof?)", path, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// stopServer ends the server process the way an operator would (SIGTERM).
func (e *httpEnv) stopServer() error {
	if e.proc == nil {
		return nil
	}
	if e.cpu != nil {
		if err := <-e.cpu; err != nil {
			fmt.Fprintln(os.Stderr, "server profile:", err)
		} else if err := e.fetch("/debug/pprof/allocs", e.j.Profile+".server.allocs"); err != nil {
			fmt.Fprintln(os.Stderr, "server profile:", err)
		}
		e.cpu = nil
	}
	_ = e.proc.Process.Signal(syscall.SIGTERM)
	err := e.proc.Wait()
	e.proc = nil
	return err
}

// broker returns the in-process broker, reopening the data directory once
// a server process has stopped, to verify what it left.
func (e *httpEnv) broker() (*queen.Broker, error) {
	if e.b == nil {
		if err := e.stopServer(); err != nil {
			return nil, fmt.Errorf("server exit: %w", err)
		}
		b, err := queenOpen(e.j, e.j.Sync)
		if err != nil {
			return nil, err
		}
		e.b = b
	}
	return e.b.Broker, nil
}

func (e *httpEnv) close() error {
	serr := e.stopServer()
	if e.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.srv.Shutdown(ctx)
	}
	if e.b != nil {
		if err := e.b.Close(); err != nil {
			return err
		}
	}
	return serr
}

// do sends a request and decodes a JSON reply into out (when out is not
// nil and the status is not 204). It returns the status.
func (e *httpEnv) do(method, path string, body []byte, out any) (int, error) {
	var buf bytes.Buffer
	return e.doInto(method, path, body, &buf, out)
}

// doInto is do reading the reply into buf, emptied first: a consumer
// reuses one buffer for all its replies.
func (e *httpEnv) doInto(method, path string, body []byte, buf *bytes.Buffer, out any) (int, error) {
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
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return resp.StatusCode, err
	}
	data := buf.Bytes()
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
	case "httppop", "httpone":
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
	e, err := httpStart(j, nil, nil)
	if err != nil {
		return Result{}, err
	}
	names := partNames("p", j.Partitions)
	payload := fixedPayload(j.Payload)
	prof := startProfile(j)
	p, err := produce(j, func(w, lo, hi int) error { return e.push(names, payload, lo, hi) })
	prof.stop()
	var qs *queen.QueueStats
	b, serr := e.broker()
	if serr == nil {
		qs, serr = b.QueueStats(context.Background(), benchQueue)
	}
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

// push sends items lo..hi-1 in one /api/v1/push call, spread over the
// partitions names, and checks every item was queued.
func (e *httpEnv) push(names []string, payload []byte, lo, hi int) error {
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

// preloadJob is the untimed push of j.N messages a pop/ack row starts from.
func preloadJob(j *Job) *Job {
	pre := *j
	pre.Producers, pre.Batch, pre.MaxTime = 2, 1000, 0
	return &pre
}

// preloadBacklog pushes j.N messages in process, untimed.
func preloadBacklog(b *queen.Broker, j *Job) error {
	payload := fixedPayload(j.Payload)
	_, err := queenPushAll(context.Background(), b, preloadJob(j), partNames("p", j.Partitions), func(int) []byte { return payload })
	return err
}

// httpPreloadBacklog is preloadBacklog through a server's HTTP API.
func httpPreloadBacklog(e *httpEnv, j *Job) error {
	names, payload := partNames("p", j.Partitions), fixedPayload(j.Payload)
	_, err := produce(preloadJob(j), func(w, lo, hi int) error { return e.push(names, payload, lo, hi) })
	return err
}

func httpPopAck(j *Job) (Result, error) {
	e, err := httpStart(j, func(b *queen.Broker) error { return preloadBacklog(b, j) }, func(e *httpEnv) error { return httpPreloadBacklog(e, j) })
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	group := "http-" + j.Tag
	oc := newOffsetChecker()
	popPath := "/api/v1/pop/queue/" + benchQueue + "?consumerGroup=" + group + "&batch=" + strconv.Itoa(j.Batch) + "&wait=true&timeout=100&subscriptionMode=all"
	one := j.Kind == "httpone"
	var done atomic.Int64
	// Where a consumer's time goes: pops that returned messages, pops that
	// returned none (long polls ended by their timeout), and acks.
	var popNS, emptyNS, ackNS, empties atomic.Int64
	var lt lastTime
	var once sync.Once
	var firstErr error
	var failed, capped atomic.Bool
	fail := func(err error) { once.Do(func() { firstErr = err; failed.Store(true) }) }
	end := deadline(j)
	prof := startProfile(j)
	cpu := startCPU(e)
	start := time.Now()
	var wg sync.WaitGroup
	for range max(j.Consumers, 1) {
		wg.Go(func() {
			msgs := make([]*queen.Message, 0, j.Batch)
			var body, reply bytes.Buffer
			for done.Load() < int64(j.N) && !failed.Load() {
				if time.Now().After(end) {
					capped.Store(true)
					return
				}
				var rep httpPopReply
				t0 := time.Now()
				st, err := e.doInto("GET", popPath, nil, &reply, &rep)
				if err != nil {
					fail(err)
					return
				}
				if st == http.StatusNoContent || len(rep.Messages) == 0 {
					emptyNS.Add(int64(time.Since(t0)))
					empties.Add(1)
					continue
				}
				t1 := time.Now()
				popNS.Add(int64(t1.Sub(t0)))
				msgs = msgs[:0]
				body.Reset()
				ackPath := "/api/v1/ack/batch"
				if one {
					// A one-message consumer acks through /api/v1/ack,
					// as Queen's client examples do.
					ackPath = "/api/v1/ack"
					if len(rep.Messages) != 1 {
						fail(fmt.Errorf("pop batch 1 returned %d messages", len(rep.Messages)))
						return
					}
				} else {
					body.WriteString(`{"consumerGroup":"` + group + `","acknowledgments":[`)
				}
				for i, m := range rep.Messages {
					msgs = append(msgs, &queen.Message{ConsumerGroup: m.ConsumerGroup, Partition: m.Partition, Offset: m.Offset, DeliveryAttempt: m.DeliveryAttempt})
					if i > 0 {
						body.WriteByte(',')
					}
					body.WriteString(`{"transactionId":"` + m.TransactionID + `","partitionId":"` + m.PartitionID + `","leaseId":"` + m.LeaseID + `","status":"completed"`)
					if one {
						body.WriteString(`,"consumerGroup":"` + group + `"`)
					}
					body.WriteByte('}')
				}
				if !one {
					body.WriteString(`]}`)
				}
				if err := oc.check(msgs); err != nil {
					fail(err)
					return
				}
				var acks []httpAckResult
				t2 := time.Now()
				if _, err := e.doInto("POST", ackPath, body.Bytes(), &reply, &acks); err != nil {
					fail(err)
					return
				}
				ackNS.Add(int64(time.Since(t2)))
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
	cpuNote := cpu.note(done.Load())
	prof.stop()
	if firstErr != nil {
		return Result{}, firstErr
	}
	r := Result{Msgs: done.Load(), Seconds: lt.get().Sub(start).Seconds(), Capped: capped.Load()}
	if calls := r.Msgs / int64(j.Batch); calls > 0 {
		r.Note = fmt.Sprintf("per cycle: pop %.0f µs, ack %.0f µs, empty pops %.0f µs (%d)",
			float64(popNS.Load())/float64(calls)/1e3, float64(ackNS.Load())/float64(calls)/1e3, float64(emptyNS.Load())/float64(calls)/1e3, empties.Load())
	}
	r.Note += cpuNote
	b, err := e.broker()
	if err != nil {
		return Result{}, err
	}
	if !r.Capped {
		if err := verifyDrained(context.Background(), b, []string{group}); err != nil {
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
