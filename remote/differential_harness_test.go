package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/httpapi"
	"github.com/queenlite/queen/internal/compat"
	itest "github.com/queenlite/queen/internal/queentest"
	"github.com/queenlite/queen/queentest"
	"github.com/queenlite/queen/remote"
)

// The harness of the differential test (differential_test.go): three
// backends on one fake clock, every call run on each of them and the
// answers compared. It is also what a reproducer printed by the test
// calls, so a pasted reproducer runs exactly what the failing sequence ran.

// The backends, in the order calls run on them.
const (
	bMem    = iota // a broker on an in-memory Badger database
	bDisk          // a broker in a temporary directory
	bRemote        // remote.Client → httpapi → a broker on an in-memory database
	nBack
)

var backNames = [nBack]string{"memory", "disk", "remote"}

// diffKey is the encryption key of every backend (queues may enable
// encryption).
var diffKey = []byte("0123456789abcdef0123456789abcdef")

// diff is one run: the backends, the clock they share, and what the
// comparison has learnt of their ids.
type diff struct {
	tb     testing.TB // set in a reproducer: a divergence fails it at once
	ctx    context.Context
	cancel context.CancelFunc
	clock  *queentest.Clock
	start  time.Time
	dir    string
	opts   queen.Options
	db     [nBack]*badger.DB // the in-memory databases (nil for disk), kept across reopens
	b      [nBack]*queen.Broker
	c      [nBack]queen.Client
	rc     *remote.Client
	srv    *httptest.Server
	mu     sync.Mutex // guards h and stop, read by the server's goroutines
	h      http.Handler
	stop   chan struct{}
	// names maps each backend's ids to the names the comparison prints,
	// one namer per side of each compared pair (memory–remote,
	// memory–disk): ids are random, so two answers agree when their ids
	// were first seen in the same order.
	names   [2][2]*namer
	reopens int

	counts map[string]int // what the memory broker answered (see tally)

	step int          // operation running, for failures
	fail *diffFailure // the first divergence
	code *strings.Builder
}

// diffFailure is the first divergence of a run.
type diffFailure struct {
	step int
	kind string // the operation and the backend that differs: the shrinker's signature
	msg  string
}

func (f *diffFailure) String() string { return f.kind + ": " + f.msg }

// newDiff opens the three backends. With tb set (a reproducer), an error
// or a divergence fails tb and everything is closed when it ends;
// otherwise failures are recorded and the caller calls close.
func newDiff(tb testing.TB) *diff {
	d := &diff{tb: tb, clock: itest.NewClock()}
	d.start = d.clock.Now()
	d.ctx, d.cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	for i := range d.names {
		d.names[i] = [2]*namer{newNamer(), newNamer()}
	}
	d.opts = queen.Options{
		Clock: d.clock, EncryptionKey: diffKey, MemoryBudget: queen.MinMemoryBudget,
		// Maintenance runs when the test says (d.maintain), never on its own.
		MaintenanceInterval: 24 * time.Hour, GCInterval: 24 * time.Hour, DrainTimeout: time.Second,
		Durability: queen.SyncNever,
	}
	if tb != nil {
		tb.Helper()
		tb.Cleanup(d.close)
	}
	var err error
	if d.dir, err = os.MkdirTemp("", "queen-diff-"); err != nil {
		d.failf("open", "%v", err)
		return d
	}
	for _, k := range []int{bMem, bRemote} {
		o := d.opts
		o.InMemory = true
		bo, err := queen.BadgerOptions("", &o)
		if err == nil {
			d.db[k], err = badger.Open(bo.WithLogger(nil))
		}
		if err != nil {
			d.failf("open", "%s: %v", backNames[k], err)
			return d
		}
	}
	if !d.openBrokers() {
		return d
	}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		h := d.h
		d.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	d.rc, err = remote.Dial(d.srv.URL, &remote.Options{Clock: d.clock, Retries: -1})
	if err != nil {
		d.failf("open", "remote: %v", err)
		return d
	}
	d.c[bRemote] = d.rc
	return d
}

