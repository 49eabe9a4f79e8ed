package gateway

import (
	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// locHead is a location's head as the place a run writes
// (sessionrun.Head), compacts (run_maintain.go) and branches from.
type locHead struct {
	f   *sessionFile
	loc *location
}

func (h locHead) Leaf() string { return h.f.head(h.loc) }

func (h locHead) Append(e session.Entry, sync session.SyncPolicy) (session.Entry, error) {
	return h.f.append(h.loc, e, sync)
}

// branchTo moves the head to the entry of ref. Callers make sure no run
// is active at the location: a reply that comes during a run joins it.
func (h locHead) branchTo(ref chat.MsgRef) {
	target, ok := branchPoint(h.f.tree(), ref)
	if !ok {
		return
	}
	if err := h.f.moveHead(h.loc, target, session.SyncGrouped); err != nil {
		h.f.env.log.Warn("branch", "loc", h.loc.key, "err", err)
	}
}

// tagged is p's user message tagged with p, so that its entry is tied to
// p when the agent hands the message back at its message_end.
func tagged(p *pending, m llm.Message) agent.Tagged { return agent.Tagged{Message: m, Tag: p} }

// record writes the message of a message_end to the session and updates
// the reply.
func (r *run) record(e agent.Event) {
	if e.Message == nil || r.journal.frozen() {
		return
	}
	p, _ := e.Tag.(*pending)
	rec, err := r.journal.message(e)
	if p != nil {
		r.msgs.unwait(p)
	}
	if err != nil {
		if p != nil && lostToStorage(r.o.sess, err) {
			r.o.health.strand(err, []*pending{p})
		}
		r.fail(err)
		return
	}
	switch m := e.Message; m.Role {
	case llm.RoleUser:
		crashpoint.Hit(crashpoint.UserEntry)
		// Acknowledged after the run ended, with the session's next fsync.
		if p == nil {
			return
		}
		// A message the run took from its queues executes from now.
		r.o.begin(r.ctx, []*pending{p})
		if p.queued {
			r.o.replier.react(r.ctx, p.item.In.Msg, "✅")
		}
		if p.note != nil {
			r.o.replier.settleNote(r.ctx, p, p.note.takenText(r))
		}
		r.msgs.done(p)
	case llm.RoleToolResult:
		crashpoint.Hit(crashpoint.ToolResult)
	case llm.RoleAssistant:
		if m.StopReason == llm.StopToolUse {
			crashpoint.Hit(crashpoint.ToolCall)
		} else {
			crashpoint.Hit(crashpoint.AnswerEntry)
		}
		r.o.metrics.usage(m.Usage)
		r.reply.answer(m, rec.Entry.ID)
	}
}
