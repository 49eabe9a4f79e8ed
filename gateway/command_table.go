package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/pibot/pibot/chat"
)

// right says who may use a command in one kind of conversation. Everyone
// meant has passed the access check already.
type right int

const (
	// rightAnyone: everyone.
	rightAnyone right = iota
	// rightOwnersToChange: everyone may look (an argument listed in
	// command.looks); only owners may change.
	rightOwnersToChange
	// rightOwnersOrRequester: owners, and the person whose request is
	// running, for that request only.
	rightOwnersOrRequester
	// rightOwners: owners only.
	rightOwners
)

// need says which session a command acts on.
type need int

const (
	// sessionNone: the command needs no session.
	sessionNone need = iota
	// sessionIfBound: the conversation's session if it has one.
	sessionIfBound
	// sessionBound: the conversation's session; without one the command
	// says so.
	sessionBound
	// sessionOpen: the conversation's session, started if it has none.
	sessionOpen
)

// command is one entry of the command table.
type command struct {
	name string
	args string // shown in /help after the name
	help string // what it does, for /help and the platform's command list
	// hidden commands work but are not listed (/start).
	hidden bool
	// noMenu commands are in /help but not in the platforms' menus
	// (/skill:NAME, which no menu takes).
	noMenu bool
	// dm and group say who may use it in DMs and in groups.
	dm, group right
	// looks lists the arguments that only look, for rightOwnersToChange.
	looks []string
	// echoArg: a refusal repeats the first word of the arguments.
	echoArg bool
	session need
	// intake: the command touches no session and is answered when it
	// arrives; every other command waits its turn in the mailbox of its
	// location (it may be executed later, by the session's owner).
	intake bool
	// queue, if set, makes the command's text a message with that queue
	// mode (/steer, /followup); handle is then nil.
	queue string
	// message: the command's whole text is a message (a prompt
	// template, expanded before the run); handle is then nil.
	message bool
	handle  func(ctx context.Context, c *invocation)
}

// commandTable lists the commands in /help order.
func commandTable() []command {
	return []command{
		{name: "help", help: "show this help", intake: true, handle: cmdHelp},
		{name: "new", help: "start a new session here", group: rightOwners, session: sessionIfBound, handle: cmdNew},
		{name: "stop", help: "stop the current run", group: rightOwnersOrRequester, session: sessionBound, handle: cmdStop},
		{name: "steer", args: "TEXT", help: "steer the current run with TEXT", intake: true, queue: modeSteer},
		{name: "followup", args: "TEXT", help: "run TEXT after the current run", intake: true, queue: modeFollowup},
		{name: "queue", args: "[steer|followup|collect|interrupt|list|drop]", help: "show or set what happens to messages sent while I work",
			group: rightOwnersToChange, looks: []string{"", "list"}, echoArg: true, session: sessionOpen, handle: cmdQueue},
		{name: "model", args: "[provider/model]", help: "show or switch the model",
			group: rightOwnersToChange, looks: []string{""}, session: sessionOpen, handle: cmdModel},
		{name: "thinking", args: "[off|minimal|low|medium|high|xhigh]", help: "show or set the thinking level",
			group: rightOwnersToChange, looks: []string{""}, echoArg: true, session: sessionOpen, handle: cmdThinking},
		{name: "compact", args: "[instructions]", help: "summarise older messages to free context", group: rightOwners, session: sessionBound, handle: cmdCompact},
		{name: "tree", help: "show the branches of this session", session: sessionBound, handle: cmdTree},
		{name: "fork", help: "branch from a message (reply to it with /fork)", group: rightOwners, session: sessionBound, handle: cmdFork},
		{name: "status", help: "show session, model and queue state", session: sessionBound, handle: cmdStatus},
		{name: "diff", help: "show what this thread changed in its git worktree", session: sessionBound, handle: cmdDiff},
		{name: "worktree", help: "show this thread's git worktree and branch", session: sessionBound, handle: cmdWorktree},
		// Anyone looks; the handler lets only owners switch, in DMs too (an
		// agent is a set of rights, which a binding never grants).
		{name: "agent", args: "[NAME]", help: "show this conversation's agent and why (owners: switch to agent NAME, in a new session)",
			session: sessionIfBound, handle: cmdAgent},
		{name: "usage", help: "show tokens and cost of this branch", session: sessionBound, handle: cmdUsage},
		{name: "limits", args: "[lift|raise SCOPE ...]", help: "show today's spend against the daily caps (owners: lift or raise one for today)",
			group: rightOwnersToChange, looks: []string{""}, handle: cmdLimits},
		{name: "approve", args: "[id]", help: "approve the pending tool call", handle: cmdDecide},
		{name: "deny", args: "[id]", help: "deny the pending tool call", handle: cmdDecide},
		{name: "schedule", args: "[every …|in …|list|cancel ID]", help: "schedule a prompt here (every weekday 09:00 …, in 2h …)",
			group: rightOwnersToChange, looks: []string{"", "list"}, echoArg: true, handle: cmdSchedule},
		{name: "extensions", args: "[approve HASH]", help: "show the workspace files for the system prompt, and those waiting for an owner's approval",
			group: rightOwnersToChange, looks: []string{""}, echoArg: true, intake: true, handle: cmdExtensions},
		{name: "whoami", help: "show your user id and rights", intake: true, handle: cmdWhoami},
		{name: "start", help: "show this help", hidden: true, intake: true, handle: cmdHelp},
	}
}

