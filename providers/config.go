// Package providers turns configuration into llm.Model values: a provider
// owns credentials, base URL and headers, an API is a wire protocol
// ("openai-completions", "openai-responses", "anthropic-messages", "faux")
// and a model is data (llm.ModelInfo). Registry resolves "provider/id"
// references; Fallback chains models with per-model cooldowns. Wiring is
// an explicit switch on the API name.
package providers

import (
	"net/url"
	"strings"

	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/anthropic"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/providers/internal/transport"
	"github.com/pibot/pibot/providers/openai"
)

// API names accepted in Config.API.
const (
	APIOpenAICompletions = openai.APICompletions
	APIOpenAIResponses   = openai.APIResponses
	APIAnthropic         = anthropic.API
	APIFaux              = faux.API
)

// Compat holds the OpenAI-compatible server switches (see openai.Compat).
type Compat = openai.Compat

// RetryPolicy says how transient failures are retried before a stream
// starts (see the fields for defaults).
type RetryPolicy = transport.RetryPolicy

// Timeouts bound the phases of a model call: Connect (DNS, TCP and TLS),
// FirstByte (request sent to the first stream event) and Idle (between
// two stream events). A zero field means its default (see
// DefaultTimeouts). A timeout fails the call with a message that names
// providers.NAME.timeouts.PHASE.
type Timeouts = transport.Timeouts

// DefaultTimeouts returns the timeouts of a provider that sets none.
func DefaultTimeouts() Timeouts { return Timeouts{}.WithDefaults() }

// Config is one configured provider, already parsed and with its key
// resolved (${ENV} and file expansion are done by the config package).
type Config struct {
	// Name is the provider name used in "provider/model" references.
	Name string
	// API is the provider's wire protocol; a model's Info.API overrides it.
	API     string
	BaseURL string
	APIKey  secret.Secret
	Headers map[string]string
	Compat  Compat
	Models  []llm.ModelInfo
	// Timeouts bound every call to this provider (zero fields: defaults).
	Timeouts Timeouts
	// Script is what a faux provider answers, one turn per model call
	// (each of its models plays it from the start, once per registry),
	// then it echoes. Ignored for other APIs.
	Script []faux.Turn
	// KeySource says where APIKey came from ("OPENAI_API_KEY",
	// "providers.local.api_key"), for the hint of a rejected key; ""
	// means the provider's api_key key.
	KeySource string
}

// keySource is KeySource or the provider's api_key config key.
func (c Config) keySource() string {
	if c.KeySource != "" {
		return c.KeySource
	}
	return "providers." + c.Name + ".api_key"
}

// Root is the API root the provider's calls go to, resolved from BaseURL
// as its API's client resolves it ("" for faux, which calls nothing).
// `pibot doctor` lists the models there.
func (c Config) Root() string {
	switch c.API {
	case APIOpenAICompletions, APIOpenAIResponses:
		return openai.Root(c.BaseURL)
	case APIAnthropic:
		return anthropic.Root(c.BaseURL)
	}
	return ""
}

// needsKey reports whether calls without a key are expected to fail: local
// servers (Ollama, llama.cpp, vLLM on loopback) and faux need none.
func (c Config) needsKey() bool {
	if c.API == APIFaux {
		return false
	}
	if c.BaseURL == "" {
		return true
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		return true
	}
	h := u.Hostname()
	return h != "localhost" && !strings.HasPrefix(h, "127.") && h != "::1"
}

func str(s string) *string { return &s }

// Defaults returns the built-in providers whose standard environment
// variables are set: "openai" (OPENAI_API_KEY, optional OPENAI_BASE_URL)
// and "anthropic" (ANTHROPIC_API_KEY, optional ANTHROPIC_BASE_URL).
func Defaults(getenv func(string) string) []Config {
	var out []Config
	if k := getenv("OPENAI_API_KEY"); k != "" {
		out = append(out, Config{
			Name:    "openai",
			API:     APIOpenAIResponses,
			BaseURL: getenv("OPENAI_BASE_URL"),
			APIKey:  secret.New(k),
			Models:  openaiModels(),
			// The key came from the environment.
			KeySource: "OPENAI_API_KEY",
		})
	}
	if k := getenv("ANTHROPIC_API_KEY"); k != "" {
		out = append(out, Config{
			Name:    "anthropic",
			API:     APIAnthropic,
			BaseURL: getenv("ANTHROPIC_BASE_URL"),
			APIKey:  secret.New(k),
			Models:  anthropicModels(),
			// The key came from the environment.
			KeySource: "ANTHROPIC_API_KEY",
		})
	}
	return out
}

var textImage = []string{"text", "image"}

func openaiModels() []llm.ModelInfo {
	reasoningMap := map[llm.ThinkingLevel]*string{llm.ThinkingOff: nil, llm.ThinkingMinimal: str("low")}
	return []llm.ModelInfo{
		{ID: "gpt-4.1", Name: "GPT-4.1", Input: textImage, ContextWindow: 1047576, MaxTokens: 32768,
			Cost: llm.ModelCost{Input: 2, Output: 8, CacheRead: 0.5}},
		{ID: "gpt-4.1-mini", Name: "GPT-4.1 mini", Input: textImage, ContextWindow: 1047576, MaxTokens: 32768,
			Cost: llm.ModelCost{Input: 0.4, Output: 1.6, CacheRead: 0.1}},
		{ID: "gpt-4o-mini", Name: "GPT-4o mini", Input: textImage, ContextWindow: 128000, MaxTokens: 16384,
			Cost: llm.ModelCost{Input: 0.15, Output: 0.6, CacheRead: 0.075}},
		{ID: "o4-mini", Name: "o4-mini", Input: textImage, Reasoning: true, ThinkingMap: reasoningMap,
			ContextWindow: 200000, MaxTokens: 100000, Cost: llm.ModelCost{Input: 1.1, Output: 4.4, CacheRead: 0.275}},
		{ID: "gpt-5", Name: "GPT-5", Input: textImage, Reasoning: true, ThinkingMap: map[llm.ThinkingLevel]*string{llm.ThinkingOff: str("minimal")},
			ContextWindow: 400000, MaxTokens: 128000, Cost: llm.ModelCost{Input: 1.25, Output: 10, CacheRead: 0.125}},
		{ID: "gpt-5-mini", Name: "GPT-5 mini", Input: textImage, Reasoning: true, ThinkingMap: map[llm.ThinkingLevel]*string{llm.ThinkingOff: str("minimal")},
			ContextWindow: 400000, MaxTokens: 128000, Cost: llm.ModelCost{Input: 0.25, Output: 2, CacheRead: 0.025}},
	}
}

func anthropicModels() []llm.ModelInfo {
	return []llm.ModelInfo{
		{ID: "claude-sonnet-4-5", Name: "Claude Sonnet 4.5", Input: textImage, Reasoning: true,
			ContextWindow: 200000, MaxTokens: 64000, Cost: llm.ModelCost{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}},
		{ID: "claude-opus-4-1", Name: "Claude Opus 4.1", Input: textImage, Reasoning: true,
			ContextWindow: 200000, MaxTokens: 32000, Cost: llm.ModelCost{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}},
		{ID: "claude-haiku-4-5", Name: "Claude Haiku 4.5", Input: textImage, Reasoning: true,
			ContextWindow: 200000, MaxTokens: 64000, Cost: llm.ModelCost{Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25}},
	}
}
