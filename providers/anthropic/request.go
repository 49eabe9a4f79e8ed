package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/transform"
)

// NormalizeID makes a tool call id acceptable to Anthropic.
func NormalizeID(id string) string { return transform.SanitizeID(id, 64) }

func contentBlocks(cs []llm.Content) []block {
	out := make([]block, 0, len(cs))
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			if strings.TrimSpace(c.Text) == "" {
				continue
			}
			out = append(out, textBlock(c.Text))
		case llm.ContentImage:
			out = append(out, imageBlock(c.MimeType, c.Data))
		}
	}
	return out
}

// toolResultContent converts a tool result's text and images.
func toolResultContent(cs []llm.Content) []block {
	out := contentBlocks(cs)
	if len(out) == 0 {
		out = append(out, textBlock("(no output)"))
	}
	return out
}

// assistantBlocks converts a replayed assistant turn.
func assistantBlocks(msg llm.Message) []block {
	var blocks []block
	for _, c := range msg.Content {
		switch c.Type {
		case llm.ContentText:
			if strings.TrimSpace(c.Text) != "" {
				blocks = append(blocks, textBlock(c.Text))
			}
		case llm.ContentThinking:
			switch {
			case c.Redacted:
				blocks = append(blocks, redactedThinkingBlock(c.ThinkingSignature))
			case c.ThinkingSignature != "":
				blocks = append(blocks, thinkingBlock(c.ThinkingSignature, c.Thinking))
			case strings.TrimSpace(c.Thinking) != "":
				blocks = append(blocks, textBlock(c.Thinking))
			}
		case llm.ContentToolCall:
			args := c.Arguments
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			blocks = append(blocks, toolUseBlock(c.ID, args, c.Name))
		}
	}
	return blocks
}

// adaptive reports whether a model uses adaptive thinking with effort.
func adaptive(id string) bool {
	for _, s := range []string{"opus-4-6", "opus-4.6", "opus-4-7", "opus-4.7", "sonnet-4-6", "sonnet-4.6"} {
		if strings.Contains(id, s) {
			return true
		}
	}
	return false
}

// budget is the thinking budget in tokens of a level.
func budget(level llm.ThinkingLevel) int64 {
	switch level {
	case llm.ThinkingMinimal:
		return 1024
	case llm.ThinkingLow:
		return 2048
	case llm.ThinkingMedium:
		return 8192
	case llm.ThinkingHigh, llm.ThinkingXHigh:
		return 16384
	}
	return 0
}

// encode returns the JSON body of the streaming request for req.
func (m *Model) encode(req llm.Request) ([]byte, error) {
	p, err := m.params(req)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // text as written, not <>& escaped
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// params builds the request body.
func (m *Model) params(req llm.Request) (request, error) {
	msgs := transform.Messages(req.Messages, m.info, NormalizeID)
	var out []message
	for i := 0; i < len(msgs); i++ {
		msg := msgs[i]
		switch msg.Role {
		case llm.RoleUser:
			if blocks := contentBlocks(msg.Content); len(blocks) > 0 {
				out = append(out, message{Role: "user", Content: blocks})
			}
		case llm.RoleAssistant:
			if blocks := assistantBlocks(msg); len(blocks) > 0 {
				out = append(out, message{Role: "assistant", Content: blocks})
			}
		case llm.RoleToolResult:
			var results []block
			for ; i < len(msgs) && msgs[i].Role == llm.RoleToolResult; i++ {
				tr := msgs[i]
				results = append(results, toolResultBlock(tr.ToolCallID, toolResultContent(tr.Content), tr.IsError))
			}
			i--
			out = append(out, message{Role: "user", Content: results})
		}
	}
	// Prompt caching: mark the last block of the last user turn (text,
	// image or tool result: all take cache_control).
	if n := len(out); n > 0 && out[n-1].Role == "user" {
		if bs := out[n-1].Content; len(bs) > 0 {
			bs[len(bs)-1].CacheControl = ephemeral()
		}
	}
	maxTok := req.MaxTokens
	if maxTok <= 0 {
		maxTok = 32000
		if m.info.MaxTokens > 0 {
			maxTok = min(m.info.MaxTokens, 32000)
		}
	}
	p := request{Model: m.info.ID, Messages: out, Stream: true}
	if p.Messages == nil {
		p.Messages = []message{}
	}
	if req.SystemPrompt != "" {
		sys := textBlock(req.SystemPrompt)
		sys.CacheControl = ephemeral()
		p.System = []block{sys}
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		if !json.Valid(schema) {
			return p, fmt.Errorf("%s: tool schema is not valid JSON", t.Name)
		}
		p.Tools = append(p.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	level := req.Thinking
	if level == "" {
		level = llm.ThinkingOff
	}
	thinks := false
	if m.info.Reasoning {
		level = m.info.ClampThinking(level)
		mapped, hasMap := m.info.ThinkingMap[level]
		switch {
		case level == llm.ThinkingOff:
			p.Thinking = &thinking{Type: "disabled"}
		case adaptive(m.info.ID):
			thinks = true
			eff := "high"
			switch {
			case hasMap && mapped != nil:
				eff = *mapped
			case level == llm.ThinkingMinimal || level == llm.ThinkingLow:
				eff = "low"
			case level == llm.ThinkingMedium:
				eff = "medium"
			}
			p.Thinking = &thinking{Type: "adaptive", Display: "summarized"}
			p.OutputConfig = &outputConfig{Effort: eff}
		default:
			thinks = true
			b := budget(level)
			if m.info.MaxTokens > 0 {
				maxTok = min(maxTok+b, m.info.MaxTokens)
			} else {
				maxTok += b
			}
			if b > maxTok-1024 {
				b = max(maxTok-1024, 1024)
			}
			p.Thinking = &thinking{Type: "enabled", BudgetTokens: b}
		}
	}
	p.MaxTokens = maxTok
	if req.Temperature != nil && !thinks {
		p.Temperature = req.Temperature
	}
	if req.SessionID != "" {
		p.Metadata = &metadata{UserID: req.SessionID}
	}
	return p, nil
}
