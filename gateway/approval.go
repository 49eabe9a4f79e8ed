package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
)

// Approval decisions, as stored and as button suffixes.
const (
	decideOnce    = "o"
	decideSession = "s"
	decideDeny    = "d"

	customApproval = "pibot.approval"
)

// approvals tracks tool calls waiting for a human decision. Each pending
// approval is persisted as a custom entry, so a decision made after a
// restart still applies: the tool then runs (or is refused) and the run
// continues (approval_recover.go).
//
// approvals holds no gateway, owner or run: the chat, owner rights and the
// clock come in through approvalHost, and each call names the location it
// waits in (approvalSite) and the run that waits (approvalRun).
type approvals struct {
	deps approvalDeps
	// approvalRules are the policies calls are checked against
	// (approval_rules.go).
	approvalRules
	mu      sync.Mutex
	pending map[string]*approval
	// waiting counts the tool calls waiting for a decision now: a
	// shutdown whose runs all wait for one stops at once (drain).
	waiting atomic.Int64
}

// approvalDeps are the collaborators of approvals.
type approvalDeps struct {
	// policy is the default agent's approval policy (approvalRules).
	policy approvalPolicy
	host   approvalHost
	log    *slog.Logger
	// existing finds the bound session of a conversation, and enqueue makes
	// a resume item durable in the inbox: both for decisions whose run is
	// gone (approval_recover.go).
	existing func(ctx context.Context, in chat.Inbound) (*owner, *location)
	enqueue  func(ctx context.Context, key string, data []byte) (id string, durable func() error, err error)
	// tools builds the tools a resumed call runs with.
	tools ToolFactory
	// agents are the policies of the agents besides the default (policy),
	// by name.
	agents map[string]approvalPolicy
}

// approvalPolicy is the part of Config approvals apply.
type approvalPolicy struct {
	dm, group map[string]string // tool (or "*") → allow|ask|deny
	// toolPaths, workspaceOnly, nonOwnersOnly: see Config.ToolPaths,
	// WorkspaceOnly and NonOwnersWorkspaceOnly.
	toolPaths     func(dir, tool string, args json.RawMessage) ([]ToolPath, error)
	workspaceOnly bool
	nonOwnersOnly bool
	workspace     string // absolute
	timeout       time.Duration
}

// approvalHost is what approvals need from the gateway around them.
type approvalHost interface {
	// send posts a message.
	send(ctx context.Context, conv chat.ConvRef, out chat.Out) (chat.MsgRef, error)
	// editLater replaces a message's content on a goroutine the gateway
	// owns, waiting out rate limits.
	editLater(ref chat.MsgRef, out chat.Out)
	// isOwner reports whether user is an owner of the bot on p.
	isOwner(p chat.Platform, user string) bool
	// timer is the clock: c fires after d unless stop is called first.
	timer(d time.Duration) (c <-chan time.Time, stop func() bool)
}

// approvalSite is the location a tool call waits in: where its approval is
// recorded and "Allow for this session" grants are kept.
type approvalSite interface {
	// record appends ap as a custom entry, durably.
	record(ap *approval) error
	granted(key string) bool
	grant(key string)
}

// approvalRun is the run whose tool call waits for a decision.
type approvalRun interface {
	approvalSite
	// requester is the user whose request the run answers.
	requester() string
	// status shows (or, with "", clears) a status line in the reply.
	status(text string)
	// cut closes the reply's part said so far before the card is posted:
	// what follows goes below the card (stream.Controller.Cut).
	cut(ctx context.Context) error
	// frozen reports that the run records nothing more (shutdown).
	frozen() bool
	// dir is where the run's tools work (ToolRun.Dir).
	dir() string
}

type approval struct {
	ID        string          `json:"id"`
	ToolCall  string          `json:"toolCallId"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args"`
	Requester string          `json:"requester"`
	// Outside: the call would touch a path outside the workspace.
	Outside bool   `json:"outside,omitempty"`
	State   string `json:"state"` // pending | allowed | denied
	By      string `json:"by,omitempty"`
	Scope   string `json:"scope,omitempty"` // once | session

	path string // the session file
	conv chat.ConvRef
	// workspace is the workspace of the run's agent (absolute).
	workspace string
	site      approvalSite
	msg       chat.MsgRef
	decided   chan string
}

