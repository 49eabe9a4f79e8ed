package llm

import (
	"context"
	"encoding/json"
	"iter"
)

// ThinkingLevel is pi's reasoning effort level.
type ThinkingLevel string

// Thinking levels, lowest first.
const (
	ThinkingOff     ThinkingLevel = "off"
	ThinkingMinimal ThinkingLevel = "minimal"
	ThinkingLow     ThinkingLevel = "low"
	ThinkingMedium  ThinkingLevel = "medium"
	ThinkingHigh    ThinkingLevel = "high"
	ThinkingXHigh   ThinkingLevel = "xhigh"
)

// ThinkingLevels lists every level, lowest first.
var ThinkingLevels = [...]ThinkingLevel{ThinkingOff, ThinkingMinimal, ThinkingLow, ThinkingMedium, ThinkingHigh, ThinkingXHigh}

// ModelCost is the price of a model in US dollars per million tokens.
type ModelCost struct {
	Input      float64 `json:"input" yaml:"input"`
	Output     float64 `json:"output" yaml:"output"`
	CacheRead  float64 `json:"cacheRead" yaml:"cache_read"`
	CacheWrite float64 `json:"cacheWrite" yaml:"cache_write"`
}

// ModelInfo describes a model as data, like pi-ai's Model.
type ModelInfo struct {
	// ID is the provider's model id; Name a display name.
	ID   string `json:"id"`
	Name string `json:"name"`
	// API is the wire protocol: "openai-completions", "openai-responses",
	// "anthropic-messages" or "faux".
	API string `json:"api"`
	// Provider names the configured provider (credentials, base URL).
	Provider string `json:"provider"`
	BaseURL  string `json:"baseUrl,omitempty"`
	// Reasoning reports whether the model can think.
	Reasoning bool `json:"reasoning"`
	// ThinkingMap maps a level to the value sent to the API; a nil value
	// marks the level unsupported. Missing levels use the default mapping
	// (xhigh is supported only when mapped).
	ThinkingMap map[ThinkingLevel]*string `json:"thinkingLevelMap,omitempty"`
	// Input lists the accepted modalities: "text", "image".
	Input         []string  `json:"input"`
	Cost          ModelCost `json:"cost"`
	ContextWindow int64     `json:"contextWindow"`
	MaxTokens     int64     `json:"maxTokens"`
}

// Ref returns "provider/id".
func (m ModelInfo) Ref() string { return m.Provider + "/" + m.ID }

// SupportsImages reports whether the model accepts image input.
func (m ModelInfo) SupportsImages() bool {
	for _, in := range m.Input {
		if in == "image" {
			return true
		}
	}
	return false
}

// SupportedThinkingLevels lists the levels the model accepts, like pi's
// getSupportedThinkingLevels.
func (m ModelInfo) SupportedThinkingLevels() []ThinkingLevel {
	if !m.Reasoning {
		return []ThinkingLevel{ThinkingOff}
	}
	var out []ThinkingLevel
	for _, l := range ThinkingLevels {
		v, mapped := m.ThinkingMap[l]
		if mapped && v == nil {
			continue
		}
		if l == ThinkingXHigh && !mapped {
			continue
		}
		out = append(out, l)
	}
	return out
}

// ClampThinking returns the supported level nearest to l, searching upward
// first, then downward, like pi's clampThinkingLevel.
func (m ModelInfo) ClampThinking(l ThinkingLevel) ThinkingLevel {
	sup := m.SupportedThinkingLevels()
	ok := func(x ThinkingLevel) bool {
		for _, s := range sup {
			if s == x {
				return true
			}
		}
		return false
	}
	idx := -1
	for i, x := range ThinkingLevels {
		if x == l {
			idx = i
		}
	}
	if idx < 0 {
		return sup[0]
	}
	for i := idx; i < len(ThinkingLevels); i++ {
		if ok(ThinkingLevels[i]) {
			return ThinkingLevels[i]
		}
	}
	for i := idx - 1; i >= 0; i-- {
		if ok(ThinkingLevels[i]) {
			return ThinkingLevels[i]
		}
	}
	return sup[0]
}