// groupRightsNote ends /help. It says in words what the group column of
// the table holds (a test checks that they agree).
const groupRightsNote = "In a group, `/new`, `/compact`, `/fork`, the branch buttons of `/tree` and changing `/model`, `/thinking`, `/queue`, `/schedule` or `/limits` or approving with `/extensions` are for owners; `/stop` is for owners and the person whose request is running."

// commands answers chat commands and button presses. It holds no gateway:
// what the handlers use comes in through its fields.
type commands struct {
	table []command
	// skills: "skill:NAME" (Slack's /pi skill:NAME) is a message for the
	// skill expansion, not an unknown command.
	skills    bool
	log       *slog.Logger
	rights    senderRights
	models    Models
	model     string // the default "provider/model"
	approvals *approvals
	spend     spendCaps
	chat      commandChat
	sessions  commandSessions
	schedules *schedules // nil: /schedule says it is unavailable
	ext       Extensions // nil: /extensions says there are none
}

// senderRights says what a sender is (gateway/access.Checker).
type senderRights interface {
	IsOwner(p chat.Platform, userID string) bool
	Known(ctx context.Context, p chat.Platform, userID string) (bool, error)
}

// commandChat is how commands answer.
type commandChat interface {
	// reply sends a short answer to in's conversation.
	reply(ctx context.Context, in chat.Inbound, md string)
	// respond answers in: through its interaction if it has one (only
	// for the sender when private), else as reply does. An empty md just
	// ends the interaction's spinner.
	respond(ctx context.Context, in chat.Inbound, md string, private bool)
	// send posts a message.
	send(ctx context.Context, conv chat.ConvRef, out chat.Out) (chat.MsgRef, error)
	// answer answers a button press with a toast.
	answer(ctx context.Context, in chat.Inbound, toast string)
}

// commandSessions finds the session a command acts on.
type commandSessions interface {
	// locate returns the conversation's session, starting one if needed.
	locate(ctx context.Context, in chat.Inbound) (*owner, *location, error)
	// existing returns the conversation's session, nil if it has none.
	existing(ctx context.Context, in chat.Inbound) (*owner, *location)
	// unbind detaches the conversation with key convKey from its session.
	unbind(ctx context.Context, convKey string) error
	// chosen is the agent a new session of in's conversation would get.
	chosen(in chat.Inbound) agentRecord
	// agentNames lists the agents, default first.
	agentNames() []string
	// startAgent starts a new session of agent rec for conv.
	startAgent(ctx context.Context, conv chat.ConvRef, rec agentRecord) error
	// target is where a command sent in conv acts (threads.target).
	target(ctx context.Context, conv chat.ConvRef) chat.ConvRef
}

