// Command compare runs queen side by side with NATS JetStream (embedded,
// file storage) and raw Badger, and prints one table.
//
//	cd bench && go run ./cmd/compare -quick
//
// Every measurement runs in its own child process (this binary, re-run
// with -child), so that each row's peak RSS is its own; systems alternate
// within each scenario and round so that machine drift hits all of them.
// Results are verified (counts, exactly-once, order where it applies): a
// wrong result makes the run fail, a slow one never does.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	quick       bool
	n           int
	backlog     int
	orderN      int
	payload     int
	producers   []int
	producers2  []int
	pushBatch   int
	partitions  int
	groups      int
	consumers   int
	orderWork   int
	orderKeys   int
	batch       int
	idle        int
	rate        int
	latTime     time.Duration
	maxTime     time.Duration
	rounds      int
	durability  []bool // sync?
	scenarios   map[string]bool
	systems     map[string]bool
	dir         string
	keep        bool
	profile     string
	jsDedup     bool
	childLimit  time.Duration
	out         string
	verbose     bool
	badgerMem   int
	badgerMems  int
	badgerCache int
	httpN       int
	httpOne     int
	queenBin    string
	baseBin     string
	memN        int
	budgets     []int
	loopN       int
	remoteN     int
	loopParts   int
	loopBatches []int
	openParts   int
	openCache   string
	openMaster  string
}

