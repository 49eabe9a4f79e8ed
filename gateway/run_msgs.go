package gateway

import (
	"slices"
	"sync"

	"github.com/pibot/pibot/agent"
)

// runMessages are the chat messages one run answers: those handed to the
// agent (as prompts or queued) whose entry is not written yet, and those
// recorded, which are acknowledged to the inbox when the run ends.
type runMessages struct {
	mu sync.Mutex
	// waiting are handed to the agent, oldest first; the agent hands
	// each back as the tag of its message_end.
	waiting []*pending
	// acks are recorded in the session.
	acks []*pending
}

// wait notes that p is handed to the agent and awaits its entry.
func (m *runMessages) wait(p *pending) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.waiting = append(m.waiting, p)
}

// unwait notes that p no longer awaits its entry in this run (recorded,
// or taken back from the agent).
func (m *runMessages) unwait(p *pending) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := slices.Index(m.waiting, p); i >= 0 {
		m.waiting = slices.Delete(m.waiting, i, i+1)
	}
}

// untag returns the chat messages of messages taken back from the agent's
// queues; they no longer await an entry in this run.
func (m *runMessages) untag(ts []agent.Tagged) []*pending {
	var out []*pending
	for _, t := range ts {
		if p, ok := t.Tag.(*pending); ok {
			m.unwait(p)
			out = append(out, p)
		}
	}
	return out
}

// done records that p is in the session; it is acknowledged when the run
// ends.
func (m *runMessages) done(p *pending) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acks = append(m.acks, p)
}

// finished lists the messages recorded by the run.
func (m *runMessages) finished() []*pending {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acks
}

// lastSender is the sender of the newest message still waiting for its
// entry, "" if none.
func (m *runMessages) lastSender() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.waiting); n > 0 {
		return m.waiting[n-1].item.In.User.ID
	}
	return ""
}

// queueGate orders messages fed to a run's agent against the run's end:
// once closed (the run has answered), the agent's queues take nothing
// more and a message starts the next run instead.
type queueGate struct {
	mu     sync.Mutex
	closed bool
}

// close shuts the gate.
func (g *queueGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

// pass runs f unless the gate is closed, and reports whether it did. f
// runs under the gate's lock, so close waits for it.
func (g *queueGate) pass(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	f()
	return true
}
