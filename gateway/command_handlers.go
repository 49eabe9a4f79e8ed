package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// customQueue records a location's queue mode in the session.
const customQueue = "pibot.queue"

// The handlers of the command table (command_tree.go has /tree and /fork).

func cmdHelp(ctx context.Context, c *invocation) { c.tell(ctx, "%s", c.cmds.helpText()) }

func cmdWhoami(ctx context.Context, c *invocation) {
	in, rights := c.in, c.cmds.rights
	known, err := rights.Known(ctx, in.Conv.Platform, in.User.ID)
	if err != nil {
		c.failed(ctx, "looking you up", err)
		return
	}
	role := "not allowed"
	switch {
	case rights.IsOwner(in.Conv.Platform, in.User.ID):
		role = "owner: every command, everywhere"
	case known && in.Conv.DM:
		role = "allowed user: every command in this chat"
	case !in.Conv.DM:
		role = "member of this group: /help, /whoami, /status, /usage, /tree, /queue, /model, /thinking and /limits to look, /steer, /followup, and /stop of your own request"
	}
	group := ""
	if !in.Conv.DM {
		group = fmt.Sprintf("\n\nThis group is `%s:%s` (the form `access.groups` lists).", in.Conv.Platform, in.Conv.Channel)
	}
	c.tell(ctx, "You are `%s:%s` (%s), %s.%s", in.Conv.Platform, in.User.ID, displayName(in.User), role, group)
}

func cmdNew(ctx context.Context, c *invocation) {
	if c.run != nil {
		c.run.interrupt("stopped by /new")
	}
	if err := c.cmds.sessions.unbind(ctx, c.conv.Key()); err != nil {
		c.failed(ctx, "starting a new session", err)
		return
	}
	c.say(ctx, "🆕 New session. The previous one is kept; this conversation starts fresh.")
}

func cmdDecide(ctx context.Context, c *invocation) {
	d := decideOnce
	if c.name == "deny" {
		d = decideDeny
	}
	id := c.arg
	if id == "" {
		id = c.cmds.approvals.waitingIn(c.conv.Key())
	}
	if id == "" {
		c.tell(ctx, "Nothing is waiting for approval here.")
		return
	}
	toast, then := c.cmds.approvals.decide(ctx, c.in, id, d)
	if then == nil {
		// Nothing was decided: only the sender needs to know why.
		c.tell(ctx, "%s", toast)
		return
	}
	then()
	c.say(ctx, "%s", toast)
}

// cmdStop stops the run. With every right it also drops the queue; a
// member stops only their own request (the dispatcher checked it is
// theirs), and the queue, which is everyone's, stays.
func cmdStop(ctx context.Context, c *invocation) {
	if !c.full {
		if c.run == nil {
			c.tell(ctx, "Nothing is running.")
			return
		}
		c.run.interrupt("stopped by /stop")
		c.say(ctx, "⏹ Stopping.")
		return
	}
	n := c.o.queue.dropQueued(c.loc)
	if c.run == nil {
		if n == 0 {
			c.tell(ctx, "Nothing is running.")
			return
		}
		c.say(ctx, "Nothing is running.%s", droppedNote(n))
		return
	}
	c.run.interrupt("stopped by /stop")
	c.say(ctx, "⏹ Stopping.%s", droppedNote(n))
}

func droppedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" Dropped %s.", plural(n, "queued message"))
}

func cmdQueue(ctx context.Context, c *invocation) {
	o, loc, arg := c.o, c.loc, c.arg
	switch {
	case arg == "" || arg == "list":
		mode := o.state(loc).mode
		q := o.queue.queuedTexts(loc)
		if len(q) == 0 {
			c.tell(ctx, "Queue mode: **%s**. Nothing queued.", mode)
			return
		}
		c.tell(ctx, "Queue mode: **%s**. Queued:\n\n- %s", mode, strings.Join(q, "\n- "))
	case arg == "drop":
		c.say(ctx, "Dropped %s.", plural(o.queue.dropQueued(loc), "queued message"))
	case slices.Contains(queueModes, arg):
		data, _ := json.Marshal(map[string]string{"mode": arg})
		if _, err := o.append(loc, session.Entry{Type: session.TypeCustom, CustomType: customQueue, Data: data}, session.SyncAlways); err != nil {
			c.failed(ctx, "saving the queue mode", err)
			return
		}
		o.setMode(loc, arg)
		c.say(ctx, "Queue mode set to **%s**.", arg)
	default:
		c.tell(ctx, "Usage: `/queue [steer|followup|collect|interrupt|list|drop]`")
	}
}

func cmdModel(ctx context.Context, c *invocation) {
	o, loc, arg := c.o, c.loc, c.arg
	_, _, ref, _ := o.contextFor(loc)
	if ref == "" {
		ref = c.cmds.model
	}
	if arg == "" && ref == "" {
		c.tell(ctx, "Model: none configured. %s", noModelHint(o.cfg.NoModelHelp))
		return
	}
	if arg == "" {
		c.tell(ctx, "Model: `%s`. Switch with `/model provider/model`.", ref)
		return
	}
	if c.cmds.models == nil {
		c.tell(ctx, "No models are configured.")
		return
	}
	m, err := c.cmds.models.Model(arg)
	if err != nil {
		c.tell(ctx, "%s", "⚠️ "+err.Error())
		return
	}
	info := m.Info()
	if _, err := o.append(loc, session.Entry{Type: session.TypeModelChange, Provider: info.Provider, ModelID: info.ID}, session.SyncAlways); err != nil {
		c.failed(ctx, "saving the model", err)
		return
	}
	o.setModel(loc, info.Ref())
	c.say(ctx, "Model set to `%s`.", info.Ref())
}

