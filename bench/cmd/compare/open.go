package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
	"golang.org/x/sys/unix"
)

// Scenario 12 times the Open of a store holding one queue of j.Partitions
// partitions with one message each, in a process of its own, against a
// plain Badger iteration over the same store's keys: the floor, since
// Open reads every partition. One child fills a master store and closes
// it; each measurement runs on a fresh copy of it (see openStore):
//
//   - queen: the first Open of the copy, as after a restart (Badger then
//     runs the compactions the filled tree is due);
//   - queen+second: the Open after one Open and Close of the copy by
//     another child;
//   - badger: badger.Open with the options queen.Open uses, then every
//     key in key order (no value is read; small values sit beside their
//     keys), then Close.
//
// With -open-cache cold the copy's pages are dropped from the page cache
// (posix_fadvise DONTNEED on each file, which needs no privilege) before
// the measured child starts; warm leaves them as the copy wrote them.

// openMaster returns the master store of scenario 12 under root, filling
// it in a child the first time.
func openMaster(exe string, c *config, root string, j Job) (string, error) {
	dir := filepath.Join(root, "open-master")
	if c.openMaster != "" {
		dir = filepath.Join(c.openMaster, fmt.Sprintf("parts%d-payload%d", j.Partitions, j.Payload))
	}
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir, nil
	}
	j.Kind, j.System, j.Dir = "openfill", "queen", dir
	res, err := runOne(exe, c, &j, "openfill")
	if err != nil {
		return "", fmt.Errorf("fill: %w", err)
	}
	logf("  scenario 12: filled %d partitions in %.1fs", res.Msgs, res.Seconds)
	return dir, os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644)
}

// openStore prepares dir for system s of scenario 12: a copy of master,
// opened and closed once by a child for queen+second, its pages dropped
// from the page cache when cold. It returns the page-cache state measured.
func openStore(exe string, c *config, master, dir, s string, j Job) (string, error) {
	if err := copyStore(master, dir); err != nil {
		return "", err
	}
	if s == "queen+second" {
		j.Kind, j.System, j.Dir = "openonce", "queen", dir
		if _, err := runOne(exe, c, &j, "openonce"); err != nil {
			return "", fmt.Errorf("first open: %w", err)
		}
	}
	if c.openCache != "cold" {
		return "warm", nil
	}
	if err := evict(dir); err != nil {
		return "", fmt.Errorf("evicting the copy from the page cache: %w", err)
	}
	return "cold", nil
}

// copyStore copies the files of a closed store, flat, and syncs them.
func copyStore(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "complete" {
			continue
		}
		in, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		out, err := os.OpenFile(filepath.Join(to, e.Name()), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = io.Copy(out, in)
			if err == nil {
				err = out.Sync()
			}
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// evict drops the clean pages of dir's files from the page cache.
func evict(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	syscall.Sync()
	for _, e := range entries {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// runOpenJob is a child of scenario 12: openfill, openonce or open.
func runOpenJob(j *Job) (Result, error) {
	ctx := context.Background()
	switch j.Kind {
	case "openfill":
		start := time.Now()
		b, err := queen.Open(j.Dir, &queen.Options{Durability: queen.SyncNever})
		if err != nil {
			return Result{}, err
		}
		payload := fixedPayload(j.Payload)
		for lo := 0; lo < j.Partitions; lo += 1000 {
			items := make([]queen.PushItem, 0, 1000)
			for i := lo; i < min(lo+1000, j.Partitions); i++ {
				items = append(items, queen.PushItem{Queue: benchQueue, Partition: "c" + strconv.Itoa(i), Payload: payload})
			}
			if _, err := b.Push(ctx, items); err != nil {
				b.Close()
				return Result{}, err
			}
		}
		return Result{Msgs: int64(j.Partitions), Seconds: time.Since(start).Seconds()}, b.Close()
	case "openonce":
		b, err := queen.Open(j.Dir, nil)
		if err != nil {
			return Result{}, err
		}
		return Result{}, b.Close()
	}
	if j.System == "badger" {
		return badgerKeyScan(j)
	}
	h0 := heapAfterGC()
	io0, cpu0 := procIO(), cpuTime()
	start := time.Now()
	b, err := queen.Open(j.Dir, nil)
	if err != nil {
		return Result{}, err
	}
	took := time.Since(start)
	read, cpu := procIO()-io0, cpuTime()-cpu0
	defer b.Close()
	start = time.Now()
	res, err := b.Pop(ctx, queen.PopRequest{Queue: benchQueue, Group: "first-" + j.Tag, Batch: 1, SubscriptionMode: queen.SubscriptionModeAll})
	if err != nil {
		return Result{}, err
	}
	pop := time.Since(start)
	heap := heapAfterGC() - h0
	qs, err := b.QueueStats(ctx, benchQueue)
	if err != nil {
		return Result{}, err
	}
	if len(res.Messages) != 1 || qs.Messages != int64(j.Partitions) {
		return Result{}, fmt.Errorf("verify: first pop got %d messages, queue holds %d; want 1 and %d", len(res.Messages), qs.Messages, j.Partitions)
	}
	return Result{Msgs: int64(j.Partitions), Seconds: took.Seconds(),
		Note: fmt.Sprintf("open %d ms (CPU %d ms), %s from disk; heap after Open %d MiB; a new group's first pop %.1f ms", took.Milliseconds(), cpu.Milliseconds(), mib(read), heap>>20, pop.Seconds()*1e3)}, nil
}

// badgerKeyScan opens j.Dir with queen.Open's Badger options and reads
// every key in order, without values: scenario 12's floor.
func badgerKeyScan(j *Job) (Result, error) {
	bo, err := queen.BadgerOptions(j.Dir, nil)
	if err != nil {
		return Result{}, err
	}
	io0, cpu0 := procIO(), cpuTime()
	start := time.Now()
	db, err := badger.Open(bo)
	if err != nil {
		return Result{}, err
	}
	defer db.Close()
	var keys, keyBytes int64
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys++
			keyBytes += int64(len(it.Item().Key()))
		}
		return nil
	})
	took := time.Since(start)
	read, cpu := procIO()-io0, cpuTime()-cpu0
	if err != nil {
		return Result{}, err
	}
	return Result{Msgs: int64(j.Partitions), Seconds: took.Seconds(),
		Note: fmt.Sprintf("open and key scan %d ms (CPU %d ms), %d keys (%s), %s from disk", took.Milliseconds(), cpu.Milliseconds(), keys, mib(keyBytes), mib(read))}, nil
}

// cpuTime is the CPU time this process has used (user and system, every
// thread: Badger's compactions included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procIO is the bytes this process has had read from storage
// (/proc/self/io read_bytes), or 0 where unknown.
func procIO() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "read_bytes: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