// invocation is one use of a command: what its handler gets besides the
// context.
type invocation struct {
	in chat.Inbound
	// conv is where the command acts: in.Conv, or for a command sent on
	// a channel's main line, the thread it applies to (threads.target).
	// Answers go to in.Conv.
	conv chat.ConvRef
	name string
	arg  string // the arguments, trimmed
	// full: the sender has every right of the command here (an owner, or
	// anyone where the command is for anyone).
	full bool
	// o and loc are the session the command acts on (see need), run is
	// loc's run when the command arrived.
	o    *owner
	loc  *location
	run  *run
	cmds *commands
	// replay: the command is taken from the inbox at start; it may have
	// been executed before the crash (see cmdCompact).
	replay bool
	// answered: in.Interaction has been answered (it takes one answer;
	// later words are plain replies).
	answered bool
}

// say answers the command where the conversation sees it.
func (c *invocation) say(ctx context.Context, format string, args ...any) {
	c.speak(ctx, fmt.Sprintf(format, args...), false)
}

// tell answers the command for its sender: what they looked up, a usage
// line, a refusal, an error. Through an interaction it is ephemeral (where
// the platform can); a text command's answer is a normal reply.
func (c *invocation) tell(ctx context.Context, format string, args ...any) {
	c.speak(ctx, fmt.Sprintf(format, args...), true)
}

// speak sends md: the first answer through the command's interaction, if
// it has one, the rest as replies.
func (c *invocation) speak(ctx context.Context, md string, private bool) {
	in := c.in
	if c.answered {
		in.Interaction = nil
	}
	c.answered = true
	c.cmds.chat.respond(ctx, in, md, private)
}

// finish ends the spinner of an interaction nothing answered yet: every
// path of a command delivered as an interaction answers it.
func (c *invocation) finish(ctx context.Context) {
	if c.in.Interaction != nil && !c.answered {
		c.answered = true
		c.cmds.chat.respond(ctx, c.in, "", false)
	}
}

// failed tells the sender that something went wrong without the details
// (which can hold server paths) and logs them.
func (c *invocation) failed(ctx context.Context, doing string, err error) {
	c.cmds.log.Error("command failed", "conv", c.in.Conv.Key(), "doing", doing, "err", err)
	c.speak(ctx, "⚠️ Something went wrong "+doing+"; the details are in pibot's log.", true)
}

// lookup returns the command called name.
func (cs *commands) lookup(name string) (command, bool) {
	i := slices.IndexFunc(cs.table, func(x command) bool { return x.name == name })
	if i < 0 {
		return command{}, false
	}
	return cs.table[i], true
}

// needsSession reports whether command name waits for its location's
// mailbox (false: dispatch answers it at intake; unknown names too).
func (cs *commands) needsSession(name string) bool {
	cmd, ok := cs.lookup(name)
	return ok && !cmd.intake
}

// answeredAtIntake reports whether command name is answered by dispatch
// alone, at intake (/help, /whoami, an unknown command), not turned into
// a message like /steer and /followup.
func (cs *commands) answeredAtIntake(name string) bool {
	cmd, ok := cs.lookup(name)
	return !ok || cmd.intake && cmd.queue == ""
}

// dispatch executes in's command. For a command whose text is a message (/steer,
// /followup) it returns the queue mode and handled=false: the text then
// goes through the inbox. replay marks a command taken from the inbox at
// start.
//
// A command that came with an interaction is answered on every path, a
// queued one (handled=false) with an empty answer that just ends the
// spinner: its reply is the run's.
func (cs *commands) dispatch(ctx context.Context, in chat.Inbound, replay bool) (mode string, handled bool) {
	c := &invocation{in: in, conv: in.Conv, name: in.Command.Name, arg: strings.TrimSpace(in.Command.Args), cmds: cs, replay: replay}
	defer c.finish(ctx)
	return cs.invoke(ctx, c)
}