func cmdThinking(ctx context.Context, c *invocation) {
	_, cur, _, _ := c.o.contextFor(c.loc)
	if c.arg == "" {
		c.tell(ctx, "Thinking: **%s**.", cur)
		return
	}
	if !slices.Contains(llm.ThinkingLevels[:], llm.ThinkingLevel(c.arg)) {
		c.tell(ctx, "Usage: `/thinking off|minimal|low|medium|high|xhigh`")
		return
	}
	if _, err := c.o.append(c.loc, session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: c.arg}, session.SyncAlways); err != nil {
		c.failed(ctx, "saving the thinking level", err)
		return
	}
	c.say(ctx, "Thinking set to **%s**.", c.arg)
}

func cmdCompact(ctx context.Context, c *invocation) {
	if c.run != nil {
		c.tell(ctx, "A run is active; /stop it first or wait.")
		return
	}
	o, loc := c.o, c.loc
	if c.replay && compactedLast(o, loc) {
		// Replayed after a crash that came after its compaction was
		// written: the model is not asked twice.
		c.say(ctx, "🗜 Compacted.")
		return
	}
	_, _, ref, err := o.contextFor(loc)
	var m llm.Model
	if err == nil {
		m, err = resolveModel(o.cfg, o.agentConfig().Model, o.models, ref)
	}
	if err == nil {
		_, err = locHead{f: o.sessionFile, loc: loc}.compact(ctx, m, o.cfg.Compaction, c.arg)
	}
	switch {
	case errors.Is(err, compaction.ErrNothingToCompact):
		c.tell(ctx, "Nothing to compact: the conversation is short enough to keep as it is (the most recent %d tokens are always kept).", o.cfg.Compaction.KeepRecentTokens)
		return
	case errors.Is(err, compaction.ErrAlreadyCompacted):
		c.tell(ctx, "Nothing to compact: nothing was said since the last compaction.")
		return
	case err != nil:
		c.failed(ctx, "compacting", err)
		return
	}
	c.say(ctx, "🗜 Compacted.")
}

func cmdStatus(ctx context.Context, c *invocation) {
	o, loc := c.o, c.loc
	msgs, thinking, ref, err := o.contextFor(loc)
	if err != nil {
		c.failed(ctx, "reading the session", err)
		return
	}
	if ref == "" {
		ref = c.cmds.model
	}
	st := o.state(loc)
	running, mode := st.run != nil, st.mode
	state := "idle"
	if running {
		state = "running"
	}
	name := o.tree().Name()
	if name == "" {
		name = o.tree().Header().ID
	}
	model := "`" + ref + "`"
	if ref == "" {
		model = "none configured (" + noModelHint(o.cfg.NoModelHelp) + ")"
	}
	waiting := ""
	if ext := c.cmds.ext; ext != nil && c.cmds.rights.IsOwner(c.in.Conv.Platform, c.in.User.ID) {
		if _, hash := ext.Review(); hash != "" {
			waiting = "\n- ⏳ workspace files wait for an owner's approval and are not used: `/extensions`"
		}
	}
	waiting = worktreeStatus(o, loc) + waiting
	if o.cfg.Route != nil {
		rec := o.agentRec()
		waiting = fmt.Sprintf("\n- agent: `%s` (%s)", rec.Name, agentWhy(rec)) + waiting
	}
	// No server paths: the session is named by its name or id.
	c.tell(ctx, "**Session** %s\n- head: `%s`, %s in context\n- model: %s, thinking %s\n- queue mode: %s, %s%s",
		name, o.head(loc), plural(len(msgs), "message"), model, thinking, mode, state, waiting)
}

// noModelHint is how to configure a model: the deployment's help text, or
// the config key.
func noModelHint(help string) string {
	if help = strings.TrimPrefix(help, "No model is configured. "); help != "" {
		return help
	}
	return "set `agent.model` to provider/model in the configuration"
}

// plural is "1 message", "2 messages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func cmdUsage(ctx context.Context, c *invocation) {
	branch, err := c.o.view(c.loc).branch()
	if err != nil {
		c.failed(ctx, "reading the session", err)
		return
	}
	var u llm.Usage
	calls := 0
	for _, e := range branch {
		if e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleAssistant {
			calls++
			mu := e.Message.Usage
			u.Input += mu.Input
			u.Output += mu.Output
			u.CacheRead += mu.CacheRead
			u.CacheWrite += mu.CacheWrite
			u.Cost.Total += mu.Cost.Total
		}
	}
	c.tell(ctx, "**Usage of this branch** (%s)\n- input %d, output %d, cache read %d, cache write %d tokens\n- cost $%.4f",
		plural(calls, "model call"), u.Input, u.Output, u.CacheRead, u.CacheWrite, u.Cost.Total)
}

// compactedLast reports whether the latest compaction on loc's branch
// comes after its latest message (markers such as a lease takeover may
// follow it).
func compactedLast(o *owner, loc *location) bool {
	branch, err := o.view(loc).branch()
	if err != nil {
		return false
	}
	for i := len(branch) - 1; i >= 0; i-- {
		switch branch[i].Type {
		case session.TypeCompaction:
			return true
		case session.TypeMessage, session.TypeCustomMessage:
			return false
		}
	}
	return false
}
