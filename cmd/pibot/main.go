// Command pibot runs a pi-style coding agent behind chat: a local web chat,
// Telegram, Slack, Discord and a terminal chat, with pi-compatible session
// files.
//
// Usage:
//
//	pibot serve [-c FILE] [--listen ADDR]
//	pibot chat [-c FILE] [-p] [--mode text|json] [--session FILE] [PROMPT...]
//	pibot session ls [DIR]
//	pibot session tree FILE
//	pibot session context FILE [--leaf ID]
//	pibot session fork FILE --at ID [-o DIR]
//	pibot session repair FILE [--dry-run]
//	pibot session export FILE [--leaf ID] [-o OUT]
//	pibot config check [-c FILE]
//	pibot config example
//	pibot models [-c FILE]
//	pibot agents [-c FILE]
//	pibot agents which [-c FILE] LOCATION [--user ID] [--role ID] [--dm true|false]
//	pibot pairing list [-c FILE]
//	pibot pairing approve PLATFORM CODE
//	pibot pairing revoke PLATFORM USER
//	pibot extensions [-c FILE] [approve HASH]
//	pibot discord invite [-c FILE] [--application-id ID]
//	pibot doctor [-c FILE]
//	pibot cluster status [-c FILE]
//	pibot healthcheck [-c FILE] [--ready] [--url URL]
//	pibot slack manifest [-c FILE] [--format yaml|json] [--url URL]
//	pibot mcp list [-c FILE] [--wait D]
//	pibot version [--short]
//	pibot help
//
// Every command that reads a configuration takes -c FILE; PIBOT_CONFIG is
// the default, and without either pibot runs on config.Default(). The
// wiring of every package is explicit in this directory: there are no
// registries and no init functions. The commands are a table
// (commands.go); `pibot help` prints the usage generated from it, and a
// test holds the list above to it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/tools"
	"github.com/pibot/pibot/tools/jail"
)

// cli holds the process's standard streams and environment, so commands
// can be run in tests without touching the real ones, and what every
// command does with them: parse flags, load the configuration, find a
// session file and report its damage. It dispatches to the commands: a
// command with steps of its own is a type embedding the cli (chatCmd,
// serveCmd, sessionCmd, pairingCmd), a one-step one a run… function.
type cli struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// scrub, when set, removes the secrets of a loaded configuration
	// from the process environment (main sets it; tests do not).
	scrub func(config.Config)
	// redisLog is go-redis's logger (main sets it; nil in tests).
	redisLog *redisLog
}

// exitError carries a process exit code; its message (if any) has already
// been printed or is printed by main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErr reports a command-line mistake (exit status 2).
func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

func main() {
	// A bash call's launcher: applies its limits and executes the
	// command, never returning.
	jail.Main()
	hardenProcess()
	// Commands read the environment as it was at start: secrets are
	// scrubbed from the process once the configuration is loaded.
	env := snapshotEnv()
	// go-redis logs every failed dial through a package-level logger
	// of its own, to stderr: set once, here, for every command.
	rl := &redisLog{}
	redis.SetLogger(rl)
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: env.get, redisLog: rl,
		scrub: func(cfg config.Config) { scrubSecrets(cfg, newLogger(os.Stderr, cfg.Log)) }}
	code := c.main(context.Background(), os.Args[1:])
	tools.RemoveOutputDir(os.TempDir()) //nolint:errcheck // best effort; a later pibot sweeps it
	os.Exit(code)
}

// main runs one command and returns the exit status.
func (c *cli) main(ctx context.Context, args []string) int {
	err := c.dispatch(ctx, args)
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(c.stderr, "pibot:", err)
	if code == 2 {
		fmt.Fprintln(c.stderr, "run 'pibot help' for usage")
	}
	return code
}

func (c *cli) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, usage())
		return &exitError{code: 2}
	}
	cmd, ok := findCommand(args[0])
	if !ok {
		return usageErr("unknown command %q", args[0])
	}
	return cmd.run(ctx, c, args[1:])
}

// newFlags returns a flag set that reports errors instead of exiting.
func (c *cli) newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("pibot "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	return fs
}

// parseArgs parses fs over args, allowing flags after positional
// arguments ("session context FILE --leaf ID"). It returns the positional
// arguments.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &exitError{code: 2, err: err}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// wantArgs checks the number of positional arguments.
func wantArgs(cmd string, pos []string, n int, names string) error {
	if len(pos) != n {
		return usageErr("%s: want %s, got %d argument(s): %s", cmd, names, len(pos), strings.Join(pos, " "))
	}
	return nil
}
