package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/session"
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
// continues.
type approvals struct {
	g       *Gateway
	mu      sync.Mutex
	pending map[string]*approval
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

	path    string
	loc     *location
	msg     chat.MsgRef
	decided chan string
}

func newApprovals(g *Gateway) *approvals {
	return &approvals{g: g, pending: map[string]*approval{}}
}

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

// policy returns allow|ask|deny for tool in loc.
func (g *Gateway) policy(loc *location, tool string) string {
	m := g.cfg.GroupApprovals
	if loc.conv.DM {
		m = g.cfg.DMApprovals
	}
	if p, ok := m[tool]; ok {
		return p
	}
	if p, ok := m["*"]; ok {
		return p
	}
	return "allow"
}

// beforeToolCall is the agent hook that applies the approval policy. In
// groups a call that would touch a path outside the workspace asks even
// when its tool's policy is allow (a denied tool stays denied).
func (r *run) beforeToolCall(ctx context.Context, c agent.ToolCall) (agent.Decision, error) {
	g, loc := r.o.g, r.loc
	paths, outside := g.toolPaths(loc, c)
	switch g.policy(loc, c.Name) {
	case "deny":
		return agent.Decision{Block: true, Reason: fmt.Sprintf("The %s tool is disabled in this chat.", c.Name)}, nil
	case "ask":
	default:
		if !outside {
			return agent.Decision{}, nil
		}
	}
	requester := r.requester()
	key := allowKey(requester, c.Name, outside)
	r.o.mu.Lock()
	ok := loc.allowed[key] || !outside && loc.allowed[allowKey(requester, c.Name, true)]
	r.o.mu.Unlock()
	if ok {
		return agent.Decision{}, nil
	}
	ap := &approval{ID: newID(), ToolCall: c.ID, Tool: c.Name, Args: c.Args, Requester: requester, Outside: outside, State: "pending", path: r.o.path, loc: loc, decided: make(chan string, 1)}
	if err := r.o.recordApproval(loc, ap); err != nil {
		g.log.Error("record approval", "err", err)
		return agent.Decision{Block: true, Reason: "The approval could not be recorded, so the call was not made."}, nil
	}
	g.approval.add(ap)
	defer g.approval.remove(ap.ID)
	if err := g.approval.ask(ctx, ap, g.approvalText(ap, paths)); err != nil {
		g.log.Error("ask for approval", "err", err)
		return agent.Decision{Block: true, Reason: "The approval could not be requested, so the call was not made."}, nil
	}
	r.ctl.Status("waiting for approval of " + c.Name)
	defer r.ctl.Status("")
	timer := time.NewTimer(g.cfg.ApprovalTimeout)
	defer timer.Stop()
	var d string
	select {
	case d = <-ap.decided:
	case <-timer.C:
		if g.approval.claim(ap.ID) {
			d = decideDeny
			ap.By = "timeout"
			g.approval.finish(context.WithoutCancel(ctx), ap, d)
		} else {
			d = <-ap.decided // a press won the race
		}
	case <-ctx.Done():
		if r.frozen.Load() {
			return agent.Decision{Block: true, Reason: "pibot restarted while this call waited for approval; the buttons still work"}, nil
		}
		return agent.Decision{Block: true, Reason: "Operation aborted"}, nil
	}
	if d == decideDeny {
		reason := "The user denied this tool call."
		if ap.By == "timeout" {
			reason = "No one approved this tool call in time; it was denied."
		}
		return agent.Decision{Block: true, Reason: reason}, nil
	}
	if d == decideSession {
		r.o.mu.Lock()
		loc.allowed[key] = true
		r.o.mu.Unlock()
	}
	return agent.Decision{}, nil
}

// toolPaths returns the paths call c would touch and whether, in a group,
// one of them is outside the workspace (arguments that cannot be read
// count as outside: the call is asked about rather than trusted).
func (g *Gateway) toolPaths(loc *location, c agent.ToolCall) ([]ToolPath, bool) {
	if g.cfg.ToolPaths == nil {
		return nil, false
	}
	paths, err := g.cfg.ToolPaths(c.Name, c.Args)
	if loc.conv.DM || g.cfg.WorkspaceOnly {
		return paths, false
	}
	outside := err != nil
	for _, p := range paths {
		outside = outside || !p.Inside
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

func (r *run) requester() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last int64
	who := ""
	for ts, p := range r.meta {
		if ts > last {
			last, who = ts, p.item.In.User.ID
		}
	}
	if who == "" {
		if h, ok := r.o.sess.Get(r.o.head(r.loc)); ok {
			for _, e := range r.branchEntries(h.ID) {
				if e.Pibot != nil && e.Pibot.From != "" {
					who = e.Pibot.From
				}
			}
		}
	}
	return who
}

func (r *run) branchEntries(leaf string) []session.Entry {
	b, _ := r.o.sess.Branch(leaf)
	return b
}

func (o *owner) recordApproval(loc *location, ap *approval) error {
	data, _ := json.Marshal(ap)
	_, err := o.append(loc, session.Entry{Type: session.TypeCustom, CustomType: customApproval, Data: data}, session.SyncAlways)
	return err
}

func (a *approvals) add(ap *approval) {
	a.mu.Lock()
	a.pending[ap.ID] = ap
	a.mu.Unlock()
}

func (a *approvals) remove(id string) {
	a.mu.Lock()
	delete(a.pending, id)
	a.mu.Unlock()
}

func (a *approvals) get(id string) *approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pending[id]
}

// ask posts the approval message md with its three buttons.
func (a *approvals) ask(ctx context.Context, ap *approval, md string) error {
	ad := a.g.adapters[ap.loc.conv.Platform]
	if ad == nil {
		return fmt.Errorf("no adapter for %s", ap.loc.conv.Platform)
	}
	out := chat.Out{Markdown: md, Buttons: [][]chat.Button{{
		{ID: "ap:" + ap.ID + ":" + decideOnce, Label: "Allow once", Style: chat.StylePrimary},
		{ID: "ap:" + ap.ID + ":" + decideSession, Label: "Allow for this session"},
		{ID: "ap:" + ap.ID + ":" + decideDeny, Label: "Deny", Style: chat.StyleDanger},
	}}}
	ref, err := ad.Send(ctx, ap.loc.conv, out)
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
	if o, err := a.g.owner(ctx, ap.path); err == nil {
		data, _ := json.Marshal(ap)
		if _, err := o.append(ap.loc, session.Entry{Type: session.TypeCustom, CustomType: customApproval, Data: data}, session.SyncAlways); err != nil {
			a.g.log.Warn("record approval decision", "err", err)
		}
	}
	a.mu.Lock()
	msg := ap.msg
	a.mu.Unlock()
	if ad := a.g.adapters[ap.loc.conv.Platform]; ad != nil && msg.ID != "" {
		out := chat.Out{Markdown: decisionText(ap)}
		a.g.track(func(ctx context.Context) { a.g.editRetry(ctx, ad, msg, out) })
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
