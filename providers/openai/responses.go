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

// Responses is a model served through the /responses API. Reasoning items
// are kept (as JSON in the thinking block's signature) so that they can be
// replayed; tool call ids are "<call_id>|<item_id>".
type Responses struct {
	base
	compat resolved
}

// NewResponses returns a Responses API model.
func NewResponses(cfg Config) *Responses {
	cfg.Info.API = APIResponses
	b := newBase(cfg)
	return &Responses{base: b, compat: cfg.Compat.resolve(b.baseURL, b.info)}
}

// Info returns the model description.
func (m *Responses) Info() llm.ModelInfo { return m.info }

// responsesID normalises a foreign tool call id: "call|item" parts are
// sanitised; an item id that is not OpenAI's ("fc_...") is dropped.
func responsesID(id string) string {
	call, item, found := strings.Cut(id, "|")
	call = transform.SanitizeID(call, 64)
	if !found {
		return call
	}
	item = transform.SanitizeID(item, 64)
	if !strings.HasPrefix(item, "fc") {
		return call
	}
	return call + "|" + item
}

type rsPart struct {
	Type        string   `json:"type"`
	Text        string   `json:"text,omitempty"`
	ImageURL    string   `json:"image_url,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
}

func rsUserParts(blocks []llm.Content) []rsPart {
	parts := make([]rsPart, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case llm.ContentText:
			parts = append(parts, rsPart{Type: "input_text", Text: b.Text})
		case llm.ContentImage:
			parts = append(parts, rsPart{Type: "input_image", ImageURL: "data:" + b.MimeType + ";base64," + b.Data})
		}
	}
	return parts
}

func (m *Responses) body(req llm.Request) ([]byte, error) {
	msgs := transform.Messages(req.Messages, m.info, responsesID)
	var input []any
	if req.SystemPrompt != "" {
		role := "system"
		if m.compat.developer || m.info.Reasoning {
			role = "developer"
		}
		input = append(input, map[string]any{"role": role, "content": req.SystemPrompt})
	}
	for _, msg := range msgs {
		switch msg.Role {
		case llm.RoleUser:
			input = append(input, map[string]any{"role": "user", "content": rsUserParts(msg.Content)})
		case llm.RoleAssistant:
			for _, c := range msg.Content {
				switch c.Type {
				case llm.ContentThinking:
					if c.ThinkingSignature != "" && json.Valid([]byte(c.ThinkingSignature)) {
						input = append(input, json.RawMessage(c.ThinkingSignature))
					}
				case llm.ContentText:
					item := map[string]any{"type": "message", "role": "assistant", "status": "completed",
						"content": []map[string]any{{"type": "output_text", "text": c.Text, "annotations": []any{}}}}
					if strings.HasPrefix(c.TextSignature, "msg_") {
						item["id"] = c.TextSignature
					}
					input = append(input, item)
				case llm.ContentToolCall:
					call, itemID, _ := strings.Cut(c.ID, "|")
					args := string(c.Arguments)
					if args == "" {
						args = "{}"
					}
					item := map[string]any{"type": "function_call", "call_id": call, "name": c.Name, "arguments": args}
					if itemID != "" {
						item["id"] = itemID
					}
					input = append(input, item)
				}
			}
		case llm.RoleToolResult:
			call, _, _ := strings.Cut(msg.ToolCallID, "|")
			text := llm.JoinText(msg.Content, "\n")
			if text == "" {
				text = "(see attached image)"
			}
			input = append(input, map[string]any{"type": "function_call_output", "call_id": call, "output": text})
			var imgs []llm.Content
			for _, c := range msg.Content {
				if c.Type == llm.ContentImage {
					imgs = append(imgs, c)
				}
			}
			if len(imgs) > 0 {
				parts := rsUserParts(append([]llm.Content{llm.TextBlock("Attached image(s) from tool result:")}, imgs...))
				input = append(input, map[string]any{"role": "user", "content": parts})
			}
		}
	}
	body := map[string]any{
		"model":             m.info.ID,
		"input":             input,
		"stream":            true,
		"max_output_tokens": maxTokens(m.info, req),
	}
	if m.compat.store {
		body["store"] = false
	}
	if req.SessionID != "" {
		body["prompt_cache_key"] = req.SessionID
	}
	if len(req.Tools) > 0 {
		tools := make([]map[string]any, len(req.Tools))
		for i, t := range req.Tools {
			tools[i] = map[string]any{"type": "function", "name": t.Name, "description": t.Description, "parameters": t.Parameters, "strict": false}
		}
		body["tools"] = tools
	}
	eff, on := effort(m.info, req.Thinking)
	if m.info.Reasoning {
		if on {
			body["reasoning"] = map[string]string{"effort": eff, "summary": "auto"}
			body["include"] = []string{"reasoning.encrypted_content"}
		} else {
			off := "none"
			if v, ok := m.info.ThinkingMap[llm.ThinkingOff]; ok && v != nil {
				off = *v
			}
			body["reasoning"] = map[string]string{"effort": off}
		}
	} else if req.Temperature != nil {
		body["temperature"] = *req.Temperature
	}
	return llm.MarshalJSONNoEscape(body)
}

// Stream calls the model and yields pi's events.
func (m *Responses) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		b := assemble.New(m.info, yield, nil)
		body, err := m.body(req)
		if err != nil {
			if b.Start() {
				b.Fail(llm.StopError, fmt.Sprintf("%s: encode request: %v", m.info.Provider, err))
			}
			return
		}
		resp, err := m.post(ctx, "/responses", body)
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

type rsItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type rsEvent struct {
	Type        string          `json:"type"`
	OutputIndex int             `json:"output_index"`
	Delta       string          `json:"delta"`
	Item        json.RawMessage `json:"item"`
	Message     string          `json:"message"`
	Code        any             `json:"code"`
	Response    *struct {
		ID     string `json:"id"`
		Model  string `json:"model"`
		Status string `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Usage *struct {
			InputTokens        int64 `json:"input_tokens"`
			OutputTokens       int64 `json:"output_tokens"`
			TotalTokens        int64 `json:"total_tokens"`
			InputTokensDetails *struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	} `json:"response"`
}

