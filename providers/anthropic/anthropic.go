// Package anthropic streams from the Anthropic Messages API
// ("anthropic-messages"): text, extended thinking (budgeted and adaptive)
// with signatures and redacted thinking kept for replay, tool use and
// prompt caching. Requests are sent and streams decoded by the official
// SDK (github.com/anthropics/anthropic-sdk-go) with its retries off, so
// that pibot's RetryPolicy decides.
package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

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
	// KeySource names where APIKey comes from, for the hint of a
	// rejected key.
	KeySource string
}

// Model is an Anthropic Messages model.
type Model struct {
	info   llm.ModelInfo
	sdk    anthropic.Client
	client *transport.Client
}

// New returns a model for cfg. The SDK client ignores the ANTHROPIC_*
// environment: credentials and base URL come from cfg only.
func New(cfg Config) *Model {
	u := strings.TrimRight(cfg.BaseURL, "/")
	if u == "" {
		u = DefaultBaseURL
	}
	u = strings.TrimSuffix(u, "/v1")
	cfg.Info.API = API
	cfg.Info.BaseURL = u
	hc := cfg.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithBaseURL(u + "/"),
		option.WithHTTPClient(hc), option.WithMaxRetries(0), option.WithHeader("anthropic-version", Version)}
	if !cfg.APIKey.IsZero() {
		// Anthropic documents API keys in x-api-key; the SDK's WithAPIKey
		// sends them as a bearer token instead.
		opts = append(opts, option.WithHeader("X-Api-Key", cfg.APIKey.Reveal()))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return &Model{
		info: cfg.Info,
		sdk:  anthropic.NewClient(opts...),
		client: &transport.Client{
			Provider:  cfg.Info.Provider,
			Retry:     cfg.Retry,
			Logger:    cfg.Logger,
			Secrets:   []secret.Secret{cfg.APIKey},
			BaseURL:   u,
			KeySource: cfg.KeySource,
		},
	}
}

// Info returns the model description.
func (m *Model) Info() llm.ModelInfo { return m.info }

// Stream calls the model and yields pi's events.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		b := assemble.New(m.info, yield, nil)
		params, opts, err := m.params(req)
		if err != nil {
			if b.Start() {
				b.Fail(llm.StopError, fmt.Sprintf("%s: encode request: %v", m.info.Provider, err))
			}
			return
		}
		var stream *ssestream.Stream[anthropic.MessageStreamEventUnion]
		err = m.client.Do(ctx, func(ctx context.Context) error {
			var resp *http.Response
			s := m.sdk.Messages.NewStreaming(ctx, params, append(opts, option.WithResponseInto(&resp))...)
			if err := s.Err(); err != nil {
				_ = s.Close()
				return m.client.Failure(resp, err)
			}
			stream = s
			return nil
		})
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

// NormalizeID makes a tool call id acceptable to Anthropic.
func NormalizeID(id string) string { return transform.SanitizeID(id, 64) }

func contentBlocks(cs []llm.Content) []anthropic.ContentBlockParamUnion {
	out := make([]anthropic.ContentBlockParamUnion, 0, len(cs))
	for _, c := range cs {
		switch c.Type {
		case llm.ContentText:
			if strings.TrimSpace(c.Text) == "" {
				continue
			}
			out = append(out, anthropic.NewTextBlock(c.Text))
		case llm.ContentImage:
			out = append(out, anthropic.NewImageBlockBase64(c.MimeType, c.Data))
		}
	}
	return out
}

// toolResultContent converts a tool result's text and images.
func toolResultContent(cs []llm.Content) []anthropic.ToolResultBlockParamContentUnion {
	var out []anthropic.ToolResultBlockParamContentUnion
	for _, b := range contentBlocks(cs) {
		out = append(out, anthropic.ToolResultBlockParamContentUnion{OfText: b.OfText, OfImage: b.OfImage})
	}
	if len(out) == 0 {
		out = append(out, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: "(no output)"}})
	}
	return out
}

