package crashtest_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/crashtest"
	"github.com/stretchr/testify/require"
)

var loopBacklog = flag.Int("crash.backlog", 20000, "messages the consume-loop crash test pushes (raise it with -crash.rounds)")

// TestCrash_ConsumeLoopAtLeastOnce kills (SIGKILL) a child running the
// README's consume loop (Batch 100, Concurrency 4, Each) over a backlog,
// while it consumes, several rounds on one directory, then lets a last
// child drain the rest. The loop acks a lane's accepted messages in
// batches, after the next handler has started, so a kill between a
// handler's return and its ack reaching storage delivers the message
// again: at least once. What must hold for any kill time, per partition:
//   - every pushed message is handled at least once (nothing lost);
//   - a message OnSettled reported accepted (its ack returned success) is
//     never handled again, in that round or a later one: the ack is durable;
//   - within a round, the handled offsets are consecutive and increasing
//     (handlers never fail, so nothing comes back within a round);
//   - at the end the group's lag is 0 and its cursor is at the end.
//
// How many messages were handled twice (handled, not yet acked, killed)
// is logged per round: that is the crash window the documentation states.
func TestCrash_ConsumeLoopAtLeastOnce(t *testing.T) {
	t.Parallel()
	bin, seed := child(t), testSeed(t)
	for _, mode := range []queen.Durability{queen.SyncEveryCommit, queen.SyncNever, queen.SyncPushes} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			started := time.Now()
			rng := rand.New(rand.NewPCG(seed, 1<<32|uint64(mode)))
			dir := t.TempDir()
			data, logPath := filepath.Join(dir, "data"), filepath.Join(dir, "log")
			args := func(round int) []string {
				return []string{"-dir", data, "-log", logPath, "-round", fmt.Sprint(round), "-seed", fmt.Sprint(seed),
					"-durability", mode.String(), "-loop", fmt.Sprint(*loopBacklog), "-for", "2m"}
			}
			for round := 1; round <= *rounds; round++ {
				cmd := exec.Command(bin, args(round)...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				from := fileSize(t, logPath)
				require.NoError(t, cmd.Start())
				exited := make(chan struct{})
				go func() { _ = cmd.Wait(); close(exited) }()
				// Kill once this round has logged a random number of acks:
				// early in some rounds, late in others, and leaving work
				// for the next ones.
				target := func(lag int) int {
					if lag == 0 {
						return 0
					}
					return 1 + rng.IntN(max(1, lag/(*rounds-round+2)))
				}
				why := waitAcks(logPath, from, round, target, exited)
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-exited
				if why != "" {
					t.Fatalf("round %d: %s; stderr: %s", round, why, stderr.String())
				}
				ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
				require.True(t, ws.Signaled(), "round %d: child ended on its own: %s", round, stderr.String())
			}
			// The last child drains the rest and exits by itself.
			drain := *rounds + 1
			cmd := exec.Command(bin, append(args(drain), "-drain")...)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "draining child: %s", out)
			verifyLoop(t, data, logPath, mode, drain)
			t.Logf("%s: %d kills and a drain in %v", mode, *rounds, time.Since(started).Round(time.Millisecond))
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	require.NoError(t, err)
	return fi.Size()
}

