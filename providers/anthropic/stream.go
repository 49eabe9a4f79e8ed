package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/assemble"
	"github.com/pibot/pibot/providers/internal/sse"
)

type usage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

type event struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		ID    string `json:"id"`
		Model string `json:"model"`
		Usage usage  `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type     string          `json:"type"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		Data     string          `json:"data"`
		Input    json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func set(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

func (m *Model) read(ctx context.Context, b *assemble.Builder, body io.Reader) {
	r := sse.NewReader(body)
	blocks := map[int]int{}
	var u llm.Usage
	stop := ""
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.FailErr(ctx, fmt.Errorf("%s: read stream: %w", m.info.Provider, err))
			return
		}
		var e event
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			b.Fail(llm.StopError, fmt.Sprintf("%s: bad stream event: %v", m.info.Provider, err))
			return
		}
		switch e.Type {
		case "message_start":
			if e.Message != nil {
				b.SetResponse(e.Message.ID, e.Message.Model)
				mu := e.Message.Usage
				set(&u.Input, mu.InputTokens)
				set(&u.Output, mu.OutputTokens)
				set(&u.CacheRead, mu.CacheReadInputTokens)
				set(&u.CacheWrite, mu.CacheCreationInputTokens)
				u.TotalTokens = 0
				b.SetUsage(u)
			}
		case "content_block_start":
			cb := e.ContentBlock
			if cb == nil {
				continue
			}
			var i int
			ok := true
			switch cb.Type {
			case "text":
				if i, ok = b.TextStart(); ok && cb.Text != "" {
					ok = b.Delta(i, cb.Text)
				}
			case "thinking":
				if i, ok = b.ThinkingStart(); ok && cb.Thinking != "" {
					ok = b.Delta(i, cb.Thinking)
				}
			case "redacted_thinking":
				if i, ok = b.ThinkingStart(); ok {
					blk := b.Block(i)
					blk.Redacted = true
					blk.ThinkingSignature = cb.Data
					ok = b.Delta(i, "[Reasoning redacted]")
				}
			case "tool_use":
				i, ok = b.ToolCallStart(cb.ID, cb.Name)
			default:
				continue
			}
			if !ok {
				return
			}
			blocks[e.Index] = i
		case "content_block_delta":
			i, found := blocks[e.Index]
			if !found || e.Delta == nil {
				continue
			}
			d := e.Delta
			ok := true
			switch d.Type {
			case "text_delta":
				ok = b.Delta(i, d.Text)
			case "thinking_delta":
				ok = b.Delta(i, d.Thinking)
			case "signature_delta":
				b.Block(i).ThinkingSignature += d.Signature
			case "input_json_delta":
				if d.PartialJSON != "" {
					ok = b.Delta(i, d.PartialJSON)
				}
			}
			if !ok {
				return
			}
		case "content_block_stop":
			if i, found := blocks[e.Index]; found && !b.End(i) {
				return
			}
		case "message_delta":
			if e.Delta != nil && e.Delta.StopReason != "" {
				stop = e.Delta.StopReason
			}
			if e.Usage != nil {
				set(&u.Input, e.Usage.InputTokens)
				set(&u.Output, e.Usage.OutputTokens)
				set(&u.CacheRead, e.Usage.CacheReadInputTokens)
				set(&u.CacheWrite, e.Usage.CacheCreationInputTokens)
				u.TotalTokens = 0
				b.SetUsage(u)
			}
		case "message_stop":
			m.finish(b, stop)
			return
		case "error":
			msg := "stream error"
			if e.Error != nil {
				msg = strings.TrimSpace(e.Error.Type + ": " + e.Error.Message)
			}
			b.Fail(llm.StopError, m.info.Provider+": "+msg)
			return
		}
	}
	if ctx.Err() != nil {
		b.Abort()
		return
	}
	if stop != "" {
		m.finish(b, stop)
		return
	}
	b.Fail(llm.StopError, m.info.Provider+": stream ended without message_stop")
}

func (m *Model) finish(b *assemble.Builder, stop string) {
	switch stop {
	case "end_turn", "pause_turn", "stop_sequence", "":
		b.Done(llm.StopStop)
	case "max_tokens":
		b.Done(llm.StopLength)
	case "tool_use":
		b.Done(llm.StopToolUse)
	default:
		b.Fail(llm.StopError, "Provider stop_reason: "+stop)
	}
}
