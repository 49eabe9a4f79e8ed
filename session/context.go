package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
	// derived message): LLMMessages decodes each entry once per Tree.
	from []*node
}

// MarshalJSON writes {"messages":[...],"thinkingLevel":...,"model":...}.
func (c Context) MarshalJSON() ([]byte, error) {
	size := 64
	for _, m := range c.Messages {
		size += len(m) + 1
	}
	b := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := c.WriteTo(b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteTo writes the same bytes as MarshalJSON to w without building them
// in memory first (wrap w in a bufio.Writer: it makes one Write per part).
func (c Context) WriteTo(w io.Writer) (int64, error) {
	cw := countWriter{w: w}
	cw.writeString(`{"messages":[`)
	for i, m := range c.Messages {
		if i > 0 {
			cw.writeString(",")
		}
		cw.write(m)
	}
	if err := writeContextTail(&cw, c.ThinkingLevel, c.Model); err != nil {
		return cw.n, err
	}
	return cw.n, cw.err
}

// writeContextTail closes the messages array and writes the thinking level
// and model and the closing brace.
func writeContextTail(cw *countWriter, thinking string, model *ModelRef) error {
	cw.writeString(`],"thinkingLevel":`)
	cw.write(jsonString(thinking))
	cw.writeString(`,"model":`)
	if model == nil {
		cw.writeString("null")
	} else {
		m, err := marshalNoEscape(model)
		if err != nil {
			return err
		}
		cw.write(m)
	}
	cw.writeString("}")
	return nil
}

// countWriter counts bytes and keeps the first error; later writes are
// dropped.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (cw *countWriter) write(p []byte) {
	if cw.err != nil {
		return
	}
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	cw.err = err
}

func (cw *countWriter) writeString(s string) {
	if cw.err != nil {
		return
	}
	n, err := io.WriteString(cw.w, s)
	cw.n += int64(n)
	cw.err = err
}

// LLMMessages decodes the messages. A stored message is decoded once and
// kept by its Tree; each call returns copies the caller may change
// (Content is copied, its blocks' byte slices are shared and read-only).
func (c Context) LLMMessages() ([]llm.Message, error) {
	// The spare capacity lets an agent that adopts the slice add a run's
	// messages without copying it (agent.Headroom; session may not import
	// agent).
	out := make([]llm.Message, len(c.Messages), len(c.Messages)+4)
	for i, m := range c.Messages {
		var n *node
		if i < len(c.from) {
			n = c.from[i]
		}
		if err := decodeMessage(&out[i], n, m); err != nil {
			return nil, fmt.Errorf("session: context message %d: %w", i, err)
		}
		out[i].Content = slices.Clone(out[i].Content)
	}
	return out, nil
}

// decodeMessage sets *dst to the message raw, which is n's stored message
// or (n == nil) a derived one. A stored message is decoded once and kept
// by n; *dst then shares its Content, which nobody may change.
func decodeMessage(dst *llm.Message, n *node, raw []byte) error {
	if n != nil {
		if d := n.decoded.Load(); d != nil {
			*dst = *d
			return nil
		}
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return err
	}
	if n != nil {
		d := *dst
		n.decoded.Store(&d)
	}
	return nil
}

// Context builds the context for leafID ("" = pi's default leaf, the last
// entry in file order) exactly like pi's buildSessionContext.
func (t *Tree) Context(leafID string) (Context, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	path, err := t.branchLocked(leafID)
	if err != nil {
		return Context{}, err
	}
	c := Context{ThinkingLevel: "off", Messages: []json.RawMessage{}}
	if len(path) == 0 {
		return c, nil
	}
	c.Messages = make([]json.RawMessage, 0, len(path)+1)
	c.from = make([]*node, 0, len(path)+1)
	br := t.bodies()
	defer br.close()
	c.ThinkingLevel, c.Model = buildContext(path, func(k int, derived []byte) {
		if k < 0 {
			c.Messages = append(c.Messages, derived)
			c.from = append(c.from, nil)
			return
		}
		n := path[k]
		c.Messages = append(c.Messages, json.RawMessage(br.message(n)))
		c.from = append(c.from, n)
	})
	if br.err != nil {
		return Context{}, br.err
	}
	return c, nil
}

// buildContext is pi's buildSessionContext over path (root first): it
// calls emit for each message in order, with the index in path of a
// message entry whose stored message is used as is, or k < 0 and a
// message derived from an entry, and returns the thinking level and model.
// Nodes of message entries need typ, id, role, provider, model and msg;
// the others typ, id, ts and ent.
func buildContext(path []*node, emit func(k int, derived []byte)) (string, *ModelRef) {
	thinking := "off"
	var model *ModelRef
	compaction := -1
	for i, n := range path {
		thinking, model = settings(n, thinking, model)
		if n.typ == TypeCompaction {
			compaction = i
		}
	}
	if compaction < 0 {
		for k, n := range path {
			appendMessage(k, n, emit)
		}
		return thinking, model
	}
	comp := path[compaction]
	var b objWriter
	b.str("role", string(llm.RoleCompactionSummary))
	b.str("summary", comp.ent.Summary)
	_ = b.val("tokensBefore", comp.ent.TokensBefore)
	b.raw("timestamp", jsMillis(comp.ts))
	emit(-1, b.close())
	// pi finds the compaction by id; with duplicate ids the first wins.
	for i, n := range path {
		if n.typ == TypeCompaction && n.id == comp.id {
			compaction = i
			break
		}
	}
	kept := false
	for k, n := range path[:compaction] {
		if n.id == comp.ent.FirstKeptEntryID {
			kept = true
		}
		if kept {
			appendMessage(k, n, emit)
		}
	}
	for k, n := range path[compaction+1:] {
		appendMessage(compaction+1+k, n, emit)
	}
	return thinking, model
}

// settings returns the thinking level and model in effect after n on a
// branch, given those before it.
func settings(n *node, thinking string, model *ModelRef) (string, *ModelRef) {
	switch n.typ {
	case TypeThinkingLevelChange:
		thinking = n.ent.ThinkingLevel
	case TypeModelChange:
		model = &ModelRef{Provider: n.ent.Provider, ModelID: n.ent.ModelID}
	case TypeMessage:
		if n.role == string(llm.RoleAssistant) {
			model = &ModelRef{Provider: n.provider, ModelID: n.model}
		}
	}
	return thinking, model
}

// appendMessage is pi's appendMessage: message entries as stored,
// custom_message and non-empty branch_summary entries converted.
func appendMessage(k int, n *node, emit func(k int, derived []byte)) {
	if n.typ == TypeMessage {
		if n.msg[1] > n.msg[0] {
			emit(k, nil)
		}
		return
	}
	if m := derivedMessage(n); m != nil {
		emit(-1, m)
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