func (m *Responses) read(ctx context.Context, b *assemble.Builder, body io.Reader) {
	r := sse.NewReader(body)
	blocks := map[int]int{} // output_index -> block index
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.FailErr(ctx, fmt.Errorf("%s: read stream: %w", m.info.Provider, err))
			return
		}
		var e rsEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			b.Fail(llm.StopError, fmt.Sprintf("%s: bad stream event: %v", m.info.Provider, err))
			return
		}
		if e.Response != nil {
			b.SetResponse(e.Response.ID, e.Response.Model)
		}
		block := func() (int, bool) { i, ok := blocks[e.OutputIndex]; return i, ok }
		switch e.Type {
		case "response.output_item.added":
			var it rsItem
			if json.Unmarshal(e.Item, &it) != nil {
				continue
			}
			var i int
			var ok bool
			switch it.Type {
			case "reasoning":
				i, ok = b.ThinkingStart()
			case "message":
				i, ok = b.TextStart()
				if ok {
					b.Block(i).TextSignature = it.ID
				}
			case "function_call":
				i, ok = b.ToolCallStart(it.CallID+"|"+it.ID, it.Name)
				if ok && it.Arguments != "" {
					ok = b.Delta(i, it.Arguments)
				}
			default:
				continue
			}
			if !ok {
				return
			}
			blocks[e.OutputIndex] = i
		case "response.reasoning_summary_part.added":
			if i, ok := block(); ok && b.Block(i).Thinking != "" && !b.Delta(i, "\n\n") {
				return
			}
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta",
			"response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta":
			if i, ok := block(); ok && e.Delta != "" && !b.Delta(i, e.Delta) {
				return
			}
		case "response.output_item.done":
			i, ok := block()
			if !ok {
				continue
			}
			var it rsItem
			_ = json.Unmarshal(e.Item, &it)
			blk := b.Block(i)
			switch it.Type {
			case "reasoning":
				blk.ThinkingSignature = string(e.Item)
			case "function_call":
				if string(blk.Arguments) == "{}" && it.Arguments != "" && it.Arguments != "{}" {
					if !b.Delta(i, it.Arguments) {
						return
					}
				}
			}
			if !b.End(i) {
				return
			}
		case "response.completed", "response.incomplete", "response.failed", "response.cancelled":
			m.finish(b, e)
			return
		case "error":
			msg := e.Message
			if e.Code != nil {
				msg = fmt.Sprintf("%v %s", e.Code, msg)
			}
			b.Fail(llm.StopError, m.info.Provider+": "+strings.TrimSpace(msg))
			return
		}
	}
	if ctx.Err() != nil {
		b.Abort()
		return
	}
	b.Fail(llm.StopError, m.info.Provider+": stream ended without a response.completed event")
}

func (m *Responses) finish(b *assemble.Builder, e rsEvent) {
	resp := e.Response
	if resp == nil {
		b.Fail(llm.StopError, m.info.Provider+": "+e.Type+" without a response")
		return
	}
	if u := resp.Usage; u != nil {
		var cached int64
		if u.InputTokensDetails != nil {
			cached = u.InputTokensDetails.CachedTokens
		}
		b.SetUsage(llm.Usage{Input: max(u.InputTokens-cached, 0), Output: u.OutputTokens, CacheRead: cached, TotalTokens: u.TotalTokens})
	}
	switch resp.Status {
	case "completed", "":
		if b.HasToolCalls() {
			b.Done(llm.StopToolUse)
		} else {
			b.Done(llm.StopStop)
		}
	case "incomplete":
		b.Done(llm.StopLength)
	default:
		msg := "response " + resp.Status
		if resp.Error != nil {
			msg = strings.TrimSpace(resp.Error.Code + " " + resp.Error.Message)
		}
		b.Fail(llm.StopError, m.info.Provider+": "+msg)
	}
}
