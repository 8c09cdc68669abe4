package main

import (
	"context"
	"io"
)

// subcommands are the commands queen runs instead of serving, by the
// first argument: "queen ctl queues", "queen backup -o FILE".
var subcommands = map[string]func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int{
	"ctl":     runCtl,
	"backup":  runBackup,
	"restore": runRestore,
	"inspect": runInspect,
}
