package agent

import (
	"slices"
	"sync"

	"github.com/pibot/pibot/llm"
)

// conversation holds an agent's messages and their conversion for a
// model. It is safe for concurrent use; a run's goroutine is its only
// writer while the run is active.
type conversation struct {
	mu       sync.Mutex
	messages []llm.Message
	// conv is messages[:convSrc] converted for a model (llm.ConvertToLLM),
	// grown by what a run adds (convertedLocked) so that a model call
	// does not convert and copy the whole conversation again; nil after
	// the conversation changed otherwise.
	conv    []llm.Message
	convSrc int
	// streaming: the last message is the run's live partial, whose
	// Content the run goroutine rewrites (under mu) on every update;
	// snapshot copies it.
	streaming bool
}

// snapshot returns a copy of the conversation, including a partial
// assistant message while one streams.
func (c *conversation) snapshot() []llm.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.messages)
	if n := len(out); c.streaming && n > 0 {
		// The live partial's blocks change with the next update.
		out[n-1].Content = slices.Clone(out[n-1].Content)
	}
	return out
}

// set replaces the conversation with a copy of msgs.
func (c *conversation) set(msgs []llm.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.messages = slices.Clone(msgs)
	c.conv, c.convSrc = nil, 0
}

// last returns the number of messages and the role of the last one.
func (c *conversation) last() (n int, role llm.Role) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n = len(c.messages)
	if n > 0 {
		role = c.messages[n-1].Role
	}
	return n, role
}

// add appends m.
func (c *conversation) add(m llm.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.messages = append(c.messages, m)
}

// removeLastAssistant drops the conversation's last message if it is an
// assistant message and returns it (ok false when it was not); pi does
// this before a retry or an overflow compaction (the message stays in the
// session file).
func (c *conversation) removeLastAssistant() (llm.Message, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.messages); n > 0 && c.messages[n-1].Role == llm.RoleAssistant {
		m := c.messages[n-1]
		// Clipped: the next message must not overwrite the dropped one,
		// which may be an adopted history's (see Adopt) or in a request
		// a provider was given.
		c.messages = slices.Clip(c.messages[:n-1])
		c.conv, c.convSrc = nil, 0
		return m, true
	}
	return llm.Message{}, false
}

// forRequest returns the messages for the next model request: a copy when
// a TransformContext hook will see them (transform), else the messages
// converted for a model.
func (c *conversation) forRequest(transform bool) []llm.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case transform:
		return slices.Clone(c.messages)
	case llmNative(c.messages):
		// Nothing to convert: the request shares the conversation. It is
		// a snapshot all the same: while the model streams, the run
		// goroutine (the only writer) adds messages after these, never
		// over them, and the clipped slice cannot grow into them.
		return slices.Clip(c.messages)
	default:
		// Converted once, grown by what was added since (a session
		// with a compaction has a summary to convert on every call).
		return c.convertedLocked()
	}
}

// convertedLocked returns the conversation converted for a model
// (llm.ConvertToLLM), converting only the messages added since the last
// call. The messages it converted are never changed in place: a run only
// appends, and replaces only the message streaming after them. The
// result is clipped, so a request keeps its snapshot while the run
// appends. The caller holds mu.
func (c *conversation) convertedLocked() []llm.Message {
	if c.convSrc > len(c.messages) {
		c.conv, c.convSrc = nil, 0
	}
	if c.conv == nil {
		// Room for a few tool rounds: a run's later calls append to it.
		c.conv = make([]llm.Message, 0, len(c.messages)+16)
	}
	c.conv = llm.AppendConverted(c.conv, c.messages[c.convSrc:])
	c.convSrc = len(c.messages)
	return slices.Clip(c.conv)
}

// setLast replaces the streaming message (replace) or appends m.
func (c *conversation) setLast(m llm.Message, replace bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streaming = false
	if replace && len(c.messages) > 0 {
		c.messages[len(c.messages)-1] = m
		return
	}
	c.messages = append(c.messages, m)
}

// setLive makes *partial the provider's message src, its blocks copied
// into live (reusing its array), and the conversation's last message; it
// returns the array. The caller streams: the last message is the one
// message_start appended.
func (c *conversation) setLive(partial, src *llm.Message, live []llm.Content) []llm.Content {
	c.mu.Lock()
	defer c.mu.Unlock()
	live = append(live[:0], src.Content...)
	*partial = *src
	partial.Content = live
	if n := len(c.messages); n > 0 {
		c.messages[n-1] = *partial
	}
	c.streaming = true
	return live
}

// llmNative reports whether every message has a role a model takes as is,
// so that llm.ConvertToLLM would copy them unchanged.
func llmNative(msgs []llm.Message) bool {
	for i := range msgs {
		switch msgs[i].Role {
		case llm.RoleUser, llm.RoleAssistant, llm.RoleToolResult:
		default:
			return false
		}
	}
	return true
}
