// Package anthropic streams from the Anthropic Messages API
// ("anthropic-messages"): text, extended thinking (budgeted and adaptive)
// with signatures and redacted thinking kept for replay, tool use and
// prompt caching. Requests and SSE streams are encoded and parsed directly
// following Anthropic's documented wire format.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"

	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/assemble"
	"github.com/pibot/pibot/providers/internal/transform"
	"github.com/pibot/pibot/providers/internal/transport"
)

// API is the wire protocol name.
const API = "anthropic-messages"

// DefaultBaseURL is Anthropic's API root.
const DefaultBaseURL = "https://api.anthropic.com"

// Version is the anthropic-version header sent with every request.
const Version = "2023-06-01"

// Config configures one model.
type Config struct {
	Info    llm.ModelInfo
	BaseURL string
	APIKey  secret.Secret
	Headers map[string]string
	HTTP    *http.Client
	Logger  *slog.Logger
	Retry   transport.RetryPolicy
}

// Model is an Anthropic Messages model.
type Model struct {
	info    llm.ModelInfo
	baseURL string
	key     secret.Secret
	headers map[string]string
	client  *transport.Client
}

// New returns a model for cfg.
func New(cfg Config) *Model {
	u := strings.TrimRight(cfg.BaseURL, "/")
	if u == "" {
		u = DefaultBaseURL
	}
	u = strings.TrimSuffix(u, "/v1")
	cfg.Info.API = API
	cfg.Info.BaseURL = u
	return &Model{
		info:    cfg.Info,
		baseURL: u,
		key:     cfg.APIKey,
		headers: cfg.Headers,
		client: &transport.Client{
			Provider: cfg.Info.Provider,
			HTTP:     cfg.HTTP,
			Retry:    cfg.Retry,
			Logger:   cfg.Logger,
			Secrets:  []secret.Secret{cfg.APIKey},
		},
	}
}

// Info returns the model description.
func (m *Model) Info() llm.ModelInfo { return m.info }

// Stream calls the model and yields pi's events.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		b := assemble.New(m.info, yield, nil)
		body, err := m.body(req)
		if err != nil {
			if b.Start() {
				b.Fail(llm.StopError, fmt.Sprintf("%s: encode request: %v", m.info.Provider, err))
			}
			return
		}
		resp, err := m.client.Do(ctx, func(ctx context.Context) (*http.Request, error) {
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, m.baseURL+"/v1/messages", bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "text/event-stream")
			r.Header.Set("Anthropic-Version", Version)
			for k, v := range m.headers {
				r.Header.Set(k, v)
			}
			if !m.key.IsZero() {
				r.Header.Set("X-Api-Key", m.key.Reveal())
			}
			return r, nil
		})
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

// NormalizeID makes a tool call id acceptable to Anthropic.
func NormalizeID(id string) string { return transform.SanitizeID(id, 64) }

type block = map[string]any

var cacheControl = map[string]string{"type": "ephemeral"}

func contentBlocks(cs []llm.Content) []block {
	out := make([]block, 0, len(cs))
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			if strings.TrimSpace(c.Text) == "" {
				continue
			}
			out = append(out, block{"type": "text", "text": c.Text})
		case llm.ContentImage:
			out = append(out, block{"type": "image", "source": map[string]string{"type": "base64", "media_type": c.MimeType, "data": c.Data}})
		}
	}
	return out
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

var budgets = map[llm.ThinkingLevel]int64{
	llm.ThinkingMinimal: 1024, llm.ThinkingLow: 2048, llm.ThinkingMedium: 8192,
	llm.ThinkingHigh: 16384, llm.ThinkingXHigh: 16384,
}