func main() {
	child := flag.String("child", "", "internal: run one job (JSON) and report")
	var c config
	flag.BoolVar(&c.quick, "quick", false, "small sizes and short time caps (under a minute); for CI smoke runs")
	flag.IntVar(&c.n, "n", 0, "messages per push row (default 200000; quick 10000)")
	flag.IntVar(&c.backlog, "backlog", 0, "preloaded backlog for scenarios 3 and 4 (default 1000000; quick 30000); scenarios 6 and 8 use half")
	flag.IntVar(&c.orderN, "order-n", 0, "messages in scenario 5 (default 200000; quick 10000)")
	flag.IntVar(&c.memN, "mem-n", 0, "messages pushed then drained in scenario 9 (default 300000; quick 20000)")
	flag.IntVar(&c.loopN, "loop-n", 0, "backlog drained by each row of scenario 10 (default 40000; quick 1000)")
	flag.IntVar(&c.loopParts, "loop-partitions", 16, "partitions of scenario 10's backlog")
	flag.IntVar(&c.remoteN, "remote-n", 0, "messages pushed, and drained, through package remote in scenario 11 (default 10000; quick 1000)")
	flag.IntVar(&c.openParts, "open-partitions", 0, "partitions (one message each) of the store scenario 12 opens (default 1000000; quick 20000)")
	flag.StringVar(&c.openCache, "open-cache", "cold", "scenario 12: the store's pages dropped from the page cache before each open (cold) or left as its copy wrote them (warm)")
	flag.StringVar(&c.openMaster, "open-store", "", "scenario 12: keep the filled master store in this directory and reuse it in later runs (so that two binaries open the same store)")
	loopBatches := flag.String("loop-batches", "10,100", "pop batches of scenario 10 (comma list): one row each")
	flag.IntVar(&c.payload, "payload", 256, "payload size in bytes")
	prods := flag.String("producers", "1,64", "concurrent producers for scenario 1 (comma list)")
	prods2 := flag.String("producers-batch", "1,4", "concurrent producers for scenario 2 (comma list)")
	flag.IntVar(&c.pushBatch, "push-batch", 100, "messages per call in scenario 2")
	flag.IntVar(&c.partitions, "partitions", 10, "partitions (JetStream: subjects) messages are spread over")
	flag.IntVar(&c.groups, "groups", 10, "consumer groups in scenario 4")
	flag.IntVar(&c.consumers, "consumers", 4, "concurrent consumers in scenarios 3, 6 and 7")
	flag.IntVar(&c.orderWork, "order-workers", 16, "workers in scenario 5")
	flag.IntVar(&c.orderKeys, "order-keys", 1000, "keys (partitions) in scenario 5")
	flag.IntVar(&c.batch, "batch", 100, "pop / fetch batch")
	flag.IntVar(&c.idle, "idle", 0, "idle partitions in scenario 6 (default 100000; quick 10000)")
	flag.IntVar(&c.rate, "rate", 2000, "offered load of scenario 7, msgs/s")
	flag.DurationVar(&c.latTime, "latency-time", 0, "duration of scenario 7 (default 10s; quick 1s)")
	flag.DurationVar(&c.maxTime, "max-time", 0, "time cap of one measured phase (default 4s; quick 0.5s); a capped row measures what it did")
	flag.IntVar(&c.rounds, "rounds", 0, "rounds per row, systems alternating; the median is reported (default 3; quick 1)")
	dur := flag.String("durability", "both", "sync (fsync per commit; JetStream sync_interval: always), nosync (JetStream default), or both")
	scen := flag.String("scenarios", "1,2,3,4,5,6,7,8,9,10,11,12", "scenarios to run")
	sys := flag.String("systems", "queen,jetstream,badger,http,server,server-pushes", "systems to run (http: scenario 8 through httpapi in process; server: scenario 8 against cmd/queen in its own process, server-base too with -base-bin; server-pushes: cmd/queen with -durability pushes, in the fsync rows of scenario 8 pop+ack; queen-tuned: queen with the -badger-* options, an experiment)")
	flag.StringVar(&c.dir, "dir", "", "work directory (default: a new temporary directory)")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory")
	flag.StringVar(&c.profile, "profile", "", "write CPU and alloc profiles of every measured phase to this directory")
	flag.BoolVar(&c.jsDedup, "js-dedup", false, "give every JetStream publish a Nats-Msg-Id, as queen always deduplicates by transaction id")
	flag.DurationVar(&c.childLimit, "child-timeout", 0, "kill a measurement that runs longer, as a hang (default 10m; quick 2m)")
	flag.StringVar(&c.out, "out", "", "also write the table (markdown) to this file")
	flag.BoolVar(&c.verbose, "v", false, "log every measurement")
	budgets := flag.String("budgets", "16,32,128,256", "scenario 9: also run queen with these Options.MemoryBudget values, in MiB (comma list; empty for none)")
	flag.IntVar(&c.badgerMem, "badger-memtable-mb", 0, "experiment: Badger MemTableSize of system queen-tuned (queen on queen.OpenDB); 0 = queen.Open's")
	flag.IntVar(&c.badgerMems, "badger-memtables", 0, "experiment: Badger NumMemtables; 0 = queen.Open's")
	flag.IntVar(&c.httpN, "http-n", 0, "messages drained over HTTP in scenario 8 (default 100000; quick 10000); the one-message consumers take half")
	flag.IntVar(&c.httpOne, "http-one-consumers", 10, "one-message consumers (pop 1 + ack) in scenario 8")
	flag.StringVar(&c.queenBin, "queen-bin", "", "cmd/queen binary of system server (default: built from this module's queen)")
	flag.StringVar(&c.baseBin, "base-bin", "", "cmd/queen binary of system server-base, e.g. one built from an older commit (system runs only when set)")
	flag.IntVar(&c.badgerCache, "badger-cache-mb", -1, "experiment: Badger BlockCacheSize in MB; -1 = queen.Open's")
	flag.Parse()
	if *child != "" {
		runChild(*child)
		return
	}
	var err error
	if c.producers, err = intList(*prods); err != nil {
		fatal(err)
	}
	if c.producers2, err = intList(*prods2); err != nil {
		fatal(err)
	}
	if c.loopBatches, err = intList(*loopBatches); err != nil {
		fatal(err)
	}
	if strings.TrimSpace(*budgets) != "" {
		if c.budgets, err = intList(*budgets); err != nil {
			fatal(err)
		}
	}
	switch *dur {
	case "both":
		c.durability = []bool{true, false}
	case "sync":
		c.durability = []bool{true}
	case "nosync":
		c.durability = []bool{false}
	default:
		fatal(fmt.Errorf("-durability: want sync, nosync or both, not %q", *dur))
	}
	c.scenarios = set(*scen)
	c.systems = set(*sys)
	if c.baseBin != "" {
		c.systems["server-base"] = true
	}
	if os.Getenv("QUEEN_REAL_URL") != "" { // scenario 11 against Queen's own server too
		c.systems[queenMQ] = true
	}
	c.defaults()
	if err := run(&c); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

func (c *config) defaults() {
	pick := func(v *int, full, quick int) {
		if *v == 0 {
			*v = full
			if c.quick {
				*v = quick
			}
		}
	}
	pickD := func(v *time.Duration, full, quick time.Duration) {
		if *v == 0 {
			*v = full
			if c.quick {
				*v = quick
			}
		}
	}
	pick(&c.n, 200000, 10000)
	pick(&c.backlog, 1000000, 30000)
	pick(&c.orderN, 200000, 10000)
	pick(&c.memN, 300000, 20000)
	pick(&c.loopN, 40000, 1000)
	pick(&c.remoteN, 10000, 1000)
	pick(&c.idle, 100000, 10000)
	pick(&c.openParts, 1000000, 20000)
	pick(&c.httpN, 100000, 10000)
	pick(&c.rounds, 3, 1)
	pickD(&c.latTime, 10*time.Second, time.Second)
	pickD(&c.maxTime, 4*time.Second, 500*time.Millisecond)
	pickD(&c.childLimit, 10*time.Minute, 2*time.Minute)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(2)
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func set(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			m[f] = true
		}
	}
	return m
}