func newApprovals(d approvalDeps) *approvals {
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	a := &approvals{deps: d, pending: map[string]*approval{}}
	a.approvalRules.reset(d.policy, d.agents)
	return a
}

// agentOf is the agent of the run r (optional: a run that cannot say
// is the default agent's).
func agentOf(r approvalRun) string {
	if ar, ok := r.(interface{ agentName() string }); ok {
		return ar.agentName()
	}
	return DefaultAgent
}

// pendingFor reports whether a call of session file path waits for a
// decision.
func (a *approvals) pendingFor(path string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pending {
		if p.path == path {
			return true
		}
	}
	return false
}

// waitingIn returns the id of a call waiting for a decision in the
// conversation with key convKey, "" if none.
func (a *approvals) waitingIn(convKey string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := ""
	for _, ap := range a.pending {
		if ap.conv.Key() == convKey {
			id = ap.ID
		}
	}
	return id
}

// check applies the approval policy to call c of run r, which writes
// session file path for conv: it is the agent's BeforeToolCall hook. In
// groups a call that would touch a path outside the workspace asks even
// when its tool's policy is allow (a denied tool stays denied).
func (a *approvals) check(ctx context.Context, r approvalRun, path string, conv chat.ConvRef, c agent.ToolCall) agent.Decision {
	name := agentOf(r)
	pol := a.policyOf(name)
	confined := pol.workspaceOnly ||
		pol.nonOwnersOnly && !a.deps.host.isOwner(conv.Platform, r.requester())
	paths, outside := a.toolPaths(pol, r.dir(), conv, c, confined)
	switch a.policyFor(name, conv, c.Name) {
	case "deny":
		return agent.Decision{Block: true, Reason: fmt.Sprintf("The %s tool is disabled in this chat.", c.Name)}
	case "ask":
	default:
		if !outside {
			return agent.Decision{}
		}
	}
	requester := r.requester()
	key := allowKey(requester, c.Name, outside)
	if r.granted(key) || !outside && r.granted(allowKey(requester, c.Name, true)) {
		return agent.Decision{}
	}
	ap := &approval{ID: newID(), ToolCall: c.ID, Tool: c.Name, Args: c.Args, Requester: requester, Outside: outside, State: "pending", path: path, conv: conv, site: r, decided: make(chan string, 1),
		workspace: pol.workspace}
	if err := r.record(ap); err != nil {
		a.deps.log.Error("record approval", "err", err)
		return agent.Decision{Block: true, Reason: "The approval could not be recorded, so the call was not made."}
	}
	a.mu.Lock()
	a.pending[ap.ID] = ap
	a.mu.Unlock()
	defer a.claim(ap.ID) // whoever decided has claimed it already
	// The card, and the decision that replaces its buttons, stand between
	// what led to the call and what follows it.
	if err := r.cut(ctx); err != nil {
		a.deps.log.Warn("show the reply before the approval card", "err", err)
	}
	if err := a.post(ctx, ap, a.text(ap, paths)); err != nil {
		a.deps.log.Error("ask for approval", "err", err)
		return agent.Decision{Block: true, Reason: "The approval could not be requested, so the call was not made."}
	}
	r.status("waiting for approval of " + c.Name)
	defer r.status("")
	timeout, stop := a.deps.host.timer(a.def.timeout)
	defer stop()
	var d string
	a.waiting.Add(1)
	defer a.waiting.Add(-1)
	select {
	case d = <-ap.decided:
	case <-timeout:
		if a.claim(ap.ID) {
			d = decideDeny
			ap.By = "timeout"
			a.finish(context.WithoutCancel(ctx), ap, d)
		} else {
			d = <-ap.decided // a press won the race
		}
	case <-ctx.Done():
		if r.frozen() {
			return agent.Decision{Block: true, Reason: "pibot restarted while this call waited for approval; the buttons still work"}
		}
		return agent.Decision{Block: true, Reason: "Operation aborted"}
	}
	if d == decideDeny {
		reason := "The user denied this tool call."
		if ap.By == "timeout" {
			reason = "No one approved this tool call in time; it was denied."
		}
		return agent.Decision{Block: true, Reason: reason}
	}
	if a.policyFor(name, conv, c.Name) == "deny" {
		// A reload disabled the tool while the call waited.
		return agent.Decision{Block: true, Reason: fmt.Sprintf("The %s tool is disabled in this chat.", c.Name)}
	}
	if d == decideSession {
		r.grant(key)
	}
	return agent.Decision{}
}