// openBrokers opens the three brokers on their storage: a first time, or
// again after closeBrokers.
func (d *diff) openBrokers() bool {
	for k := range nBack {
		var b *queen.Broker
		var err error
		if k == bDisk {
			b, err = queen.Open(d.dir, &d.opts)
		} else {
			o := d.opts
			o.InMemory = true
			b, err = queen.OpenDB(d.db[k], &o)
		}
		if err != nil {
			d.failf("open", "%s: %v", backNames[k], err)
			return false
		}
		d.b[k], d.c[k] = b, b
	}
	stop := make(chan struct{})
	h := httpapi.New(d.b[bRemote], &httpapi.Options{Shutdown: stop})
	d.mu.Lock()
	d.h, d.stop = h, stop
	d.mu.Unlock()
	if d.rc != nil {
		d.c[bRemote] = d.rc
	}
	return true
}

func (d *diff) closeBrokers() {
	d.mu.Lock()
	if d.stop != nil {
		close(d.stop)
		d.stop = nil
	}
	d.mu.Unlock()
	for k, b := range d.b {
		if b != nil {
			if err := b.Close(); err != nil {
				d.failf("close", "%s: %v", backNames[k], err)
			}
			d.b[k] = nil
		}
	}
}

// close closes everything the run opened.
func (d *diff) close() {
	if d.rc != nil {
		_ = d.rc.Close()
	}
	if d.srv != nil {
		d.srv.Close()
	}
	d.closeBrokers()
	for k, db := range d.db {
		if db != nil {
			_ = db.Close()
			d.db[k] = nil
		}
	}
	if d.dir != "" {
		_ = os.RemoveAll(d.dir)
	}
	d.cancel()
}

// failf records the first divergence (or fails the reproducer's test).
func (d *diff) failf(kind, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if d.tb != nil {
		d.tb.Helper()
		d.tb.Fatalf("%s: %s", kind, msg)
	}
	if d.fail == nil {
		d.fail = &diffFailure{step: d.step, kind: kind, msg: msg}
	}
}

// emit adds a line to the reproducer being recorded.
func (d *diff) emit(format string, args ...any) {
	if d.code != nil {
		fmt.Fprintf(d.code, "\t"+format+"\n", args...)
	}
}

// ans packs a call's two results as do compares them.
func ans[T any](v T, err error) any { return []any{v, err} }

// do runs fn on every backend, in order, and compares the answers: the
// memory broker's with the remote client's and with the disk broker's.
func (d *diff) do(label string, fn func(k int, c queen.Client) any) [nBack]any {
	var got [nBack]any
	if d.fail != nil {
		return got
	}
	for k := range nBack {
		got[k] = fn(k, d.c[k])
	}
	d.compare(label, got)
	d.tally(label, got[bMem])
	return got
}

// tally counts what the memory broker answered, for the test's log: how
// often each error came back, how many messages pops delivered, how many
// acks succeeded.
func (d *diff) tally(label string, x any) {
	if d.counts == nil {
		return
	}
	v, _ := x.([]any)
	for _, e := range v {
		switch e := e.(type) {
		case error:
			d.counts[label+" err "+errText(e)]++
		case *queen.PopResult:
			if e != nil && len(e.Messages) > 0 {
				d.counts["~messages popped"] += len(e.Messages)
			}
		case []queen.AckResult:
			for _, a := range e {
				if a.Success {
					d.counts["~ack items settled"]++
				} else {
					d.counts["~ack items refused "+errText(a.Err)]++
				}
			}
		case *queen.ReplayResult:
			if e != nil {
				d.counts["~replayed"]++
			}
		}
	}
}

// pop is do for a pop, returning each backend's result: the handles of
// later acks, renewals and transactions.
func (d *diff) pop(fn func(k int, c queen.Client) (*queen.PopResult, error)) [nBack]*queen.PopResult {
	var out [nBack]*queen.PopResult
	d.do("pop", func(k int, c queen.Client) any {
		r, err := fn(k, c)
		if r != nil && r.PartitionsClaimed > 1 {
			// The partitions of one pop come in no defined order: by
			// name, for the printer and for the handles of later acks.
			sort.SliceStable(r.Messages, func(i, j int) bool { return r.Messages[i].Partition < r.Messages[j].Partition })
		}
		out[k] = r
		return ans(r, err)
	})
	return out
}

