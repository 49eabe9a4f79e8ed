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
	queue byte
}

// Steer queues m to be injected at the next turn boundary (after the
// current tool batch). It works when idle too: the message then waits for
// the next run, right after its prompt. Callers that forward events emit
// QueueUpdate() afterwards, as pi does.
func (a *Agent) Steer(m llm.Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.steer = append(a.steer, m)
	if m.Role == llm.RoleUser {
		a.shownSteer = append(a.shownSteer, m.Text())
	}
}

// FollowUp queues m to run after the current run would stop.
func (a *Agent) FollowUp(m llm.Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.follow = append(a.follow, m)
	if m.Role == llm.RoleUser {
		a.shownFollow = append(a.shownFollow, m.Text())
	}
}

// ClearQueues empties both queues and returns what they held.
func (a *Agent) ClearQueues() (steer, follow []llm.Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	steer, follow = a.steer, a.follow
	a.steer, a.follow = nil, nil
	a.shownSteer, a.shownFollow = nil, nil
	return steer, follow
}

// Queued returns copies of the queued steering and follow-up messages.
func (a *Agent) Queued() (steer, follow []llm.Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.steer), slices.Clone(a.follow)
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
	var out []llm.Message
	out, a.steer = drain(a.steer, a.cfg.SteeringMode)
	return tag(out, 's')
}

func (a *Agent) drainFollow() []pending {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []llm.Message
	out, a.follow = drain(a.follow, a.cfg.FollowUpMode)
	return tag(out, 'f')
}

func drain(q []llm.Message, mode QueueMode) (out, rest []llm.Message) {
	if len(q) == 0 {
		return nil, q
	}
	if mode == QueueAll {
		return q, nil
	}
	return q[:1:1], slices.Clone(q[1:])
}

func tag(msgs []llm.Message, q byte) []pending {
	out := make([]pending, len(msgs))
	for i, m := range msgs {
		out[i] = pending{msg: m, queue: q}
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
