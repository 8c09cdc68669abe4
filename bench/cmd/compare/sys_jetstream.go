package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const jsStream = "BENCH"

// jsEnv is an embedded NATS server with JetStream on file storage, and a
// client connected to it in process (no socket).
type jsEnv struct {
	s  *server.Server
	nc *nats.Conn
	js jetstream.JetStream
}

// jsStart starts the server. With sync, it behaves as sync_interval:
// always (every stream write is fsynced); without, as the default (fsync
// every 2 minutes).
func jsStart(j *Job, sync bool) (*jsEnv, error) {
	opts := &server.Options{
		ServerName: "bench", JetStream: true, StoreDir: j.Dir,
		DontListen: true, NoLog: true, NoSigs: true,
		SyncAlways: sync,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("nats server not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		s.Shutdown()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		s.Shutdown()
		return nil, err
	}
	return &jsEnv{s: s, nc: nc, js: js}, nil
}

func (e *jsEnv) close() {
	e.nc.Close()
	e.s.Shutdown()
	e.s.WaitForShutdown()
}

func (e *jsEnv) stream(ctx context.Context) (jetstream.Stream, error) {
	return e.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: jsStream, Subjects: []string{"bench.>"}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, Replicas: 1, MaxMsgs: -1, MaxBytes: -1,
	})
}

func subjects(prefix string, n int) []string {
	s := make([]string, max(n, 1))
	for i := range s {
		s[i] = prefix + strconv.Itoa(i)
	}
	return s
}

func runJS(j *Job) (Result, error) {
	switch j.Kind {
	case "push", "preload":
		return jsPush(j)
	case "drain", "fanout":
		return jsDrain(j)
	case "order":
		return jsOrder(j)
	case "latency":
		return jsLatency(j)
	case "pushdrain":
		return jsPushDrain(j)
	}
	return Result{}, fmt.Errorf("jetstream: unknown kind %q", j.Kind)
}