// waitAcks follows the log from byte from until the child of round has
// logged target(lag) acked lines, lag being what it logged as left to
// consume; why is set when it gave up (the child reported an error or
// exited, or too long passed).
func waitAcks(logPath string, from int64, round int, target func(lag int) int, exited <-chan struct{}) (why string) {
	deadline := time.Now().Add(60 * time.Second)
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	ready := false
	readyLine := fmt.Sprintf("ready %d", round)
	n, want := 0, -1
	var partial []byte
	buf := make([]byte, 1<<16)
	for {
		if f == nil {
			if g, err := os.Open(logPath); err == nil {
				if _, err := g.Seek(from, io.SeekStart); err != nil {
					g.Close()
					return err.Error()
				}
				f = g
			}
		}
		progressed := false
		for f != nil {
			k, err := f.Read(buf)
			if k == 0 || err != nil {
				break
			}
			progressed = true
			partial = append(partial, buf[:k]...)
			for {
				i := bytes.IndexByte(partial, '\n')
				if i < 0 {
					break
				}
				line := string(partial[:i])
				partial = partial[i+1:]
				switch {
				case line == readyLine:
					ready = true
				case strings.HasPrefix(line, "ERR ") || strings.HasPrefix(line, "other "):
					return "child logged: " + line
				case ready && want < 0 && strings.HasPrefix(line, "lag "):
					lag, err := strconv.Atoi(line[len("lag "):])
					if err != nil {
						return "bad line: " + line
					}
					want = target(lag)
				case ready && strings.HasPrefix(line, "acked "):
					n++
				}
			}
			if want >= 0 && n >= want {
				return ""
			}
		}
		if progressed {
			continue
		}
		select {
		case <-exited:
			return fmt.Sprintf("child exited after %d of the %d acks awaited", n, want)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("only %d of the %d acks awaited after 60s (ready: %v)", n, want, ready)
		}
		time.Sleep(time.Millisecond)
	}
}

type partOff struct {
	part string
	off  int64
}

