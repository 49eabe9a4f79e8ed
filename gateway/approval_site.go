package gateway

import (
	"context"
	"encoding/json"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/session"
)

// locSite is the approvalSite of an owner's location: approvals are
// custom entries of its session, grants live in the location.
type locSite struct {
	o   *owner
	loc *location
}

func (s locSite) record(ap *approval) error {
	data, _ := json.Marshal(ap)
	_, err := s.o.append(s.loc, session.Entry{Type: session.TypeCustom, CustomType: customApproval, Data: data}, session.SyncAlways)
	return err
}

func (s locSite) granted(key string) bool { return s.o.granted(s.loc, key) }

func (s locSite) grant(key string) { s.o.grant(s.loc, key) }

// runSite is the approvalRun of a run.
type runSite struct {
	locSite
	r *run
}

func (s runSite) requester() string { return s.r.requester() }

// agentName is the run's agent, whose approval policy applies.
func (s runSite) agentName() string { return s.r.o.agentRec().Name }
func (s runSite) status(text string) {
	s.r.reply.ctl.Status(text)
}
func (s runSite) frozen() bool { return s.r.journal.frozen() }
func (s runSite) dir() string  { return s.r.wt.dir() }
func (s runSite) cut(ctx context.Context) error {
	return s.r.reply.ctl.Cut(ctx)
}

// beforeToolCall is the agent hook of a run: the approvals decide.
func (s runSite) beforeToolCall(ctx context.Context, c agent.ToolCall) (agent.Decision, error) {
	d := s.o.approval.check(ctx, s, s.o.path, s.loc.conv, c)
	if ctl := s.r.reply.controller(); ctl != nil {
		ctl.ToolResumed(c.ID) // the wait for an approval is not the tool's time
	}
	return d, nil
}

// toolRun is what the run's tools know of it: where files are attached,
// and whether its requester is an owner at the time of each call.
func (r *run) toolRun() ToolRun {
	return ToolRun{Attach: &attacher{r: r}, Dir: r.wt.dir(), Owner: func() bool {
		return r.o.approval.deps.host.isOwner(r.loc.conv.Platform, r.requester())
	}}
}

// requester is the user whose request r answers: the sender of its latest
// message, or, for a resumed run, of the latest message on its branch.
func (r *run) requester() string {
	who := r.msgs.lastSender()
	if who == "" {
		if h, ok := r.o.tree().Get(r.o.head(r.loc)); ok {
			b, _ := r.o.tree().Branch(h.ID)
			for _, e := range b {
				if e.Pibot != nil && e.Pibot.From != "" {
					who = e.Pibot.From
				}
			}
		}
	}
	return who
}