func (m *Model) body(req llm.Request) ([]byte, error) {
	msgs := transform.Messages(req.Messages, m.info, NormalizeID)
	var out []map[string]any
	for i := 0; i < len(msgs); i++ {
		msg := msgs[i]
		switch msg.Role {
		case llm.RoleUser:
			blocks := contentBlocks(msg.Content)
			if len(blocks) == 0 {
				continue
			}
			out = append(out, map[string]any{"role": "user", "content": blocks})
		case llm.RoleAssistant:
			var blocks []block
			for _, c := range msg.Content {
				switch c.Type {
				case llm.ContentText:
					if strings.TrimSpace(c.Text) != "" {
						blocks = append(blocks, block{"type": "text", "text": c.Text})
					}
				case llm.ContentThinking:
					switch {
					case c.Redacted:
						blocks = append(blocks, block{"type": "redacted_thinking", "data": c.ThinkingSignature})
					case c.ThinkingSignature != "":
						blocks = append(blocks, block{"type": "thinking", "thinking": c.Thinking, "signature": c.ThinkingSignature})
					case strings.TrimSpace(c.Thinking) != "":
						blocks = append(blocks, block{"type": "text", "text": c.Thinking})
					}
				case llm.ContentToolCall:
					args := c.Arguments
					if len(args) == 0 {
						args = json.RawMessage("{}")
					}
					blocks = append(blocks, block{"type": "tool_use", "id": c.ID, "name": c.Name, "input": args})
				}
			}
			if len(blocks) == 0 {
				continue
			}
			out = append(out, map[string]any{"role": "assistant", "content": blocks})
		case llm.RoleToolResult:
			var results []block
			for ; i < len(msgs) && msgs[i].Role == llm.RoleToolResult; i++ {
				tr := msgs[i]
				content := contentBlocks(tr.Content)
				if len(content) == 0 {
					content = []block{{"type": "text", "text": "(no output)"}}
				}
				results = append(results, block{"type": "tool_result", "tool_use_id": tr.ToolCallID, "content": content, "is_error": tr.IsError})
			}
			i--
			out = append(out, map[string]any{"role": "user", "content": results})
		}
	}
	// Prompt caching: mark the last block of the last user turn.
	if n := len(out); n > 0 && out[n-1]["role"] == "user" {
		if bs := out[n-1]["content"].([]block); len(bs) > 0 {
			bs[len(bs)-1]["cache_control"] = cacheControl
		}
	}
	maxTok := req.MaxTokens
	if maxTok <= 0 {
		maxTok = 32000
		if m.info.MaxTokens > 0 {
			maxTok = min(m.info.MaxTokens, 32000)
		}
	}
	body := map[string]any{
		"model":    m.info.ID,
		"messages": out,
		"stream":   true,
	}
	if req.SystemPrompt != "" {
		body["system"] = []block{{"type": "text", "text": req.SystemPrompt, "cache_control": cacheControl}}
	}
	if len(req.Tools) > 0 {
		tools := make([]block, len(req.Tools))
		for i, t := range req.Tools {
			schema := t.Parameters
			if len(schema) == 0 {
				schema = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			tools[i] = block{"name": t.Name, "description": t.Description, "input_schema": schema}
		}
		body["tools"] = tools
	}
	level := req.Thinking
	if level == "" {
		level = llm.ThinkingOff
	}
	thinking := false
	if m.info.Reasoning {
		level = m.info.ClampThinking(level)
		mapped, hasMap := m.info.ThinkingMap[level]
		switch {
		case level == llm.ThinkingOff:
			body["thinking"] = map[string]string{"type": "disabled"}
		case adaptive(m.info.ID):
			thinking = true
			eff := "high"
			switch {
			case hasMap && mapped != nil:
				eff = *mapped
			case level == llm.ThinkingMinimal || level == llm.ThinkingLow:
				eff = "low"
			case level == llm.ThinkingMedium:
				eff = "medium"
			}
			body["thinking"] = map[string]string{"type": "adaptive", "display": "summarized"}
			body["output_config"] = map[string]string{"effort": eff}
		default:
			thinking = true
			budget := budgets[level]
			if m.info.MaxTokens > 0 {
				maxTok = min(maxTok+budget, m.info.MaxTokens)
			} else {
				maxTok += budget
			}
			if budget > maxTok-1024 {
				budget = max(maxTok-1024, 1024)
			}
			body["thinking"] = map[string]any{"type": "enabled", "budget_tokens": budget}
		}
	}
	body["max_tokens"] = maxTok
	if req.Temperature != nil && !thinking {
		body["temperature"] = *req.Temperature
	}
	if req.SessionID != "" {
		body["metadata"] = map[string]string{"user_id": req.SessionID}
	}
	return llm.MarshalJSONNoEscape(body)
}