// jsPublishAll publishes [0, n): a single message per call with a
// synchronous Publish (waits for the stream's ack), or for batches,
// batch async publishes and a wait for all their acks.
func jsPublishAll(ctx context.Context, e *jsEnv, j *Job, subj func(i int) string, payload func(i int) []byte) (produced, error) {
	return produce(j, func(w, lo, hi int) error {
		var opts []jetstream.PublishOpt
		if hi-lo == 1 {
			if j.JSDedup {
				opts = append(opts, jetstream.WithMsgID(nats.NewInbox()))
			}
			_, err := e.js.Publish(ctx, subj(lo), payload(lo), opts...)
			return err
		}
		futs := make([]jetstream.PubAckFuture, 0, hi-lo)
		for i := lo; i < hi; i++ {
			var opts []jetstream.PublishOpt
			if j.JSDedup {
				opts = append(opts, jetstream.WithMsgID(nats.NewInbox()))
			}
			f, err := e.js.PublishAsync(subj(i), payload(i), opts...)
			if err != nil {
				return err
			}
			futs = append(futs, f)
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

func jsPush(j *Job) (Result, error) {
	ctx := context.Background()
	sync := j.Sync && j.Kind != "preload"
	e, err := jsStart(j, sync)
	if err != nil {
		return Result{}, err
	}
	st, err := e.stream(ctx)
	if err != nil {
		e.close()
		return Result{}, err
	}
	subs := subjects("bench.p", j.Partitions)
	payload := fixedPayload(j.Payload)
	prof := startProfile(j)
	p, err := jsPublishAll(ctx, e, j, func(i int) string { return subs[i%len(subs)] }, func(int) []byte { return payload })
	prof.stop()
	if err != nil {
		e.close()
		return Result{}, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		e.close()
		return Result{}, err
	}
	e.close()
	if info.State.Msgs != uint64(p.n) {
		return Result{}, fmt.Errorf("verify: stream holds %d, published %d", info.State.Msgs, p.n)
	}
	// Verify on a restarted server.
	e, err = jsStart(j, false)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	st, err = e.js.Stream(ctx, jsStream)
	if err != nil {
		return Result{}, err
	}
	info, err = st.Info(ctx)
	if err != nil {
		return Result{}, err
	}
	if info.State.Msgs != uint64(p.n) {
		return Result{}, fmt.Errorf("verify after restart: stream holds %d, published %d", info.State.Msgs, p.n)
	}
	if p.n > 0 {
		m, err := st.GetMsg(ctx, info.State.LastSeq)
		if err != nil || string(m.Data) != string(payload) {
			return Result{}, fmt.Errorf("verify: last message: %v", err)
		}
	}
	return p.result(), nil
}

// jsConsumer fetches and acks from one durable pull consumer.
type jsConsumer struct {
	cons    jetstream.Consumer
	workers int
	batch   int
	target  int64
	end     time.Time
	check   func(msgs []jetstream.Msg) error
}

// run acks each message explicitly: Ack for all but the last of a fetch,
// DoubleAck (which waits for the server's confirmation, and so for the
// acks sent before it on the same connection) for the last.
func (jc *jsConsumer) run(ctx context.Context) (n int64, last time.Time, capped bool, err error) {
	var done atomic.Int64
	var lt lastTime
	var firstErr error
	var once sync.Once
	var failed, capFlag atomic.Bool
	fail := func(e error) { once.Do(func() { firstErr = e; failed.Store(true) }) }
	var wg sync.WaitGroup
	for range max(jc.workers, 1) {
		wg.Go(func() {
			msgs := make([]jetstream.Msg, 0, jc.batch)
			for done.Load() < jc.target && !failed.Load() {
				if time.Now().After(jc.end) {
					capFlag.Store(true)
					return
				}
				mb, err := jc.cons.Fetch(jc.batch, jetstream.FetchMaxWait(200*time.Millisecond))
				if err != nil {
					fail(fmt.Errorf("fetch: %w", err))
					return
				}
				msgs = msgs[:0]
				for m := range mb.Messages() {
					msgs = append(msgs, m)
				}
				if len(msgs) == 0 {
					if err := mb.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
						fail(fmt.Errorf("fetch: %w", err))
						return
					}
					continue
				}
				if jc.check != nil {
					if err := jc.check(msgs); err != nil {
						fail(err)
						return
					}
				}
				for i, m := range msgs {
					var err error
					if i == len(msgs)-1 {
						err = m.DoubleAck(ctx)
					} else {
						err = m.Ack()
					}
					if err != nil {
						fail(fmt.Errorf("ack: %w", err))
						return
					}
				}
				lt.note(time.Now())
				done.Add(int64(len(msgs)))
			}
		})
	}
	wg.Wait()
	return done.Load(), lt.get(), capFlag.Load(), firstErr
}

// seqChecker verifies exactly-once delivery of stream sequences per
// consumer, and with ordered, that they arrive in increasing order.
type seqChecker struct {
	mu      sync.Mutex
	seen    *seen
	last    uint64
	ordered bool
}

func (sc *seqChecker) check(msgs []jetstream.Msg) error {
	for _, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if md.NumDelivered != 1 {
			return fmt.Errorf("stream seq %d delivered %d times", md.Sequence.Stream, md.NumDelivered)
		}
		if sc.ordered {
			sc.mu.Lock()
			if md.Sequence.Stream <= sc.last {
				sc.mu.Unlock()
				return fmt.Errorf("order: seq %d after %d", md.Sequence.Stream, sc.last)
			}
			sc.last = md.Sequence.Stream
			sc.mu.Unlock()
		}
		sc.seen.mark(md.Sequence.Stream)
	}
	return nil
}

func jsDurable(ctx context.Context, e *jsEnv, name string, filter string) (jetstream.Consumer, error) {
	return e.js.CreateOrUpdateConsumer(ctx, jsStream, jetstream.ConsumerConfig{
		Durable: name, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait: 5 * time.Minute, MaxAckPending: 1 << 20, FilterSubject: filter, MaxRequestBatch: 0,
	})
}

func verifyJSConsumer(ctx context.Context, c jetstream.Consumer, want int64) error {
	ci, err := c.Info(ctx)
	if err != nil {
		return err
	}
	if ci.NumPending != 0 || ci.NumAckPending != 0 || ci.AckFloor.Consumer != uint64(want) {
		return fmt.Errorf("verify: consumer %s: pending %d, ack pending %d, ack floor %d of %d", ci.Name, ci.NumPending, ci.NumAckPending, ci.AckFloor.Consumer, want)
	}
	return nil
}

// jsDrain is scenario 3 (one durable consumer, j.Consumers fetchers) and 4
// (j.Groups durable consumers, one fetcher each) on the preloaded stream.
func jsDrain(j *Job) (Result, error) {
	ctx := context.Background()
	e, err := jsStart(j, j.Sync)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	names := []string{"drain-" + j.Tag}
	workers := j.Consumers
	if j.Kind == "fanout" {
		names = nil
		for g := range max(j.Groups, 1) {
			names = append(names, fmt.Sprintf("fan-%s-%d", j.Tag, g))
		}
		workers = 1
	}
	conss := make([]jetstream.Consumer, len(names))
	for i, n := range names {
		if conss[i], err = jsDurable(ctx, e, n, ""); err != nil {
			return Result{}, err
		}
	}
	end := deadline(j)
	prof := startProfile(j)
	start := time.Now()
	type out struct {
		n      int64
		last   time.Time
		capped bool
		err    error
		sc     *seqChecker
	}
	outs := make([]out, len(names))
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() {
			o := &outs[i]
			o.sc = &seqChecker{seen: newSeen(j.N), ordered: workers == 1}
			jc := &jsConsumer{cons: conss[i], workers: workers, batch: j.Batch, target: int64(j.N), end: end, check: o.sc.check}
			o.n, o.last, o.capped, o.err = jc.run(ctx)
		})
	}
	wg.Wait()
	prof.stop()
	var r Result
	var last time.Time
	for i, o := range outs {
		if o.err != nil {
			return Result{}, fmt.Errorf("consumer %s: %w", names[i], o.err)
		}
		if o.sc.seen.dups != 0 || o.sc.seen.n != o.n {
			return Result{}, fmt.Errorf("verify: consumer %s: %d acked, %d distinct, %d duplicates", names[i], o.n, o.sc.seen.n, o.sc.seen.dups)
		}
		r.Msgs += o.n
		r.Capped = r.Capped || o.capped
		if o.last.After(last) {
			last = o.last
		}
	}
	r.Seconds = last.Sub(start).Seconds()
	if !r.Capped {
		for _, c := range conss {
			if err := verifyJSConsumer(ctx, c, int64(j.N)); err != nil {
				return Result{}, err
			}
		}
	}
	return r, nil
}

