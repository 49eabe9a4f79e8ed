package chattest

import (
	"context"
	"slices"

	"github.com/pibot/pibot/chat"
)

// Calls returns every recorded call, in order.
func (a *Adapter) Calls() []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls.all()
}

// Filter returns the calls of calls whose method is one of ms.
func Filter(calls []Call, ms ...Method) []Call {
	var out []Call
	for _, c := range calls {
		if slices.Contains(ms, c.Method) {
			out = append(out, c)
		}
	}
	return out
}

// WaitFor blocks until cond holds for the recorded calls, checking after
// every call, or until ctx ends (returning its error).
func (a *Adapter) WaitFor(ctx context.Context, cond func([]Call) bool) error {
	for {
		a.mu.Lock()
		if a.changed == nil {
			a.changed = make(chan struct{})
		}
		calls, changed := a.calls.all(), a.changed
		a.mu.Unlock()
		if cond(calls) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Messages returns the visible text of each message of conv that was not
// deleted and is not ephemeral, in posting order.
func (a *Adapter) Messages(conv chat.ConvRef) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, m := range a.msgs {
		if !m.Deleted && m.Ephemeral == "" && m.Ref.Conv == conv {
			out = append(out, m.Text)
		}
	}
	return out
}

// LastText returns the visible text of the last message of conv that was
// not deleted, "" if none.
func (a *Adapter) LastText(conv chat.ConvRef) string {
	msgs := a.Messages(conv)
	if len(msgs) == 0 {
		return ""
	}
	return msgs[len(msgs)-1]
}

// Message returns the state of the message ref.
func (a *Adapter) Message(ref chat.MsgRef) (Message, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.byKey[ref.Key()]
	if !ok {
		return Message{}, false
	}
	c := *m
	c.Reactions = slices.Clone(m.Reactions)
	return c, true
}

// Ephemerals returns the text of the ephemeral messages user sees in
// conv, in posting order.
func (a *Adapter) Ephemerals(conv chat.ConvRef, user string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, m := range a.msgs {
		if m.Ephemeral == user && m.Ref.Conv == conv {
			out = append(out, m.Text)
		}
	}
	return out
}

// Status returns the last status set for conv.
func (a *Adapter) Status(conv chat.ConvRef) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status[conv.Key()]
}

// Draft returns the text of conv's open native stream, "" if none.
func (a *Adapter) Draft(conv chat.ConvRef) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.drafts[conv.Key()]
}

// Commands returns the last registered command list.
func (a *Adapter) Commands() []chat.CommandSpec {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.commands)
}
