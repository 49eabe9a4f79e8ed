package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
)

// Extensions are what an operator plugs into the runs: prompt templates
// offered as commands, skill and template expansion, and hooks.
// cmd/pibot builds them (agent/skills, agent/hooks); nil means none.
type Extensions interface {
	// Commands are the prompt templates and, named "skill:NAME", the
	// skills: commands whose text is a message, expanded by Input.
	// Skills are listed in /help only (no platform menu takes ':').
	Commands() []chat.CommandSpec
	// Input turns a chat message into the prompt: the input hooks, then
	// "/skill:NAME" and template expansion. handled means the hooks
	// answered it with reply instead (no run). An error refuses the
	// message (a hook that fails closed).
	Input(ctx context.Context, in chat.Inbound) (text, reply string, handled bool, err error)
	// BeforeStart returns text to add to the system prompt of a run
	// whose prompt is prompt (before_agent_start hooks). An error
	// refuses the run.
	BeforeStart(ctx context.Context, prompt string) (string, error)
	// Hooks returns h with the tool hooks around it.
	Hooks(h agent.Hooks) agent.Hooks
	// End tells the hooks a run ended, with the messages it added.
	End(ctx context.Context, msgs []llm.Message)
	// Review describes (in Markdown) the workspace files that go into
	// the system prompt or become commands, those that wait for an
	// owner's approval first; hash approves exactly those (Approve), ""
	// when none waits.
	Review() (md, hash string)
	// Approve approves the workspace files Review gave hash for, on
	// behalf of by; the answer says what happened. An error means the
	// approval could not be recorded.
	Approve(hash, by string) (string, error)
}

// templateNameRE matches a template name every platform takes as a
// command (Telegram's set: a-z, 0-9, _).
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var templateNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_]{1,32}$`) })

// maxCommands is the most commands a platform menu takes (Telegram's
// setMyCommands refuses more than 100).
const maxCommands = 100

// templateCommands are the commands of the prompt templates: usable by
// anyone (their text becomes a message, with the rights of a message).
// A template whose name is taken or is no command name is skipped with a
// log line.
func templateCommands(ext Extensions, builtin []command, log *slog.Logger) []command {
	if ext == nil {
		return nil
	}
	var out []command
	taken := map[string]bool{}
	for _, c := range builtin {
		taken[c.name] = true
	}
	for _, s := range ext.Commands() {
		if strings.HasPrefix(s.Name, "skill:") && !strings.ContainsAny(s.Name, " \t\n") {
			out = append(out, command{name: s.Name, args: "[text]", help: helpOf(s), intake: true, message: true, noMenu: true})
			continue
		}
		switch {
		case !templateNameRE().MatchString(s.Name):
			log.Warn("prompt template not offered as a command: its name must be 1-32 characters of a-z, 0-9 and _", "name", s.Name)
			continue
		case taken[s.Name]:
			log.Warn("prompt template not offered as a command: the name is taken", "name", s.Name)
			continue
		case len(taken) >= maxCommands:
			log.Warn("prompt template not offered as a command: a platform menu takes at most 100 commands", "name", s.Name)
			continue
		}
		taken[s.Name] = true
		out = append(out, command{name: s.Name, help: helpOf(s), intake: true, message: true})
	}
	return out
}

// helpOf is the help line of a template or skill: its description, at
// most 100 characters (Discord's limit), or a word on what it is.
func helpOf(s chat.CommandSpec) string {
	help := strings.Join(strings.Fields(s.Description), " ")
	switch {
	case help == "" && strings.HasPrefix(s.Name, "skill:"):
		return "skill"
	case help == "":
		return "prompt template"
	case utf8.RuneCountInString(help) > 100:
		return string([]rune(help)[:99]) + "…"
	}
	return help
}

// messageText is the text of a message command's item: the command as the
// template expansion expects it.
func messageText(c *chat.Command) string {
	return strings.TrimSpace("/" + c.Name + " " + c.Args)
}

// inputOutcome is what applyInput made of a message.
type inputOutcome int

const (
	// inputRun: route the message (its text possibly changed).
	inputRun inputOutcome = iota
	// inputAnswered: a hook handled or refused it; acknowledge it.
	inputAnswered
	// inputLater: pibot is stopping; the message stays in the inbox.
	inputLater
)

// applyInput runs ext.Input on a message item before it is routed.
func applyInput(ctx context.Context, ext Extensions, log *slog.Logger, item *inboxItem, reply func(string)) inputOutcome {
	if ext == nil || item.In.Text == "" {
		return inputRun
	}
	text, answer, handled, err := ext.Input(ctx, item.In)
	switch {
	case err != nil && ctx.Err() != nil:
		return inputLater
	case err != nil:
		log.Warn("message refused by a hook", "conv", item.In.Conv.Key(), "err", err)
		reply("⚠️ This message was not processed: a hook refused it (the details are in pibot's log).")
		return inputAnswered
	case handled:
		if answer != "" {
			reply(answer)
		}
		return inputAnswered
	}
	item.In.Text = text
	return inputRun
}

// beforeStart asks the hooks what to add to the system prompt of a run
// with prompts.
func beforeStart(ctx context.Context, ext Extensions, prompts []agent.Tagged) (string, error) {
	if ext == nil {
		return "", nil
	}
	var texts []string
	for _, p := range prompts {
		texts = append(texts, p.Message.Text())
	}
	add, err := ext.BeforeStart(ctx, strings.Join(texts, "\n\n"))
	if err != nil {
		return "", err
	}
	if add != "" {
		add = "\n\n" + add
	}
	return add, nil
}

// cmdExtensions shows the workspace files that go into the system prompt
// or become commands and those waiting for approval; "/extensions approve
// HASH" approves exactly the files shown with that hash (owners).
func cmdExtensions(ctx context.Context, c *invocation) {
	ext := c.cmds.ext
	if ext == nil {
		c.tell(ctx, "No skills, prompt templates or project context are configured.")
		return
	}
	if c.arg == "" {
		md, _ := ext.Review()
		c.tell(ctx, "%s", md)
		return
	}
	verb, hash, _ := strings.Cut(c.arg, " ")
	if verb != "approve" || strings.TrimSpace(hash) == "" {
		c.tell(ctx, "Usage: `/extensions` to look, `/extensions approve HASH` to approve the files it lists.")
		return
	}
	if !c.cmds.rights.IsOwner(c.in.Conv.Platform, c.in.User.ID) {
		c.tell(ctx, "Only an owner of this bot can approve workspace files.")
		return
	}
	by := fmt.Sprintf("%s:%s (%s)", c.in.Conv.Platform, c.in.User.ID, displayName(c.in.User))
	answer, err := ext.Approve(strings.TrimSpace(hash), by)
	if err != nil {
		c.failed(ctx, "recording the approval", err)
		return
	}
	c.tell(ctx, "%s", answer)
}