// view is what a comparison of two backends looks at.
type view struct {
	// remote leaves out what the remote API does not carry (the package
	// doc of remote, "What the remote API does not carry").
	remote bool
}

func (d *diff) compare(label string, got [nBack]any) {
	for i, other := range []int{bRemote, bDisk} {
		v := view{remote: other == bRemote}
		a := d.show(d.names[i][0], v, label, got[bMem])
		b := d.show(d.names[i][1], v, label, got[other])
		if a != b {
			d.failf(label+"/"+backNames[other]+"/"+firstDiff(a, b), "%s: memory and %s answer differently\n%s", label, backNames[other],
				lineDiff(a, b, backNames[other]))
			return
		}
	}
}

// firstDiff names what two printed answers first differ in: the field
// of the first differing token of the first differing line (so that the
// shrinker keeps the same divergence, not any divergence of that call).
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] == bl[i] {
			continue
		}
		at, bt := strings.Fields(al[i]), strings.Fields(bl[i])
		for j := range max(len(at), len(bt)) {
			var x, y string
			if j < len(at) {
				x = at[j]
			}
			if j < len(bt) {
				y = bt[j]
			}
			if x != y {
				k, _, _ := strings.Cut(x, "=")
				if k == "" {
					k, _, _ = strings.Cut(y, "=")
				}
				return k
			}
		}
	}
	return "length"
}

// lineDiff shows two printed answers line by line (a longest common
// subsequence), marking the lines only one of them has.
func lineDiff(a, b, name string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	// lcs[i][j] is the longest common subsequence of al[i:] and bl[j:].
	lcs := make([][]int, len(al)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(bl)+1)
	}
	for i := len(al) - 1; i >= 0; i-- {
		for j := len(bl) - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < len(al) || j < len(bl) {
		switch {
		case i < len(al) && j < len(bl) && al[i] == bl[j]:
			fmt.Fprintf(&sb, "      %s\n", al[i])
			i, j = i+1, j+1
		case j == len(bl) || i < len(al) && lcs[i+1][j] >= lcs[i][j+1]:
			fmt.Fprintf(&sb, "  - memory: %s\n", al[i])
			i++
		default:
			fmt.Fprintf(&sb, "  + %s: %s\n", name, bl[j])
			j++
		}
	}
	return strings.TrimRight(sb.String(), "\n")
}

// namer names ids in order of first sight.
type namer struct {
	m map[string]int
}

func newNamer() *namer { return &namer{m: map[string]int{}} }

// rank is the number of id's name, or a number above every name's for
// an id not seen yet.
func (n *namer) rank(id string) int {
	if x, ok := n.m[strings.ToLower(id)]; ok {
		return x
	}
	return len(n.m) + 1
}

var uuidRe = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)

// ids replaces every UUID in s by its name.
func (n *namer) ids(s string) string {
	return uuidRe.ReplaceAllStringFunc(s, func(u string) string {
		u = strings.ToLower(u)
		x, ok := n.m[u]
		if !ok {
			x = len(n.m) + 1
			n.m[u] = x
		}
		return "#" + strconv.Itoa(x)
	})
}

// printer writes an answer as text, one record a line.
type printer struct {
	d     *diff
	n     *namer
	v     view
	label string // the operation
	sb    strings.Builder
}

func (d *diff) show(n *namer, v view, label string, x any) string {
	p := &printer{d: d, n: n, v: v, label: label}
	p.any(x)
	return strings.TrimRight(p.sb.String(), "\n")
}

func (p *printer) f(format string, args ...any) { fmt.Fprintf(&p.sb, format, args...) }

// id prints a string that may hold ids.
func (p *printer) id(s string) string { return p.n.ids(s) }

// tm prints an instant relative to the clock's start.
func (p *printer) tm(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return "+" + t.Sub(p.d.start).String()
}

