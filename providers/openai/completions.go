package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/assemble"
	"github.com/pibot/pibot/providers/internal/sse"
	"github.com/pibot/pibot/providers/internal/transform"
)

// Completions is a model served through /chat/completions.
type Completions struct {
	base
	compat resolved
}

// NewCompletions returns a Chat Completions model.
func NewCompletions(cfg Config) *Completions {
	cfg.Info.API = APICompletions
	b := newBase(cfg)
	return &Completions{base: b, compat: cfg.Compat.resolve(b.baseURL, b.info)}
}

// Info returns the model description.
func (m *Completions) Info() llm.ModelInfo { return m.info }

type ccMessage struct {
	Role       string       `json:"role"`
	Content    any          `json:"content"`
	ToolCalls  []ccToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
	reasoning  map[string]string
}

// MarshalJSON adds replayed reasoning fields (reasoning_content, ...).
func (m ccMessage) MarshalJSON() ([]byte, error) {
	type plain ccMessage
	b, err := json.Marshal(plain(m))
	if err != nil || len(m.reasoning) == 0 {
		return b, err
	}
	extra, err := json.Marshal(m.reasoning)
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1], ','), extra[1:]...), nil
}

type ccToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type ccPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url,omitempty"`
}

type ccTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// completionsID keeps ids within OpenAI's 40 characters and charset; a
// Responses id "call|item" keeps its call part.
func completionsID(id string) string {
	if i := strings.IndexByte(id, '|'); i >= 0 {
		id = id[:i]
	}
	return transform.SanitizeID(id, 40)
}

func userContent(blocks []llm.Content) any {
	text := true
	for _, b := range blocks {
		if b.Type != llm.ContentText {
			text = false
		}
	}
	if text {
		return llm.JoinText(blocks, "\n")
	}
	parts := make([]ccPart, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case llm.ContentText:
			parts = append(parts, ccPart{Type: "text", Text: b.Text})
		case llm.ContentImage:
			p := ccPart{Type: "image_url", ImageURL: &struct {
				URL string `json:"url"`
			}{URL: "data:" + b.MimeType + ";base64," + b.Data}}
			parts = append(parts, p)
		}
	}
	return parts
}

// body builds the JSON request.
func (m *Completions) body(req llm.Request) ([]byte, error) {
	msgs := transform.Messages(req.Messages, m.info, completionsID)
	var out []ccMessage
	if req.SystemPrompt != "" {
		role := "system"
		if m.compat.developer {
			role = "developer"
		}
		out = append(out, ccMessage{Role: role, Content: req.SystemPrompt})
	}
	var toolImages []llm.Content
	for _, msg := range msgs {
		if msg.Role != llm.RoleToolResult && len(toolImages) > 0 {
			out = append(out, ccMessage{Role: "user", Content: userContent(append([]llm.Content{llm.TextBlock("Attached image(s) from tool result:")}, toolImages...))})
			toolImages = nil
		}
		switch msg.Role {
		case llm.RoleUser:
			out = append(out, ccMessage{Role: "user", Content: userContent(msg.Content)})
		case llm.RoleAssistant:
			am := ccMessage{Role: "assistant"}
			var text []string
			for _, c := range msg.Content {
				switch c.Type {
				case llm.ContentText:
					if c.Text != "" {
						text = append(text, c.Text)
					}
				case llm.ContentThinking:
					// Same-model reasoning is replayed in the field it came in.
					if f := c.ThinkingSignature; f == "reasoning_content" || f == "reasoning" || f == "reasoning_text" {
						if am.reasoning == nil {
							am.reasoning = map[string]string{}
						}
						am.reasoning[f] += c.Thinking
					}
				case llm.ContentToolCall:
					tc := ccToolCall{ID: c.ID, Type: "function"}
					tc.Function.Name = c.Name
					args := string(c.Arguments)
					if args == "" {
						args = "{}"
					}
					tc.Function.Arguments = args
					am.ToolCalls = append(am.ToolCalls, tc)
				}
			}
			if len(text) > 0 {
				am.Content = strings.Join(text, "")
			}
			if am.Content == nil && len(am.ToolCalls) == 0 {
				continue
			}
			out = append(out, am)
		case llm.RoleToolResult:
			text := llm.JoinText(msg.Content, "\n")
			for _, c := range msg.Content {
				if c.Type == llm.ContentImage {
					toolImages = append(toolImages, c)
				}
			}
			if text == "" {
				text = "(see attached image)"
			}
			out = append(out, ccMessage{Role: "tool", Content: text, ToolCallID: msg.ToolCallID})
		}
	}
	if len(toolImages) > 0 {
		out = append(out, ccMessage{Role: "user", Content: userContent(append([]llm.Content{llm.TextBlock("Attached image(s) from tool result:")}, toolImages...))})
	}

	body := map[string]any{
		"model":    m.info.ID,
		"messages": out,
		"stream":   true,
	}
	body[m.compat.maxTokensField] = maxTokens(m.info, req)
	if m.compat.streamUsage {
		body["stream_options"] = map[string]bool{"include_usage": true}
	}
	if m.compat.store {
		body["store"] = false
	}
	if len(req.Tools) > 0 {
		tools := make([]ccTool, len(req.Tools))
		for i, t := range req.Tools {
			tools[i].Type = "function"
			tools[i].Function.Name = t.Name
			tools[i].Function.Description = t.Description
			tools[i].Function.Parameters = t.Parameters
		}
		body["tools"] = tools
	}
	eff, on := effort(m.info, req.Thinking)
	if req.Temperature != nil && !on {
		body["temperature"] = *req.Temperature
	}
	if m.info.Reasoning {
		switch m.compat.thinkingFormat {
		case "openrouter":
			if !on {
				eff = "none"
			}
			body["reasoning"] = map[string]string{"effort": eff}
		case "deepseek":
			typ := "disabled"
			if on {
				typ = "enabled"
			}
			body["thinking"] = map[string]string{"type": typ}
		case "qwen", "zai":
			body["enable_thinking"] = on
		case "qwen-chat-template":
			body["chat_template_kwargs"] = map[string]bool{"enable_thinking": on, "preserve_thinking": true}
		default:
			if on && m.compat.reasoningEffort {
				body["reasoning_effort"] = eff
			}
		}
	}
	return llm.MarshalJSONNoEscape(body)
}

