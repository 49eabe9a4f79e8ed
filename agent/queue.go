package agent

import (
	"slices"
	"sync"

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

// SteerTagged queues t's message to be injected at the next turn boundary
// (after the current tool batch). It works when idle too: the message then
// waits for the next run, right after its prompt. Callers that forward
// events emit QueueUpdate() afterwards, as pi does.
func (a *Agent) SteerTagged(t Tagged) { a.queue.push(t, 's') }

// FollowUpTagged queues t's message to run after the current run would
// stop.
func (a *Agent) FollowUpTagged(t Tagged) { a.queue.push(t, 'f') }

// ClearTagged empties both queues and returns what they held, with tags.
func (a *Agent) ClearTagged() (steer, follow []Tagged) { return a.queue.clear() }

// Queued returns copies of the queued steering and follow-up messages.
func (a *Agent) Queued() (steer, follow []llm.Message) { return a.queue.queued() }

// QueueUpdate returns the queue_update event describing the queues now
// (the texts of queued user messages that have not started yet).
func (a *Agent) QueueUpdate() Event { return a.queue.update() }

// queues holds an agent's steering and follow-up queues and the display
// texts pi's session keeps for queue_update. It is safe for concurrent use.
type queues struct {
	mu     sync.Mutex
	steer  []pending
	follow []pending
	// shownSteer and shownFollow are the display texts pi's session keeps
	// for queue_update: a text leaves when its message starts.
	shownSteer  []string
	shownFollow []string
	steerMode   QueueMode
	followMode  QueueMode
}

// push appends t to the steering queue (which 's') or the follow-up
// queue ('f').
func (q *queues) push(t Tagged, which byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	list, shown := &q.steer, &q.shownSteer
	if which == 'f' {
		list, shown = &q.follow, &q.shownFollow
	}
	*list = append(*list, pending{msg: t.Message, tag: t.Tag, queue: which})
	if t.Message.Role == llm.RoleUser {
		*shown = append(*shown, t.Message.Text())
	}
}

// clear empties both queues and returns what they held, with tags.
func (q *queues) clear() (steer, follow []Tagged) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st, fu := q.steer, q.follow
	q.steer, q.follow = nil, nil
	q.shownSteer, q.shownFollow = nil, nil
	return tagged(st), tagged(fu)
}

// queued returns copies of the queued messages.
func (q *queues) queued() (steer, follow []llm.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return untag(tagged(q.steer)), untag(tagged(q.follow))
}

// update returns the queue_update event describing the queues now.
func (q *queues) update() Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.updateLocked()
}

func (q *queues) updateLocked() Event {
	return Event{Type: EventQueueUpdate, Steering: slices.Clone(q.shownSteer), FollowUp: slices.Clone(q.shownFollow)}
}

// drainSteer takes what the steering mode lets go of the steering queue.
func (q *queues) drainSteer() []pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []pending
	out, q.steer = drain(q.steer, q.steerMode)
	return out
}

// drainFollow takes what the follow-up mode lets go of the follow-up
// queue.
func (q *queues) drainFollow() []pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []pending
	out, q.follow = drain(q.follow, q.followMode)
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
func (q *queues) unshow(p pending) (Event, bool) {
	if p.queue == 0 || p.msg.Role != llm.RoleUser {
		return Event{}, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	text := p.msg.Text()
	list := &q.shownSteer
	if p.queue == 'f' {
		list = &q.shownFollow
	}
	i := slices.Index(*list, text)
	if i < 0 {
		return Event{}, false
	}
	*list = slices.Delete(slices.Clone(*list), i, i+1)
	return q.updateLocked(), true
}
