package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/stream"
	"github.com/pibot/pibot/internal/otlp"
	"github.com/pibot/pibot/llm"
)

// run is one agent run for one location: it sets the agent up, runs it
// and delivers its reply, and it is how other goroutines stop it. What it
// shows in the chat is its reply (runReply, run_reply.go), what it writes
// to the session its journal (runJournal, run_journal.go), where its
// tools work its worktree (runWorktree, run_worktree.go).
type run struct {
	o      *owner
	loc    *location
	model  llm.Model
	ctx    context.Context
	cancel context.CancelFunc

	// agent runs the run; nil until the run set it up. Goroutines other
	// than the run's own load it.
	agent atomic.Pointer[agent.Agent]
	// reply is what the run shows in the chat.
	reply runReply
	// journal is what the run writes to the session.
	journal runJournal
	// wt is the git worktree the run works in.
	wt runWorktree

	// msgs are the chat messages the run answers (run_msgs.go).
	msgs runMessages
	// gate closes the agent's queues once the run has answered
	// (run_msgs.go).
	gate queueGate

	// prelude runs before the agent (a tool approved after a restart).
	prelude func(context.Context, *run) bool
	// payer is the user the run's spend is counted for, payerAgent the
	// agent when the gateway routes sessions to agents (spend.go).
	payer, payerAgent string
}

// newRunAt returns a run for loc of o that is not started: ctx is its
// context, cancel ends it.
func newRunAt(ctx context.Context, cancel context.CancelFunc, o *owner, loc *location, prelude func(context.Context, *run) bool) *run {
	r := &run{o: o, loc: loc, ctx: ctx, cancel: cancel, prelude: prelude, wt: runWorktree{o: o, loc: loc}}
	r.journal.open(o.sessionFile, loc, o.log)
	return r
}

// userMessage builds the user message of a pending item; receive
// downloads its files into ws (ownerDeps.receiveFile).
func userMessage(ctx context.Context, receive receiver, ws string, p *pending, ts int64) llm.Message {
	in := p.item.In
	text := in.Text
	var blocks []llm.Content
	for _, f := range in.Files {
		note, img := receive(ctx, ws, in.Conv, f)
		if img != nil {
			blocks = append(blocks, *img)
		}
		if note != "" {
			text += "\n\n" + note
		}
	}
	m := llm.UserText(strings.TrimSpace(text), ts)
	m.Content = append(m.Content, blocks...)
	return m
}

