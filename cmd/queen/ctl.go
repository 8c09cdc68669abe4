package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/queenlite/queen"
	"github.com/queenlite/queen/remote"
)

// ctlCommand is one command of queen ctl.
type ctlCommand struct {
	name  string
	args  string // the positional arguments, for the usage line
	short string // one line for the command list
	run   func(x *ctl, args []string) error
}

// ctlCommands are the commands of queen ctl, listed in this order.
var ctlCommands = []ctlCommand{
	{"queues", "", "list the queues with their message counts", ctlQueues},
	{"queue", "NAME", "describe one queue: settings, partitions, cursors", ctlQueue},
	{"groups", "[GROUP]", "list the consumer groups", ctlGroups},
	{"lag", "[QUEUE]", "what each group has left to read", ctlLag},
	{"dlq", "list|show|replay|delete ...", "the dead letters", ctlDLQ},
	{"parked", "list|show|replay|delete ...", "the parked messages", ctlParked},
	{"seek", "GROUP QUEUE --to-end | --time T", "move a group's cursors", ctlSeek},
	{"push", "QUEUE JSON...", "push messages", ctlPush},
	{"tail", "QUEUE", "print new messages as they arrive (no lease taken)", ctlTail},
	{"maintenance", "[on|off]", "show or switch maintenance mode", ctlMaintenance},
}

// Exit codes of queen ctl (and of backup, restore and inspect).
const (
	exitOK     = 0
	exitFailed = 1 // not found, refused, unreachable
	exitUsage  = 2 // bad arguments
)

const (
	// defaultURL is the server without --server or QUEEN_URL: cmd/queen's
	// default address.
	defaultURL = "http://localhost:6632"
	// ctlMaxWidth is the terminal width the output fits.
	ctlMaxWidth = 80
)

// usageError is a bad command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// ctl is one run of queen ctl: its settings, output and client.
type ctl struct {
	ctx            context.Context
	getenv         func(string) string
	stdout, stderr io.Writer

	server  string
	token   string
	json    bool
	timeout time.Duration

	// cmd is the command line so far, for usage lines: "queen ctl dlq".
	cmd    string
	client *remote.Client
}

// runCtl runs queen ctl with args (what follows "ctl") and returns the exit
// code.
func runCtl(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	x := newCtl(ctx, "queen ctl", getenv, stdout, stderr)
	return x.finish(x.dispatch(args))
}

// newCtl returns the state of the command cmd ("queen ctl"), with the
// server and token from the environment.
func newCtl(ctx context.Context, cmd string, getenv func(string) string, stdout, stderr io.Writer) *ctl {
	x := &ctl{ctx: ctx, getenv: getenv, stdout: stdout, stderr: stderr, cmd: cmd,
		server: strings.TrimSpace(getenv("QUEEN_URL")), token: strings.TrimSpace(getenv("QUEEN_TOKEN")), timeout: 30 * time.Second}
	if x.server == "" {
		x.server = defaultURL
	}
	return x
}

// finish closes the client, reports err and returns the exit code.
func (x *ctl) finish(err error) int {
	if x.client != nil {
		_ = x.client.Close()
	}
	return x.exit(err)
}

// exit reports err on stderr and returns its exit code.
func (x *ctl) exit(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(x.stderr, "%s: %s\nRun '%s --help' for usage.\n", x.cmd, ue.msg, x.cmd)
		return exitUsage
	case errors.Is(err, queen.ErrInvalidArgument):
		// The server refused an argument of ours: it came from the
		// command line.
		fmt.Fprintf(x.stderr, "%s: %v\n", x.cmd, err)
		return exitUsage
	}
	fmt.Fprintf(x.stderr, "%s: %v\n", x.cmd, err)
	return exitFailed
}

// dispatch reads the flags before the command, then runs the command.
func (x *ctl) dispatch(args []string) error {
	fs := x.flags("", "COMMAND [ARGS]", "Operates a running queen server (cmd/queen, any httpapi server, or Queen's own).")
	fs.Usage = func() {
		x.printUsage(fs, "", "COMMAND [ARGS]", "Operates a running queen server (cmd/queen, any httpapi server, or Queen's own).")
		fmt.Fprintln(x.stdout, "\nCommands:")
		for _, c := range ctlCommands {
			fmt.Fprintf(x.stdout, "  %-12s %s\n", c.name, c.short)
		}
		fmt.Fprintln(x.stdout, "\nRun 'queen ctl COMMAND --help' for a command's arguments and flags.")
	}
	if err := x.parseFlags(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usagef("no command given")
	}
	for _, c := range ctlCommands {
		if c.name == rest[0] {
			x.cmd += " " + c.name
			return c.run(x, rest[1:])
		}
	}
	return usagef("unknown command %q", rest[0])
}

// flags returns a flag set with the flags every command takes: --server,
// --token, --json and --timeout, defaulting to what was parsed so far.
func (x *ctl) flags(name, args, about string) *flag.FlagSet {
	fs := x.bareFlags(name, args, about)
	fs.StringVar(&x.server, "server", x.server, "server URL, or a comma-separated list (env QUEEN_URL)")
	fs.StringVar(&x.token, "token", x.token, "bearer token (env QUEEN_TOKEN)")
	fs.DurationVar(&x.timeout, "timeout", x.timeout, "bound on each request")
	return fs
}

