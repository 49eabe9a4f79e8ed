package anthropic

import "encoding/json"

// The request body of POST /v1/messages. Fields are in alphabetical
// order, as Anthropic's own SDKs write them; optional ones are left out
// when unset.
type request struct {
	MaxTokens    int64         `json:"max_tokens"`
	Messages     []message     `json:"messages"`
	Metadata     *metadata     `json:"metadata,omitempty"`
	Model        string        `json:"model"`
	OutputConfig *outputConfig `json:"output_config,omitempty"`
	Stream       bool          `json:"stream"`
	System       []block       `json:"system,omitempty"`
	Temperature  *float64      `json:"temperature,omitempty"`
	Thinking     *thinking     `json:"thinking,omitempty"`
	Tools        []tool        `json:"tools,omitempty"`
}

type message struct {
	Content []block `json:"content"`
	Role    string  `json:"role"`
}

type metadata struct {
	UserID string `json:"user_id"`
}

type outputConfig struct {
	Effort string `json:"effort"`
}

type thinking struct {
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
	Type         string `json:"type"`
}

type cacheControl struct {
	Type string `json:"type"`
}

// ephemeral marks a prompt-caching breakpoint.
func ephemeral() *cacheControl { return &cacheControl{Type: "ephemeral"} }

type tool struct {
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Name        string          `json:"name"`
}

type imageSource struct {
	Data      string `json:"data"`
	MediaType string `json:"media_type"`
	Type      string `json:"type"`
}

// block is one content block of any type: text, image, thinking,
// redacted_thinking, tool_use or tool_result. Only the fields of its
// type are set; Thinking, Input and IsError are pointers or raw so that
// their required values are sent even when empty or false.
type block struct {
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
	Content      []block         `json:"content,omitempty"`
	Data         string          `json:"data,omitempty"`
	ID           string          `json:"id,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	IsError      *bool           `json:"is_error,omitempty"`
	Name         string          `json:"name,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	Source       *imageSource    `json:"source,omitempty"`
	Text         *string         `json:"text,omitempty"`
	Thinking     *string         `json:"thinking,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Type         string          `json:"type"`
}

func textBlock(s string) block { return block{Type: "text", Text: &s} }

func imageBlock(mime, data string) block {
	return block{Type: "image", Source: &imageSource{Data: data, MediaType: mime, Type: "base64"}}
}

func thinkingBlock(signature, text string) block {
	return block{Type: "thinking", Signature: signature, Thinking: &text}
}

func redactedThinkingBlock(data string) block { return block{Type: "redacted_thinking", Data: data} }

func toolUseBlock(id string, input json.RawMessage, name string) block {
	return block{Type: "tool_use", ID: id, Input: input, Name: name}
}

func toolResultBlock(id string, content []block, isError bool) block {
	return block{Type: "tool_result", ToolUseID: id, Content: content, IsError: &isError}
}

// event is one decoded stream event; which fields are set depends on Type
// (message_start, content_block_start, content_block_delta,
// content_block_stop, message_delta, message_stop).
type event struct {
	Type    string `json:"type"`
	Index   int64  `json:"index"`
	Message *struct {
		ID    string `json:"id"`
		Model string `json:"model"`
		Usage *usage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
		Data     string `json:"data"`
		ID       string `json:"id"`
		Name     string `json:"name"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usage `json:"usage"`
}

// usage counts tokens; a field the event does not carry (or carries as
// null) is nil.
type usage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
}

// apiError is the body of an error event (and of an error response).
type apiError struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}