// execute runs the agent to the end and delivers the reply.
func (r *run) execute(ps []*pending) {
	o, loc := r.o, r.loc
	var parent string
	if len(ps) > 0 {
		parent = ps[len(ps)-1].item.Trace
	}
	ctx, span := o.cfg.Tracer.StartRemote(r.ctx, "pibot.run", parent)
	defer span.End()
	// From here a crash counts against these messages, and only them
	// (the messages that wait meanwhile are not to blame).
	o.begin(ctx, ps)
	span.Set("pibot.loc", loc.key)
	var replyTo *chat.MsgRef
	if len(ps) > 0 {
		if last := ps[len(ps)-1].item.In.Msg; last.ID != "" && last.Conv.Key() == loc.key {
			// (A channel message answered in the thread opened on it is
			// not replied to: it lives in another conversation.)
			replyTo = &last
		}
	}
	ad := o.adapters[loc.conv.Platform]
	if ad == nil {
		o.log.Error("no adapter for location", "loc", loc.key)
		r.agent.Store(agent.New(agent.Config{}, nil))
		return
	}
	var ctl *stream.Controller
	ctl = stream.New(ad, loc.conv, stream.Options{Verbosity: o.cfg.Verbosity, ReplyTo: replyTo, Recipient: r.recipient(ps),
		RecipientTeam: loc.conv.Workspace, FinalWait: o.cfg.FinalWait, Logger: o.log, Splitters: o.splitters,
		Continue: r.reply.resumes,
		// Each message of the reply is journaled as soon as the platform
		// posted it, before the next platform call (run_journal.go).
		OnPost: func() { r.journal.posted(ctl) },
		// Not a word more once the session's lease is lost, checked at
		// each call: another replica answers.
		Allowed: func() bool { return !r.reply.silenced() && leaseLive(o.lease) }})

	if ref := replyBranch(loc, ps); ref != nil {
		locHead{f: o.sessionFile, loc: loc}.branchTo(*ref)
	}
	// The branch's worktree first: uploads land in it.
	notice, wtErr := r.wt.open(ctx)
	prompts := r.prompts(ctx, ps)
	err := r.setUp(ctx, ps, prompts, ctl, span)
	if err == nil && wtErr != nil {
		o.log.Error("worktree", "loc", loc.key, "err", wtErr)
		err = errors.New("⚠️ This thread's git worktree could not be made or opened, so nothing was run (the details are in pibot's log)")
	}
	if err != nil {
		// Keep the user's message, and say what is missing.
		for _, t := range prompts {
			r.record(agent.Event{Type: agent.EventMessageEnd, Message: &t.Message, Tag: t.Tag})
		}
		if _, serr := ad.Send(ctx, loc.conv, chat.Out{Markdown: err.Error(), ReplyTo: replyTo}); serr != nil {
			o.log.Warn("send", "err", serr)
		}
		return
	}
	if err := r.reply.notice(ctx, ad, loc.conv, notice); err != nil {
		o.log.Warn("send", "err", err)
	}
	r.reply.ctl.Start(ctx)
	o.metrics.runStarted()
	defer func() {
		// The worktree's state after the run, unless nothing more is
		// recorded.
		if !r.journal.frozen() && !r.reply.silenced() {
			r.wt.close(context.WithoutCancel(ctx))
		}
	}()
	a := r.agent.Load()
	if r.prelude != nil {
		if !r.prelude(ctx, r) {
			r.deliver()
			return
		}
		if history, _, _, err := o.contextFor(loc); err == nil {
			a.SetMessages(history)
		}
	}
	start := time.Now()
	maint := r.maintenance()
	var ended []llm.Message // for the agent_end hooks
	emit := func(e agent.Event) {
		maint.Observe(e)
		if e.Type == agent.EventMessageEnd && e.Message != nil && o.agentConfig().Extensions != nil {
			ended = append(ended, *e.Message)
		}
		r.emit(e)
	}
	if len(prompts) == 0 {
		err = a.Continue(ctx, emit)
	} else {
		err = a.PromptTagged(ctx, emit, prompts...)
	}
	if err != nil {
		o.log.Error("agent run", "loc", loc.key, "err", err)
	}
	if r.reply.stopped() == "" && o.cfg.Compaction.Enabled {
		if err := maint.AfterRun(ctx, a, emit); err != nil {
			o.log.Warn("compaction", "loc", loc.key, "err", err)
		}
	}
	// The agent reads its queues no more: a message that arrives while the
	// reply is delivered starts the next run.
	r.gate.close()
	r.deliver()
	o.metrics.runEnded(time.Since(start))
	// agent_end hooks observe; they run after the reply is out.
	if ext := o.agentConfig().Extensions; ext != nil && len(ended) > 0 {
		ext.End(context.WithoutCancel(ctx), ended)
	}
}

// prompts are the user messages of ps the run prompts the agent with;
// messages already applied are done.
func (r *run) prompts(ctx context.Context, ps []*pending) []agent.Tagged {
	prompts := make([]agent.Tagged, 0, len(ps))
	for _, p := range ps {
		if p.applied {
			r.msgs.done(p)
			continue
		}
		r.msgs.wait(p)
		prompts = append(prompts, tagged(p, userMessage(ctx, r.o.receiveFile, r.wt.uploads(), p, time.Now().UnixMilli())))
	}
	return prompts
}

