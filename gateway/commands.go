package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// customQueue records a location's queue mode in the session.
const customQueue = "pibot.queue"

type command struct {
	name, args, help string
}

var commands = []command{
	{"help", "", "show this help"},
	{"new", "", "start a new session here"},
	{"stop", "", "stop the current run"},
	{"steer", "TEXT", "steer the current run with TEXT"},
	{"followup", "TEXT", "run TEXT after the current run"},
	{"queue", "[steer|followup|collect|interrupt|list|drop]", "show or set what happens to messages sent while I work"},
	{"model", "[provider/model]", "show or switch the model"},
	{"thinking", "[off|minimal|low|medium|high|xhigh]", "show or set the thinking level"},
	{"compact", "[instructions]", "summarise older messages to free context"},
	{"tree", "", "show the branches of this session"},
	{"fork", "", "branch from a message (reply to it with /fork)"},
	{"status", "", "show session, model and queue state"},
	{"usage", "", "show tokens and cost of this branch"},
	{"approve", "[id]", "approve the pending tool call"},
	{"deny", "[id]", "deny the pending tool call"},
	{"whoami", "", "show your user id and rights"},
}

func commandSpecs() []chat.CommandSpec {
	out := make([]chat.CommandSpec, len(commands))
	for i, c := range commands {
		out[i] = chat.CommandSpec{Name: c.name, Description: c.help}
	}
	return out
}

func helpText() string {
	var b strings.Builder
	b.WriteString("**Commands**\n\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "- `/%s", c.name)
		if c.args != "" {
			b.WriteString(" " + c.args)
		}
		fmt.Fprintf(&b, "` — %s\n", c.help)
	}
	b.WriteString("\nReply to an earlier message to branch the conversation from there.")
	b.WriteString("\n\nIn a group, `/new`, `/compact`, `/fork`, the branch buttons of `/tree` and changing `/model`, `/thinking` or `/queue` are for owners; `/stop` is for owners and the person whose request is running.")
	return b.String()
}

// handleCommand runs a command. For /steer and /followup it returns the
// queue mode and handled=false: the text then goes through the inbox.
func (g *Gateway) handleCommand(ctx context.Context, in chat.Inbound) (string, bool) {
	c := in.Command
	say := func(format string, args ...any) { g.reply(ctx, in, fmt.Sprintf(format, args...)) }
	if c.Name != "start" && !slices.ContainsFunc(commands, func(x command) bool { return x.name == c.Name }) {
		say("Unknown command `/%s`. Send /help for the list.", c.Name)
		return "", true
	}
	if ownersOnlyInGroup(c) && !in.Conv.DM && !g.access.IsOwner(in.Conv.Platform, in.User.ID) {
		say("Only an owner of this bot can use `/%s%s` in a group: it changes the conversation for everyone here.", c.Name, argHint(c))
		return "", true
	}
	switch c.Name {
	case "steer", "followup":
		if strings.TrimSpace(c.Args) == "" {
			say("Usage: `/%s TEXT`", c.Name)
			return "", true
		}
		if c.Name == "steer" {
			return modeSteer, false
		}
		return modeFollowup, false
	case "help", "start":
		say("%s", helpText())
	case "whoami":
		role := "not allowed"
		switch {
		case g.access.IsOwner(in.Conv.Platform, in.User.ID):
			role = "owner: every command, everywhere"
		case g.access.Known(in.Conv.Platform, in.User.ID) && in.Conv.DM:
			role = "allowed user: every command in this chat"
		case !in.Conv.DM:
			role = "member of this group: /help, /whoami, /status, /usage, /tree, /queue, /model and /thinking to look, /steer, /followup, and /stop of your own request"
		}
		say("You are `%s:%s` (%s), %s.", in.Conv.Platform, in.User.ID, displayName(in.User), role)
	case "new":
		g.cmdNew(ctx, in)
	case "approve", "deny":
		g.cmdDecide(ctx, in)
	default:
		var o *owner
		var loc *location
		switch c.Name {
		case "queue", "model", "thinking":
			var err error
			if o, loc, err = g.locate(ctx, in); err != nil {
				g.failed(ctx, in, "opening this conversation's session", err)
				return "", true
			}
		default:
			o, loc = g.existing(ctx, in)
		}
		if o == nil {
			say("There is no session here yet. Send a message to start one.")
			return "", true
		}
		g.locationCommand(ctx, in, o, loc)
	}
	return "", true
}

// ownersOnlyInGroup reports whether c changes a group's shared
// conversation or settings: in a group only owners may run it (in a DM the
// user may, it is their own conversation). Looking (/model, /thinking,
// /queue without an argument or with list) is for everyone.
func ownersOnlyInGroup(c *chat.Command) bool {
	arg := strings.TrimSpace(c.Args)
	switch c.Name {
	case "new", "compact", "fork":
		return true
	case "model", "thinking":
		return arg != ""
	case "queue":
		return arg != "" && arg != "list"
	}
	return false
}

