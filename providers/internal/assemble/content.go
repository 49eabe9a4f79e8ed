package assemble

import (
	"encoding/json"
	"strings"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/partialjson"
)

// Blocks are the content blocks of a Builder's message: it opens them,
// grows them by deltas and ends them, emitting each block's start, delta
// and end events. It is not safe for concurrent use; get it from
// Builder.Blocks.
type Blocks struct {
	msg *llm.Message
	out *events
	// state is the state of each content block, by index (a slice, not
	// maps: every streamed token looks its block up).
	state []block
}

// block is the state of one content block.
type block struct {
	open bool
	// raw is a tool call's raw JSON, or the growing text of a text or
	// thinking block; nil until its first delta for text.
	raw *strings.Builder
}

func (bs *Blocks) add(c llm.Content, typ llm.EventType, raw *strings.Builder) (int, bool) {
	bs.msg.Content = append(bs.msg.Content, c)
	i := len(bs.msg.Content) - 1
	for len(bs.state) <= i {
		bs.state = append(bs.state, block{})
	}
	bs.state[i] = block{open: true, raw: raw}
	return i, bs.out.emit(llm.Event{Type: typ, ContentIndex: i, Partial: bs.msg})
}

// TextStart opens a text block and returns its index.
func (bs *Blocks) TextStart() (int, bool) {
	return bs.add(llm.Content{Type: llm.ContentText}, llm.EventTextStart, nil)
}

// ThinkingStart opens a thinking block and returns its index.
func (bs *Blocks) ThinkingStart() (int, bool) {
	return bs.add(llm.Content{Type: llm.ContentThinking}, llm.EventThinkingStart, nil)
}

// ToolCallStart opens a tool-call block and returns its index.
func (bs *Blocks) ToolCallStart(id, name string) (int, bool) {
	return bs.add(llm.Content{Type: llm.ContentToolCall, ID: id, Name: name, Arguments: json.RawMessage("{}")}, llm.EventToolCallStart, &strings.Builder{})
}

// At returns block i for provider-specific updates (signatures, ids).
func (bs *Blocks) At(i int) *llm.Content { return &bs.msg.Content[i] }

// IsOpen reports whether block i has started and not ended.
func (bs *Blocks) IsOpen(i int) bool {
	return i >= 0 && i < len(bs.state) && bs.state[i].open
}

// Delta appends s to block i and emits the matching delta event. For a
// tool call s is a raw JSON fragment and the partial arguments are
// re-parsed best effort. A delta for a block that is not open is ignored.
func (bs *Blocks) Delta(i int, s string) bool {
	if bs.out.over() {
		return false
	}
	if !bs.IsOpen(i) {
		return true
	}
	c := &bs.msg.Content[i]
	st := &bs.state[i]
	var typ llm.EventType
	switch c.Type {
	case llm.ContentText:
		c.Text = st.grow(c.Text, s)
		typ = llm.EventTextDelta
	case llm.ContentThinking:
		c.Thinking = st.grow(c.Thinking, s)
		typ = llm.EventThinkingDelta
	case llm.ContentToolCall:
		if args, ok := st.argsDelta(s); ok {
			c.Arguments = args
		}
		typ = llm.EventToolCallDelta
	default:
		return true
	}
	return bs.out.emit(llm.Event{Type: typ, ContentIndex: i, Delta: s, Partial: bs.msg})
}

// End closes block i and emits its end event. Ending a closed block does
// nothing.
func (bs *Blocks) End(i int) bool {
	if !bs.IsOpen(i) {
		return !bs.out.over()
	}
	st := &bs.state[i]
	st.open = false
	c := &bs.msg.Content[i]
	switch c.Type {
	case llm.ContentText:
		st.raw = nil
		return bs.out.emit(llm.Event{Type: llm.EventTextEnd, ContentIndex: i, Content: c.Text, Partial: bs.msg})
	case llm.ContentThinking:
		st.raw = nil
		return bs.out.emit(llm.Event{Type: llm.EventThinkingEnd, ContentIndex: i, Content: c.Thinking, Partial: bs.msg})
	case llm.ContentToolCall:
		if st.raw != nil {
			c.Arguments = st.argsEnd()
			st.raw = nil
		}
		tc := *c
		return bs.out.emit(llm.Event{Type: llm.EventToolCallEnd, ContentIndex: i, ToolCall: &tc, Partial: bs.msg})
	}
	return !bs.out.over()
}

// endOpen ends every open block, in order; false when the stream is over.
func (bs *Blocks) endOpen() bool {
	for i := range bs.msg.Content {
		if bs.IsOpen(i) && !bs.End(i) {
			return false
		}
	}
	return true
}

// drop forgets every block's state without end events (the stream
// failed), keeping a tool call's partial arguments as a JSON object.
func (bs *Blocks) drop() {
	for i := range bs.state {
		st := &bs.state[i]
		if st.raw != nil && bs.msg.Content[i].Type == llm.ContentToolCall {
			bs.msg.Content[i].Arguments = partialjson.Object(st.raw.String())
		}
		*st = block{}
	}
}

// grow appends s to cur, the text of a text or thinking block, in
// amortised constant time.
func (st *block) grow(cur, s string) string {
	sb := st.raw
	if sb == nil {
		sb = &strings.Builder{}
		sb.WriteString(cur)
		st.raw = sb
	}
	sb.WriteString(s)
	return sb.String()
}

// argsDelta appends the raw JSON fragment s to a tool call's arguments
// and returns them repaired into an object, best effort; false when the
// fragments so far do not repair into one.
func (st *block) argsDelta(s string) (json.RawMessage, bool) {
	st.raw.WriteString(s)
	if out, ok := partialjson.Repair(st.raw.String()); ok && strings.HasPrefix(out, "{") {
		return json.RawMessage(out), true
	}
	return nil, false
}

// argsEnd returns a tool call's final arguments: its raw JSON when that is
// a valid object, else the object its fragments repair into.
func (st *block) argsEnd() json.RawMessage {
	raw := st.raw.String()
	if json.Valid([]byte(raw)) && strings.HasPrefix(strings.TrimSpace(raw), "{") {
		return json.RawMessage(strings.TrimSpace(raw))
	}
	return partialjson.Object(raw)
}
