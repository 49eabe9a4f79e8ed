package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/extensions"
	"github.com/pibot/pibot/internal/sessionrun"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// chatOptions are the flags of `pibot chat`.
type chatOptions struct {
	configFile string
	print      bool
	mode       string
	session    string
	model      string
	prompts    []string
}

// chatCmd is `pibot chat`: one-shot print or JSON mode, or the interactive
// terminal chat.
type chatCmd struct{ *cli }

// run runs `pibot chat`.
func (c chatCmd) run(ctx context.Context, args []string) error {
	fs := c.newFlags("chat")
	var o chatOptions
	fs.StringVar(&o.configFile, "c", "", "configuration `FILE` (default $PIBOT_CONFIG)")
	fs.BoolVar(&o.print, "p", false, "print mode: run the prompt and print only the final answer")
	fs.StringVar(&o.mode, "mode", "", "output `mode`: text (with -p) or json (every event as one JSON line)")
	fs.StringVar(&o.session, "session", "", "continue the `SESSION` (a file, a session id or an id prefix)")
	fs.StringVar(&o.model, "model", "", "model `provider/id` (default agent.model)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	o.prompts = pos
	switch o.mode {
	case "", "text", "json":
	default:
		return usageErr("chat: --mode must be text or json, not %q", o.mode)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !o.print && o.mode == "" {
		if len(o.prompts) > 0 {
			o.print = true // `pibot chat "question"` answers once
		} else {
			return c.interactive(ctx, o)
		}
	}
	if len(o.prompts) == 0 {
		return usageErr("chat: no prompt given")
	}
	return c.once(ctx, o)
}

// chatRun is one agent conversation recorded in a session file through
// the session runner the gateway uses too (sessionrun.Runner).
type chatRun struct {
	agent  *agent.Agent
	maint  *agent.Maintenance
	sess   *session.Session
	rec    *sessionrun.Runner
	header session.Header
	// ext expands /skill:NAME and prompt templates.
	ext *extensions.Set
	// closeTools stops the MCP servers the run started.
	closeTools func()
	// err is the first write failure; the run is aborted when it happens.
	err error
}

// open resolves the model, opens or creates the session file and builds
// the agent. The session must be closed by the caller.
func (c chatCmd) open(ctx context.Context, o chatOptions, cfg config.Config) (*chatRun, error) {
	log := newLogger(c.stderr, config.Log{Level: "warn", Format: cfg.Log.Format})
	if cfg.Log.Level == "debug" {
		log = newLogger(c.stderr, cfg.Log)
	}
	reg, err := newRegistry(cfg, c.getenv, log, -1)
	if err != nil {
		return nil, err
	}
	var resumed *session.Session
	var sctx session.Context
	if o.session != "" {
		if resumed, err = session.OpenFile(o.session, session.Options{Logger: log}); err != nil {
			return nil, err
		}
		c.reportDamage(resumed.Report())
		if sctx, err = resumed.Tree().Context(""); err != nil {
			resumed.Close()
			return nil, err
		}
	}
	closeResumed := func() {
		if resumed != nil {
			resumed.Close()
		}
	}
	// pi's choice, as in the gateway: --model, else the session's model,
	// else the configured one; the session's thinking level, else the
	// configured one.
	def := defaultModel(cfg, reg)
	ref, thinking := sessionrun.Resolve(sctx, o.model, def, llm.ThinkingLevel(cfg.Agent.Thinking))
	if ref == "" {
		closeResumed()
		return nil, fmt.Errorf("chat: %s", noModelHelp)
	}
	model, err := reg.Model(ref)
	if err != nil && o.model == "" && def != "" && ref != def {
		// The session's model is gone (a provider removed from the
		// config): go on with the configured one, as pi does.
		log.Warn("the session's model is not usable; using the configured one", "model", ref, "err", err)
		model, err = reg.Model(def)
	}
	if err != nil {
		closeResumed()
		return nil, err
	}
	info := model.Info()
	thinking = info.ClampThinking(thinking)
	tb, err := newToolbox(ctx, cfg, log)
	if err != nil {
		closeResumed()
		return nil, err
	}
	ext, err := newExtensions(cfg, tb.ws, log)
	if err != nil {
		closeResumed()
		return nil, err
	}
	prompt, err := tb.prompt(cfg, false, ext).build()
	if err != nil {
		closeResumed()
		return nil, err
	}
	var history []llm.Message
	sess := resumed
	if resumed != nil {
		if history, err = sctx.LLMMessages(); err != nil {
			closeResumed()
			return nil, err
		}
	} else {
		now := time.Now()
		h := session.Header{ID: session.NewSessionID(now), Timestamp: session.Timestamp(now), Cwd: tb.ws}
		first := session.Entry{Type: session.TypeModelChange, Provider: info.Provider, ModelID: info.ID}
		if sess, err = session.CreateFile(session.Dir(cfg.DataDir, "cli"), h, first, session.Options{Logger: log}); err != nil {
			return nil, err
		}
		sctx = session.Context{Model: &session.ModelRef{Provider: info.Provider, ModelID: info.ID}}
	}
	head := sessionrun.NewLeaf(sess, sess.Tree().Leaf())
	if err := sessionrun.Settle(head, sctx, info, thinking, session.SyncGrouped); err != nil {
		sess.Close()
		return nil, err
	}
	a := agent.New(agent.Config{
		Model: model, Thinking: thinking, SystemPrompt: prompt, Tools: tb.forRun("", nil, localOwner),
		Retry: retryConfig(cfg), SessionID: sess.Tree().Header().ID,
		Watchdog: watchdog(cfg, log, nil), Hooks: ext.Hooks(agent.Hooks{}),
	}, history)
	settings := compactionSettings(cfg)
	maint := sessionrun.Maintenance(settings,
		func(ctx context.Context, instructions string) (compaction.Result, error) {
			return sessionrun.Compact(ctx, sess.Tree(), head, a.Model(), settings, instructions, thinking)
		},
		func() ([]llm.Message, error) { return sessionrun.Messages(sess.Tree(), head) })
	return &chatRun{agent: a, maint: maint, sess: sess, rec: sessionrun.NewRunner(head, sessionrun.Options{}), header: sess.Tree().Header(),
		ext: ext, closeTools: tb.close}, nil
}

// prompt runs one user prompt, then the automatic compaction check. emit
// sees every event.
func (r *chatRun) prompt(ctx context.Context, text string, emit func(agent.Event)) error {
	wrapped := func(ev agent.Event) {
		r.maint.Observe(ev)
		if r.err == nil {
			if _, err := r.rec.Record(ev); err != nil {
				r.err = err
				r.agent.Abort()
			}
		}
		if emit != nil {
			emit(ev)
		}
	}
	if r.ext != nil {
		text = r.ext.Expand(text)
	}
	if err := r.agent.Prompt(ctx, wrapped, llm.UserText(text, time.Now().UnixMilli())); err != nil {
		return err
	}
	if r.err != nil {
		return fmt.Errorf("session: %w", r.err)
	}
	if err := r.maint.AfterRun(ctx, r.agent, wrapped); err != nil {
		return err
	}
	if r.err != nil {
		return fmt.Errorf("session: %w", r.err)
	}
	return nil
}

// lastAssistant returns the conversation's last assistant message.
func (r *chatRun) lastAssistant() (llm.Message, bool) {
	msgs := r.agent.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleAssistant {
			return msgs[i], true
		}
	}
	return llm.Message{}, false
}

// once is pi's print mode (-p) and JSON mode (--mode json).
func (c chatCmd) once(ctx context.Context, o chatOptions) error {
	cfg, _, err := c.loadConfig(o.configFile)
	if err != nil {
		return err
	}
	if o.session != "" {
		if o.session, err = c.sessionPath(o.session, o.configFile); err != nil {
			return err
		}
		unlock, err := lockForSession(cfg, o.session)
		if err != nil {
			return err
		}
		defer unlock()
	}
	run, err := c.open(ctx, o, cfg)
	if err != nil {
		return err
	}
	defer run.sess.Close()
	defer run.closeTools()
	var emit func(agent.Event)
	if o.mode == "json" {
		if err := writeJSONLine(c.stdout, run.header); err != nil {
			return err
		}
		emit = func(ev agent.Event) {
			if err := writeJSONLine(c.stdout, ev); err != nil {
				run.agent.Abort()
			}
		}
	}
	for _, p := range o.prompts {
		if err := run.prompt(ctx, p, emit); err != nil {
			return err
		}
	}
	if err := run.sess.Close(); err != nil {
		return err
	}
	last, ok := run.lastAssistant()
	if !ok {
		return errors.New("chat: the model gave no answer")
	}
	if last.StopReason == llm.StopError || last.StopReason == llm.StopAborted {
		msg := last.ErrorMessage
		if msg == "" {
			msg = "request " + string(last.StopReason)
		}
		if o.mode == "json" {
			return &exitError{code: 1}
		}
		return fmt.Errorf("%s (session %s)", msg, run.sess.Path())
	}
	if o.mode != "json" {
		text := strings.TrimRight(last.Text(), "\n")
		if _, err := fmt.Fprintln(c.stdout, text); err != nil {
			return err
		}
	}
	return nil
}

// writeJSONLine writes v's JSON and a newline. MarshalJSON is called
// directly so the output is not HTML-escaped (pi writes JSON.stringify).
func writeJSONLine(w io.Writer, v json.Marshaler) error {
	b, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