func durName(sync bool) string {
	if sync {
		return "fsync"
	}
	return "no-fsync"
}

// row is one line group of the table: one scenario variant at one
// durability, measured on several systems.
type row struct {
	scen    string // "1".."10"
	title   string
	sync    bool
	systems []string
	job     Job
	// preload names the shared backlog the row reads (scenarios 3, 4).
	preload bool
	latency bool // rank rounds by p99, not throughput
	results map[string][]Result
	errs    []string
	pending string
}

func (c *config) rows() []*row {
	var rows []*row
	base := Job{Payload: c.payload, Partitions: c.partitions, Consumers: c.consumers, Groups: c.groups, Batch: c.batch, MaxTime: c.maxTime, JSDedup: c.jsDedup,
		BadgerMemMB: c.badgerMem, BadgerMemtables: c.badgerMems, BadgerCacheMB: c.badgerCache}
	add := func(scen, title string, sync bool, systems []string, j Job, mod func(r *row)) {
		if !c.scenarios[scen] {
			return
		}
		var sys []string
		for _, s := range systems {
			if base, _, _ := strings.Cut(s, "+"); c.systems[base] || strings.HasPrefix(s, "queen@") { // queen+idle, http+each: a variant of queen, http
				sys = append(sys, s)
			}
		}
		if len(sys) == 0 {
			return
		}
		j.Sync = sync
		r := &row{scen: scen, title: title, sync: sync, systems: sys, job: j, results: map[string][]Result{}}
		if mod != nil {
			mod(r)
		}
		rows = append(rows, r)
	}
	all := []string{"queen", "queen-tuned", "jetstream", "badger"}
	brokers := []string{"queen", "queen-tuned", "jetstream"}
	for _, sync := range c.durability {
		for _, p := range c.producers {
			j := base
			j.Kind, j.N, j.Batch, j.Producers = "push", c.n, 1, p
			add("1", fmt.Sprintf("push 1/call, %d producer(s)", p), sync, all, j, nil)
		}
	}
	for _, sync := range c.durability {
		for _, p := range c.producers2 {
			j := base
			j.Kind, j.N, j.Batch, j.Producers = "push", c.n, c.pushBatch, p
			add("2", fmt.Sprintf("push %d/call, %d producer(s)", c.pushBatch, p), sync, all, j, nil)
		}
	}
	for _, sync := range c.durability {
		j := base
		j.Kind, j.N = "drain", c.backlog
		j.MaxTime = 8 * c.maxTime // the drain of the whole backlog is the measurement
		add("3", fmt.Sprintf("drain %d, 1 group, %d consumers, batch %d", c.backlog, c.consumers, c.batch), sync, brokers, j, func(r *row) { r.preload = true })
	}
	for _, sync := range c.durability {
		j := base
		j.Kind, j.N = "fanout", c.backlog
		add("4", fmt.Sprintf("fan-out %d to %d groups", c.backlog, c.groups), sync, brokers, j, func(r *row) { r.preload = true })
	}
	for _, sync := range c.durability {
		j := base
		j.Kind, j.N, j.Partitions, j.Consumers = "order", c.orderN, c.orderKeys, c.orderWork
		add("5", fmt.Sprintf("per-key order, %d keys, %d workers", c.orderKeys, c.orderWork), sync, brokers, j, nil)
	}
	// Scenario 6 is about memory and CPU, not the disk: one durability.
	// Its "systems" are queen alone and queen beside the idle partitions.
	{
		idleSync := !slices.Contains(c.durability, false)
		j := base
		j.Kind, j.N, j.Idle = "idle", c.backlog/2, c.idle
		add("6", fmt.Sprintf("pop/ack %d over %d busy partitions, alone vs beside %d idle", j.N, c.partitions, c.idle), idleSync,
			[]string{"queen", "queen+idle", "queen-tuned", "queen-tuned+idle"}, j, nil)
	}
	for _, sync := range c.durability {
		j := base
		j.Kind, j.Rate, j.Consumers, j.Producers = "latency", c.rate, 2, 32
		j.N = int(float64(c.rate) * c.latTime.Seconds())
		j.MaxTime = c.latTime
		add("7", fmt.Sprintf("push→handler at %d msg/s", c.rate), sync, brokers, j, func(r *row) { r.latency = true })
	}
	for _, sync := range c.durability {
		j := base
		j.Kind, j.N, j.Batch, j.Producers = "httppush", c.n, 1, 4
		add("8", "HTTP push 1/call, 4 clients vs in-process", sync, []string{"queen", "http"}, j, nil)
		servers := []string{"queen", "http", "server", "server-base"}
		if sync { // acks fsynced in the background, pushes before they return
			servers = append(servers, "server-pushes")
		}
		j.Kind, j.N, j.Batch = "httppop", c.httpN, c.batch
		add("8", fmt.Sprintf("pop+ack %d, batch %d, %d consumers, HTTP vs in-process", j.N, c.batch, c.consumers), sync, servers, j, nil)
		j.Kind, j.N, j.Batch, j.Consumers = "httpone", c.httpN/2, 1, c.httpOne
		j.MaxTime = 2 * c.maxTime
		add("8", fmt.Sprintf("one-message consumers: %d in parallel, pop 1 + ack, HTTP vs in-process", c.httpOne), sync, servers, j, nil)
	}
	// Scenario 9 is about peak memory: one process pushes a backlog and
	// drains it, and its peak RSS is the row's.
	for _, sync := range c.durability {
		j := base
		j.Kind, j.N, j.Batch, j.PopBatch, j.Producers = "pushdrain", c.memN, c.pushBatch, c.batch, 4
		j.MaxTime = 8 * c.maxTime // the whole backlog is the measurement
		systems := []string{"queen", "jetstream"}
		if c.systems["queen"] {
			for _, mb := range c.budgets {
				systems = append(systems, fmt.Sprintf("queen@%d", mb))
			}
		}
		add("9", fmt.Sprintf("push %d (%d/call, %d producers) then drain (%d consumers, batch %d)", j.N, j.Batch, j.Producers, j.Consumers, j.PopBatch), sync,
			systems, j, nil)
	}
	// Scenario 10: the consume loop against the hand-batched drain, on the
	// same backlog, in process and over HTTP (remote → httpapi).
	for _, sync := range c.durability {
		for _, n := range c.loopBatches {
			j := base
			j.Kind, j.N, j.Partitions, j.Batch = "loop", c.loopN, c.loopParts, n
			j.MaxTime = 4 * c.maxTime // the whole backlog is the measurement; a slow loop reports what it did
			var systems []string
			for _, t := range []string{"queen", "http"} {
				for _, st := range loopStyles {
					systems = append(systems, t+st)
				}
			}
			add("10", fmt.Sprintf("consume loop vs hand drain: %d over %d partitions, 1 group, %d consumers, batch %d", j.N, j.Partitions, j.Consumers, n), sync, systems, j, nil)
		}
	}
	// Scenario 11: package remote, one goroutine, against cmd/queen and
	// (with QUEEN_REAL_URL) Queen's own server, which is durable on its own
	// terms: fsync rows only.
	if slices.Contains(c.durability, true) {
		j := base
		j.Kind, j.N, j.Batch = "remote-push", c.remoteN, 1
		j.MaxTime = 4 * c.maxTime
		add("11", fmt.Sprintf("remote, 1 goroutine: push %d, 1/call", j.N), true, []string{"server", queenMQ}, j, nil)
		j.Kind, j.Batch = "remote-drain", 100
		add("11", fmt.Sprintf("remote, 1 goroutine: drain %d, pop 100 + ack batch", j.N), true, []string{"server", queenMQ}, j, nil)
	}
	// Scenario 12: Open of a store of many one-message partitions, in a
	// process of its own, against Badger's own open and key scan.
	{
		j := base
		j.Kind, j.Partitions = "open", c.openParts
		add("12", fmt.Sprintf("Open of 1 queue × %d partitions × 1 message (%s page cache), in a fresh process", c.openParts, c.openCache), false,
			[]string{"queen", "queen+second", "badger"}, j, nil)
	}
	return rows
}