// assistantBlocks converts a replayed assistant turn.
func assistantBlocks(msg llm.Message) []anthropic.ContentBlockParamUnion {
	var blocks []anthropic.ContentBlockParamUnion
	for _, c := range msg.Content {
		switch c.Type {
		case llm.ContentText:
			if strings.TrimSpace(c.Text) != "" {
				blocks = append(blocks, anthropic.NewTextBlock(c.Text))
			}
		case llm.ContentThinking:
			switch {
			case c.Redacted:
				blocks = append(blocks, anthropic.NewRedactedThinkingBlock(c.ThinkingSignature))
			case c.ThinkingSignature != "":
				blocks = append(blocks, anthropic.NewThinkingBlock(c.ThinkingSignature, c.Thinking))
			case strings.TrimSpace(c.Thinking) != "":
				blocks = append(blocks, anthropic.NewTextBlock(c.Thinking))
			}
		case llm.ContentToolCall:
			args := c.Arguments
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, args, c.Name))
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

var budgets = map[llm.ThinkingLevel]int64{
	llm.ThinkingMinimal: 1024, llm.ThinkingLow: 2048, llm.ThinkingMedium: 8192,
	llm.ThinkingHigh: 16384, llm.ThinkingXHigh: 16384,
}

// params builds the SDK request; opts carry the fields the SDK's params
// do not model (temperature).
func (m *Model) params(req llm.Request) (anthropic.MessageNewParams, []option.RequestOption, error) {
	msgs := transform.Messages(req.Messages, m.info, NormalizeID)
	var out []anthropic.MessageParam
	for i := 0; i < len(msgs); i++ {
		msg := msgs[i]
		switch msg.Role {
		case llm.RoleUser:
			if blocks := contentBlocks(msg.Content); len(blocks) > 0 {
				out = append(out, anthropic.NewUserMessage(blocks...))
			}
		case llm.RoleAssistant:
			if blocks := assistantBlocks(msg); len(blocks) > 0 {
				out = append(out, anthropic.NewAssistantMessage(blocks...))
			}
		case llm.RoleToolResult:
			var results []anthropic.ContentBlockParamUnion
			for ; i < len(msgs) && msgs[i].Role == llm.RoleToolResult; i++ {
				tr := msgs[i]
				results = append(results, anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{
					ToolUseID: tr.ToolCallID, Content: toolResultContent(tr.Content), IsError: anthropic.Bool(tr.IsError)}})
			}
			i--
			out = append(out, anthropic.NewUserMessage(results...))
		}
	}
	// Prompt caching: mark the last block of the last user turn.
	if n := len(out); n > 0 && out[n-1].OfUser != nil {
		if bs := out[n-1].OfUser.Content; len(bs) > 0 {
			if cc := bs[len(bs)-1].GetCacheControl(); cc != nil {
				*cc = anthropic.NewCacheControlEphemeralParam()
			}
		}
	}
	maxTok := req.MaxTokens
	if maxTok <= 0 {
		maxTok = 32000
		if m.info.MaxTokens > 0 {
			maxTok = min(m.info.MaxTokens, 32000)
		}
	}
	p := anthropic.MessageNewParams{Model: m.info.ID, Messages: out}
	if req.SystemPrompt != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.SystemPrompt, CacheControl: anthropic.NewCacheControlEphemeralParam()}}
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		if !json.Valid(schema) {
			return p, nil, fmt.Errorf("%s: tool schema is not valid JSON", t.Name)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: t.Name,
			Description: anthropic.String(t.Description), InputSchema: param.Override[anthropic.ToolInputSchemaParam](schema)}})
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
			p.Thinking = anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}
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
			p.Thinking = anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{Display: anthropic.ThinkingConfigAdaptiveDisplaySummarized}}
			p.OutputConfig = anthropic.OutputConfigParam{Effort: anthropic.OutputConfigEffort(eff)}
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
			p.Thinking = anthropic.ThinkingConfigParamOfEnabled(budget)
		}
	}
	p.MaxTokens = maxTok
	var opts []option.RequestOption
	if req.Temperature != nil && !thinking {
		// MessageNewParams has no temperature field.
		opts = append(opts, option.WithJSONSet("temperature", *req.Temperature))
	}
	if req.SessionID != "" {
		p.Metadata = anthropic.MetadataParam{UserID: anthropic.String(req.SessionID)}
	}
	return p, opts, nil
}