// toolPaths returns the paths call c would touch and whether, in a group,
// one of them is outside the workspace (arguments that cannot be read
// count as outside: the call is asked about rather than trusted). A
// confined call is never outside: the tool itself refuses such paths.
func (a *approvals) toolPaths(p approvalPolicy, dir string, conv chat.ConvRef, c agent.ToolCall, confined bool) ([]ToolPath, bool) {
	if p.toolPaths == nil {
		return nil, false
	}
	paths, err := p.toolPaths(dir, c.Name, c.Args)
	if conv.DM || confined {
		return paths, false
	}
	outside := err != nil
	for _, tp := range paths {
		outside = outside || !tp.Inside
	}
	return paths, outside
}

// allowKey is the key of an "Allow for this session" grant: it lets that
// requester's later calls of that tool through, and no one else's; a grant
// for paths outside the workspace covers the inside too, not the reverse.
func allowKey(requester, tool string, outside bool) string {
	k := requester + "\x00" + tool
	if outside {
		k += "\x00outside"
	}
	return k
}

// post sends the approval message md with its three buttons.
func (a *approvals) post(ctx context.Context, ap *approval, md string) error {
	out := chat.Out{Markdown: md, Buttons: [][]chat.Button{{
		{ID: btnApprove + ap.ID + ":" + decideOnce, Label: "Allow once", Style: chat.StylePrimary},
		{ID: btnApprove + ap.ID + ":" + decideSession, Label: "Allow for this session"},
		{ID: btnApprove + ap.ID + ":" + decideDeny, Label: "Deny", Style: chat.StyleDanger},
	}}}
	ref, err := a.deps.host.send(ctx, ap.conv, out)
	if err != nil {
		return err
	}
	a.mu.Lock()
	ap.msg = ref // a press may be handled on another goroutine right now
	a.mu.Unlock()
	return nil
}

// claim takes approval id out of the pending set; only the caller that
// gets true decides it (a press, /approve, or the timeout).
func (a *approvals) claim(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.pending[id]
	delete(a.pending, id)
	return ok
}

// finish records the decision and replaces the buttons with its outcome.
func (a *approvals) finish(ctx context.Context, ap *approval, d string) {
	ap.State, ap.Scope = "allowed", "once"
	switch d {
	case decideDeny:
		ap.State, ap.Scope = "denied", ""
	case decideSession:
		ap.Scope = "session"
	}
	if err := ap.site.record(ap); err != nil {
		a.deps.log.Warn("record approval decision", "err", err)
	}
	a.mu.Lock()
	msg := ap.msg
	a.mu.Unlock()
	if msg.ID != "" {
		a.deps.host.editLater(msg, chat.Out{Markdown: decisionText(ap)})
	}
}

func decisionText(ap *approval) string {
	who := ap.By
	if who == "" {
		who = "someone"
	}
	switch {
	case ap.By == "timeout":
		return fmt.Sprintf("⌛ `%s` was denied: no answer in time.", ap.Tool)
	case ap.State == "denied":
		return fmt.Sprintf("❌ `%s` denied by %s.", ap.Tool, who)
	case ap.Scope == "session":
		return fmt.Sprintf("✅ `%s` allowed for this session by %s, for the calls of the person who asked.", ap.Tool, who)
	default:
		return fmt.Sprintf("✅ `%s` allowed once by %s.", ap.Tool, who)
	}
}

func newID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