// verifyLoop checks the log of the -loop rounds 1..last and the directory
// they left.
func verifyLoop(t *testing.T, data, logPath string, mode queen.Durability, last int) {
	t.Helper()
	lines, err := crashtest.ReadLog(logPath)
	require.NoError(t, err)

	count := map[string]int64{}      // messages pushed per partition
	handledIn := map[partOff][]int{} // rounds that handled each message
	ackedIn := map[partOff]int{}     // round whose OnSettled reported it accepted
	prevOff := map[string]int64{}    // last offset handled in this round, per partition
	type stat struct{ handled, acked, attempt1 int }
	per := make([]stat, last+1)
	round, drained := 0, false
	for _, l := range lines {
		switch l.Kind {
		case "ERR", "other":
			t.Fatalf("round %d: child logged %s %s", round, l.Kind, strings.Join(l.Fields, " "))
		case "ready":
			r := int(l.Int(0))
			require.Equal(t, round+1, r, "rounds out of order in the log")
			round = r
			clear(prevOff)
		case "push":
			require.Equal(t, crashtest.LoopQueue, l.Fields[0])
			part, txid, off := l.Fields[1], l.Fields[2], l.Int(3)
			var i int
			_, err := fmt.Sscanf(txid, "m%d", &i)
			require.NoError(t, err, "push of %s", txid)
			require.Equal(t, crashtest.LoopPartitions[i%len(crashtest.LoopPartitions)], part, "push of %s", txid)
			require.Equal(t, int64(i/len(crashtest.LoopPartitions)), off, "%s/%s: offset of %s", part, txid, txid)
			count[part] = max(count[part], off+1)
		case "handled":
			k := partOff{l.Fields[0], l.Int(1)}
			require.GreaterOrEqual(t, l.Int(2), int64(1), "%v: DeliveryAttempt", k)
			if l.Int(2) == 1 {
				per[round].attempt1++
			}
			if r, ok := ackedIn[k]; ok {
				t.Fatalf("%s@%d handled in round %d after round %d's OnSettled reported it accepted: an accepted report not backed by a stored ack", k.part, k.off, round, r)
			}
			if p, ok := prevOff[k.part]; ok && k.off != p+1 {
				t.Fatalf("%s: round %d handled offset %d after %d (per-partition order broken, or a message skipped or delivered again within a round)", k.part, round, k.off, p)
			}
			prevOff[k.part] = k.off
			handledIn[k] = append(handledIn[k], round)
			per[round].handled++
		case "acked":
			k := partOff{l.Fields[0], l.Int(1)}
			rs := handledIn[k]
			require.True(t, len(rs) > 0 && rs[len(rs)-1] == round, "%s@%d reported accepted in round %d, which did not handle it", k.part, k.off, round)
			_, dup := ackedIn[k]
			require.False(t, dup, "%s@%d reported accepted twice", k.part, k.off)
			ackedIn[k] = round
			per[round].acked++
		case "drained":
			require.Equal(t, last, round, "drained logged by a kill round")
			drained = true
		}
	}
	require.Equal(t, last, round, "rounds in the log")
	require.True(t, drained, "the last child did not log drained")

	// Nothing lost: every pushed message was handled.
	var total int64
	np := len(crashtest.LoopPartitions)
	for i, part := range crashtest.LoopPartitions {
		require.Equal(t, int64((*loopBacklog-i+np-1)/np), count[part], "%s: confirmed pushes", part)
		total += count[part]
		for off := range count[part] {
			require.NotEmpty(t, handledIn[partOff{part, off}], "%s@%d pushed and never handled: lost", part, off)
		}
	}
	require.Len(t, handledIn, int(total), "handled messages that were never pushed")

	// The crash window: per round, what it handled that a later round
	// handled again (accepted, ack not yet written when the kill came),
	// and what it handled with no accepted report that did not come back
	// (the ack was written, the kill came before OnSettled logged it).
	again, silent := make([]int, last+1), make([]int, last+1)
	for k, rs := range handledIn {
		for i, r := range rs {
			if i+1 < len(rs) {
				again[r]++
			} else if _, ok := ackedIn[k]; !ok {
				silent[r]++
			}
		}
	}
	var report []string
	twice := 0
	for r := 1; r <= last; r++ {
		twice += again[r]
		report = append(report, fmt.Sprintf("round %d: %d handled (%d at attempt 1), %d acked, %d handled again later, %d acked without a report",
			r, per[r].handled, per[r].attempt1, per[r].acked, again[r], silent[r]))
	}
	require.Zero(t, again[last], "the draining round left messages to handle again")
	t.Logf("%s:\n%s\n%d messages handled twice in all", mode, strings.Join(report, "\n"), twice)

	// The broker agrees: nothing left for the group, its cursor at the end.
	b, err := queen.Open(data, &queen.Options{Durability: mode, MaintenanceInterval: time.Hour, GCInterval: time.Hour})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	ctx := context.Background()
	gs, err := b.ListGroups(ctx, queen.GroupFilter{Group: crashtest.LoopGroup})
	require.NoError(t, err)
	found := false
	for _, g := range gs {
		if g.Queue == crashtest.LoopQueue {
			found = true
			require.Zero(t, g.Lag, "group lag after the drain")
			require.Zero(t, g.InFlight, "group in flight after the drain")
		}
	}
	require.True(t, found, "group %s of %s not found", crashtest.LoopGroup, crashtest.LoopQueue)
	qs, err := b.QueueStats(ctx, crashtest.LoopQueue)
	require.NoError(t, err)
	require.Equal(t, total, qs.Messages)
	var names []string
	for _, ps := range qs.Partitions {
		names = append(names, ps.Name)
		require.Equal(t, count[ps.Name], ps.Messages, "%s: stored messages", ps.Name)
		require.Equal(t, count[ps.Name], ps.NextOffset, "%s: next offset", ps.Name)
		var c *queen.CursorStats
		for i := range ps.Cursors {
			if ps.Cursors[i].Group == crashtest.LoopGroup {
				c = &ps.Cursors[i]
			}
		}
		require.NotNil(t, c, "%s: no cursor of group %s", ps.Name, crashtest.LoopGroup)
		require.Equal(t, count[ps.Name], c.Offset, "%s: cursor of group %s", ps.Name, crashtest.LoopGroup)
		require.Zero(t, c.Lag, "%s: lag of group %s", ps.Name, crashtest.LoopGroup)
	}
	sort.Strings(names)
	require.Equal(t, crashtest.LoopPartitions, names, "partitions")
	res, err := b.Pop(ctx, queen.PopRequest{Queue: crashtest.LoopQueue, Group: crashtest.LoopGroup, SubscriptionMode: queen.SubscriptionModeAll, Partitions: len(names), Batch: 100})
	require.NoError(t, err)
	require.Empty(t, res.Messages, "the group still gets messages after the drain")
}
