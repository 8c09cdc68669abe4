package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/queenlite/queen"
)

// runBackup runs queen backup: a full or incremental backup of a running
// server or of a stopped data directory, written to a file.
func runBackup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	x := newCtl(ctx, "queen backup", getenv, stdout, stderr)
	return x.finish(x.backup(args))
}

// runRestore runs queen restore: a store rebuilt from backup files.
func runRestore(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	x := newCtl(ctx, "queen restore", getenv, stdout, stderr)
	return x.finish(x.restore(args))
}

// runInspect runs queen inspect: a read-only report on a stopped store.
func runInspect(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	x := newCtl(ctx, "queen inspect", getenv, stdout, stderr)
	return x.finish(x.inspect(args))
}

// backupJSON is queen backup's --json output.
type backupJSON struct {
	File  string `json:"file"`
	Bytes int64  `json:"bytes"`
	Since uint64 `json:"since"`
	// Next is the version the backup reaches: -since for the next
	// increment.
	Next uint64 `json:"next"`
}

func (x *ctl) backup(args []string) error {
	fs := x.flags("", "-o FILE (-dir DIR | --server URL)", "Writes a backup of a running server (--server, or QUEEN_URL; an admin route) or\n"+
		"of a stopped data directory (-dir). -since 0 (the default) is a full backup;\n"+
		"-since N, with N the next version an earlier backup printed, an increment\n"+
		"over it. FILE is written whole or not at all; - writes to standard output.")
	out := fs.String("o", "", "the file to write; it must not exist (- for standard output)")
	since := fs.String("since", "0", "the next version printed by the backup this one follows; 0 for a full backup")
	dir := fs.String("dir", "", "back up this stopped data directory instead of a server")
	if _, err := x.exactly(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	n, err := strconv.ParseUint(*since, 10, 64)
	switch {
	case *out == "":
		return usagef("-o FILE is required")
	case err != nil:
		return usagef("-since must be a version number (0 for a full backup), not %q", *since)
	case set["dir"] && set["server"]:
		return usagef("give -dir or --server, not both")
	case set["dir"] && *dir == "":
		return usagef("-dir must not be empty")
	}
	write := func(w io.Writer) (uint64, error) {
		if *dir != "" {
			return x.backupDir(*dir, w, n)
		}
		return x.backupServer(w, n)
	}
	res := backupJSON{File: *out, Since: n}
	report := x.stdout
	if *out == "-" {
		report = x.stderr // stdout is the backup
		cw := &countingWriter{w: x.stdout}
		if res.Next, err = write(cw); err != nil {
			return err
		}
		res.Bytes = cw.n
	} else if res.Next, res.Bytes, err = writeFileAtomic(*out, write); err != nil {
		return err
	}
	if x.json {
		saved := x.stdout
		x.stdout = report
		defer func() { x.stdout = saved }()
		return x.printJSON(res)
	}
	kind := "full backup"
	if n > 0 {
		kind = fmt.Sprintf("increment since %d", n)
	}
	_, err = fmt.Fprintf(report, "%s written to %s (%s)\nnext version %d: queen backup -since %d ... writes the next increment\n",
		kind, *out, sizeText(res.Bytes), res.Next, res.Next)
	return err
}

// backupServer streams the server's backup to w.
func (x *ctl) backupServer(w io.Writer, since uint64) (uint64, error) {
	c, err := x.remote()
	if err != nil {
		return 0, err
	}
	b, ok := any(c).(interface {
		Backup(ctx context.Context, w io.Writer, since uint64) (uint64, error)
	})
	if !ok {
		return 0, fmt.Errorf("%w: this build's remote client cannot take backups; use -dir on a stopped store", queen.ErrUnsupported)
	}
	return b.Backup(x.ctx, w, since)
}

// backupDir opens the stopped store in dir and writes its backup to w.
func (x *ctl) backupDir(dir string, w io.Writer, since uint64) (uint64, error) {
	if err := requireStore(dir); err != nil {
		return 0, err
	}
	opts, err := x.storeOptions()
	if err != nil {
		return 0, err
	}
	b, err := queen.Open(dir, opts)
	if errors.Is(err, queen.ErrLocked) {
		return 0, fmt.Errorf("%w: a server has it open; back it up with --server instead", err)
	}
	if err != nil {
		return 0, err
	}
	next, err := b.Backup(x.ctx, w, since)
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return next, err
}

// storeOptions are the broker options of the commands that open a store:
// the encryption key from the environment, so that a store with encrypted
// queues opens as the server opens it.
func (x *ctl) storeOptions() (*queen.Options, error) {
	key, err := encryptionKey(x.getenv)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return &queen.Options{EncryptionKey: key}, nil
}

// requireStore refuses a dir that holds no store, so that a mistyped path
// is reported rather than made into a new, empty store.
func requireStore(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: no store in %s", queen.ErrNotFound, dir)
		}
		return err
	}
	return nil
}

