package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/assemble"
	"github.com/pibot/pibot/providers/internal/transport"
)

// setIf sets a usage field only when the event carries it.
func setIf(dst *int64, v int64, ok bool) {
	if ok {
		*dst = v
	}
}

func (m *Model) read(ctx context.Context, b *assemble.Builder, stream *ssestream.Stream[anthropic.MessageStreamEventUnion]) {
	blocks := map[int64]int{}
	var u llm.Usage
	stop := ""
	for stream.Next() {
		e := stream.Current()
		switch e.Type {
		case "message_start":
			if e.JSON.Message.Valid() {
				b.SetResponse(e.Message.ID, e.Message.Model)
				mu := e.Message.Usage
				setIf(&u.Input, mu.InputTokens, mu.JSON.InputTokens.Valid())
				setIf(&u.Output, mu.OutputTokens, mu.JSON.OutputTokens.Valid())
				setIf(&u.CacheRead, mu.CacheReadInputTokens, mu.JSON.CacheReadInputTokens.Valid())
				setIf(&u.CacheWrite, mu.CacheCreationInputTokens, mu.JSON.CacheCreationInputTokens.Valid())
				u.TotalTokens = 0
				b.SetUsage(u)
			}
		case "content_block_start":
			cb := e.ContentBlock
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
			if !found {
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
			if e.Delta.StopReason != "" {
				stop = string(e.Delta.StopReason)
			}
			if e.JSON.Usage.Valid() {
				du := e.Usage
				setIf(&u.Input, du.InputTokens, du.JSON.InputTokens.Valid())
				setIf(&u.Output, du.OutputTokens, du.JSON.OutputTokens.Valid())
				setIf(&u.CacheRead, du.CacheReadInputTokens, du.JSON.CacheReadInputTokens.Valid())
				setIf(&u.CacheWrite, du.CacheCreationInputTokens, du.JSON.CacheCreationInputTokens.Valid())
				u.TotalTokens = 0
				b.SetUsage(u)
			}
		case "message_stop":
			m.finish(b, stop)
			return
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
	if stop != "" {
		m.finish(b, stop)
		return
	}
	b.Fail(llm.StopError, m.info.Provider+": stream ended without message_stop")
}

// streamFailure renders an error that ended the stream: an error event
// (the SDK turns it into *anthropic.Error), an event that does not decode,
// or a broken connection.
func streamFailure(err error) string {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		if msg := strings.TrimSpace(string(ae.Type()) + ": " + ae.Message); ae.Message != "" {
			return msg
		}
		return transport.ErrorText([]byte(ae.RawJSON()))
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return "bad stream event: " + err.Error()
	}
	return "read stream: " + err.Error()
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
