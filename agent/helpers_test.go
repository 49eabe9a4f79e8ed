package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/llm"
)

// recorder collects events and renders them as pi-comparable lines:
// type, role, toolCallId, contentIndex (and the provider event type).
type recorder struct {
	events []agent.Event
	hook   func(agent.Event)
}

func (r *recorder) emit(e agent.Event) {
	r.events = append(r.events, keep(e))
	if r.hook != nil {
		r.hook(e)
	}
}

// keep copies what a message_update lends only for the emit call.
func keep(e agent.Event) agent.Event {
	if e.Type != agent.EventMessageUpdate {
		return e
	}
	m := *e.Message
	m.Content = slices.Clone(m.Content)
	ae := *e.AssistantEvent
	ae.Partial = &m
	e.Message, e.AssistantEvent = &m, &ae
	return e
}

func (r *recorder) lines() []string {
	var out []string
	for _, e := range r.events {
		out = append(out, line(e))
	}
	return out
}

func line(e agent.Event) string {
	s := string(e.Type)
	switch e.Type {
	case agent.EventMessageStart, agent.EventMessageEnd:
		s += " " + string(e.Message.Role)
		if e.Message.Role == llm.RoleToolResult {
			s += " " + e.Message.ToolCallID
		}
	case agent.EventMessageUpdate:
		s += fmt.Sprintf(" %s %d", e.AssistantEvent.Type, e.AssistantEvent.ContentIndex)
	case agent.EventToolExecutionStart, agent.EventToolExecutionUpdate, agent.EventToolExecutionEnd:
		s += " " + e.ToolCallID
	case agent.EventQueueUpdate:
		s += fmt.Sprintf(" %q %q", e.Steering, e.FollowUp)
	case agent.EventAutoRetryStart, agent.EventAutoRetryEnd:
		s += fmt.Sprintf(" %d", e.Attempt)
	}
	return s
}

func (r *recorder) find(t agent.EventType, id string) agent.Event {
	for _, e := range r.events {
		if e.Type == t && e.ToolCallID == id {
			return e
		}
	}
	return agent.Event{}
}

func checkLines(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("event order mismatch\n got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// expand turns shorthand into lines: "text 0" expands to the three
// message_update lines of a streamed block.
func expand(spec ...string) []string {
	var out []string
	for _, s := range spec {
		f := strings.Fields(s)
		switch f[0] {
		case "text", "thinking", "toolcall":
			for _, p := range []string{"_start", "_delta", "_end"} {
				out = append(out, "message_update "+f[0]+p+" "+f[1])
			}
		default:
			out = append(out, s)
		}
	}
	return out
}

func user(s string) llm.Message { return llm.UserText(s, 1) }

func fixedNow() time.Time { return time.UnixMilli(1_700_000_000_000) }

func newAgent(model llm.Model, tools []agent.Tool, mod func(*agent.Config)) *agent.Agent {
	cfg := agent.Config{Model: model, Tools: tools, Now: fixedNow, SystemPrompt: "sys"}
	if mod != nil {
		mod(&cfg)
	}
	return agent.New(cfg, nil)
}

func prompt(t *testing.T, a *agent.Agent, r *recorder, text string) {
	t.Helper()
	if err := a.Prompt(t.Context(), r.emit, user(text)); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
}

func resultText(e agent.Event) string {
	if e.Result == nil {
		return ""
	}
	return llm.JoinText(e.Result.Content, "")
}

func echoTool(name string) *agenttest.Tool {
	return &agenttest.Tool{Name: name, Fn: func(_ context.Context, id string, args json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		return agenttest.TextOutput(name + ":" + string(args)), nil
	}}
}
