// Package openai streams from the OpenAI Chat Completions API
// ("openai-completions") and the Responses API ("openai-responses"), and
// from any server that speaks them (Ollama, vLLM, llama.cpp server,
// OpenRouter, Groq, DeepSeek, ...), with Compat switches for the ways
// those servers differ. Requests are sent and streams decoded by the
// official SDK (github.com/openai/openai-go/v3) with its retries off, so
// that pibot's RetryPolicy decides; fields of compatible servers that the
// SDK does not model are added with request options or read from the raw
// chunk JSON.
package openai

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3/option"

	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/transport"
)

// API names.
const (
	APICompletions = "openai-completions"
	APIResponses   = "openai-responses"
)

// DefaultBaseURL is OpenAI's API root.
const DefaultBaseURL = "https://api.openai.com/v1"

// Compat holds per-provider switches for OpenAI-compatible servers. A nil
// pointer or empty string means "detect from the base URL".
type Compat struct {
	// DeveloperRole sends the system prompt with role "developer"
	// (OpenAI reasoning models) instead of "system".
	DeveloperRole *bool `yaml:"developer_role" json:"developerRole,omitempty"`
	// MaxTokensField is "max_tokens" or "max_completion_tokens".
	MaxTokensField string `yaml:"max_tokens_field" json:"maxTokensField,omitempty"`
	// ReasoningEffort sends reasoning_effort for reasoning models.
	ReasoningEffort *bool `yaml:"reasoning_effort" json:"reasoningEffort,omitempty"`
	// StreamUsage asks for usage in the last chunk (stream_options).
	StreamUsage *bool `yaml:"stream_usage" json:"streamUsage,omitempty"`
	// Store sends "store": false (OpenAI only).
	Store *bool `yaml:"store" json:"store,omitempty"`
	// ThinkingFormat selects how thinking is switched on: "openai"
	// (reasoning_effort), "openrouter" (reasoning.effort), "deepseek"
	// (thinking.type), "qwen" (enable_thinking) or "qwen-chat-template"
	// (chat_template_kwargs.enable_thinking).
	ThinkingFormat string `yaml:"thinking_format" json:"thinkingFormat,omitempty"`
}

// Config configures one model.
type Config struct {
	Info    llm.ModelInfo
	BaseURL string
	APIKey  secret.Secret
	Headers map[string]string
	Compat  Compat
	HTTP    *http.Client
	Logger  *slog.Logger
	Retry   transport.RetryPolicy
	// KeySource names where APIKey comes from, for the hint of a
	// rejected key.
	KeySource string
}

type resolved struct {
	developer       bool
	maxTokensField  string
	reasoningEffort bool
	streamUsage     bool
	store           bool
	thinkingFormat  string
}

func flag(p *bool, def bool) bool {
	if p != nil {
		return *p
	}
	return def
}

// resolve applies base-URL detection to the unset switches.
func (c Compat) resolve(baseURL string, info llm.ModelInfo) resolved {
	u := strings.ToLower(baseURL)
	official := strings.Contains(u, "api.openai.com")
	r := resolved{
		developer:       flag(c.DeveloperRole, official && info.Reasoning),
		maxTokensField:  c.MaxTokensField,
		reasoningEffort: flag(c.ReasoningEffort, !strings.Contains(u, "x.ai") && !strings.Contains(u, "z.ai")),
		streamUsage:     flag(c.StreamUsage, true),
		store:           flag(c.Store, official),
		thinkingFormat:  c.ThinkingFormat,
	}
	if r.maxTokensField == "" {
		r.maxTokensField = "max_tokens"
		if official {
			r.maxTokensField = "max_completion_tokens"
		}
	}
	if r.thinkingFormat == "" {
		switch {
		case strings.Contains(u, "openrouter.ai"):
			r.thinkingFormat = "openrouter"
		case strings.Contains(u, "deepseek.com"):
			r.thinkingFormat = "deepseek"
		default:
			r.thinkingFormat = "openai"
		}
	}
	return r
}

type base struct {
	info   llm.ModelInfo
	opts   []option.RequestOption
	client *transport.Client
}

// Root is the API root the calls go to (ROOT/chat/completions,
// ROOT/models), resolved from a provider's base_url: DefaultBaseURL when
// empty, without a trailing slash. `pibot doctor` lists the models there.
func Root(baseURL string) string {
	if u := strings.TrimRight(baseURL, "/"); u != "" {
		return u
	}
	return DefaultBaseURL
}

// newBase resolves the base URL and the SDK options shared by every call.
// The SDK services are built from these options only (not from
// openai.NewClient), so that no OPENAI_* environment variable leaks into a
// request for another provider.
func newBase(cfg Config) base {
	u := Root(cfg.BaseURL)
	cfg.Info.BaseURL = u
	hc := cfg.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	opts := []option.RequestOption{option.WithBaseURL(u), option.WithHTTPClient(hc), option.WithMaxRetries(0)}
	if !cfg.APIKey.IsZero() {
		opts = append(opts, option.WithAPIKey(cfg.APIKey.Reveal()))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return base{
		info: cfg.Info,
		opts: opts,
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

// effort maps a thinking level through the model's map; ok is false when
// thinking is off and nothing is mapped for off.
func effort(info llm.ModelInfo, level llm.ThinkingLevel) (string, bool) {
	if level == "" {
		level = llm.ThinkingOff
	}
	if !info.Reasoning {
		return "", false
	}
	level = info.ClampThinking(level)
	if v, ok := info.ThinkingMap[level]; ok && v != nil {
		return *v, true
	}
	if level == llm.ThinkingOff {
		return "", false
	}
	return string(level), true
}

func maxTokens(info llm.ModelInfo, req llm.Request) int64 {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	if info.MaxTokens > 0 {
		return min(info.MaxTokens, 32000)
	}
	return 32000
}