func argHint(c *chat.Command) string {
	if arg, _, _ := strings.Cut(strings.TrimSpace(c.Args), " "); arg != "" && (c.Name == "queue" || c.Name == "thinking") {
		return " " + arg
	}
	return ""
}

// failed tells the chat that something went wrong without the details
// (which can hold server paths) and logs them.
func (g *Gateway) failed(ctx context.Context, in chat.Inbound, doing string, err error) {
	g.log.Error("command failed", "conv", in.Conv.Key(), "doing", doing, "err", err)
	g.reply(ctx, in, "⚠️ Something went wrong "+doing+"; the details are in pibot's log.")
}

// existing returns the owner and location of in's conversation, if bound.
func (g *Gateway) existing(ctx context.Context, in chat.Inbound) (*owner, *location) {
	path, ok := g.index.get(in.Conv.Key())
	if !ok {
		return nil, nil
	}
	o, err := g.owner(ctx, path)
	if err != nil {
		return nil, nil
	}
	return o, o.location(in.Conv.Key(), in.Conv)
}

func (g *Gateway) cmdNew(ctx context.Context, in chat.Inbound) {
	if o, loc := g.existing(ctx, in); o != nil {
		o.mu.Lock()
		r := loc.run
		o.mu.Unlock()
		if r != nil {
			r.interrupt("stopped by /new")
		}
	}
	if err := g.index.set(in.Conv.Key(), ""); err != nil {
		g.failed(ctx, in, "starting a new session", err)
		return
	}
	g.reply(ctx, in, "🆕 New session. The previous one is kept; this conversation starts fresh.")
}

func (g *Gateway) cmdDecide(ctx context.Context, in chat.Inbound) {
	d := decideOnce
	if in.Command.Name == "deny" {
		d = decideDeny
	}
	id := strings.TrimSpace(in.Command.Args)
	if id == "" {
		g.approval.mu.Lock()
		for _, ap := range g.approval.pending {
			if ap.loc != nil && ap.loc.key == in.Conv.Key() {
				id = ap.ID
			}
		}
		g.approval.mu.Unlock()
	}
	if id == "" {
		g.reply(ctx, in, "Nothing is waiting for approval here.")
		return
	}
	toast, then := g.decide(ctx, in, id, d)
	if then != nil {
		then()
	}
	g.reply(ctx, in, toast)
}

// locationCommand runs a command that acts on an existing location.
func (g *Gateway) locationCommand(ctx context.Context, in chat.Inbound, o *owner, loc *location) {
	c := in.Command
	arg := strings.TrimSpace(c.Args)
	say := func(format string, args ...any) { g.reply(ctx, in, fmt.Sprintf(format, args...)) }
	o.mu.Lock()
	r := loc.run
	o.mu.Unlock()
	switch c.Name {
	case "stop":
		if !in.Conv.DM && !g.access.IsOwner(in.Conv.Platform, in.User.ID) {
			// A member may stop the run they asked for; the queue is
			// everyone's and stays.
			switch {
			case r == nil:
				say("Nothing is running.")
			case r.requester() != in.User.ID:
				say("Only an owner, or the person whose request is running, can stop it.")
			default:
				r.interrupt("stopped by /stop")
				say("⏹ Stopping.")
			}
			return
		}
		n := o.dropQueued(loc)
		if r == nil {
			say("Nothing is running.%s", droppedNote(n))
			return
		}
		r.interrupt("stopped by /stop")
		say("⏹ Stopping.%s", droppedNote(n))
	case "queue":
		g.cmdQueue(ctx, in, o, loc, arg)
	case "model":
		g.cmdModel(ctx, in, o, loc, arg)
	case "thinking":
		g.cmdThinking(ctx, in, o, loc, arg)
	case "compact":
		if r != nil {
			say("A run is active; /stop it first or wait.")
			return
		}
		_, _, ref, err := o.contextFor(loc)
		var m llm.Model
		if err == nil {
			m, err = (&run{o: o}).resolveModel(ref)
		}
		if err == nil {
			err = o.compact(ctx, loc, m, arg)
		}
		if err != nil {
			g.failed(ctx, in, "compacting", err)
			return
		}
		say("🗜 Compacted.")
	case "tree":
		g.cmdTree(ctx, in, o, loc)
	case "fork":
		g.cmdFork(ctx, in, o, loc)
	case "status":
		g.cmdStatus(ctx, in, o, loc)
	case "usage":
		g.cmdUsage(ctx, in, o, loc)
	}
}

func droppedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" Dropped %d queued message(s).", n)
}

