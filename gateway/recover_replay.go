package gateway

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// What a replayed message finds in its session after a restart (an inbox
// item whose message the session already holds) and what is done about
// it: every answer of the location that never reached the chat is
// delivered, wherever it sits on the branch and however many messages
// followed it; a run cut short is finished.

// replayState is what loc's branch says about a replayed message.
type replayState struct {
	// delivered: a delivery of the location follows the message's entry
	// on the branch (its run, one run answering several messages
	// included, recorded its reply), or the branch moved away from it:
	// nothing is left to do for it.
	delivered bool
	// answers are the final answers on the branch after the location's
	// last recorded delivery or noted reply: in the session, never shown
	// in the chat as a whole (a reply marked interrupted, or cut before
	// its delivery was recorded). Oldest first.
	answers []session.Entry
	// final: the branch's last message is a final answer (the run
	// answered; nothing is left for the model).
	final bool
}

// replay reads the branch for the replayed message key ("" for an item
// without a message: a resume after an approval).
func (v locView) replay(key string) replayState {
	var st replayState
	branch, err := v.branch()
	if err != nil {
		return replayState{delivered: true}
	}
	at := -1
	if key != "" {
		id, ok := v.tree.EntryForMsg(key)
		if !ok {
			return replayState{delivered: true}
		}
		for i, e := range branch {
			if e.ID == id {
				at = i
				break
			}
		}
		if at < 0 {
			// The branch moved away from the message: nothing to deliver here.
			return replayState{delivered: true}
		}
	}
	for i, e := range branch {
		if shown, delivered := closesReply(e, v.key); shown {
			st.answers = st.answers[:0]
			if delivered && at >= 0 && i > at {
				st.delivered = true
			}
			continue
		}
		if e.Type != session.TypeMessage || e.Message == nil {
			continue
		}
		st.final = isFinalAnswer(e.Message)
		if st.final && answerText(e.Message) != "" {
			st.answers = append(st.answers, e)
		}
	}
	return st
}

// answered reports whether the entry of message key is on the branch and
// followed there by a final answer of the model.
func (v locView) answered(key string) bool {
	id, ok := v.tree.EntryForMsg(key)
	if !ok {
		return false
	}
	branch, err := v.branch()
	if err != nil {
		return false
	}
	seen := false
	for _, e := range branch {
		seen = seen || e.ID == id
		if seen && e.Type == session.TypeMessage && e.Message != nil && isFinalAnswer(e.Message) {
			return true
		}
	}
	return false
}

// closesReply reports whether e, an entry of the location key, ends a
// reply whose text the chat shows: a recorded delivery (delivered), or a
// reply a drained run ended with its own note.
func closesReply(e session.Entry, key string) (shown, delivered bool) {
	if e.Type != session.TypeCustom || e.Pibot == nil || e.Pibot.Loc != key {
		return false, false
	}
	if _, ok := deliveryOf(e); ok {
		return true, true
	}
	if e.CustomType != customReply {
		return false, false
	}
	var rr replyRecord
	return json.Unmarshal(e.Data, &rr) == nil && rr.State == replyNoted, false
}

// isFinalAnswer reports whether m is an answer of the model that calls no
// tools (it may have failed or been aborted).
func isFinalAnswer(m *llm.Message) bool {
	return m.Role == llm.RoleAssistant && m.StopReason != llm.StopToolUse
}

// answerText is what the chat shows of a recorded answer: its text, and
// the error of a failed one.
func answerText(m *llm.Message) string {
	text := m.Text()
	if m.StopReason == llm.StopError && m.ErrorMessage != "" {
		text = strings.TrimSpace(text + "\n\n⚠️ " + m.ErrorMessage)
	}
	return text
}

// replay finishes a replayed message at loc, which no run of this process
// works on: nothing if its reply reached the chat; else the location's
// answers that never did are delivered, by a run that continues a cut
// short one (resumable) after them, or by one that only delivers them.
// take is the mailbox item's offer of its goroutine.
func (q queue) replay(ctx context.Context, loc *location, p *pending, take takeOver) {
	o := q.o
	st := o.view(loc).replay(p.msgKey())
	switch {
	case st.delivered:
	case st.final && len(st.answers) > 0:
		o.runs.redeliver(loc, p, st.answers)
		return
	case st.final:
		// Shown by the reply a drained run ended with its note.
	default:
		resumable, unknown := o.resumable(loc)
		switch {
		case resumable:
			// Its run was cut short (crash, restart, a replica
			// killed): finish it, after what it had answered.
			o.log.Info("resuming an interrupted run", "loc", loc.key, "unknown_outcome", unknown, "answers_first", len(st.answers))
			if len(unknown) > 0 {
				o.replier.reply(ctx, p.item.In, unknownOutcomeNotice(unknown))
			}
			p.applied = true
			var prelude func(context.Context, *run) bool
			if len(st.answers) > 0 {
				prelude = func(_ context.Context, r *run) bool {
					r.reply.seed(st.answers)
					return true
				}
			}
			o.runs.startWith(loc, []*pending{p}, prelude, nil, take)
			return
		case len(st.answers) > 0:
			// The run waits (an approval): what it answered so far
			// reaches the chat meanwhile.
			o.runs.redeliver(loc, p, st.answers)
			return
		}
	}
	// Its run is in the session: it leaves the inbox once that is
	// durable (a redelivery may come while the run's last lines wait
	// for the group commit).
	o.durable.ack(ctx, []*pending{p})
}

// joinRun hands a replayed message to r, the run now working at its
// location, when r will answer after the message's entry: r's delivery,
// recorded after everything r appends at the location's head, follows the
// message, and the message leaves the inbox with r's own. False when r
// takes nothing more (it is delivering) or the branch moved away from
// the message.
func (q queue) joinRun(r *run, p *pending) bool {
	o := q.o
	if st := o.view(r.loc).replay(p.msgKey()); st.delivered {
		return false
	}
	return r.gate.pass(func() {
		r.msgs.done(p)
		o.begin(r.ctx, []*pending{p})
	})
}