func run(c *config) error {
	root := c.dir
	if root == "" {
		var err error
		if root, err = os.MkdirTemp("", "queen-bench-"); err != nil {
			return err
		}
	}
	if !c.keep {
		defer os.RemoveAll(root)
	}
	if c.profile != "" {
		if err := os.MkdirAll(c.profile, 0o755); err != nil {
			return err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	rows := c.rows()
	if err := c.buildServer(rows, root); err != nil {
		return err
	}
	start := time.Now()
	logf("queen bench: %d rows, %d round(s), work dir %s, GOMAXPROCS %d", len(rows), c.rounds, root, runtime.GOMAXPROCS(0))
	preloaded := map[string]string{} // system -> dir
	preloadInfo := map[string]Result{}
	var failures []string
	for ri, r := range rows {
		if r.pending != "" {
			continue
		}
		if r.preload {
			for _, s := range r.systems {
				if preloaded[s] != "" {
					continue
				}
				dir := filepath.Join(root, "backlog-"+s)
				j := r.job
				j.Kind, j.System, j.Dir, j.Sync, j.Producers, j.Batch, j.MaxTime = "preload", s, dir, false, 2, 1000, 0
				res, err := runOne(exe, c, &j, "preload-"+s)
				if err != nil {
					failures = append(failures, fmt.Sprintf("preload %s: %v", s, err))
					r.errs = append(r.errs, "preload failed")
					continue
				}
				preloaded[s] = dir
				preloadInfo[s] = res
				logf("  preload %s: %d msgs at %.0f msg/s (push 1000/call, no fsync)", s, res.Msgs, res.rate())
			}
		}
		for round := range c.rounds {
			order := slices.Clone(r.systems)
			k := (round + ri) % len(order)
			order = append(order[k:], order[:k]...)
			for _, s := range order {
				j := r.job
				j.System = s
				switch s {
				case "server", "server-pushes":
					j.Bin = c.queenBin
				case "server-base":
					j.Bin = c.baseBin
				}
				j.Tag = fmt.Sprintf("r%d%s", round, durName(r.sync))
				if r.preload {
					if preloaded[s] == "" {
						continue
					}
					j.Dir = preloaded[s]
				} else {
					j.Dir = filepath.Join(root, fmt.Sprintf("row%02d-%s-r%d", ri, s, round))
				}
				if r.scen == "12" {
					master, err := openMaster(exe, c, root, r.job)
					if err == nil {
						_, err = openStore(exe, c, master, j.Dir, s, j)
					}
					if err != nil {
						failures = append(failures, fmt.Sprintf("scenario 12 %s: %v", s, err))
						r.errs = append(r.errs, s+": "+err.Error())
						os.RemoveAll(j.Dir)
						continue
					}
				}
				name := fmt.Sprintf("s%s-%s-%s-row%02d-r%d", r.scen, s, durName(r.sync), ri, round)
				res, err := runOne(exe, c, &j, name)
				if !r.preload && !c.keep {
					os.RemoveAll(j.Dir)
				}
				if err != nil {
					failures = append(failures, fmt.Sprintf("scenario %s %q %s %s: %v", r.scen, r.title, durName(r.sync), s, err))
					r.errs = append(r.errs, s+": "+err.Error())
					continue
				}
				res.Round = round
				r.results[s] = append(r.results[s], res)
				if c.verbose {
					logf("  %s: %d msgs in %.2fs = %.0f msg/s p50 %.3f p99 %.3f ms rss %d MB%s; %s", name, res.Msgs, res.Seconds, res.rate(), res.P50, res.P99, res.RSSKB>>10, cappedNote(res), res.Note)
				}
			}
		}
	}
	table := renderTable(c, rows, preloadInfo)
	fmt.Print(table)
	logf("total %.1fs", time.Since(start).Seconds())
	if c.out != "" {
		if err := os.WriteFile(c.out, []byte(table), 0o644); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "\n  "))
	}
	return nil
}

