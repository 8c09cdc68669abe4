package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// median picks the middle round: by throughput, or by p99 for latency rows.
func median(rs []Result, latency bool) (Result, int64) {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b Result) int {
		if latency {
			return cmpF(a.P99, b.P99)
		}
		return cmpF(a.rate(), b.rate())
	})
	var rss int64
	for _, r := range rs {
		rss = max(rss, r.RSSKB)
	}
	return s[len(s)/2], rss
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func fmtRate(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v > 0:
		return fmt.Sprintf("%.1f", v)
	}
	return "-"
}

func fmtMS(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	case v < 100:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

var sysLabel = map[string]string{
	"queen":            "queen",
	"jetstream":        "JetStream",
	"badger":           "raw Badger",
	"http":             "queen over HTTP",
	"server":           "cmd/queen",
	"server-base":      "cmd/queen, base",
	"server-pushes":    "cmd/queen -durability pushes",
	queenMQ:            "Queen's server (C++, PostgreSQL)",
	"queen-tuned":      "queen, tuned Badger",
	"queen+idle":       "queen + idle partitions",
	"queen+second":     "queen, second open",
	"queen-tuned+idle": "queen, tuned Badger + idle partitions",
}

func renderTable(c *config, rows []*row, preload map[string]Result) string {
	var b strings.Builder
	mode := "full"
	if c.quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "\nqueen bench (%s): %s/%s, %d CPUs, GOMAXPROCS %d, %s; payload %d B; %d round(s) per row, median shown\n\n",
		mode, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), c.payload, c.rounds)
	b.WriteString("| # | scenario | durability | system | msgs/s | p50 ms | p99 ms | peak RSS MB | ours/peer | notes |\n")
	b.WriteString("|---|---|---|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		if r.pending != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | - | - | - | - | - | %s |\n", r.scen, r.title, durName(r.sync), strings.Join(labels(r.systems, r.scen), ", "), r.pending)
			continue
		}
		ours, haveOurs := Result{}, false
		if rs := r.results["queen"]; len(rs) > 0 {
			ours, _ = median(rs, r.latency)
			haveOurs = true
		}
		for _, s := range r.systems {
			rs := r.results[s]
			if len(rs) == 0 {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | - | - | - | - | - | FAILED |\n", r.scen, r.title, durName(r.sync), rowLabel(s, r.scen))
				continue
			}
			m, rss := median(rs, r.latency)
			ratio, notes := "", []string{}
			switch {
			case r.scen == "10":
				// A loop over the hand drain of its transport; the HTTP
				// drain over the in-process one. Ratios pair rounds.
				transport, style, _ := strings.Cut(s, "+")
				switch {
				case style != "":
					if x, ok := roundRatio(rs, r.results[transport]); ok {
						ratio = fmt.Sprintf("%.2f× drain", x)
					}
				case s == "http":
					if x, ok := roundRatio(rs, r.results["queen"]); ok {
						ratio = fmt.Sprintf("%.2f (HTTP/in-process)", x)
					}
				}
			case r.scen == "12":
				// Open's time over Badger's open and key scan (lower is
				// better), rounds paired.
				if x, ok := roundRatio(r.results["badger"], rs); ok && s != "badger" {
					ratio = fmt.Sprintf("%.2f× Badger's time", x)
				}
			case r.scen == "11" && s == "server":
				if x, ok := roundRatio(rs, r.results[queenMQ]); ok {
					ratio = fmt.Sprintf("%.2f (cmd/queen / Queen's server)", x)
				}
			case strings.HasSuffix(s, "+idle"):
				if alone := r.results[strings.TrimSuffix(s, "+idle")]; len(alone) > 0 {
					a, _ := median(alone, false)
					ratio = fmt.Sprintf("%.2f (idle/alone)", m.rate()/a.rate())
					perLive := float64(m.HeapLive-a.HeapLive) / float64(r.job.Idle)
					perStore := float64(m.HeapStore-a.HeapStore) / float64(r.job.Idle)
					notes = append(notes, fmt.Sprintf("heap per idle partition: %.0f B, %.0f B of it Badger's (memtables, table builders in flight)", perLive, perStore))
				}
			case s == "queen-tuned" && haveOurs && ours.rate() > 0:
				if r.latency {
					ratio = fmt.Sprintf("%.2f (p99 tuned/default)", m.P99/ours.P99)
				} else {
					ratio = fmt.Sprintf("%.2f (tuned/default)", m.rate()/ours.rate())
				}
			case strings.HasPrefix(s, "queen@") && haveOurs && ours.rate() > 0:
				ratio = fmt.Sprintf("%.2f (budget/default)", m.rate()/ours.rate())
			case r.scen == "8" && (s == "http" || s == "server" || s == "server-pushes") && haveOurs:
				ratio = fmt.Sprintf("%.2f (HTTP/in-process)", m.rate()/ours.rate())
				if bs := r.results["server-base"]; s != "http" && len(bs) > 0 {
					bm, _ := median(bs, false)
					ratio += fmt.Sprintf("; %.2f (new/base)", m.rate()/bm.rate())
				}
			case r.latency && s != "queen" && haveOurs && m.P99 > 0:
				ratio = fmt.Sprintf("%.2f (p99 ours/peer, lower is better)", ours.P99/m.P99)
			case s != "queen" && s != "http" && !isServer(s) && haveOurs && m.rate() > 0:
				ratio = fmt.Sprintf("%.2f", ours.rate()/m.rate())
			}
			if r.latency {
				notes = append(notes, fmt.Sprintf("p999 %s ms", fmtMS(m.P999)))
			}
			if m.DrainSeconds > 0 {
				d := fmt.Sprintf("drain %s msg/s", fmtRate(m.drainRate()))
				if strings.HasPrefix(s, "queen@") && haveOurs && ours.drainRate() > 0 {
					d += fmt.Sprintf(" (budget/default %.2f)", m.drainRate()/ours.drainRate())
				} else if s != "queen" && haveOurs && ours.drainRate() > 0 {
					d += fmt.Sprintf(" (ours/peer %.2f)", ours.drainRate()/m.drainRate())
				}
				notes = append(notes, d)
			}
			if m.Note != "" {
				notes = append(notes, m.Note)
			}
			if m.PeakHeap > 0 {
				notes = append(notes, fmt.Sprintf("Go heap peak %d MB", m.PeakHeap>>20))
			}
			if mp := m.Mem; r.scen == "9" && mp.RSS > 0 {
				notes = append(notes, fmt.Sprintf("at the peak (MiB): anon %d (heap goal %d), files %d (vlog %d, sst %d)",
					mp.Anon>>10, mp.HeapGoal>>10, mp.File>>10, mp.Vlog>>10, mp.SST>>10))
			}
			if m.Capped {
				notes = append(notes, fmt.Sprintf("time-capped: %d msgs in %.1fs", m.Msgs, m.Seconds))
			}
			p50, p99 := m.P50, m.P99
			if r.scen == "3" || r.scen == "4" || r.scen == "5" || r.scen == "6" {
				p50, p99 = 0, 0
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %d | %s | %s |\n",
				r.scen, r.title, durName(r.sync), rowLabel(s, r.scen), fmtRate(m.rate()), fmtMS(p50), fmtMS(p99), m.RSSKB>>10, ratio, strings.Join(notes, "; "))
			_ = rss
		}
		if len(r.errs) > 0 {
			fmt.Fprintf(&b, "| %s | %s | %s | errors | | | | | | %s |\n", r.scen, r.title, durName(r.sync), strings.ReplaceAll(strings.Join(r.errs, "; "), "|", "/"))
		}
	}
	b.WriteString(`
- ours/peer: queen's msgs/s over the peer's, same scenario and durability (≥ 1 means queen is faster); latency rows compare p99.
- fsync: queen SyncEveryCommit (group commit: one fsync per storage transaction); JetStream sync_interval: always; raw Badger db.Sync() after each WriteBatch.
  no-fsync: queen SyncNever; JetStream's default (fsync every 2 min); raw Badger without Sync.
- JetStream: embedded nats-server, file storage, one stream, subjects bench.p<k> for partitions, nats.go client connected in process (no socket).
  Push 1/call = synchronous Publish; push N/call = N PublishAsync then wait for every ack. No Nats-Msg-Id unless -js-dedup (queen always deduplicates).
  Drain/fan-out = durable pull consumers, Fetch(batch), explicit ack: Ack each message, DoubleAck the last of the fetch.
  JetStream persists consumer ack state asynchronously (about 10 writes/s per consumer) even with sync_interval: always; queen's acks are fsynced with the fsync setting.
- cmd/queen -durability pushes (queen.SyncPushes, scenario 8 fsync rows): pushes fsynced before they return, acks committed at once and fsynced
  in the background within 100 ms (as JetStream's ack state); "new/base" compares it with the base binary on the durable default.
- Scenario 5 on JetStream: order is per consumer, not per subject across consumers, so keys are sharded statically over one filtered durable consumer per worker (subject bench.o.<shard>.<key>).
- Scenario 9: msgs/s and p50/p99 are the push phase (per call); the drain phase's rate is in the notes; peak RSS covers both. JetStream's server restarts between the phases.
- Scenario 10: one backlog per row (pushed untimed into a fresh store), one group (subscription mode all), drained by: the hand drain (4 goroutines, Pop batch N + one AckBatch each);
  the README's consume loop (Batch(N).Concurrency(4).Each().Consume, handler returns nil); the same with ConsumeBatch. In process (Broker) and over HTTP (package remote → httpapi, loopback).
  "× drain" is the loop's msgs/s over the hand drain's of the same transport, batch and round (median over rounds). Verified: offset order per partition, each message accepted once, group lag 0.
- Scenario 3/4 p50/p99 are not measured (throughput only). Push rows: latency is per call. Scenario 7: open loop (32 senders on a fixed schedule), from the start of the push call to the handler; senders' lateness against the schedule is in the notes.
- Scenario 12: msgs/s is partitions opened per second (Open's time in the notes); a fresh copy of one filled store per measurement, opened in a child of its own;
  "× Badger's time" is Open's time over raw Badger's open and scan of every key (no value read) of a copy in the same state, rounds paired (lower is better).
- Raw Badger writes the broker's bytes for each message (record + dedup-index entry) with the broker's Badger options: the storage engine's limit for push.
`)
	if len(preload) > 0 {
		b.WriteString("- Backlog preload (push 1000/call, 2 producers, no fsync, not in the table):")
		for _, s := range []string{"queen", "jetstream"} {
			if p, ok := preload[s]; ok {
				fmt.Fprintf(&b, " %s %.0f msg/s;", sysLabel[s], p.rate())
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func labels(s []string, scen string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = rowLabel(v, scen)
	}
	return out
}

// rowLabel names a system in a row of scenario scen.
func rowLabel(s, scen string) string {
	if scen == "12" && s == "queen" {
		return "queen, first open"
	}
	if scen != "10" {
		return label(s)
	}
	transport, style, _ := strings.Cut(s, "+")
	t := "queen"
	if transport == "http" {
		t = "remote → httpapi"
	}
	switch style {
	case "each":
		return t + ": Consume, Each()"
	case "batch":
		return t + ": ConsumeBatch"
	}
	return t + ": hand drain (Pop + AckBatch)"
}

// roundRatio is the median over rounds of rs's msgs/s over base's in the
// same round.
func roundRatio(rs, base []Result) (float64, bool) {
	var xs []float64
	for _, r := range rs {
		for _, b := range base {
			if b.Round == r.Round && b.rate() > 0 {
				xs = append(xs, r.rate()/b.rate())
			}
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	slices.Sort(xs)
	return xs[len(xs)/2], true
}

// label names a system in the table.
func label(s string) string {
	if mb, ok := strings.CutPrefix(s, "queen@"); ok {
		return "queen, MemoryBudget " + mb + " MiB"
	}
	return sysLabel[s]
}
