package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/assemble"
	"github.com/pibot/pibot/providers/internal/transform"
)

// Completions is a model served through /chat/completions.
type Completions struct {
	base
	compat resolved
	svc    openai.ChatCompletionService
}

// NewCompletions returns a Chat Completions model.
func NewCompletions(cfg Config) *Completions {
	cfg.Info.API = APICompletions
	b := newBase(cfg)
	return &Completions{base: b, compat: cfg.Compat.resolve(b.info.BaseURL, b.info), svc: openai.NewChatCompletionService(b.opts...)}
}

// Info returns the model description.
func (m *Completions) Info() llm.ModelInfo { return m.info }

// completionsID keeps ids within OpenAI's 40 characters and charset; a
// Responses id "call|item" keeps its call part.
func completionsID(id string) string {
	if i := strings.IndexByte(id, '|'); i >= 0 {
		id = id[:i]
	}
	return transform.SanitizeID(id, 40)
}

func userMessage(blocks []llm.Content) openai.ChatCompletionMessageParamUnion {
	text := true
	for _, b := range blocks {
		if b.Type != llm.ContentText {
			text = false
		}
	}
	if text {
		return openai.UserMessage(llm.JoinText(blocks, "\n"))
	}
	parts := make([]openai.ChatCompletionContentPartUnionParam, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case llm.ContentText:
			parts = append(parts, openai.TextContentPart(b.Text))
		case llm.ContentImage:
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:" + b.MimeType + ";base64," + b.Data}))
		}
	}
	return openai.UserMessage(parts)
}

func toolImagesMessage(imgs []llm.Content) openai.ChatCompletionMessageParamUnion {
	return userMessage(append([]llm.Content{llm.TextBlock("Attached image(s) from tool result:")}, imgs...))
}

// schema decodes a tool's JSON schema for the SDK's map-typed parameters.
func schema(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("tool schema: %w", err)
	}
	return m, nil
}

// assistantMessage converts a replayed assistant turn; ok is false when
// nothing is left to send.
func assistantMessage(msg llm.Message) (openai.ChatCompletionMessageParamUnion, bool) {
	var am openai.ChatCompletionAssistantMessageParam
	var text []string
	reasoning := map[string]any{}
	for _, c := range msg.Content {
		switch c.Type {
		case llm.ContentText:
			if c.Text != "" {
				text = append(text, c.Text)
			}
		case llm.ContentThinking:
			// Same-model reasoning is replayed in the field it came in.
			if f := c.ThinkingSignature; f == "reasoning_content" || f == "reasoning" || f == "reasoning_text" {
				prev, _ := reasoning[f].(string)
				reasoning[f] = prev + c.Thinking
			}
		case llm.ContentToolCall:
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			am.ToolCalls = append(am.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: c.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args}}})
		}
	}
	if len(text) == 0 && len(am.ToolCalls) == 0 {
		return openai.ChatCompletionMessageParamUnion{}, false
	}
	if len(text) > 0 {
		am.Content.OfString = openai.String(strings.Join(text, ""))
	}
	if len(reasoning) > 0 {
		am.SetExtraFields(reasoning)
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &am}, true
}

// params builds the SDK request and the options for the fields the SDK
// does not model (compat switches of other servers).
func (m *Completions) params(req llm.Request) (openai.ChatCompletionNewParams, []option.RequestOption, error) {
	msgs := transform.Messages(req.Messages, m.info, completionsID)
	var out []openai.ChatCompletionMessageParamUnion
	if req.SystemPrompt != "" {
		if m.compat.developer {
			out = append(out, openai.DeveloperMessage(req.SystemPrompt))
		} else {
			out = append(out, openai.SystemMessage(req.SystemPrompt))
		}
	}
	var toolImages []llm.Content
	for _, msg := range msgs {
		if msg.Role != llm.RoleToolResult && len(toolImages) > 0 {
			out = append(out, toolImagesMessage(toolImages))
			toolImages = nil
		}
		switch msg.Role {
		case llm.RoleUser:
			out = append(out, userMessage(msg.Content))
		case llm.RoleAssistant:
			if am, ok := assistantMessage(msg); ok {
				out = append(out, am)
			}
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
			out = append(out, openai.ToolMessage(text, msg.ToolCallID))
		}
	}
	if len(toolImages) > 0 {
		out = append(out, toolImagesMessage(toolImages))
	}

	p := openai.ChatCompletionNewParams{Model: m.info.ID, Messages: out}
	var opts []option.RequestOption
	switch n := maxTokens(m.info, req); m.compat.maxTokensField {
	case "max_tokens":
		p.MaxTokens = openai.Int(n)
	case "max_completion_tokens":
		p.MaxCompletionTokens = openai.Int(n)
	default:
		opts = append(opts, option.WithJSONSet(m.compat.maxTokensField, n))
	}
	if m.compat.streamUsage {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	if m.compat.store {
		p.Store = openai.Bool(false)
	}
	for _, t := range req.Tools {
		params, err := schema(t.Parameters)
		if err != nil {
			return p, nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: params}))
	}
	eff, on := effort(m.info, req.Thinking)
	if req.Temperature != nil && !on {
		p.Temperature = openai.Float(*req.Temperature)
	}
	if m.info.Reasoning {
		switch m.compat.thinkingFormat {
		case "openrouter":
			if !on {
				eff = "none"
			}
			opts = append(opts, option.WithJSONSet("reasoning", map[string]string{"effort": eff}))
		case "deepseek":
			typ := "disabled"
			if on {
				typ = "enabled"
			}
			opts = append(opts, option.WithJSONSet("thinking", map[string]string{"type": typ}))
		case "qwen", "zai":
			opts = append(opts, option.WithJSONSet("enable_thinking", on))
		case "qwen-chat-template":
			opts = append(opts, option.WithJSONSet("chat_template_kwargs", map[string]bool{"enable_thinking": on, "preserve_thinking": true}))
		default:
			if on && m.compat.reasoningEffort {
				p.ReasoningEffort = shared.ReasoningEffort(eff)
			}
		}
	}
	return p, opts, nil
}

