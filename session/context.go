package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/pibot/pibot/llm"
)

// ModelRef is the model a context was last using.
type ModelRef struct {
	Provider string `json:"provider"`
	ModelID  string `json:"modelId"`
}

// Context is what pi's buildSessionContext returns for a leaf. Messages are
// the AgentMessages as JSON: stored message objects byte for byte, and the
// custom/branchSummary/compactionSummary messages pi derives from entries.
type Context struct {
	Messages      []json.RawMessage
	ThinkingLevel string
	Model         *ModelRef

	// from[i] is the message entry Messages[i] was taken from (nil for a
	// derived message): LLMMessages decodes each entry once per Session.
	from []*node
}

// MarshalJSON writes {"messages":[...],"thinkingLevel":...,"model":...}.
func (c Context) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"messages":[`)
	for i, m := range c.Messages {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteString(`],"thinkingLevel":`)
	b.Write(jsonString(c.ThinkingLevel))
	b.WriteString(`,"model":`)
	if c.Model == nil {
		b.WriteString("null")
	} else {
		m, err := marshalNoEscape(c.Model)
		if err != nil {
			return nil, err
		}
		b.Write(m)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// LLMMessages decodes the messages. A stored message is decoded once and
// kept by its Session; each call returns copies the caller may change
// (Content is copied, its blocks' byte slices are shared and read-only).
func (c Context) LLMMessages() ([]llm.Message, error) {
	out := make([]llm.Message, len(c.Messages))
	for i, m := range c.Messages {
		var n *node
		if i < len(c.from) {
			n = c.from[i]
		}
		if n != nil {
			if d := n.decoded.Load(); d != nil {
				out[i] = *d
				out[i].Content = slices.Clone(d.Content)
				continue
			}
		}
		if err := json.Unmarshal(m, &out[i]); err != nil {
			return nil, fmt.Errorf("session: context message %d: %w", i, err)
		}
		if n != nil {
			d := out[i]
			d.Content = slices.Clone(d.Content)
			n.decoded.Store(&d)
		}
	}
	return out, nil
}

// Context builds the context for leafID ("" = pi's default leaf, the last
// entry in file order) exactly like pi's buildSessionContext.
func (s *Session) Context(leafID string) (Context, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	leaf, err := s.leafLocked(leafID)
	if err != nil {
		return Context{}, err
	}
	c := Context{ThinkingLevel: "off", Messages: []json.RawMessage{}}
	if leaf == nil {
		return c, nil
	}
	path := s.pathLocked(leaf)
	compaction := -1
	for i, n := range path {
		switch n.typ {
		case TypeThinkingLevelChange:
			c.ThinkingLevel = n.ent.ThinkingLevel
		case TypeModelChange:
			c.Model = &ModelRef{Provider: n.ent.Provider, ModelID: n.ent.ModelID}
		case TypeMessage:
			if n.role == string(llm.RoleAssistant) {
				c.Model = &ModelRef{Provider: n.provider, ModelID: n.model}
			}
		case TypeCompaction:
			compaction = i
		}
	}
	if compaction < 0 {
		c.Messages = make([]json.RawMessage, 0, len(path))
		c.from = make([]*node, 0, len(path))
		for _, n := range path {
			c.appendMessage(n)
		}
		return c, nil
	}
	comp := path[compaction]
	var b objWriter
	b.str("role", string(llm.RoleCompactionSummary))
	b.str("summary", comp.ent.Summary)
	_ = b.val("tokensBefore", comp.ent.TokensBefore)
	b.raw("timestamp", jsMillis(comp.ts))
	c.Messages = append(c.Messages, b.close())
	c.from = append(c.from, nil)
	// pi finds the compaction by id; with duplicate ids the first wins.
	for i, n := range path {
		if n.typ == TypeCompaction && n.id == comp.id {
			compaction = i
			break
		}
	}
	kept := false
	for _, n := range path[:compaction] {
		if n.id == comp.ent.FirstKeptEntryID {
			kept = true
		}
		if kept {
			c.appendMessage(n)
		}
	}
	for _, n := range path[compaction+1:] {
		c.appendMessage(n)
	}
	return c, nil
}

// appendMessage is pi's appendMessage: message entries as stored,
// custom_message and non-empty branch_summary entries converted.
func (c *Context) appendMessage(n *node) {
	if n.typ == TypeMessage {
		if n.msg[1] > n.msg[0] {
			c.Messages = append(c.Messages, json.RawMessage(n.raw[n.msg[0]:n.msg[1]]))
			c.from = append(c.from, n)
		}
		return
	}
	if m := derivedMessage(n); m != nil {
		c.Messages = append(c.Messages, m)
		c.from = append(c.from, nil)
	}
}

// derivedMessage is the message pi derives from a custom_message or a
// non-empty branch_summary entry, or nil.
func derivedMessage(n *node) json.RawMessage {
	switch n.typ {
	case TypeCustomMessage:
		var b objWriter
		b.str("role", string(llm.RoleCustom))
		b.str("customType", n.ent.CustomType)
		if n.ent.Content != nil {
			b.raw("content", n.ent.Content)
		}
		_ = b.val("display", n.ent.Display)
		if n.ent.Details != nil {
			b.raw("details", n.ent.Details)
		}
		b.raw("timestamp", jsMillis(n.ts))
		return b.close()
	case TypeBranchSummary:
		if n.ent.Summary != "" {
			var b objWriter
			b.str("role", string(llm.RoleBranchSummary))
			b.str("summary", n.ent.Summary)
			b.str("fromId", n.ent.FromID)
			b.raw("timestamp", jsMillis(n.ts))
			return b.close()
		}
	}
	return nil
}

// jsMillis is new Date(ts).getTime() as JSON (null for NaN).
func jsMillis(ts string) []byte {
	ms, ok := parseMillis(ts)
	if !ok {
		return []byte("null")
	}
	return strconv.AppendInt(nil, ms, 10)
}
