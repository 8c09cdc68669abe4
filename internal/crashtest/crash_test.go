package crashtest_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
	"github.com/queenlite/queen/internal/crashtest"
	"github.com/queenlite/queen/internal/keys"
	"github.com/queenlite/queen/internal/leakcheck"
	"github.com/queenlite/queen/internal/record"
	"github.com/stretchr/testify/require"
)

var (
	rounds   = flag.Int("crash.rounds", 3, "SIGKILLs per durability mode")
	seedFlag = flag.Uint64("crash.seed", 0, "random seed (0: from the clock)")
	maxRun   = flag.Duration("crash.maxrun", 1500*time.Millisecond, "longest a child runs before it is killed")
)

func TestMain(m *testing.M) { leakcheck.Main(m, nil) }

var (
	buildOnce sync.Once
	childBin  string
	buildErr  error
)

// child builds the child program once per test binary.
func child(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "queen-crashtest")
		if err != nil {
			buildErr = err
			return
		}
		childBin = filepath.Join(dir, "child")
		out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", childBin, "./child").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./child: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return childBin
}

// testSeed is -crash.seed, or one from the clock, logged for a rerun.
func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -crash.seed=%d)", seed, seed)
	return seed
}

// TestCrash_KillAndReopen runs the child against one directory, SIGKILLs
// it at a random moment, reopens the directory and checks the log against
// what the broker holds; several rounds, in every durability mode.
func TestCrash_KillAndReopen(t *testing.T) {
	t.Parallel()
	bin, seed := child(t), testSeed(t)
	for _, mode := range []queen.Durability{queen.SyncEveryCommit, queen.SyncNever, queen.SyncPushes} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, uint64(mode)))
			dir := t.TempDir()
			data, logPath := filepath.Join(dir, "data"), filepath.Join(dir, "log")
			for round := 1; round <= *rounds; round++ {
				args := []string{"-dir", data, "-log", logPath, "-round", fmt.Sprint(round), "-seed", fmt.Sprint(seed), "-durability", mode.String()}
				cmd := exec.Command(bin, args...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				require.NoError(t, cmd.Start())
				waitReady(t, logPath, round, cmd)
				time.Sleep(time.Duration(rng.Int64N(int64(*maxRun))))
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				err := cmd.Wait()
				ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
				require.True(t, ws.Signaled(), "round %d: child ended on its own (%v): %s", round, err, stderr.String())
				v := verify(t, data, logPath, mode)
				t.Logf("round %d: %d pushes, %d acks, %d dead letters, %d parked, %d replays, %d transactional hand-offs, %d into a capped queue, %d refused so far",
					round, v.pushes, v.acks, v.dl, v.pk, v.replays, v.tx, v.capTx, v.refused)
			}
		})
	}
}

