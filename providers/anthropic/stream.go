package anthropic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/assemble"
	"github.com/pibot/pibot/providers/internal/transport"
)

// maxLine bounds one line of the event stream (a tool call's arguments
// come in many small deltas; 32 MiB is far beyond any real event).
const maxLine = 32 << 20

// events decodes a text/event-stream body into the Messages API's events.
// Events without a name and ping events are skipped; an error event ends
// the stream with a *streamError.
type events struct {
	sc   *bufio.Scanner
	data bytes.Buffer
	cur  event
	err  error
}

func newEvents(r io.Reader) *events {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	return &events{sc: sc}
}

// next decodes the next event into e.cur; false at the end of the stream
// or on a failure (see e.err).
func (e *events) next() bool {
	for e.err == nil {
		name, data, ok := e.frame()
		if !ok {
			return false
		}
		switch name {
		case "", "ping":
			continue
		case "error":
			e.err = newStreamError(data)
			return false
		}
		if len(data) == 0 {
			continue
		}
		e.cur = event{}
		if err := json.Unmarshal(data, &e.cur); err != nil {
			e.err = err
			return false
		}
		return true
	}
	return false
}

// frame reads one event: its name and its data lines joined by newlines.
func (e *events) frame() (name string, data []byte, ok bool) {
	e.data.Reset()
	for e.sc.Scan() {
		line := e.sc.Bytes()
		if len(line) == 0 {
			if name == "" && e.data.Len() == 0 {
				continue
			}
			return name, bytes.TrimSuffix(e.data.Bytes(), []byte("\n")), true
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			e.data.Write(value)
			e.data.WriteByte('\n')
		}
	}
	e.err = e.sc.Err()
	return "", nil, false
}

// streamError is an error event: the API failed after the stream began.
type streamError struct {
	typ, msg string
	raw      []byte
}

func newStreamError(data []byte) *streamError {
	var ae apiError
	if json.Unmarshal(data, &ae) != nil {
		return &streamError{raw: data}
	}
	return &streamError{typ: ae.Error.Type, msg: ae.Error.Message, raw: data}
}

func (e *streamError) Error() string {
	if e.msg != "" {
		return strings.TrimSpace(e.typ + ": " + e.msg)
	}
	if t := transport.ErrorText(e.raw); t != "" {
		return t
	}
	return "received error while streaming: " + string(e.raw)
}

// counts is the usage reported so far; an event's usage replaces the
// fields it carries.
type counts struct{ llm.Usage }

func (c *counts) add(u *usage) {
	if u == nil {
		return
	}
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&c.Input, u.InputTokens)
	set(&c.Output, u.OutputTokens)
	set(&c.CacheRead, u.CacheReadInputTokens)
	set(&c.CacheWrite, u.CacheCreationInputTokens)
	c.TotalTokens = 0
}

// read turns the events into the builder's calls until message_stop, the
// end of the stream or a failure.
func (m *Model) read(ctx context.Context, b *assemble.Builder, stream *events) {
	bs := b.Blocks()
	blocks := map[int64]int{}
	var u counts
	stop := ""
	for stream.next() {
		e := &stream.cur
		switch e.Type {
		case "message_start":
			if e.Message != nil {
				b.SetResponse(e.Message.ID, e.Message.Model)
				u.add(e.Message.Usage)
				b.SetUsage(u.Usage)
			}
		case "content_block_start":
			cb := e.ContentBlock
			var i int
			ok := true
			switch cb.Type {
			case "text":
				if i, ok = bs.TextStart(); ok && cb.Text != "" {
					ok = bs.Delta(i, cb.Text)
				}
			case "thinking":
				if i, ok = bs.ThinkingStart(); ok && cb.Thinking != "" {
					ok = bs.Delta(i, cb.Thinking)
				}
			case "redacted_thinking":
				if i, ok = bs.ThinkingStart(); ok {
					blk := bs.At(i)
					blk.Redacted = true
					blk.ThinkingSignature = cb.Data
					ok = bs.Delta(i, "[Reasoning redacted]")
				}
			case "tool_use":
				i, ok = bs.ToolCallStart(cb.ID, cb.Name)
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
				ok = bs.Delta(i, d.Text)
			case "thinking_delta":
				ok = bs.Delta(i, d.Thinking)
			case "signature_delta":
				bs.At(i).ThinkingSignature += d.Signature
			case "input_json_delta":
				if d.PartialJSON != "" {
					ok = bs.Delta(i, d.PartialJSON)
				}
			}
			if !ok {
				return
			}
		case "content_block_stop":
			if i, found := blocks[e.Index]; found && !bs.End(i) {
				return
			}
		case "message_delta":
			if e.Delta.StopReason != "" {
				stop = e.Delta.StopReason
			}
			if e.Usage != nil {
				u.add(e.Usage)
				b.SetUsage(u.Usage)
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
	if err := stream.err; err != nil {
		b.Fail(llm.StopError, m.info.Provider+": "+streamFailure(err))
		return
	}
	if stop != "" {
		m.finish(b, stop)
		return
	}
	b.Fail(llm.StopError, m.info.Provider+": stream ended without message_stop")
}

// streamFailure renders an error that ended the stream: an error event,
// an event that does not decode, or a broken connection.
func streamFailure(err error) string {
	if se, ok := errors.AsType[*streamError](err); ok {
		return se.Error()
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
