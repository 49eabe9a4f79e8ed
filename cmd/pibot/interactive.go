package main

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/pibot/pibot/adapters/term"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/buildinfo"
)

// interactive runs the terminal chat: the gateway with only the terminal
// adapter, on the data directory's local pieces. It ends at the end of the
// input (Ctrl-D) or on SIGINT/SIGTERM, after the running reply finished.
func (c *cli) interactive(ctx context.Context, o chatOptions) error {
	if o.session != "" || o.model != "" {
		return usageErr("chat: --session and --model work with -p or --mode json; the terminal chat uses agent.model and keeps its own conversation (/new starts another)")
	}
	cfg, _, err := c.loadConfig(o.configFile)
	if err != nil {
		return err
	}
	logCfg := cfg.Log
	if logCfg.Level != "debug" {
		logCfg.Level = "warn" // keep the conversation readable
	}
	log := newLogger(c.stderr, logCfg)
	ta, err := term.New(term.Config{In: c.stdin, Out: c.stdout, Color: isTerminal(c.stdout) && c.getenv("NO_COLOR") == "", Logger: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := openStack(ctx, cfg, c.getenv, log, []chat.Adapter{&endOnEOF{Adapter: ta, end: cancel}}, nil, nil)
	if err != nil {
		return err
	}
	defer st.close()
	if isTerminal(c.stdin) {
		c.banner(cfg)
	}
	return st.gw.Run(ctx)
}

func (c *cli) banner(cfg config.Config) {
	model := cfg.Agent.Model
	if model == "" {
		model = "from the environment"
	}
	fmt.Fprintf(c.stdout, "pibot %s terminal chat (model %s). Type /help for commands; Ctrl-D quits.\n", buildinfo.Get().Version, model)
}

// endOnEOF is the terminal adapter whose end of input ends the chat.
// Embedding the concrete adapter keeps its optional interfaces (Typer,
// Responder) visible to the gateway.
type endOnEOF struct {
	*term.Adapter
	end context.CancelFunc
}

// Run reads the terminal until its input ends, then ends the chat.
func (e *endOnEOF) Run(ctx context.Context, sink chat.Sink) error {
	defer e.end()
	return e.Adapter.Run(ctx, sink)
}

// isTerminal reports whether v is a terminal device.
func isTerminal(v any) bool {
	f, ok := v.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

var _ chat.Adapter = (*endOnEOF)(nil)