// writeFileAtomic writes name through write: into a temporary file beside
// it, synced, then renamed to name, so name is a whole backup or absent.
// An existing name is refused.
func writeFileAtomic(name string, write func(io.Writer) (uint64, error)) (next uint64, size int64, err error) {
	if _, err := os.Lstat(name); err == nil {
		return 0, 0, fmt.Errorf("%s already exists: remove it or choose another name", name)
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-")
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	cw := &countingWriter{w: f}
	if next, err = write(cw); err != nil {
		return 0, 0, err
	}
	if err = f.Sync(); err != nil {
		return 0, 0, err
	}
	if err = f.Close(); err != nil {
		return 0, 0, err
	}
	// Link, unlike rename, refuses a name created meanwhile; where the
	// file system has no links, rename.
	if err = os.Link(f.Name(), name); errors.Is(err, os.ErrExist) {
		return 0, 0, fmt.Errorf("%s already exists: remove it or choose another name", name)
	} else if err != nil {
		if err = os.Rename(f.Name(), name); err != nil {
			return 0, 0, err
		}
	}
	_ = os.Remove(f.Name())
	return next, cw.n, nil
}

// countingWriter counts what goes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (x *ctl) restore(args []string) error {
	fs := x.bareFlags("", "-dir DIR FILE...", "Rebuilds a store in DIR (absent or empty) from a full backup and the\n"+
		"increments that follow it, in order. Every file is checked first: a corrupt,\n"+
		"truncated or out-of-order file restores nothing. The store then opens with\n"+
		"queen -data DIR.")
	dir := fs.String("dir", "", "the directory to restore into; absent or empty")
	files, err := x.positional(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *dir == "":
		return usagef("-dir DIR is required")
	case len(files) == 0:
		return usagef("missing FILE: the full backup, then its increments")
	}
	readers := make([]io.Reader, len(files))
	for i, name := range files {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: backup file %s", queen.ErrNotFound, name)
		}
		if err != nil {
			return err
		}
		defer f.Close()
		readers[i] = f
	}
	// Payloads are copied as stored: no key needed. The log says what a
	// killed earlier restore left and this one removed.
	opts := &queen.Options{Logger: slog.New(slog.NewTextHandler(x.stderr, nil))}
	if err := queen.Restore(x.ctx, *dir, opts, readers...); err != nil {
		return err
	}
	if x.json {
		return x.printJSON(struct {
			Dir   string   `json:"dir"`
			Files []string `json:"files"`
		}{*dir, files})
	}
	_, err = fmt.Fprintf(x.stdout, "restored %d backup files into %s\n", len(files), *dir)
	return err
}

func (x *ctl) inspect(args []string) error {
	fs := x.bareFlags("", "-dir DIR", "Reports on a stopped store without changing it: its format, its size on disk,\n"+
		"and per queue its partitions, messages and approximate size. A store a server\n"+
		"has open is refused (ask the server: queen ctl queues).")
	dir := fs.String("dir", "", "the data directory")
	if _, err := x.exactly(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return usagef("-dir DIR is required")
	}
	r, err := queen.Inspect(x.ctx, *dir, nil)
	if err != nil {
		return err
	}
	if x.json {
		return x.printJSON(r)
	}
	format := strconv.Itoa(r.Format)
	if r.WrittenBy != "" {
		format += " (written by " + r.WrittenBy + ")"
	}
	if r.Upgrade {
		format += fmt.Sprintf("; opening it upgrades it to %d", queen.StoreFormat)
	}
	maint := "off"
	if r.MaintenanceMode {
		maint = "on"
	}
	if err := writeFields(x.stdout, [][2]string{{"store", r.Dir}, {"format", format}, {"id", orDash(r.StoreID)},
		{"disk", fmt.Sprintf("%s (tables %s, value log %s)", sizeText(r.DiskBytes), sizeText(r.LSMBytes), sizeText(r.ValueLogBytes))},
		{"contents", fmt.Sprintf("%d queues, %d partitions, %d messages", len(r.Queues), r.Partitions, r.Messages)},
		{"maintenance", maint}}); err != nil {
		return err
	}
	if len(r.Queues) == 0 {
		return nil
	}
	fmt.Fprintln(x.stdout)
	t := newTable("QUEUE<", "PARTS>", "MESSAGES>", "PENDING>", "GROUPS>", "DLQ>", "PARKED>", "SIZE~>")
	for _, q := range r.Queues {
		t.add(q.Name, q.Partitions, q.Messages, q.Pending, q.Groups, q.DeadLetters, q.Parked, sizeText(q.ApproxBytes))
	}
	return t.write(x.stdout)
}

// sizeText is a byte count for people: 512 B, 1.5 KiB, 12.0 MiB.
func sizeText(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, units := float64(n)/1024, []string{"KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strings.TrimSpace(fmt.Sprintf("%.1f %s", v, units[i]))
}