// bareFlags returns a flag set with --json only, for the commands that
// talk to no server.
func (x *ctl) bareFlags(name, args, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(strings.TrimSpace(x.cmd+" "+name), flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by exit, help by Usage
	fs.BoolVar(&x.json, "json", x.json, "print JSON instead of tables")
	fs.Usage = func() { x.printUsage(fs, name, args, about) }
	return fs
}

// printUsage prints a command's usage line, description and flags on
// stdout, within ctlMaxWidth columns.
func (x *ctl) printUsage(fs *flag.FlagSet, name, args, about string) {
	var words []string
	for _, w := range []string{x.cmd, name, "[flags]", args} {
		if w != "" {
			words = append(words, w)
		}
	}
	fmt.Fprintf(x.stdout, "Usage: %s\n\n%s\n\nFlags:\n", strings.Join(words, " "), about)
	fs.VisitAll(func(f *flag.Flag) {
		kind, text := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if kind != "" {
			head += " " + kind
		}
		// A default from the environment is shown, but never the token's.
		if def := f.DefValue; f.Name != "token" && def != "" && def != "false" && def != "0" {
			text += " (default " + def + ")"
		}
		x.printWrapped(fmt.Sprintf("%-22s", head), text)
	})
}

// printWrapped prints text after head, wrapped within ctlMaxWidth columns
// and indented under its start.
func (x *ctl) printWrapped(head, text string) {
	indent := strings.Repeat(" ", 23)
	line := head
	if len(line) > 22 {
		fmt.Fprintln(x.stdout, line)
		line = indent[:len(indent)-1]
	}
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > ctlMaxWidth && strings.TrimSpace(line) != "" && len(line) > len(indent) {
			fmt.Fprintln(x.stdout, line)
			line = indent[:len(indent)-1]
		}
		line += " " + w
	}
	fmt.Fprintln(x.stdout, line)
}

// parseFlags parses args, letting flags and positional arguments mix
// ("seek G Q --to-end"); "--" ends the flags. The positional arguments
// are left in fs.Args() order by parsePositional.
func (x *ctl) parseFlags(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {} // the flag package calls it on errors too: help alone prints it
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return err
	case err != nil:
		return usagef("%v", err)
	}
	return nil
}

// positional parses args with flags anywhere among them and returns the
// positional arguments.
func (x *ctl) positional(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := x.parseFlags(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// exactly parses args and checks that there are n positional arguments,
// named by names for the error.
func (x *ctl) exactly(fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	pos, err := x.positional(fs, args)
	if err != nil {
		return nil, err
	}
	switch {
	case len(pos) < len(names):
		return nil, usagef("missing %s", strings.Join(names[len(pos):], " and "))
	case len(pos) > len(names):
		return nil, usagef("unexpected argument %q", pos[len(names)])
	}
	for i, p := range pos {
		if strings.TrimSpace(p) == "" {
			return nil, usagef("%s must not be empty", names[i])
		}
	}
	return pos, nil
}

// optional parses args and returns its one optional positional argument,
// named name for errors: "" when there is none.
func (x *ctl) optional(fs *flag.FlagSet, args []string, name string) (string, error) {
	pos, err := x.positional(fs, args)
	switch {
	case err != nil:
		return "", err
	case len(pos) > 1:
		return "", usagef("unexpected argument %q", pos[1])
	case len(pos) == 0:
		return "", nil
	case strings.TrimSpace(pos[0]) == "":
		return "", usagef("%s must not be empty", name)
	}
	return pos[0], nil
}

// remote dials the server on first use.
func (x *ctl) remote() (*remote.Client, error) {
	if x.client != nil {
		return x.client, nil
	}
	if x.timeout <= 0 {
		return nil, usagef("--timeout must be positive, not %v", x.timeout)
	}
	c, err := remote.Dial(x.server, &remote.Options{Token: x.token, RequestTimeout: x.timeout})
	if err != nil {
		return nil, usagef("--server %q: %v", x.server, err)
	}
	x.client = c
	return c, nil
}

// printJSON prints v as indented JSON.
func (x *ctl) printJSON(v any) error {
	enc := json.NewEncoder(x.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// subcommand runs the subcommand of a command with subcommands (dlq list).
func (x *ctl) subcommand(args []string, about string, subs []ctlCommand) error {
	names := make([]string, len(subs))
	for i, c := range subs {
		names[i] = c.name
	}
	fs := x.flags("", strings.Join(names, "|")+" ...", about)
	fs.Usage = func() {
		x.printUsage(fs, "", "SUBCOMMAND [ARGS]", about)
		fmt.Fprintln(x.stdout, "\nSubcommands:")
		for _, c := range subs {
			fmt.Fprintf(x.stdout, "  %-28s %s\n", c.name+" "+c.args, c.short)
		}
	}
	if err := x.parseFlags(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usagef("missing subcommand: %s", strings.Join(names, ", "))
	}
	for _, c := range subs {
		if c.name == rest[0] {
			x.cmd += " " + c.name
			return c.run(x, rest[1:])
		}
	}
	return usagef("unknown subcommand %q: %s", rest[0], strings.Join(names, ", "))
}

// timeText formats t for tables: UTC to the second, "-" for zero.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// timeJSON formats t for JSON: RFC 3339 with fractions, "" for zero.
func timeJSON(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// parseTime reads a time flag: RFC 3339, with or without fractions.
func parseTime(flagName, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usagef("--%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not %q", flagName, s)
	}
	return t, nil
}