// jsOrder is scenario 5's closest equivalent: JetStream keeps order per
// consumer, not per subject across consumers, so the keys are sharded
// statically over j.Consumers filtered durable consumers (subject
// bench.o.<shard>.<key>), one fetcher each.
func jsOrder(j *Job) (Result, error) {
	ctx := context.Background()
	e, err := jsStart(j, j.Sync)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	if _, err := e.stream(ctx); err != nil {
		return Result{}, err
	}
	keys, shards := max(j.Partitions, 1), max(j.Consumers, 1)
	subj := make([]string, keys)
	for k := range subj {
		subj[k] = fmt.Sprintf("bench.o.%d.%d", k%shards, k)
	}
	pre := *j
	pre.Producers, pre.Batch, pre.MaxTime = 1, 1000, 0
	if _, err := jsPublishAll(ctx, e, &pre, func(i int) string { return subj[i%keys] }, func(i int) []byte { return seqPayload(i%keys, i/keys, 0, j.Payload) }); err != nil {
		return Result{}, fmt.Errorf("preload: %w", err)
	}
	conss := make([]jetstream.Consumer, shards)
	for s := range shards {
		if conss[s], err = jsDurable(ctx, e, fmt.Sprintf("order-%s-%d", j.Tag, s), fmt.Sprintf("bench.o.%d.>", s)); err != nil {
			return Result{}, err
		}
	}
	var mu sync.Mutex
	next := make([]int, keys)
	check := func(msgs []jetstream.Msg) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			k, s, _, ok := parseSeq(m.Data())
			if !ok || k < 0 || k >= keys || m.Subject() != subj[k] {
				return fmt.Errorf("bad message %q on %s", m.Data(), m.Subject())
			}
			if s != next[k] {
				return fmt.Errorf("order: key %d got seq %d, want %d", k, s, next[k])
			}
			next[k]++
		}
		return nil
	}
	end := deadline(j)
	prof := startProfile(j)
	start := time.Now()
	type out struct {
		n      int64
		last   time.Time
		capped bool
		err    error
	}
	outs := make([]out, shards)
	var wg sync.WaitGroup
	for s := range shards {
		want := 0
		for k := s; k < keys; k += shards {
			want += j.N/keys + btoi(k < j.N%keys)
		}
		wg.Go(func() {
			o := &outs[s]
			jc := &jsConsumer{cons: conss[s], workers: 1, batch: j.Batch, target: int64(want), end: end, check: check}
			o.n, o.last, o.capped, o.err = jc.run(ctx)
		})
	}
	wg.Wait()
	prof.stop()
	var r Result
	var last time.Time
	for _, o := range outs {
		if o.err != nil {
			return Result{}, o.err
		}
		r.Msgs += o.n
		r.Capped = r.Capped || o.capped
		if o.last.After(last) {
			last = o.last
		}
	}
	r.Seconds = last.Sub(start).Seconds()
	if !r.Capped {
		for k := range keys {
			if want := j.N/keys + btoi(k < j.N%keys); next[k] != want {
				return Result{}, fmt.Errorf("verify: key %d got %d messages, want %d", k, next[k], want)
			}
		}
	}
	return r, nil
}