func (g *Gateway) cmdQueue(ctx context.Context, in chat.Inbound, o *owner, loc *location, arg string) {
	switch {
	case arg == "" || arg == "list":
		o.mu.Lock()
		mode := loc.mode
		o.mu.Unlock()
		q := o.queuedTexts(loc)
		if len(q) == 0 {
			g.reply(ctx, in, fmt.Sprintf("Queue mode: **%s**. Nothing queued.", mode))
			return
		}
		g.reply(ctx, in, fmt.Sprintf("Queue mode: **%s**. Queued:\n\n- %s", mode, strings.Join(q, "\n- ")))
	case arg == "drop":
		g.reply(ctx, in, fmt.Sprintf("Dropped %d queued message(s).", o.dropQueued(loc)))
	case slices.Contains(queueModes, arg):
		data, _ := json.Marshal(map[string]string{"mode": arg})
		if _, err := o.append(loc, session.Entry{Type: session.TypeCustom, CustomType: customQueue, Data: data}, session.SyncAlways); err != nil {
			g.failed(ctx, in, "saving the queue mode", err)
			return
		}
		o.mu.Lock()
		loc.mode = arg
		o.mu.Unlock()
		g.reply(ctx, in, fmt.Sprintf("Queue mode set to **%s**.", arg))
	default:
		g.reply(ctx, in, "Usage: `/queue [steer|followup|collect|interrupt|list|drop]`")
	}
}

func (g *Gateway) cmdModel(ctx context.Context, in chat.Inbound, o *owner, loc *location, arg string) {
	_, _, ref, _ := o.contextFor(loc)
	if ref == "" {
		ref = g.cfg.Model
	}
	if arg == "" {
		g.reply(ctx, in, fmt.Sprintf("Model: `%s`. Switch with `/model provider/model`.", ref))
		return
	}
	if g.models == nil {
		g.reply(ctx, in, "No models are configured.")
		return
	}
	m, err := g.models.Model(arg)
	if err != nil {
		g.reply(ctx, in, "⚠️ "+err.Error())
		return
	}
	info := m.Info()
	if _, err := o.append(loc, session.Entry{Type: session.TypeModelChange, Provider: info.Provider, ModelID: info.ID}, session.SyncAlways); err != nil {
		g.failed(ctx, in, "saving the model", err)
		return
	}
	o.mu.Lock()
	loc.model = info.Ref()
	o.mu.Unlock()
	g.reply(ctx, in, fmt.Sprintf("Model set to `%s`.", info.Ref()))
}

func (g *Gateway) cmdThinking(ctx context.Context, in chat.Inbound, o *owner, loc *location, arg string) {
	_, cur, _, _ := o.contextFor(loc)
	if arg == "" {
		g.reply(ctx, in, fmt.Sprintf("Thinking: **%s**.", cur))
		return
	}
	if !slices.Contains(llm.ThinkingLevels[:], llm.ThinkingLevel(arg)) {
		g.reply(ctx, in, "Usage: `/thinking off|minimal|low|medium|high|xhigh`")
		return
	}
	if _, err := o.append(loc, session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: arg}, session.SyncAlways); err != nil {
		g.failed(ctx, in, "saving the thinking level", err)
		return
	}
	g.reply(ctx, in, fmt.Sprintf("Thinking set to **%s**.", arg))
}

func (g *Gateway) cmdStatus(ctx context.Context, in chat.Inbound, o *owner, loc *location) {
	msgs, thinking, ref, err := o.contextFor(loc)
	if err != nil {
		g.failed(ctx, in, "reading the session", err)
		return
	}
	if ref == "" {
		ref = g.cfg.Model
	}
	o.mu.Lock()
	running, mode := loc.run != nil, loc.mode
	o.mu.Unlock()
	state := "idle"
	if running {
		state = "running"
	}
	name := o.sess.Name()
	if name == "" {
		name = o.sess.Header().ID
	}
	// No server paths: the session is named by its name or id.
	g.reply(ctx, in, fmt.Sprintf("**Session** %s\n- head: `%s`, %d messages in context\n- model: `%s`, thinking %s\n- queue mode: %s, %s",
		name, o.head(loc), len(msgs), ref, thinking, mode, state))
}

func (g *Gateway) cmdUsage(ctx context.Context, in chat.Inbound, o *owner, loc *location) {
	branch, err := o.sess.Branch(o.head(loc))
	if err != nil {
		g.failed(ctx, in, "reading the session", err)
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
	g.reply(ctx, in, fmt.Sprintf("**Usage of this branch** (%d model calls)\n- input %d, output %d, cache read %d, cache write %d tokens\n- cost $%.4f",
		calls, u.Input, u.Output, u.CacheRead, u.CacheWrite, u.Cost.Total))
}