// buildServer builds cmd/queen for system server, from the queen module
// this harness uses, unless -queen-bin names one or no row runs it.
func (c *config) buildServer(rows []*row, root string) error {
	if c.queenBin != "" || !slices.ContainsFunc(rows, func(r *row) bool {
		return slices.Contains(r.systems, "server") || slices.Contains(r.systems, "server-pushes")
	}) {
		return nil
	}
	c.queenBin = filepath.Join(root, "queen-server")
	cmd := exec.Command("go", "build", "-o", c.queenBin, "github.com/queenlite/queen/cmd/queen")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building cmd/queen for system server: %w", err)
	}
	return nil
}

func cappedNote(r Result) string {
	if r.Capped {
		return " (time-capped)"
	}
	return ""
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// runOne runs j in a child process and returns its result with its peak RSS.
func runOne(exe string, c *config, j *Job, name string) (Result, error) {
	if c.profile != "" && j.Kind != "preload" {
		j.Profile = filepath.Join(c.profile, name)
	}
	spec, _ := json.Marshal(j)
	// Write back what earlier jobs left dirty, so that it does not queue
	// in front of this job's fsyncs.
	syscall.Sync()
	ctx, cancel := context.WithTimeout(context.Background(), c.childLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-child", string(spec))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, err
	}
	if err := cmd.Start(); err != nil {
		return Result{}, err
	}
	var res Result
	found := false
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, resultMarker); ok {
			found = json.Unmarshal([]byte(rest), &res) == nil
		}
	}
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && cmd.ProcessState != nil {
		res.RSSKB = ru.Maxrss
	}
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("timed out after %s", c.childLimit)
	case !found:
		return res, fmt.Errorf("no result (%v): %s", werr, tail(stderr.String(), 2000))
	case res.Err != "":
		return res, errors.New(res.Err)
	}
	return res, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