// jsLatency is scenario 7: the same open-loop producer, and a pull
// consumer's Consume callback that acks each message.
func jsLatency(j *Job) (Result, error) {
	ctx := context.Background()
	e, err := jsStart(j, j.Sync)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	if _, err := e.stream(ctx); err != nil {
		return Result{}, err
	}
	cons, err := jsDurable(ctx, e, "lat", "")
	if err != nil {
		return Result{}, err
	}
	subs := subjects("bench.p", j.Partitions)
	l := &lats{}
	sn := newSeen(j.N)
	var got atomic.Int64
	all := make(chan struct{})
	var cbErr atomic.Value
	cc, err := cons.Consume(func(m jetstream.Msg) {
		now := time.Now().UnixNano()
		_, s, t, ok := parseSeq(m.Data())
		if !ok {
			cbErr.Store(fmt.Errorf("bad payload %q", m.Data()))
			return
		}
		l.add(time.Duration(now - t))
		sn.mark(uint64(s))
		if err := m.Ack(); err != nil {
			cbErr.Store(err)
		}
		if got.Add(1) == int64(j.N) {
			close(all)
		}
	})
	if err != nil {
		return Result{}, err
	}
	defer cc.Stop()
	prof := startProfile(j)
	note, sent, err := openLoop(j, func(i int, at time.Time) error { // at: the call's start
		_, err := e.js.Publish(ctx, subs[i%len(subs)], seqPayload(i%len(subs), i, at.UnixNano(), j.Payload))
		return err
	})
	if err != nil {
		prof.stop()
		return Result{}, err
	}
	select {
	case <-all:
	case <-time.After(30 * time.Second):
	}
	prof.stop()
	if v := cbErr.Load(); v != nil {
		return Result{}, v.(error)
	}
	if got.Load() != int64(j.N) || sn.n != int64(j.N) || sn.dups != 0 {
		return Result{}, fmt.Errorf("verify: consumed %d (%d distinct, %d dups) of %d", got.Load(), sn.n, sn.dups, j.N)
	}
	r := Result{Msgs: int64(j.N), Seconds: sent.Seconds(), Note: note}
	l.fill(&r)
	return r, nil
}

// jsPushDrain is scenario 9 on JetStream: the push of scenario 2 and the
// drain of scenario 3, one after the other in the same process (the
// server restarts between them, as each phase's own row does).
func jsPushDrain(j *Job) (Result, error) {
	pj := *j
	pj.Kind = "push"
	if j.Profile != "" {
		pj.Profile = j.Profile + ".push"
	}
	r, err := jsPush(&pj)
	if err != nil || r.Capped {
		return r, err
	}
	dj := *j
	dj.Kind, dj.N, dj.Batch = "drain", int(r.Msgs), j.PopBatch
	if j.Profile != "" {
		dj.Profile = j.Profile + ".drain"
	}
	d, err := jsDrain(&dj)
	if err != nil {
		return Result{}, err
	}
	r.DrainSeconds, r.Capped = d.Seconds, d.Capped
	return r, nil
}