// invoke checks the rights of c's sender, finds the session c acts on and
// runs the handler (see dispatch).
func (cs *commands) invoke(ctx context.Context, c *invocation) (mode string, handled bool) {
	in := c.in
	cmd, ok := cs.lookup(c.name)
	if !ok && cs.skills && strings.HasPrefix(c.name, "skill:") {
		return "", false
	}
	if !ok {
		c.tell(ctx, "Unknown command `/%s`. Send /help for the list.", c.name)
		return "", true
	}
	r := cmd.dm
	if !in.Conv.DM {
		r = cmd.group
	}
	owner := cs.rights.IsOwner(in.Conv.Platform, in.User.ID)
	c.full = r == rightAnyone || owner
	if !owner && (r == rightOwners || r == rightOwnersToChange && !slices.Contains(cmd.looks, c.arg)) {
		c.tell(ctx, "%s", cmd.refusal(in.Conv.DM, c.arg))
		return "", true
	}
	if cmd.message {
		return "", false
	}
	if cmd.queue != "" {
		if c.arg == "" {
			c.tell(ctx, "Usage: `/%s %s`", cmd.name, cmd.args)
			return "", true
		}
		return cmd.queue, false
	}
	if !cmd.intake {
		c.conv = cs.sessions.target(ctx, in.Conv)
	}
	at := in // the event as if sent where the command acts
	if c.conv != in.Conv {
		at.Conv, at.ReplyTo = c.conv, nil
	}
	switch cmd.session {
	case sessionOpen:
		o, loc, err := cs.sessions.locate(ctx, at)
		if err != nil {
			c.failed(ctx, "opening this conversation's session", err)
			return "", true
		}
		c.o, c.loc = o, loc
	case sessionBound, sessionIfBound:
		c.o, c.loc = cs.sessions.existing(ctx, at)
		if c.o == nil && cmd.session == sessionBound {
			c.tell(ctx, "There is no session here yet. Send a message to start one.")
			return "", true
		}
	}
	if c.o != nil {
		c.run = c.o.activeRun(c.loc)
	}
	if r == rightOwnersOrRequester && !c.full && c.run != nil && c.run.requester() != in.User.ID {
		c.tell(ctx, "Only an owner, or the person whose request is running, can stop it.")
		return "", true
	}
	cmd.handle(ctx, c)
	return "", true
}

// refusal tells a sender who is not an owner that the command with arg is
// not theirs to use.
func (cmd command) refusal(dm bool, arg string) string {
	hint := ""
	if first, _, _ := strings.Cut(arg, " "); cmd.echoArg && first != "" {
		hint = " " + first
	}
	if dm {
		return fmt.Sprintf("Only an owner of this bot can use `/%s%s`.", cmd.name, hint)
	}
	return fmt.Sprintf("Only an owner of this bot can use `/%s%s` in a group: it changes the conversation for everyone here.", cmd.name, hint)
}

// specs is the command list platforms show (chat.CommandRegistrar).
func (cs *commands) specs() []chat.CommandSpec {
	var out []chat.CommandSpec
	for _, c := range cs.table {
		if !c.hidden && !c.noMenu {
			out = append(out, chat.CommandSpec{Name: c.name, Description: c.help})
		}
	}
	return out
}

// helpText is the answer to /help.
func (cs *commands) helpText() string {
	var b strings.Builder
	b.WriteString("**Commands**\n\n")
	for _, c := range cs.table {
		if c.hidden {
			continue
		}
		fmt.Fprintf(&b, "- `/%s", c.name)
		if c.args != "" {
			b.WriteString(" " + c.args)
		}
		fmt.Fprintf(&b, "` — %s\n", c.help)
	}
	b.WriteString("\nReply to an earlier message to branch the conversation from there.")
	b.WriteString("\n\n" + groupRightsNote)
	return b.String()
}
