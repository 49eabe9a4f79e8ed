// Package assemble builds an assistant message from provider stream
// callbacks and emits pi's unified events in order: start, block events and
// exactly one terminal done or error. Every API adapter and the faux
// provider share it, so the event contract lives in one place.
package assemble

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/partialjson"
)

// AbortedMessage is pi's error text for a cancelled request.
const AbortedMessage = "Request was aborted"

// Builder accumulates one assistant message. It is not safe for concurrent
// use; one Stream call owns one Builder.
type Builder struct {
	info  llm.ModelInfo
	yield func(llm.Event) bool
	msg   llm.Message
	// blocks is the state of each content block, by index (a slice, not
	// maps: every streamed token looks its block up).
	blocks  []block
	stopped bool
	ended   bool
}

// New returns a Builder for a message of model info that hands events to
// yield. now stamps the message; nil means time.Now.
func New(info llm.ModelInfo, yield func(llm.Event) bool, now func() time.Time) *Builder {
	if now == nil {
		now = time.Now
	}
	return &Builder{
		info:  info,
		yield: yield,
		msg: llm.Message{
			Role:       llm.RoleAssistant,
			Content:    []llm.Content{},
			API:        info.API,
			Provider:   info.Provider,
			Model:      info.ID,
			StopReason: llm.StopStop,
			Timestamp:  now().UnixMilli(),
		},
	}
}

// Stopped reports whether the consumer stopped iterating or a terminal
// event was sent; the caller must then return.
func (b *Builder) Stopped() bool { return b.stopped || b.ended }

func (b *Builder) emit(e llm.Event) bool {
	if b.stopped || b.ended {
		return false
	}
	if !b.yield(e) {
		b.stopped = true
	}
	return !b.stopped
}

// Message returns the message built so far (shared; copy to keep).
func (b *Builder) Message() *llm.Message { return &b.msg }

// SetResponse records the response id and the model the server reports.
func (b *Builder) SetResponse(id, model string) {
	if id != "" {
		b.msg.ResponseID = id
	}
	if model != "" && model != b.info.ID {
		b.msg.ResponseModel = model
	}
}

// Start emits the start event.
func (b *Builder) Start() bool {
	return b.emit(llm.Event{Type: llm.EventStart, Partial: &b.msg})
}

// block is the state of one content block.
type block struct {
	open bool
	// raw is a tool call's raw JSON, or the growing text of a text or
	// thinking block; nil until its first delta for text.
	raw *strings.Builder
}

func (b *Builder) add(c llm.Content, typ llm.EventType, raw *strings.Builder) (int, bool) {
	b.msg.Content = append(b.msg.Content, c)
	i := len(b.msg.Content) - 1
	for len(b.blocks) <= i {
		b.blocks = append(b.blocks, block{})
	}
	b.blocks[i] = block{open: true, raw: raw}
	return i, b.emit(llm.Event{Type: typ, ContentIndex: i, Partial: &b.msg})
}

// TextStart opens a text block and returns its index.
func (b *Builder) TextStart() (int, bool) {
	return b.add(llm.Content{Type: llm.ContentText}, llm.EventTextStart, nil)
}

// ThinkingStart opens a thinking block and returns its index.
func (b *Builder) ThinkingStart() (int, bool) {
	return b.add(llm.Content{Type: llm.ContentThinking}, llm.EventThinkingStart, nil)
}

// ToolCallStart opens a tool-call block and returns its index.
func (b *Builder) ToolCallStart(id, name string) (int, bool) {
	return b.add(llm.Content{Type: llm.ContentToolCall, ID: id, Name: name, Arguments: json.RawMessage("{}")}, llm.EventToolCallStart, &strings.Builder{})
}

// Block returns block i for provider-specific updates (signatures, ids).
func (b *Builder) Block(i int) *llm.Content { return &b.msg.Content[i] }

// Delta appends s to block i and emits the matching delta event. For a
// tool call s is a raw JSON fragment and the partial arguments are
// re-parsed best effort. A delta for a block that is not open is ignored.
func (b *Builder) Delta(i int, s string) bool {
	if b.Stopped() {
		return false
	}
	if !b.IsOpen(i) {
		return true
	}
	c := &b.msg.Content[i]
	var typ llm.EventType
	switch c.Type {
	case llm.ContentText:
		c.Text = b.grow(i, c.Text, s)
		typ = llm.EventTextDelta
	case llm.ContentThinking:
		c.Thinking = b.grow(i, c.Thinking, s)
		typ = llm.EventThinkingDelta
	case llm.ContentToolCall:
		ab := b.blocks[i].raw
		ab.WriteString(s)
		if out, ok := partialjson.Repair(ab.String()); ok && strings.HasPrefix(out, "{") {
			c.Arguments = json.RawMessage(out)
		}
		typ = llm.EventToolCallDelta
	default:
		return !b.Stopped()
	}
	return b.emit(llm.Event{Type: typ, ContentIndex: i, Delta: s, Partial: &b.msg})
}

