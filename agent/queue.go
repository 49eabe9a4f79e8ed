package agent

import (
	"slices"

	"github.com/pibot/pibot/llm"
)

// pending is a message waiting to be injected into the conversation; queue
// says which display queue it came from (0: none, 's': steering, 'f':
// follow-up).
type pending struct {
	msg   llm.Message
	tag   any
	queue byte
}

// Tagged is a message with an opaque tag of the caller's. The agent never
// looks at the tag and never sends or records it: it hands it back on the
// message's message_start and message_end events (Event.Tag) and from
// ClearTagged, so that the caller can tell its queued messages apart
// without matching on their contents or timestamps.
type Tagged struct {
	Message llm.Message
	Tag     any
}

// Steer queues m to be injected at the next turn boundary (after the
// current tool batch). It works when idle too: the message then waits for
// the next run, right after its prompt. Callers that forward events emit
// QueueUpdate() afterwards, as pi does.
func (a *Agent) Steer(m llm.Message) { a.SteerTagged(Tagged{Message: m}) }

// SteerTagged is Steer for a tagged message.
func (a *Agent) SteerTagged(t Tagged) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.steer = append(a.steer, pending{msg: t.Message, tag: t.Tag, queue: 's'})
	if t.Message.Role == llm.RoleUser {
		a.shownSteer = append(a.shownSteer, t.Message.Text())
	}
}

// FollowUp queues m to run after the current run would stop.
func (a *Agent) FollowUp(m llm.Message) { a.FollowUpTagged(Tagged{Message: m}) }

// FollowUpTagged is FollowUp for a tagged message.
func (a *Agent) FollowUpTagged(t Tagged) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.follow = append(a.follow, pending{msg: t.Message, tag: t.Tag, queue: 'f'})
	if t.Message.Role == llm.RoleUser {
		a.shownFollow = append(a.shownFollow, t.Message.Text())
	}
}

// ClearQueues empties both queues and returns what they held.
func (a *Agent) ClearQueues() (steer, follow []llm.Message) {
	st, fu := a.ClearTagged()
	return untag(st), untag(fu)
}

// ClearTagged empties both queues and returns what they held, with tags.
func (a *Agent) ClearTagged() (steer, follow []Tagged) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, fu := a.steer, a.follow
	a.steer, a.follow = nil, nil
	a.shownSteer, a.shownFollow = nil, nil
	return tagged(st), tagged(fu)
}

// Queued returns copies of the queued steering and follow-up messages.
func (a *Agent) Queued() (steer, follow []llm.Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return untag(tagged(a.steer)), untag(tagged(a.follow))
}

// QueueUpdate returns the queue_update event describing the queues now
// (the texts of queued user messages that have not started yet).
func (a *Agent) QueueUpdate() Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queueUpdateLocked()
}

func (a *Agent) queueUpdateLocked() Event {
	return Event{Type: EventQueueUpdate, Steering: slices.Clone(a.shownSteer), FollowUp: slices.Clone(a.shownFollow)}
}

func (a *Agent) drainSteer() []pending {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []pending
	out, a.steer = drain(a.steer, a.cfg.SteeringMode)
	return out
}

func (a *Agent) drainFollow() []pending {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []pending
	out, a.follow = drain(a.follow, a.cfg.FollowUpMode)
	return out
}

func drain(q []pending, mode QueueMode) (out, rest []pending) {
	if len(q) == 0 {
		return nil, q
	}
	if mode == QueueAll {
		return q, nil
	}
	return q[:1:1], slices.Clone(q[1:])
}

func tagged(ps []pending) []Tagged {
	if ps == nil {
		return nil
	}
	out := make([]Tagged, len(ps))
	for i, p := range ps {
		out[i] = Tagged{Message: p.msg, Tag: p.tag}
	}
	return out
}

func untag(ts []Tagged) []llm.Message {
	if ts == nil {
		return nil
	}
	out := make([]llm.Message, len(ts))
	for i, t := range ts {
		out[i] = t.Message
	}
	return out
}

// unshow removes a started queued message's text from its display queue
// and reports the queue_update event to emit, if any.
func (a *Agent) unshow(p pending) (Event, bool) {
	if p.queue == 0 || p.msg.Role != llm.RoleUser {
		return Event{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	text := p.msg.Text()
	list := &a.shownSteer
	if p.queue == 'f' {
		list = &a.shownFollow
	}
	i := slices.Index(*list, text)
	if i < 0 {
		return Event{}, false
	}
	*list = slices.Delete(slices.Clone(*list), i, i+1)
	return a.queueUpdateLocked(), true
}