// ms prints an instant the remote API carries with millisecond precision
// (documented: every timestamp but a message's CreatedAt in pops and
// fetches): truncated to the millisecond in a comparison with remote.
func (p *printer) ms(t time.Time) string {
	if p.v.remote {
		t = t.Truncate(time.Millisecond)
	}
	return p.tm(t)
}

// errText classifies an error by the sentinels it matches, as
// errors.Is sees them (messages differ between backends and are not
// compared).
func errText(err error) string {
	if err == nil {
		return "nil"
	}
	var names []string
	for _, s := range []struct {
		err  error
		name string
	}{
		{queen.ErrClosed, "Closed"}, {queen.ErrGroupNotFound, "GroupNotFound"}, {queen.ErrNotFound, "NotFound"},
		{queen.ErrLeaseExpired, "LeaseExpired"}, {queen.ErrAlreadySettled, "AlreadySettled"}, {queen.ErrWrongGroup, "WrongGroup"},
		{queen.ErrInvalidArgument, "InvalidArgument"}, {queen.ErrQueueFull, "QueueFull"}, {queen.ErrTooLarge, "TooLarge"},
		{queen.ErrTransactionAborted, "TransactionAborted"}, {queen.ErrUnsupported, "Unsupported"},
		{queen.ErrUnavailable, "Unavailable"}, {context.Canceled, "Canceled"}, {context.DeadlineExceeded, "DeadlineExceeded"},
	} {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	if len(names) == 0 {
		names = append(names, "other")
	}
	s := strings.Join(names, "+")
	var te *queen.TransactionError
	if errors.As(err, &te) {
		s += fmt.Sprintf("(op %d %s)", te.Index, te.Op)
	}
	return s
}

func (p *printer) err(err error) {
	if err != nil {
		p.f("err=%s\n", errText(err))
	}
}

func (p *printer) any(x any) {
	switch x := x.(type) {
	case nil:
		p.f("nil\n")
	case []any:
		for _, e := range x {
			p.any(e)
		}
	case error:
		p.err(x)
	case bool, int, int64, string:
		p.f("%v\n", x)
	case time.Time:
		if p.v.remote {
			x = x.Truncate(time.Millisecond) // documented: a lease's expiry has millisecond precision over HTTP (as p.ms)
		}
		p.f("%s\n", p.tm(x))
	case queen.LeaseRenewal:
		p.any(x.ExpiresAt)
		p.f("partitions %d\n", x.Partitions)
	case []queen.PushResult:
		p.f("pushed %d\n", len(x))
		for _, r := range x {
			p.push(&r)
		}
	case *queen.PopResult:
		p.popResult(x)
	case *queen.AckResult:
		if x == nil {
			p.f("ack nil\n")
		} else {
			p.ack(x)
		}
	case []queen.AckResult:
		p.f("acked %d\n", len(x))
		for i := range x {
			p.ack(&x[i])
		}
	case *queen.TxResult:
		p.txn(x)
	case *queen.QueueInfo:
		if x == nil {
			p.f("queue nil\n")
		} else {
			p.queueInfo(x, false)
		}
	case *queen.FetchResult:
		p.fetch(x)
	case []queen.PartitionRead:
		p.f("fetched %d\n", len(x))
		for _, r := range x {
			// Records over HTTP carry no message nor trace id (documented).
			p.f("  partition q=%s p=%s high=%d start=%d err=%s records=%d\n", r.Queue, r.Partition, r.HighWatermark, r.LogStartOffset,
				errText(r.Err), len(r.Records))
			for _, rec := range r.Records {
				p.f("    record offset=%d tx=%s created=%s payload=%s\n", rec.Offset, p.id(rec.TransactionID), p.tm(rec.CreatedAt),
					payloadText(rec.Payload))
			}
		}
	case []queen.Position:
		p.f("positions %d\n", len(x))
		for _, pos := range x {
			p.f("  position g=%s q=%s p=%s offset=%d metadata=%q forget=%v\n", pos.Group, pos.Queue, pos.Partition, pos.Offset,
				pos.Metadata, pos.Forget)
		}
	case *queen.SeekResult:
		switch {
		case x == nil:
			p.f("seek nil\n")
		case p.label == "seekGroup":
			// CursorMovedTo is the cursor of a partition seek (a group
			// seek sets it to one of its partitions', or not at all over
			// HTTP).
			p.f("seek partitions=%d\n", x.PartitionsUpdated)
		default:
			p.f("seek partitions=%d movedTo=%d\n", x.PartitionsUpdated, x.CursorMovedTo)
		}
	case letterAnswer:
		p.letters(x)
	case *queen.ReplayResult:
		if x == nil {
			p.f("replay nil\n")
		} else {
			p.f("replay id=%s msg=%s tx=%s offset=%d duplicate=%v\n", p.id(x.ID), p.id(x.MessageID), p.id(x.TransactionID), x.Offset, x.Duplicate)
		}
	case *queen.QueueStats:
		if x == nil {
			p.f("stats nil\n")
		} else {
			p.stats(x, false)
		}
	case []queen.QueueStats:
		p.f("queues %d\n", len(x))
		for i := range x {
			p.stats(&x[i], true)
		}
	case []queen.GroupStats:
		p.f("groups %d\n", len(x))
		for i := range x {
			p.group(&x[i])
		}
	default:
		p.f("unprinted %T %+v\n", x, x)
	}
}

// payloadText prints a payload; empty is null (as PushItem.Payload reads
// it: a letter of a message whose record retention removed while it was
// leased has none in process, null over HTTP).
func payloadText(b json.RawMessage) string {
	if len(b) == 0 {
		return "null"
	}
	return string(b)
}

func (p *printer) push(r *queen.PushResult) {
	pid, trace := p.id(r.PartitionID), p.id(r.TraceID)
	p.f("  push %s q=%s p=%s pid=%s msg=%s tx=%s trace=%s offset=%d err=%s\n", r.Status, r.Queue, r.Partition, pid,
		p.id(r.MessageID), p.id(r.TransactionID), trace, r.Offset, errText(r.Err))
}

func (p *printer) popResult(r *queen.PopResult) {
	if r == nil {
		p.f("pop nil\n")
		return
	}
	conflating := fmt.Sprint(r.Conflating)
	msgs := r.Messages
	first, pid := r.Partition, "-"
	if r.PartitionsClaimed > 1 {
		// The partitions a pop claims come in no defined order, and the
		// first of them is the result's Partition (d.pop sorts them).
		first = "-"
	}
	lid := p.id(r.LeaseID)
	if first != "-" {
		pid = p.id(r.PartitionID)
	}
	p.f("pop q=%s p=%s pid=%s lease=%s group=%s claimed=%d conflating=%s messages=%d\n", r.Queue, first, pid, lid,
		r.ConsumerGroup, r.PartitionsClaimed, conflating, len(msgs))
	for _, m := range msgs {
		p.message(m)
	}
}

func (p *printer) message(m *queen.Message) {
	if m == nil {
		p.f("  nil message\n")
		return
	}
	p.f("  msg %s q=%s p=%s pid=%s group=%s lease=%s offset=%d attempt=%d created=%s trace=%s sub=%s tx=%s payload=%s\n",
		p.id(m.ID), m.Queue, m.Partition, p.id(m.PartitionID), m.ConsumerGroup, p.id(m.LeaseID), m.Offset, m.DeliveryAttempt,
		p.tm(m.CreatedAt), p.id(m.TraceID), m.ProducerSub, p.id(m.TransactionID), payloadText(m.Payload))
}

func (p *printer) ack(r *queen.AckResult) {
	parked := fmt.Sprint(r.Parked)
	p.f("  ack tx=%s q=%s p=%s success=%v err=%s released=%v dlq=%v parked=%s\n", p.id(r.TransactionID), r.Queue, r.Partition,
		r.Success, errText(r.Err), r.LeaseReleased, r.DeadLettered, parked)
}

func (p *printer) txn(r *queen.TxResult) {
	if r == nil {
		p.f("txn nil\n")
		return
	}
	p.f("txn id=%s results=%d\n", p.id(r.ID), len(r.Results))
	for _, o := range r.Results {
		switch {
		case o.Ack != nil:
			p.ack(o.Ack)
		case o.Push != nil:
			p.push(o.Push)
		case o.Position != nil:
			p.f("  position g=%s q=%s p=%s offset=%d metadata=%q\n", o.Position.Group, o.Position.Queue, o.Position.Partition,
				o.Position.Offset, o.Position.Metadata)
		default:
			p.f("  empty result\n")
		}
	}
}

func (p *printer) config(c *queen.QueueConfig, labelsOnly bool) {
	if labelsOnly {
		p.f("  config ns=%q task=%q priority=%d\n", c.Namespace, c.Task, c.Priority)
		return
	}
	q := compat.Of(c)
	p.f("  config lease=%s retries=%d retryDelay=%s maxSize=%d delayed=%s window=%s retention=%s completedRetention=%s maxWait=%s priority=%d encrypted=%v ns=%q task=%q ttl=%s dlq=%v dlqAfterMax=%v retentionEnabled=%v\n",
		c.LeaseTime, c.RetryLimit, c.RetryDelay, c.MaxSize, c.DelayedProcessing, c.WindowBuffer, c.Retention, c.CompletedRetention,
		c.MaxWaitTime, c.Priority, c.EncryptionEnabled, c.Namespace, c.Task, q.TTL, q.DeadLetterQueue, q.DLQAfterMaxRetries, q.RetentionEnabled)
}

// queueInfo prints a queue's description. Over HTTP (documented) the
// answer of ConfigureQueue has no CreatedAt, and ListQueues (listed)
// carries only the labels and Priority of the configuration.
func (p *printer) queueInfo(q *queen.QueueInfo, listed bool) {
	created := p.ms(q.CreatedAt)
	if p.v.remote && p.label == "configure" {
		created = "-"
	}
	dp := p.id(q.DefaultPartitionID)
	p.f("queue %s id=%s created=%s defaultPartition=%s\n", q.Name, p.id(q.ID), created, dp)
	p.config(&q.Config, listed && p.v.remote)
}

func (p *printer) fetch(r *queen.FetchResult) {
	if r == nil {
		p.f("fetch nil\n")
		return
	}
	p.f("fetch q=%s p=%s next=%d records=%d\n", r.Queue, r.Partition, r.NextOffset, len(r.Records))
	for _, rec := range r.Records {
		p.f("  record offset=%d msg=%s tx=%s trace=%s created=%s payload=%s\n", rec.Offset, p.id(rec.MessageID), p.id(rec.TransactionID),
			p.id(rec.TraceID), p.tm(rec.CreatedAt), payloadText(rec.Payload))
	}
}

// letterAnswer is a listing of dead letters or parked messages with the
// filter that asked for it.
type letterAnswer struct {
	f    queen.LetterFilter
	page *queen.LetterPage
	err  error
}

// letters wraps a listing for do: letters(f)(c.DeadLetters(ctx, f)).
func letters(f queen.LetterFilter) func(*queen.LetterPage, error) any {
	return func(p *queen.LetterPage, err error) any { return letterAnswer{f, p, err} }
}

// sortLetters puts letters in an order every backend agrees on: newest
// failure first, as listed, then by what they hold (the brokers break
// ties by their random ids), then, for letters alike in all but their id
// (a message dead-lettered twice for one group), by the names of ids
// already seen.
func sortLetters(ls []queen.DeadLetter, n *namer) {
	sort.SliceStable(ls, func(i, j int) bool {
		a, b := &ls[i], &ls[j]
		if !a.FailedAt.Equal(b.FailedAt) {
			return a.FailedAt.After(b.FailedAt)
		}
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		if a.Offset != b.Offset {
			return a.Offset < b.Offset
		}
		if a.ConsumerGroup != b.ConsumerGroup {
			return a.ConsumerGroup < b.ConsumerGroup
		}
		if a.Error != b.Error {
			return a.Error < b.Error
		}
		if a.RetryCount != b.RetryCount {
			return a.RetryCount < b.RetryCount
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return n.rank(a.ID) < n.rank(b.ID)
	})
}

func (p *printer) letters(a letterAnswer) {
	p.err(a.err)
	if a.page == nil {
		p.f("letters nil\n")
		return
	}
	ls := append([]queen.DeadLetter(nil), a.page.Letters...)
	if p.v.remote { // millisecond precision over HTTP (documented), also in the order printed
		for i := range ls {
			ls[i].CreatedAt, ls[i].FailedAt = ls[i].CreatedAt.Truncate(time.Millisecond), ls[i].FailedAt.Truncate(time.Millisecond)
		}
	}
	partial := a.f.Offset > 0 || len(ls) < a.page.Total
	p.f("letters total=%d listed=%d\n", a.page.Total, len(ls))
	if partial {
		// Which of several letters failed at the same instant a page
		// holds depends on the random ids: compare the instants only.
		for _, l := range ls {
			p.f("  failed=%s\n", p.tm(l.FailedAt))
		}
		return
	}
	sortLetters(ls, p.n)
	for _, l := range ls {
		p.f("  letter id=%s msg=%s tx=%s q=%s p=%s pid=%s group=%s err=%q retries=%d trace=%s sub=%s offset=%d created=%s failed=%s payload=%s\n",
			p.id(l.ID), p.id(l.MessageID), p.id(l.TransactionID), l.Queue, l.Partition, p.id(l.PartitionID), l.ConsumerGroup, l.Error,
			l.RetryCount, p.id(l.TraceID), l.ProducerSub, l.Offset, p.tm(l.CreatedAt), p.tm(l.FailedAt), payloadText(l.Payload))
	}
}

// stats prints QueueStats; listed is an entry of ListQueues, which carries
// only the labels and Priority of the configuration over HTTP.
func (p *printer) stats(s *queen.QueueStats, listed bool) {
	p.queueInfo(&s.QueueInfo, listed)
	groups := fmt.Sprint(s.Groups)
	pending := fmt.Sprint(s.Pending)
	p.f("  partitions=%d messages=%d pending=%s inflight=%d dead=%d parked=%d groups=%s\n", s.PartitionN, s.Messages, pending,
		s.InFlight, s.DeadLetters, s.Parked, groups)
	for _, ps := range s.Partitions {
		p.f("  partition %s id=%s created=%s messages=%d first=%d next=%d lastPush=%s\n", ps.Name, p.id(ps.ID), p.ms(ps.CreatedAt),
			ps.Messages, ps.FirstOffset, ps.NextOffset, p.ms(ps.LastPushAt))
		if p.v.remote {
			continue // no cursors over HTTP (documented)
		}
		for _, c := range ps.Cursors {
			p.f("    cursor %s offset=%d lag=%d inflight=%d lease=%s expires=%s retries=%d consumed=%d lastAck=%s\n", c.Group, c.Offset,
				c.Lag, c.InFlight, p.id(c.LeaseID), p.tm(c.LeaseExpiresAt), c.Retries, c.Consumed, p.tm(c.LastAckAt))
		}
	}
}

func (p *printer) group(g *queen.GroupStats) {
	p.f("  group %s/%s mode=%s from=%s joined=%s conflation=%v partitions=%d withLag=%d lag=%d inflight=%d leases=%d", g.Queue, g.Group,
		g.Mode, p.ms(g.From), p.ms(g.JoinedAt), g.Conflation, g.Partitions, g.PartitionsWithLag, g.Lag, g.InFlight, g.ActiveLeases)
	if !p.v.remote { // not carried over HTTP (documented)
		p.f(" consumed=%d lastAck=%s oldestPending=%s", g.Consumed, p.tm(g.LastAckAt), p.tm(g.OldestPendingAt))
	}
	p.f("\n")
}

// Helpers the operations (and the reproducers) call.

// advance moves the shared clock and lets every broker fire its due
// timers (a pop of a queue that does not exist does that at once), so
// the next call on any backend sees the same expired leases.
func (d *diff) advance(dur time.Duration) {
	d.clock.Advance(dur)
	d.tick()
}

func (d *diff) tick() {
	for k, b := range d.b {
		if _, err := b.Pop(d.ctx, queen.PopRequest{Queue: "tick"}); err != nil {
			d.failf("tick", "%s: %v", backNames[k], err)
		}
	}
}

// maintain runs retention and max-wait eviction on every broker (the
// remote one's included) and compares what each did.
func (d *diff) maintain() {
	var errs [nBack]error
	for k, b := range d.b {
		errs[k] = b.Maintain(d.ctx)
	}
	d.do("maintain", func(k int, _ queen.Client) any { return errs[k] })
}

// reopen closes the three brokers and opens them again on their storage:
// the disk broker on its directory, the other two on their in-memory
// databases (the remote client keeps talking to the same server). What a
// broker keeps in memory only (leases, delivery attempts, retry delays,
// the order in which partitions became ready, early pops) is forgotten by
// all three at once.
func (d *diff) reopen() {
	d.closeBrokers()
	if d.fail == nil && d.openBrokers() {
		d.reopens++
		if d.counts != nil {
			d.counts["~reopened"]++
		}
	}
}

// ack is the AckItem of message j of pop p, with the pop's lease and the
// Group given in it. A LeaseID of "-" sends none (unfenced); another
// LeaseID is sent as it is.
func ack(p *queen.PopResult, j int, it queen.AckItem) queen.AckItem {
	if p == nil || j >= len(p.Messages) {
		it.TransactionID, it.PartitionID = "missing", "missing"
		return it
	}
	m := p.Messages[j]
	it.TransactionID, it.PartitionID = m.TransactionID, m.PartitionID
	switch it.LeaseID {
	case "":
		it.LeaseID = p.LeaseID
	case "-":
		it.LeaseID = ""
	}
	return it
}

// msg is message j of pop p (nil if there is none).
func msg(p *queen.PopResult, j int) *queen.Message {
	if p == nil || j >= len(p.Messages) {
		return &queen.Message{TransactionID: "missing", PartitionID: "missing"}
	}
	return p.Messages[j]
}

// lease is the lease of pop p.
func lease(p *queen.PopResult) string {
	if p == nil {
		return ""
	}
	return p.LeaseID
}

// seekPartition is SeekPartition on backend k. Over HTTP a seek of one
// partition to a time is ErrUnsupported (documented: the API's partition
// seek goes to the end): the remote client must answer that, and the
// broker behind it is then moved directly, so the backends stay in
// lockstep.
func (d *diff) seekPartition(k int, c queen.Client, group, queue, partition string, opts queen.SeekOptions) (*queen.SeekResult, error) {
	res, err := c.SeekPartition(d.ctx, group, queue, partition, opts)
	if k != bRemote || opts.ToEnd || opts.Timestamp.IsZero() || partition == "" {
		return res, err
	}
	if !errors.Is(err, queen.ErrUnsupported) {
		return res, fmt.Errorf("remote seek of a partition to a time: %v, %w, not ErrUnsupported", res, err)
	}
	return d.b[bRemote].SeekPartition(d.ctx, group, queue, partition, opts)
}

// unknownID names nothing on any backend.
const unknownID = "00000000-0000-4000-8000-000000000000"

// letterID is the id, on backend k, of letter i of every dead letter
// (dead) or parked message, in sortLetters' order; unknownID past the end.
func (d *diff) letterID(k int, dead bool, i int) string {
	list := d.c[k].ParkedMessages
	if dead {
		list = d.c[k].DeadLetters
	}
	page, err := list(d.ctx, queen.LetterFilter{Limit: 1000})
	if err != nil || i >= len(page.Letters) {
		return unknownID
	}
	ls := append([]queen.DeadLetter(nil), page.Letters...)
	n := d.names[0][0] // memory's, as compared with remote
	switch k {
	case bDisk:
		n = d.names[1][1]
	case bRemote:
		n = d.names[0][1]
	}
	sortLetters(ls, n)
	return ls[i].ID
}