// setUp gives the run its agent (on the location's context) and ctl. An
// error is what the chat is told instead of an answer (no model, spend
// cap reached, a hook refused the run); the agent is set all the same.
// (Kept out of execute: the agent runs under execute's frame, deep in
// the goroutine's stack.)
func (r *run) setUp(ctx context.Context, ps []*pending, prompts []agent.Tagged, ctl *stream.Controller, span *otlp.Span) error {
	o, loc := r.o, r.loc
	history, thinking, modelRef, err := o.branchContext(loc)
	if err == nil {
		r.model, err = resolveModel(o.cfg, o.agentConfig().Model, o.models, modelRef)
	}
	r.payer = r.recipient(ps)
	if o.cfg.Route != nil {
		// Counted per agent only when the gateway routes sessions to
		// agents.
		r.payerAgent = o.agentRec().Name
	}
	if msg := o.spend.refusal(ctx, loc.conv, r.payer, r.payerAgent); err == nil && msg != "" {
		err = errors.New(msg)
		span.Set("pibot.spend_refused", true)
	}
	cfg := r.agentConfig(thinking)
	if err == nil {
		var add string
		add, err = beforeStart(ctx, o.agentConfig().Extensions, prompts)
		if err != nil && ctx.Err() != nil {
			err = nil // stopping: the run ends as every run at shutdown does
		}
		if err != nil {
			o.log.Warn("run refused by a hook", "loc", loc.key, "err", err)
			err = errors.New("⚠️ This request was not run: a hook refused it (the details are in pibot's log)")
		}
		cfg.SystemPrompt += add
	}
	span.Set("pibot.model", modelRef)
	span.Fail(err)
	// The agent takes history without a copy; it only appends to it. The
	// controller is published first: whoever finds the agent finds it.
	r.reply.setController(ctl)
	r.agent.Store(agent.Adopt(cfg, history))
	return err
}

// recipient is the user the reply is for (native streams in Slack channels
// need one): the sender of the last message, or for a resumed run, whose
// request it answers.
func (r *run) recipient(ps []*pending) string {
	if len(ps) > 0 {
		return ps[len(ps)-1].item.In.User.ID
	}
	return r.requester()
}

// interrupt aborts the run; note is shown on the reply.
func (r *run) interrupt(note string) {
	r.reply.stop(note)
	// A message that arrives from now on starts the next run rather than
	// steering this one, which will answer nothing more.
	r.gate.close()
	if a := r.agent.Load(); a != nil {
		a.Abort()
	}
}

// resolveModel returns the model ref names, def (the agent's model)
// when ref is "".
func resolveModel(cfg *Config, def string, models Models, ref string) (llm.Model, error) {
	if ref == "" {
		ref = def
	}
	if ref == "" || models == nil {
		help := cfg.NoModelHelp
		if help == "" {
			help = "No model is configured. Set `agent.model` (provider/model) in the config file, or OPENAI_API_KEY / ANTHROPIC_API_KEY in the environment, and restart pibot."
		}
		return nil, fmt.Errorf("⚠️ %s", help)
	}
	m, err := models.Model(ref)
	if err != nil {
		return nil, fmt.Errorf("⚠️ Model %s is not usable: %v", ref, err)
	}
	return m, nil
}

// hooks are the agent hooks of r: the approvals, with the extensions'
// tool hooks around them.
func (r *run) hooks() agent.Hooks {
	// Spend caps: every model call is reserved and counted (spend.go).
	site := runSite{locSite{r.o, r.loc}, r}
	h := agent.Hooks{BeforeToolCall: site.beforeToolCall, BeforeModelCall: r.o.spend.beforeCall(r.loc.conv, r.payer, r.payerAgent)}
	if ext := r.o.agentConfig().Extensions; ext != nil {
		h = ext.Hooks(h)
	}
	return h
}

func (r *run) agentConfig(thinking llm.ThinkingLevel) agent.Config {
	o := r.o
	cfg := agent.Config{
		Model:        r.model,
		Thinking:     thinking,
		SystemPrompt: o.agentConfig().SystemPrompt() + r.wt.prompt(),
		Tools:        o.agentConfig().Tools(r.toolRun()),
		Retry:        o.cfg.Retry,
		Watchdog:     o.cfg.Watchdog,
		SessionID:    r.o.sess.Tree().Header().ID,
		Hooks:        r.hooks(),
	}
	if r.model != nil {
		cfg.Thinking = r.model.Info().ClampThinking(thinking)
	}
	return cfg
}