// IsOpen reports whether block i has started and not ended.
func (b *Builder) IsOpen(i int) bool {
	return i >= 0 && i < len(b.blocks) && b.blocks[i].open
}

// grow appends s to the text of block i in amortised constant time.
func (b *Builder) grow(i int, cur, s string) string {
	st := &b.blocks[i]
	sb := st.raw
	if sb == nil {
		sb = &strings.Builder{}
		sb.WriteString(cur)
		st.raw = sb
	}
	sb.WriteString(s)
	return sb.String()
}

// End closes block i and emits its end event. Ending a closed block does
// nothing.
func (b *Builder) End(i int) bool {
	if !b.IsOpen(i) {
		return !b.Stopped()
	}
	st := &b.blocks[i]
	st.open = false
	c := &b.msg.Content[i]
	switch c.Type {
	case llm.ContentText:
		st.raw = nil
		return b.emit(llm.Event{Type: llm.EventTextEnd, ContentIndex: i, Content: c.Text, Partial: &b.msg})
	case llm.ContentThinking:
		st.raw = nil
		return b.emit(llm.Event{Type: llm.EventThinkingEnd, ContentIndex: i, Content: c.Thinking, Partial: &b.msg})
	case llm.ContentToolCall:
		if ab := st.raw; ab != nil {
			raw := ab.String()
			if json.Valid([]byte(raw)) && strings.HasPrefix(strings.TrimSpace(raw), "{") {
				c.Arguments = json.RawMessage(strings.TrimSpace(raw))
			} else {
				c.Arguments = partialjson.Object(raw)
			}
			st.raw = nil
		}
		tc := *c
		return b.emit(llm.Event{Type: llm.EventToolCallEnd, ContentIndex: i, ToolCall: &tc, Partial: &b.msg})
	}
	return !b.Stopped()
}

// SetUsage records usage (normalised by the caller) and prices it.
func (b *Builder) SetUsage(u llm.Usage) {
	if u.TotalTokens == 0 {
		u.TotalTokens = u.Input + u.Output + u.CacheRead + u.CacheWrite
	}
	u.Cost = b.info.CostOf(u)
	b.msg.Usage = u
}

// Usage returns the usage recorded so far.
func (b *Builder) Usage() llm.Usage { return b.msg.Usage }

// HasToolCalls reports whether the message contains a tool call.
func (b *Builder) HasToolCalls() bool {
	for _, c := range b.msg.Content {
		if c.Type == llm.ContentToolCall {
			return true
		}
	}
	return false
}

func (b *Builder) closeOpen() bool {
	for i := range b.msg.Content {
		if b.IsOpen(i) && !b.End(i) {
			return false
		}
	}
	return true
}

func (b *Builder) final() *llm.Message {
	m := b.msg
	m.Content = append([]llm.Content(nil), b.msg.Content...)
	return &m
}

// Done closes open blocks and emits done with reason (stop, length or
// toolUse). It returns the final message.
func (b *Builder) Done(reason llm.StopReason) *llm.Message {
	if !b.closeOpen() {
		return b.final()
	}
	b.msg.StopReason = reason
	m := b.final()
	b.emit(llm.Event{Type: llm.EventDone, Reason: reason, Message: m})
	b.ended = true
	return m
}

// Fail emits the terminal error event with reason error or aborted and the
// partial content kept. Open blocks are left without end events, like pi.
func (b *Builder) Fail(reason llm.StopReason, text string) *llm.Message {
	return b.fail(reason, text, nil)
}

// fail is Fail with the Go error behind it (nil when none), handed to the
// consumer on the error event (llm.Event.Err).
func (b *Builder) fail(reason llm.StopReason, text string, err error) *llm.Message {
	for i := range b.blocks {
		st := &b.blocks[i]
		if st.raw != nil && b.msg.Content[i].Type == llm.ContentToolCall {
			b.msg.Content[i].Arguments = partialjson.Object(st.raw.String())
		}
		*st = block{}
	}
	b.msg.StopReason = reason
	b.msg.ErrorMessage = text
	m := b.final()
	b.emit(llm.Event{Type: llm.EventError, Reason: reason, Message: m, Err: err})
	b.ended = true
	return m
}

// Abort is Fail with pi's aborted reason and text.
func (b *Builder) Abort() *llm.Message { return b.Fail(llm.StopAborted, AbortedMessage) }

// FailErr ends the stream for err: aborted when ctx was cancelled,
// otherwise error with err's text (credentials are redacted by the
// transport before they get here), and err itself on the error event, so
// that the agent decides a retry on the typed error (llm.RetryableErr).
func (b *Builder) FailErr(ctx context.Context, err error) *llm.Message {
	if ctx.Err() != nil {
		return b.Abort()
	}
	return b.fail(llm.StopError, err.Error(), err)
}
