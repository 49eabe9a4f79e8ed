// Package agenttest provides test doubles for package agent: a scripted
// model that replays canned assistant turns and records the requests it
// receives, and configurable fake tools.
package agenttest

import (
	"context"
	"encoding/json"
	"iter"
	"sync"
	"time"

	"github.com/pibot/pibot/llm"
)

// Turn is one scripted assistant response.
type Turn struct {
	// Content are the blocks streamed, in order, each as start/delta/end.
	Content []llm.Content
	// StopReason defaults to toolUse when Content has tool calls, else
	// stop. StopError and StopAborted end the stream with an error event.
	StopReason   llm.StopReason
	ErrorMessage string
	// Err is the Go error the error event carries (llm.Event.Err), as a
	// provider's failed call does; nil for none.
	Err   error
	Usage llm.Usage
	// Wait pauses after the content, before the terminal event; when ctx
	// is cancelled during the pause the turn ends as aborted.
	Wait time.Duration
	// Hang pauses after the content until ctx is cancelled.
	Hang bool
}

// Text returns a text block.
func Text(s string) llm.Content { return llm.TextBlock(s) }

// Thinking returns a thinking block.
func Thinking(s string) llm.Content { return llm.Content{Type: llm.ContentThinking, Thinking: s} }

// Call returns a tool call block with JSON arguments.
func Call(id, name, args string) llm.Content {
	return llm.Content{Type: llm.ContentToolCall, ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// Reply returns a turn streaming blocks.
func Reply(blocks ...llm.Content) Turn { return Turn{Content: blocks} }

// Fail returns a turn that fails with a provider error.
func Fail(msg string) Turn { return Turn{StopReason: llm.StopError, ErrorMessage: msg} }

// Script is an llm.Model that replays turns, one per Stream call, and
// records every request. It is safe for concurrent use.
type Script struct {
	mu       sync.Mutex
	info     llm.ModelInfo
	turns    []Turn
	requests []llm.Request
	now      func() time.Time
}

// NewScript returns a model described by info that replays turns.
func NewScript(info llm.ModelInfo, turns ...Turn) *Script {
	if info.ID == "" {
		info = ModelInfo()
	}
	return &Script{info: info, turns: turns, now: time.Now}
}

// ModelInfo is the default description of a scripted model.
func ModelInfo() llm.ModelInfo {
	return llm.ModelInfo{ID: "script-1", Name: "Script", API: "faux", Provider: "script",
		Input: []string{"text"}, ContextWindow: 128000, MaxTokens: 16384}
}

// Push appends turns to the script.
func (s *Script) Push(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// Requests returns the requests received so far.
func (s *Script) Requests() []llm.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]llm.Request(nil), s.requests...)
}

// Remaining returns how many turns have not been played.
func (s *Script) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns)
}

// Info implements llm.Model.
func (s *Script) Info() llm.ModelInfo { return s.info }

// Stream implements llm.Model by replaying the next turn.
func (s *Script) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	var turn Turn
	ok := len(s.turns) > 0
	if ok {
		turn, s.turns = s.turns[0], s.turns[1:]
	}
	s.mu.Unlock()
	if !ok {
		turn = Fail("agenttest: script exhausted")
	}
	return func(yield func(llm.Event) bool) {
		s.play(ctx, turn, yield)
	}
}

func (s *Script) play(ctx context.Context, t Turn, yield func(llm.Event) bool) {
	msg := &llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{}, API: s.info.API,
		Provider: s.info.Provider, Model: s.info.ID, Timestamp: s.now().UnixMilli()}
	snap := func() *llm.Message {
		c := *msg
		c.Content = append([]llm.Content(nil), msg.Content...)
		return &c
	}
	end := func(reason llm.StopReason, errMsg string) {
		msg.StopReason, msg.ErrorMessage, msg.Usage = reason, errMsg, t.Usage
		typ := llm.EventDone
		if reason == llm.StopError || reason == llm.StopAborted {
			typ = llm.EventError
		}
		var err error
		if reason == llm.StopError {
			err = t.Err
		}
		yield(llm.Event{Type: typ, Reason: reason, Message: snap(), Err: err})
	}
	if ctx.Err() != nil {
		end(llm.StopAborted, "Request was aborted")
		return
	}
	if !yield(llm.Event{Type: llm.EventStart, Partial: snap()}) {
		return
	}
	for i, b := range t.Content {
		if !s.block(i, b, msg, snap, yield) {
			return
		}
		if ctx.Err() != nil {
			end(llm.StopAborted, "Request was aborted")
			return
		}
	}
	if t.Wait > 0 || t.Hang {
		var timeout <-chan time.Time
		if t.Wait > 0 {
			tm := time.NewTimer(t.Wait)
			defer tm.Stop()
			timeout = tm.C
		}
		select {
		case <-ctx.Done():
			end(llm.StopAborted, "Request was aborted")
			return
		case <-timeout:
		}
	}
	reason := t.StopReason
	if reason == "" {
		reason = llm.StopStop
		if len(msg.ToolCalls()) > 0 {
			reason = llm.StopToolUse
		}
	}
	end(reason, t.ErrorMessage)
}

func (s *Script) block(i int, b llm.Content, msg *llm.Message, snap func() *llm.Message, yield func(llm.Event) bool) bool {
	var start, delta, stop llm.EventType
	var text string
	empty := b
	switch b.Type {
	case llm.ContentThinking:
		start, delta, stop, text = llm.EventThinkingStart, llm.EventThinkingDelta, llm.EventThinkingEnd, b.Thinking
		empty.Thinking = ""
	case llm.ContentToolCall:
		start, delta, stop, text = llm.EventToolCallStart, llm.EventToolCallDelta, llm.EventToolCallEnd, string(b.Arguments)
		empty.Arguments = json.RawMessage("{}")
	default:
		start, delta, stop, text = llm.EventTextStart, llm.EventTextDelta, llm.EventTextEnd, b.Text
		empty.Text = ""
	}
	msg.Content = append(msg.Content, empty)
	if !yield(llm.Event{Type: start, ContentIndex: i, Partial: snap()}) {
		return false
	}
	msg.Content[i] = b
	if !yield(llm.Event{Type: delta, ContentIndex: i, Delta: text, Partial: snap()}) {
		return false
	}
	ev := llm.Event{Type: stop, ContentIndex: i, Partial: snap()}
	if b.Type == llm.ContentToolCall {
		c := b
		ev.ToolCall = &c
	} else {
		ev.Content = text
	}
	return yield(ev)
}