// Stream calls the model and yields pi's events.
func (m *Completions) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		b := assemble.New(m.info, yield, nil)
		params, opts, err := m.params(req)
		if err != nil {
			if b.Start() {
				b.Fail(llm.StopError, fmt.Sprintf("%s: encode request: %v", m.info.Provider, err))
			}
			return
		}
		stream, err := m.open(ctx, params, opts)
		if err != nil {
			if b.Start() {
				b.FailErr(ctx, err)
			}
			return
		}
		defer stream.Close()
		if !b.Start() {
			return
		}
		m.read(ctx, b, stream)
	}
}

// open starts the stream under the retry policy. The SDK reports HTTP
// failures only through the stream's error, before the first event.
func (m *Completions) open(ctx context.Context, params openai.ChatCompletionNewParams, opts []option.RequestOption) (*ssestream.Stream[openai.ChatCompletionChunk], error) {
	var stream *ssestream.Stream[openai.ChatCompletionChunk]
	err := m.client.Do(ctx, func(ctx context.Context) error {
		var resp *http.Response
		s := m.svc.NewStreaming(ctx, params, append(opts, option.WithResponseInto(&resp))...)
		if err := s.Err(); err != nil {
			_ = s.Close()
			return m.client.Failure(resp, err)
		}
		stream = s
		return nil
	})
	return stream, err
}

// reasoningFields are the delta fields compatible servers stream reasoning
// in; the SDK's delta struct has none of them.
var reasoningFields = [...]string{"reasoning_content", "reasoning", "reasoning_text"}

// reasoningDelta returns the first non-empty reasoning field of a delta.
func reasoningDelta(d openai.ChatCompletionChunkChoiceDelta) (field, text string) {
	for _, f := range reasoningFields {
		// Unknown keys are kept raw (and never marked Valid) by the SDK.
		raw := d.JSON.ExtraFields[f].Raw()
		if raw == "" || raw == "null" {
			continue
		}
		var s string
		if json.Unmarshal([]byte(raw), &s) == nil && s != "" {
			return f, s
		}
	}
	return "", ""
}

// read turns the chunks into events.
func (m *Completions) read(ctx context.Context, b *assemble.Builder, stream *ssestream.Stream[openai.ChatCompletionChunk]) {
	bs := b.Blocks()
	cur := -1 // open text or thinking block
	tools := map[int64]int{}
	var finish string
	for stream.Next() {
		ch := stream.Current()
		b.SetResponse(ch.ID, ch.Model)
		if ch.JSON.Usage.Valid() {
			u := ch.Usage
			cw := u.PromptTokensDetails.CacheWriteTokens
			cr := max(u.PromptTokensDetails.CachedTokens-cw, 0)
			b.SetUsage(llm.Usage{Input: max(u.PromptTokens-cr-cw, 0), Output: u.CompletionTokens, CacheRead: cr, CacheWrite: cw})
		}
		for _, c := range ch.Choices {
			d := c.Delta
			if field, text := reasoningDelta(d); text != "" {
				if cur < 0 || bs.At(cur).Type != llm.ContentThinking {
					if cur >= 0 && !bs.End(cur) {
						return
					}
					var ok bool
					if cur, ok = bs.ThinkingStart(); !ok {
						return
					}
					bs.At(cur).ThinkingSignature = field
				}
				if !bs.Delta(cur, text) {
					return
				}
			}
			if d.Content != "" {
				if cur < 0 || bs.At(cur).Type != llm.ContentText {
					if cur >= 0 && !bs.End(cur) {
						return
					}
					var ok bool
					if cur, ok = bs.TextStart(); !ok {
						return
					}
				}
				if !bs.Delta(cur, d.Content) {
					return
				}
			}
			for i, tc := range d.ToolCalls {
				idx := int64(i)
				if tc.JSON.Index.Valid() {
					idx = tc.Index
				}
				bi, seen := tools[idx]
				if !seen {
					// Calls stream one after another: a new index ends the
					// open text, thinking or previous call.
					if cur >= 0 && !bs.End(cur) {
						return
					}
					cur = -1
					for _, prev := range tools {
						if !bs.End(prev) {
							return
						}
					}
					var ok bool
					if bi, ok = bs.ToolCallStart(tc.ID, tc.Function.Name); !ok {
						return
					}
					tools[idx] = bi
				} else {
					blk := bs.At(bi)
					if blk.ID == "" {
						blk.ID = tc.ID
					}
					blk.Name += tc.Function.Name
				}
				if tc.Function.Arguments != "" && bs.IsOpen(bi) && !bs.Delta(bi, tc.Function.Arguments) {
					return
				}
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if ctx.Err() != nil {
		b.Abort()
		return
	}
	if err := stream.Err(); err != nil {
		b.Fail(llm.StopError, m.info.Provider+": "+streamFailure(err))
		return
	}
	switch finish {
	case "stop", "end", "":
		// pi treats a stream that ends without a finish reason as stop.
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

// streamFailure renders an error that ended an OpenAI stream: an in-stream
// error object (the SDK stops at any chunk with an "error" key), a chunk
// that does not decode, or a broken connection.
func streamFailure(err error) string {
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		var v struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(se.Event.Data, &v) == nil && len(v.Error) > 0 {
			return streamErrorText(v.Error)
		}
		return se.Message
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return "bad stream chunk: " + err.Error()
	}
	return "read stream: " + err.Error()
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
