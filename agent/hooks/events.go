package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/llm"
)

// Input is what the input event tells the hooks about a message.
type Input struct {
	Text string `json:"text"`
	// Source says where the message comes from (platform, conversation,
	// user); the caller fills it.
	Source map[string]string `json:"source,omitempty"`
}

// InputResult is what the hooks made of a message: its text (maybe
// transformed) or, when Handled, a reply that replaces the run.
type InputResult struct {
	Text    string
	Handled bool
	Reply   string
}

// Input runs the input event: each hook may continue, transform the text
// (the next hook sees the new text) or handle the message with a reply
// (no run; later hooks are not asked). A fail-closed hook's failure is a
// *FailedError.
func (r *Runner) Input(ctx context.Context, in Input) (InputResult, error) {
	res := InputResult{Text: in.Text}
	err := r.each(ctx, EventInput, func() any {
		return struct {
			Event string `json:"event"`
			Input
		}{EventInput, Input{Text: res.Text, Source: in.Source}}
	}, func(h Hook, a answer) (bool, error) {
		switch a.Action {
		case "", "continue":
			return true, nil
		case "transform":
			if a.Text == nil {
				return false, errors.New(`"transform" without "text"`)
			}
			res.Text = *a.Text
			return true, nil
		case "handled":
			res.Handled, res.Reply = true, a.Reply
			return false, nil
		default:
			return false, errAction(EventInput, a.Action)
		}
	})
	return res, err
}

// BeforeAgentStart runs before_agent_start with the run's prompt: each
// hook may answer context, which is added to the system prompt. It
// returns the added text (hooks' contexts separated by blank lines).
func (r *Runner) BeforeAgentStart(ctx context.Context, prompt string) (string, error) {
	var added string
	err := r.each(ctx, EventBeforeAgentStart, func() any {
		return map[string]any{"event": EventBeforeAgentStart, "prompt": prompt}
	}, func(h Hook, a answer) (bool, error) {
		switch a.Action {
		case "", "continue":
		default:
			return false, errAction(EventBeforeAgentStart, a.Action)
		}
		if a.Context != "" {
			if added != "" {
				added += "\n\n"
			}
			added += a.Context
		}
		return true, nil
	})
	return added, err
}

// AgentEnd tells the hooks that a run ended, with the messages it added.
// Answers are ignored; failures are only logged.
func (r *Runner) AgentEnd(ctx context.Context, msgs []llm.Message) {
	_ = r.each(ctx, EventAgentEnd, func() any {
		return map[string]any{"event": EventAgentEnd, "messages": msgs}
	}, func(Hook, answer) (bool, error) { return true, nil })
}

// toolEvent is the tool_call and tool_result request.
type toolEvent struct {
	Event      string          `json:"event"`
	ToolCallID string          `json:"tool_call_id"`
	ToolName   string          `json:"tool_name"`
	Input      json.RawMessage `json:"input"`
	Content    []llm.Content   `json:"content,omitempty"`
	IsError    *bool           `json:"is_error,omitempty"`
}

// ToolCall runs tool_call: each hook may allow the call, block it with a
// reason (later hooks are not asked) or modify its arguments (later hooks
// see the new ones). A fail-closed hook's failure blocks the call.
func (r *Runner) ToolCall(ctx context.Context, c agent.ToolCall) (agent.Decision, error) {
	var d agent.Decision
	args := c.Args
	err := r.each(ctx, EventToolCall, func() any {
		return toolEvent{Event: EventToolCall, ToolCallID: c.ID, ToolName: c.Name, Input: args}
	}, func(h Hook, a answer) (bool, error) {
		switch a.Action {
		case "", "continue", "allow":
			return true, nil
		case "block":
			d.Block, d.Reason = true, a.Reason
			if d.Reason == "" {
				d.Reason = "Blocked by hook " + h.Name
			}
			return false, nil
		case "modify":
			var obj map[string]any
			if err := json.Unmarshal(a.Input, &obj); err != nil || obj == nil {
				return false, errors.New(`"modify" needs "input" with the arguments as a JSON object`)
			}
			args = a.Input
			d.Args = a.Input
			return true, nil
		default:
			return false, errAction(EventToolCall, a.Action)
		}
	})
	var failed *FailedError
	if errors.As(err, &failed) {
		return agent.Decision{Block: true, Reason: fmt.Sprintf("Blocked: %v", failed)}, nil
	}
	return d, err
}

// ToolResult runs tool_result: each hook may modify the result's content
// and error flag. A fail-closed hook's failure turns the result into an
// error.
func (r *Runner) ToolResult(ctx context.Context, c agent.ToolCall, out *agent.ToolResult) error {
	return r.each(ctx, EventToolResult, func() any {
		isErr := out.IsError
		return toolEvent{Event: EventToolResult, ToolCallID: c.ID, ToolName: c.Name, Input: c.Args, Content: out.Content, IsError: &isErr}
	}, func(h Hook, a answer) (bool, error) {
		switch a.Action {
		case "", "continue":
			return true, nil
		case "modify":
			if a.Content != nil {
				var content []llm.Content
				if err := json.Unmarshal(a.Content, &content); err != nil {
					return false, fmt.Errorf(`"modify": "content": %w`, err)
				}
				out.Content = content
			}
			if a.IsError != nil {
				out.IsError = *a.IsError
			}
			return true, nil
		default:
			return false, errAction(EventToolResult, a.Action)
		}
	})
}

// Wrap returns h with the tool hooks run first: a call a hook blocks is
// never shown to h.BeforeToolCall (no approval is asked for it), and h
// sees the arguments as the hooks modified them; results pass h first,
// then the hooks.
func (r *Runner) Wrap(h agent.Hooks) agent.Hooks {
	if r.Has(EventToolCall) {
		next := h.BeforeToolCall
		h.BeforeToolCall = func(ctx context.Context, c agent.ToolCall) (agent.Decision, error) {
			d, err := r.ToolCall(ctx, c)
			if err != nil || d.Block || next == nil {
				return d, err
			}
			if d.Args != nil {
				c.Args = d.Args
			}
			d2, err := next(ctx, c)
			if d2.Args == nil {
				d2.Args = d.Args
			}
			return d2, err
		}
	}
	if r.Has(EventToolResult) {
		prev := h.AfterToolCall
		h.AfterToolCall = func(ctx context.Context, c agent.ToolCall, out *agent.ToolResult) error {
			if prev != nil {
				if err := prev(ctx, c, out); err != nil {
					return err
				}
			}
			return r.ToolResult(ctx, c, out)
		}
	}
	return h
}