// waitReady waits for the child of this round to log that it runs.
func waitReady(t *testing.T, logPath string, round int, cmd *exec.Cmd) {
	t.Helper()
	want := fmt.Sprintf("ready %d\n", round)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(logPath)
		if bytes.Contains(data, []byte(want)) {
			return
		}
		if bytes.Contains(data, []byte("\nERR ")) || bytes.HasPrefix(data, []byte("ERR ")) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	data, _ := os.ReadFile(logPath)
	t.Fatalf("child of round %d never got ready; log tail: %s", round, tail(data))
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

type gp struct{ group, part string }

type gpo struct {
	group, part string
	off         int64
}

type pushKey struct{ queue, part, txid string }

type summary struct{ pushes, acks, dl, pk, replays, tx, capTx, refused int }

// verify reopens the directory and checks every promise the log records.
func verify(t *testing.T, data, logPath string, mode queen.Durability) summary {
	t.Helper()
	lines, err := crashtest.ReadLog(logPath)
	require.NoError(t, err)

	var sum summary
	pushes := map[pushKey]int64{}
	settleable := map[gp]map[int64]bool{} // offsets some ack tried to settle
	lower := map[gp]int64{}               // confirmed cursor positions
	wantLetter := map[gpo]string{}        // confirmed dead letters ("dl") and parked ("pk")
	for _, l := range lines {
		switch l.Kind {
		case "ERR":
			t.Fatalf("child reported: %s", strings.Join(l.Fields, " "))
		case "push":
			k := pushKey{l.Fields[0], l.Fields[1], l.Fields[2]}
			off := l.Int(3)
			if prev, ok := pushes[k]; ok && prev != off {
				t.Fatalf("%v confirmed at offsets %d and %d", k, prev, off)
			}
			pushes[k] = off
		case "intent":
			k := gp{l.Fields[0], l.Fields[1]}
			if settleable[k] == nil {
				settleable[k] = map[int64]bool{}
			}
			if l.Fields[3] != string(queen.AckRetry) {
				settleable[k][l.Int(2)] = true
			}
		case "ack":
			sum.acks++
			if d := l.Fields[4]; d != "-" {
				wantLetter[gpo{l.Fields[0], l.Fields[1], l.Int(2)}] = d
			}
		case "cursor":
			k := gp{l.Fields[0], l.Fields[1]}
			lower[k] = max(lower[k], l.Int(2))
		case "replay":
			sum.replays++
		case "refused":
			sum.refused++
		}
	}
	sum.pushes = len(pushes)

	// 1. The broker opens as it is, with no repair step.
	b, err := queen.Open(data, &queen.Options{Durability: mode, MaintenanceInterval: time.Hour, GCInterval: time.Hour})
	require.NoError(t, err, "reopen after SIGKILL")
	closed := false
	defer func() {
		if !closed {
			_ = b.Close()
		}
	}()
	ctx := context.Background()

	// 2. Every stored message once: offsets contiguous, transactionIds unique.
	type stored struct {
		first int64
		byOff map[int64]queen.Record
	}
	msgs := map[gp]*stored{} // (queue, partition)
	for queue, parts := range map[string][]string{crashtest.WorkQueue: crashtest.WorkPartitions, crashtest.RetainQueue: crashtest.RetainPartitions,
		crashtest.TxQueue: crashtest.TxPartitions, crashtest.OutQueue: crashtest.TxPartitions,
		crashtest.AutoQueue: crashtest.AutoPartitions, crashtest.CapIn: crashtest.CapPartitions, crashtest.CapOut: crashtest.CapPartitions} {
		for _, part := range parts {
			st := &stored{first: -1, byOff: map[int64]queen.Record{}}
			msgs[gp{queue, part}] = st
			seen := map[string]int64{}
			next := int64(-1)
			for from := int64(0); ; {
				page, err := b.Fetch(ctx, queue, part, from, 1000)
				if err == queen.ErrNotFound {
					break
				}
				require.NoError(t, err)
				for _, r := range page.Records {
					if st.first < 0 {
						st.first = r.Offset
					} else {
						require.Equal(t, next, r.Offset, "%s/%s: hole in the offsets", queue, part)
					}
					next = r.Offset + 1
					if o, dup := seen[r.TransactionID]; dup {
						t.Fatalf("%s/%s: transactionId %s stored twice, at %d and %d", queue, part, r.TransactionID, o, r.Offset)
					}
					seen[r.TransactionID] = r.Offset
					st.byOff[r.Offset] = r
				}
				if len(page.Records) == 0 || page.NextOffset == from {
					break
				}
				from = page.NextOffset
			}
			if queue == crashtest.WorkQueue && st.first >= 0 {
				require.Zero(t, st.first, "%s/%s: work queue has no retention, yet offset 0 is gone", queue, part)
			}
		}
	}

	// 3. Dead letters and parked messages are whole, one per (group,
	// message), each matching an ack that was sent; every confirmed one is there.
	letters := map[gpo]queen.DeadLetter{}
	replaySource := map[string]queen.DeadLetter{} // "dlq:<id>" → entry
	for kind, list := range map[string]func(context.Context, queen.LetterFilter) (*queen.LetterPage, error){"dl": b.DeadLetters, "pk": b.ParkedMessages} {
		for off := 0; ; {
			page, err := list(ctx, queen.LetterFilter{Queue: crashtest.WorkQueue, Limit: 1000, Offset: off})
			require.NoError(t, err)
			for _, e := range page.Letters {
				k := gpo{e.ConsumerGroup, e.Partition, e.Offset}
				if _, dup := letters[k]; dup {
					t.Fatalf("%v moved to the dead-letter/parked stores twice", k)
				}
				letters[k] = e
				rec, ok := msgs[gp{crashtest.WorkQueue, e.Partition}].byOff[e.Offset]
				require.True(t, ok, "%s entry %v names a message that is not stored", kind, k)
				require.Equal(t, rec.TransactionID, e.TransactionID, "%s entry %v", kind, k)
				require.Equal(t, rec.MessageID, e.MessageID, "%s entry %v", kind, k)
				require.Equal(t, string(rec.Payload), string(e.Payload), "%s entry %v payload", kind, k)
				require.Equal(t, "e:"+rec.TransactionID, e.Error, "%s entry %v", kind, k)
				require.True(t, settleable[gp{e.ConsumerGroup, e.Partition}][e.Offset], "%s entry %v with no ack sent for it", kind, k)
				if kind == "dl" {
					sum.dl++
					replaySource["dlq:"+e.ID] = e
				} else {
					sum.pk++
				}
			}
			if len(page.Letters) < 1000 {
				break
			}
			off += len(page.Letters)
		}
	}
	for k, kind := range wantLetter {
		_, ok := letters[k]
		require.True(t, ok, "confirmed %s ack of %v has no entry", kind, k)
	}

	// 4. Every confirmed push is stored at its offset, byte for byte.
	for k, off := range pushes {
		st := msgs[gp{k.queue, k.part}]
		rec, ok := st.byOff[off]
		if k.queue == crashtest.RetainQueue && (st.first < 0 || off < st.first) {
			continue // deleted by retention
		}
		require.True(t, ok, "confirmed push %v at offset %d is lost", k, off)
		require.Equal(t, k.txid, rec.TransactionID, "offset %d of %s/%s", off, k.queue, k.part)
		want := crashtest.Payload(k.txid)
		if src, ok := replaySource[k.txid]; ok {
			want = src.Payload
		} else if strings.HasPrefix(k.txid, "dlq:") {
			t.Fatalf("replayed %s has no dead letter", k.txid)
		}
		require.Equal(t, string(want), string(rec.Payload), "payload of %v", k)
	}

	// 5. MaxSize holds across the crash: the capped queue, rebuilt from
	// storage, has at most CapMax pending messages.
	if st, err := b.QueueStats(ctx, crashtest.CapOut); err == nil {
		require.LessOrEqual(t, st.Pending, int64(crashtest.CapMax), "%s: pending over MaxSize after reopen", crashtest.CapOut)
	}
	// A conflating group still conflates after the crash: a pop gets the
	// newest message of its partition.
	for _, part := range crashtest.AutoPartitions {
		st := msgs[gp{crashtest.AutoQueue, part}]
		res, err := b.Pop(ctx, queen.PopRequest{Queue: crashtest.AutoQueue, Group: crashtest.ConflateGroup, Partition: part, Conflation: true})
		if errors.Is(err, queen.ErrNotFound) {
			continue
		}
		require.NoError(t, err)
		if len(res.Messages) > 0 {
			require.Len(t, res.Messages, 1, "%s/%s: conflating pop after reopen", crashtest.AutoQueue, part)
			require.Equal(t, int64(len(st.byOff))-1, res.Messages[0].Offset, "%s/%s: conflating pop after reopen is not the newest", crashtest.AutoQueue, part)
		}
	}

	// 6. Dedup holds across the crash: pushing the same transactionIds
	// again stores nothing and reports the first offset.
	var again []queen.PushItem
	var wantOff []int64
	for k, off := range pushes {
		if k.queue == crashtest.WorkQueue {
			again = append(again, queen.PushItem{Queue: k.queue, Partition: k.part, TransactionID: k.txid, Payload: json.RawMessage(`{}`)})
			wantOff = append(wantOff, off)
		}
	}
	for lo := 0; lo < len(again); lo += 2000 {
		hi := min(lo+2000, len(again))
		res, err := b.Push(ctx, again[lo:hi])
		require.NoError(t, err)
		for i, r := range res {
			require.Equal(t, queen.PushDuplicate, r.Status, "re-push of %s/%s", r.Partition, r.TransactionID)
			require.Equal(t, wantOff[lo+i], r.Offset, "re-push of %s/%s", r.Partition, r.TransactionID)
		}
	}
	require.NoError(t, b.Close())
	closed = true

	// 7. Raw storage: cursors between what was confirmed and what was
	// sent; the dedup index and the messages agree.
	db := openRaw(t, data)
	defer db.Close()
	err = db.View(func(txn *badger.Txn) error {
		pids := map[gp]uint64{}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{keys.Partition}, PrefetchValues: true})
		for it.Rewind(); it.Valid(); it.Next() {
			var m record.Partition
			require.NoError(t, it.Item().Value(func(v []byte) error { return record.DecodePartition(v, &m) }))
			pid := binary.BigEndian.Uint64(it.Item().Key()[1:])
			pids[gp{m.Queue, m.Name}] = pid
			if st := msgs[gp{m.Queue, m.Name}]; st != nil && st.first >= 0 {
				require.Equal(t, m.First, st.first, "%s/%s: stored first offset", m.Queue, m.Name)
			}
			checkIndex(t, txn, pid, m.Queue+"/"+m.Name)
		}
		it.Close()
		for _, part := range crashtest.WorkPartitions {
			pid, ok := pids[gp{crashtest.WorkQueue, part}]
			if !ok {
				continue
			}
			next := int64(len(msgs[gp{crashtest.WorkQueue, part}].byOff))
			for _, group := range []string{queen.QueueModeGroup, crashtest.NamedGroup} {
				c := record.Cursor{}
				item, err := txn.Get(keys.CursorKey(pid, group))
				if err == nil {
					require.NoError(t, item.Value(func(v []byte) (err error) { c, err = record.DecodeCursor(v); return }))
				} else {
					require.ErrorIs(t, err, badger.ErrKeyNotFound)
				}
				k := gp{group, part}
				require.GreaterOrEqual(t, c.Offset, lower[k], "%s/%s: cursor went back behind a confirmed ack", group, part)
				require.LessOrEqual(t, c.Offset, next, "%s/%s: cursor past the end", group, part)
				for o := int64(0); o < c.Offset; o++ {
					require.True(t, settleable[k][o], "%s/%s: cursor %d passed offset %d, which no ack settled", group, part, c.Offset, o)
				}
				require.LessOrEqual(t, c.Retries, int32(2), "%s/%s: retries beyond the limit", group, part)
			}
		}
		// Auto-ack and conflating groups: the cursor is at least where the
		// last pop (auto-ack) or ack (conflating) that returned left it, and
		// at most at the end: nothing confirmed is delivered again.
		for _, part := range crashtest.AutoPartitions {
			pid, ok := pids[gp{crashtest.AutoQueue, part}]
			if !ok {
				continue
			}
			next := int64(len(msgs[gp{crashtest.AutoQueue, part}].byOff))
			for _, group := range []string{crashtest.AutoGroup, crashtest.ConflateGroup} {
				c := cursorOf(t, txn, pid, group)
				require.GreaterOrEqual(t, c.Offset, lower[gp{group, part}], "%s/%s: cursor went back behind a confirmed pop or ack", group, part)
				require.LessOrEqual(t, c.Offset, next, "%s/%s: cursor past the end", group, part)
			}
		}
		// Transactions: an input is settled exactly when its output exists,
		// whether the transaction committed or was refused.
		for _, tq := range []struct {
			in, out, prefix, log string
			parts                []string
		}{
			{crashtest.TxQueue, crashtest.OutQueue, "out:", "tx", crashtest.TxPartitions},
			{crashtest.CapIn, crashtest.CapOut, "cap:", "cap", crashtest.CapPartitions},
		} {
			for _, part := range tq.parts {
				pid, ok := pids[gp{tq.in, part}]
				if !ok {
					continue
				}
				c := cursorOf(t, txn, pid, queen.QueueModeGroup)
				require.GreaterOrEqual(t, c.Offset, lower[gp{tq.log, part}], "%s/%s: transaction ack undone", tq.in, part)
				settled := map[string]bool{}
				for off, r := range msgs[gp{tq.in, part}].byOff {
					if off < c.Offset {
						settled[r.TransactionID] = true
					}
				}
				outputs := map[string]bool{}
				for _, r := range msgs[gp{tq.out, part}].byOff {
					in := strings.TrimPrefix(r.TransactionID, tq.prefix)
					outputs[in] = true
					require.True(t, settled[in], "%s/%s: output %s exists but its input is not acked", tq.out, part, r.TransactionID)
				}
				for in := range settled {
					require.True(t, outputs[in], "%s/%s: input %s acked but its output is missing", tq.in, part, in)
				}
				if tq.log == "tx" {
					sum.tx += len(settled)
				} else {
					sum.capTx += len(settled)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return sum
}

// cursorOf reads a group's stored cursor in partition pid (zero if none).
func cursorOf(t *testing.T, txn *badger.Txn, pid uint64, group string) record.Cursor {
	t.Helper()
	c := record.Cursor{}
	item, err := txn.Get(keys.CursorKey(pid, group))
	if err == nil {
		require.NoError(t, item.Value(func(v []byte) (err error) { c, err = record.DecodeCursor(v); return }))
	} else {
		require.ErrorIs(t, err, badger.ErrKeyNotFound)
	}
	return c
}

// checkIndex checks that each message of pid is in the dedup index at its
// offset, and each index entry names a stored message with that id.
func checkIndex(t *testing.T, txn *badger.Txn, pid uint64, name string) {
	t.Helper()
	byTx := map[string]int64{}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: keys.MessagePrefix(pid), PrefetchValues: true})
	for it.Rewind(); it.Valid(); it.Next() {
		_, off, ok := keys.DecodeMessageKey(it.Item().Key())
		require.True(t, ok)
		var m record.Message
		require.NoError(t, it.Item().Value(func(v []byte) error { return record.DecodeMessage(v, &m) }), "%s@%d", name, off)
		byTx[m.TxID] = off
	}
	it.Close()
	prefix := keys.PartitionScoped(keys.TxID, pid)
	n := 0
	it = txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
	for it.Rewind(); it.Valid(); it.Next() {
		txid := string(it.Item().Key()[len(prefix):])
		var off int64
		require.NoError(t, it.Item().Value(func(v []byte) (err error) { off, err = record.DecodeOffset(v); return }))
		mo, ok := byTx[txid]
		require.True(t, ok, "%s: dedup entry %s → %d names no stored message", name, txid, off)
		require.Equal(t, mo, off, "%s: dedup entry %s", name, txid)
		n++
	}
	it.Close()
	require.Equal(t, len(byTx), n, "%s: messages without a dedup entry", name)
}

// openRaw opens the store in dir with Badger itself. A child process
// another test is starting holds a copy of the directory's locked file
// until its exec, so the lock the broker just let go can look held for a
// while on a loaded machine: openRaw tries again, for up to a minute,
// while Badger says the directory is in use (queen.Open does the same for
// a quarter of a second).
func openRaw(t *testing.T, dir string) *badger.DB {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
		if err == nil {
			return db
		}
		if !strings.Contains(err.Error(), "Another process is using this Badger database") || time.Now().After(deadline) {
			require.NoError(t, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
