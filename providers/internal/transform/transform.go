// Package transform prepares a conversation for replay to a model, like
// pi-ai's transformMessages: failed assistant messages are skipped,
// orphaned tool calls get a synthetic error result, thinking from another
// model becomes text, tool call ids are normalised for the target API and
// images are replaced by a note for text-only models.
package transform

import (
	"strings"

	"github.com/pibot/pibot/llm"
)

// Notes put in place of images a text-only model cannot read.
const (
	ImageOmitted     = "(image omitted: model does not support images)"
	ToolImageOmitted = "(tool image omitted: model does not support images)"
	NoResult         = "No result provided"
)

// Messages returns msgs transformed for target. normID normalises a
// foreign tool call id for the target API (nil keeps ids). msgs is not
// modified.
func Messages(msgs []llm.Message, target llm.ModelInfo, normID func(string) string) []llm.Message {
	images := target.SupportsImages()
	ids := map[string]string{}
	first := make([]llm.Message, 0, len(msgs))
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			if !images {
				m.Content = dropImages(m.Content, ImageOmitted)
			}
		case llm.RoleToolResult:
			if id, ok := ids[m.ToolCallID]; ok {
				m.ToolCallID = id
			}
			if !images {
				m.Content = dropImages(m.Content, ToolImageOmitted)
			}
		case llm.RoleAssistant:
			m = assistant(m, target, normID, ids)
		}
		first = append(first, m)
	}

	out := make([]llm.Message, 0, len(first))
	var pending []llm.Content
	var pendingTS int64
	answered := map[string]bool{}
	flush := func() {
		for _, c := range pending {
			if !answered[c.ID] {
				out = append(out, llm.Message{
					Role:       llm.RoleToolResult,
					ToolCallID: c.ID,
					ToolName:   c.Name,
					Content:    []llm.Content{llm.TextBlock(NoResult)},
					IsError:    true,
					Timestamp:  pendingTS,
				})
			}
		}
		pending = nil
		answered = map[string]bool{}
	}
	for _, m := range first {
		switch m.Role {
		case llm.RoleAssistant:
			flush()
			if m.StopReason == llm.StopError || m.StopReason == llm.StopAborted {
				continue
			}
			pending = m.ToolCalls()
			pendingTS = m.Timestamp
		case llm.RoleToolResult:
			answered[m.ToolCallID] = true
		case llm.RoleUser:
			flush()
		}
		out = append(out, m)
	}
	flush()
	return out
}

func sameModel(m llm.Message, t llm.ModelInfo) bool {
	return m.Provider == t.Provider && m.API == t.API && m.Model == t.ID
}

func assistant(m llm.Message, target llm.ModelInfo, normID func(string) string, ids map[string]string) llm.Message {
	same := sameModel(m, target)
	content := make([]llm.Content, 0, len(m.Content))
	for _, c := range m.Content {
		switch c.Type {
		case llm.ContentThinking:
			switch {
			case c.Redacted:
				if same {
					content = append(content, c)
				}
			case same && c.ThinkingSignature != "":
				content = append(content, c)
			case strings.TrimSpace(c.Thinking) == "":
			case same:
				content = append(content, c)
			default:
				content = append(content, llm.TextBlock(c.Thinking))
			}
		case llm.ContentText:
			if !same {
				c = llm.TextBlock(c.Text)
			}
			content = append(content, c)
		case llm.ContentToolCall:
			if !same {
				c.ThoughtSignature = ""
				if normID != nil {
					if n := normID(c.ID); n != c.ID {
						ids[c.ID] = n
						c.ID = n
					}
				}
			}
			content = append(content, c)
		default:
			content = append(content, c)
		}
	}
	m.Content = content
	return m
}

func dropImages(blocks []llm.Content, note string) []llm.Content {
	has := false
	for _, b := range blocks {
		if b.Type == llm.ContentImage {
			has = true
		}
	}
	if !has {
		return blocks
	}
	out := make([]llm.Content, 0, len(blocks))
	noted := false
	for _, b := range blocks {
		if b.Type != llm.ContentImage {
			out = append(out, b)
			noted = false
			continue
		}
		if !noted {
			out = append(out, llm.TextBlock(note))
			noted = true
		}
	}
	return out
}

// SanitizeID replaces characters outside [a-zA-Z0-9_-] with '_' and cuts
// the id to max bytes (Anthropic's rule with max 64).
func SanitizeID(id string, max int) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > max {
		b = b[:max]
	}
	return string(b)
}
