package main

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/pibot/pibot/adapters/term"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/buildinfo"
	"github.com/pibot/pibot/session"
)

// interactive runs the terminal chat: the gateway with only the terminal
// adapter, on the data directory's local pieces. It ends at the end of the
// input (Ctrl-D) or on SIGINT/SIGTERM, after the running reply finished.
func (c chatCmd) interactive(ctx context.Context, o chatOptions) error {
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
	tcfg := term.Config{In: c.stdin, Out: c.stdout, Logger: log}
	if isTerminal(c.stdout) {
		fd := int(c.stdout.(interface{ Fd() uintptr }).Fd())
		tcfg.Live, tcfg.Color = true, c.getenv("NO_COLOR") == ""
		tcfg.Size = func() (int, int) { return termSize(fd) }
	}
	// The line editor needs the input in raw mode, which is set once the
	// chat starts and restored when it ends.
	tcfg.Edit = tcfg.Live && isTerminal(c.stdin)
	ta, err := term.New(tcfg)
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
		c.resumeNote(ctx, st)
	}
	if tcfg.Edit {
		restore, err := rawMode(int(c.stdin.(interface{ Fd() uintptr }).Fd()))
		if err != nil {
			return err
		}
		defer func() { _ = restore() }()
	}
	return st.gw.Run(ctx)
}

// resumeNote says which conversation the terminal chat continues, if any.
func (c chatCmd) resumeNote(ctx context.Context, st *stack) {
	path, ok, err := st.gw.SessionOf(ctx, term.Conv())
	if err != nil || !ok {
		return
	}
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		return
	}
	defer s.Close()
	sctx, err := s.Tree().Context(s.Tree().Heads()[term.Conv().Key()])
	if err != nil {
		return
	}
	fmt.Fprintf(c.stdout, "resumed session %s, %s; /new for a fresh one\n", s.Tree().Header().ID, plural(len(sctx.Messages), "message"))
}

// plural is "1 message", "2 messages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// banner prints what the terminal chat runs with.
func (c chatCmd) banner(cfg config.Config) {
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
	_, err := unix.IoctlGetTermios(int(f.Fd()), termiosGet)
	return err == nil
}

var _ chat.Adapter = (*endOnEOF)(nil)