// Stream calls the model and yields pi's events.
func (m *Completions) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		b := assemble.New(m.info, yield, nil)
		body, err := m.body(req)
		if err != nil {
			if b.Start() {
				b.Fail(llm.StopError, fmt.Sprintf("%s: encode request: %v", m.info.Provider, err))
			}
			return
		}
		resp, err := m.post(ctx, "/chat/completions", body)
		if err != nil {
			if b.Start() {
				b.FailErr(ctx, err)
			}
			return
		}
		defer resp.Body.Close()
		if !b.Start() {
			return
		}
		m.read(ctx, b, resp.Body)
	}
}

type ccChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content          *string      `json:"content"`
			ReasoningContent *string      `json:"reasoning_content"`
			Reasoning        *string      `json:"reasoning"`
			ReasoningText    *string      `json:"reasoning_text"`
			ToolCalls        []ccToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens     int64 `json:"cached_tokens"`
			CacheWriteTokens int64 `json:"cache_write_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// read parses the SSE body into events.
func (m *Completions) read(ctx context.Context, b *assemble.Builder, body io.Reader) {
	r := sse.NewReader(body)
	cur := -1 // open text or thinking block
	tools := map[int]int{}
	var finish string
	var sawDone bool
	var ch ccChunk
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.FailErr(ctx, fmt.Errorf("%s: read stream: %w", m.info.Provider, err))
			return
		}
		if string(ev.Data) == "[DONE]" {
			sawDone = true
			break
		}
		ch = ccChunk{}
		if err := json.Unmarshal(ev.Data, &ch); err != nil {
			b.Fail(llm.StopError, fmt.Sprintf("%s: bad stream chunk: %v", m.info.Provider, err))
			return
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			b.Fail(llm.StopError, m.info.Provider+": "+streamErrorText(ch.Error))
			return
		}
		b.SetResponse(ch.ID, ch.Model)
		if u := ch.Usage; u != nil {
			var cr, cw int64
			if d := u.PromptTokensDetails; d != nil {
				cw = d.CacheWriteTokens
				cr = max(d.CachedTokens-cw, 0)
			}
			b.SetUsage(llm.Usage{Input: max(u.PromptTokens-cr-cw, 0), Output: u.CompletionTokens, CacheRead: cr, CacheWrite: cw})
		}
		for _, c := range ch.Choices {
			d := c.Delta
			for _, rf := range []struct {
				field string
				v     *string
			}{{"reasoning_content", d.ReasoningContent}, {"reasoning", d.Reasoning}, {"reasoning_text", d.ReasoningText}} {
				if rf.v == nil || *rf.v == "" {
					continue
				}
				if cur < 0 || b.Block(cur).Type != llm.ContentThinking {
					if cur >= 0 && !b.End(cur) {
						return
					}
					var ok bool
					if cur, ok = b.ThinkingStart(); !ok {
						return
					}
					b.Block(cur).ThinkingSignature = rf.field
				}
				if !b.Delta(cur, *rf.v) {
					return
				}
				break
			}
			if d.Content != nil && *d.Content != "" {
				if cur < 0 || b.Block(cur).Type != llm.ContentText {
					if cur >= 0 && !b.End(cur) {
						return
					}
					var ok bool
					if cur, ok = b.TextStart(); !ok {
						return
					}
				}
				if !b.Delta(cur, *d.Content) {
					return
				}
			}
			for i, tc := range d.ToolCalls {
				idx := i
				if tc.Index != nil {
					idx = *tc.Index
				}
				bi, seen := tools[idx]
				if !seen {
					// Calls stream one after another: a new index ends the
					// open text, thinking or previous call.
					if cur >= 0 && !b.End(cur) {
						return
					}
					cur = -1
					for _, prev := range tools {
						if !b.End(prev) {
							return
						}
					}
					var ok bool
					if bi, ok = b.ToolCallStart(tc.ID, tc.Function.Name); !ok {
						return
					}
					tools[idx] = bi
				} else {
					blk := b.Block(bi)
					if blk.ID == "" {
						blk.ID = tc.ID
					}
					blk.Name += tc.Function.Name
				}
				if tc.Function.Arguments != "" && b.IsOpen(bi) && !b.Delta(bi, tc.Function.Arguments) {
					return
				}
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				finish = *c.FinishReason
			}
		}
	}
	if ctx.Err() != nil {
		b.Abort()
		return
	}
	switch finish {
	case "stop", "end", "":
		if finish == "" && !sawDone {
			b.Fail(llm.StopError, m.info.Provider+": stream ended without a finish reason")
			return
		}
		if b.HasToolCalls() {
			b.Done(llm.StopToolUse)
			return
		}
		b.Done(llm.StopStop)
	case "length":
		b.Done(llm.StopLength)
	case "tool_calls", "function_call":
		b.Done(llm.StopToolUse)
	default:
		b.Fail(llm.StopError, "Provider finish_reason: "+finish)
	}
}

// streamErrorText renders an in-stream error object or string.
func streamErrorText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var e struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		if e.Code != nil {
			return fmt.Sprintf("%v %s", e.Code, e.Message)
		}
		return e.Message
	}
	return string(raw)
}