// CostOf prices usage with the model's per-million prices.
func (m ModelInfo) CostOf(u Usage) Cost {
	c := Cost{
		Input:      m.Cost.Input / 1e6 * float64(u.Input),
		Output:     m.Cost.Output / 1e6 * float64(u.Output),
		CacheRead:  m.Cost.CacheRead / 1e6 * float64(u.CacheRead),
		CacheWrite: m.Cost.CacheWrite / 1e6 * float64(u.CacheWrite),
	}
	c.Total = c.Input + c.Output + c.CacheRead + c.CacheWrite
	return c
}

// ToolSpec describes a tool to a model. Parameters is a JSON schema.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	SystemPrompt string
	// Messages are model messages (user, assistant, toolResult); callers
	// convert coding-agent roles first (ConvertToLLM).
	Messages []Message
	Tools    []ToolSpec
	// Thinking is the reasoning level; "" or off disables reasoning.
	Thinking ThinkingLevel
	// MaxTokens caps output; 0 means min(model max tokens, 32000).
	MaxTokens int64
	// Temperature is optional.
	Temperature *float64
	// SessionID is a prompt-cache / affinity key.
	SessionID string
}

// EventType names a streaming event, as pi-ai names them.
type EventType string

// Streaming event types.
const (
	EventStart         EventType = "start"
	EventTextStart     EventType = "text_start"
	EventTextDelta     EventType = "text_delta"
	EventTextEnd       EventType = "text_end"
	EventThinkingStart EventType = "thinking_start"
	EventThinkingDelta EventType = "thinking_delta"
	EventThinkingEnd   EventType = "thinking_end"
	EventToolCallStart EventType = "toolcall_start"
	EventToolCallDelta EventType = "toolcall_delta"
	EventToolCallEnd   EventType = "toolcall_end"
	EventDone          EventType = "done"
	EventError         EventType = "error"
)

// Event is one streaming event (pi-ai's AssistantMessageEvent).
type Event struct {
	Type EventType
	// ContentIndex is the block the event is about (*_start/_delta/_end).
	ContentIndex int
	// Delta is the new text, thinking or raw tool-call JSON fragment.
	Delta string
	// Content is the full text or thinking of a finished block (*_end).
	Content string
	// ToolCall is the finished tool call (toolcall_end).
	ToolCall *Content
	// Partial is the message so far. It may be reused by the provider
	// after the event is handed over: copy what you keep.
	Partial *Message
	// Reason is the stop reason of done/error.
	Reason StopReason
	// Message is the final message (done/error).
	Message *Message
	// Err is the failure behind an error event when the provider has one
	// as a Go error (an *APIError, say). It lives in this process only:
	// it is never serialized, and a message read back from a session
	// file has just its ErrorMessage text.
	Err error
}

// MarshalJSON writes the event in pi's JSON shape.
func (e Event) MarshalJSON() ([]byte, error) {
	w := newObjWriter(nil)
	w.val("type", string(e.Type))
	switch e.Type {
	case EventStart:
		w.val("partial", e.Partial)
	case EventDone:
		w.val("reason", string(e.Reason))
		w.val("message", e.Message)
	case EventError:
		w.val("reason", string(e.Reason))
		w.val("error", e.Message)
	default:
		w.val("contentIndex", e.ContentIndex)
		switch e.Type {
		case EventTextDelta, EventThinkingDelta, EventToolCallDelta:
			w.val("delta", e.Delta)
		case EventTextEnd, EventThinkingEnd:
			w.val("content", e.Content)
		case EventToolCallEnd:
			w.val("toolCall", e.ToolCall)
		}
		w.val("partial", e.Partial)
	}
	return w.close()
}

// Model is a configured model that can stream a response.
//
// Stream yields events in pi's order: start, block events, and exactly one
// terminal done or error whose Message is the final assistant message.
// Failures after the call starts are encoded in the stream (stopReason
// error, ErrorMessage set), never returned out of band. Cancelling ctx ends
// the stream promptly with stopReason aborted. Implementations are safe for
// concurrent use.
type Model interface {
	Info() ModelInfo
	Stream(ctx context.Context, req Request) iter.Seq[Event]
}

// ToolOutput is what a tool returns: content for the model, optional
// details for the session and UI, and whether the batch may end the run.
type ToolOutput struct {
	Content []Content
	// Details is stored in the toolResult message; nil means absent.
	Details any
	// Terminate asks the loop not to call the model again after this batch
	// (honoured only if every result of the batch asks for it).
	Terminate bool
}
