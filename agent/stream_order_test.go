package agent_test

import (
	"context"
	"iter"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

// returnsModel wraps a model and notes when its stream has returned.
type returnsModel struct {
	llm.Model
	returned bool
}

func (m *returnsModel) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	inner := m.Model.Stream(ctx, req)
	return func(yield func(llm.Event) bool) {
		m.returned = false
		defer func() { m.returned = true }()
		for e := range inner {
			if !yield(e) {
				return
			}
		}
	}
}

// The answer's message_end comes once the provider's stream has returned,
// not from inside it: the listener (the gateway, which encodes the session
// line there) then runs without the provider's frames under it. Updates
// come from inside the stream, as they must.
func TestMessageEndAfterStreamReturns(t *testing.T) {
	m := &returnsModel{Model: agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text("hello there")))}
	a := newAgent(m, nil, nil)
	var updates, ends int
	r := &recorder{hook: func(e agent.Event) {
		if e.Message == nil || e.Message.Role != llm.RoleAssistant {
			return
		}
		switch e.Type {
		case agent.EventMessageUpdate:
			updates++
			if m.returned {
				t.Error("message_update after the stream returned")
			}
		case agent.EventMessageEnd:
			ends++
			if !m.returned {
				t.Error("message_end from inside the provider's stream")
			}
			if got := e.Message.Text(); got != "hello there" {
				t.Errorf("message_end text = %q", got)
			}
		}
	}}
	prompt(t, a, r, "hi")
	if updates == 0 || ends != 1 {
		t.Errorf("%d updates, %d message_end; want some and 1", updates, ends)
	}
}
