// Package assemble builds an assistant message from provider stream
// callbacks and emits pi's unified events in order: start, block events and
// exactly one terminal done or error. Every API adapter and the faux
// provider share it, so the event contract lives in one place.
//
// A Builder owns the message and its terminal event; its Blocks (content.go)
// own the content blocks and their start, delta and end events; both emit
// through one events value (events.go), which sends nothing after the
// consumer stopped or after the terminal event.
package assemble

import (
	"context"
	"time"

	"github.com/pibot/pibot/llm"
)

// AbortedMessage is pi's error text for a cancelled request.
const AbortedMessage = "Request was aborted"

// Builder accumulates one assistant message. It is not safe for concurrent
// use; one Stream call owns one Builder. A Builder must not be copied (its
// Blocks point into it).
type Builder struct {
	info   llm.ModelInfo
	out    events
	msg    llm.Message
	blocks Blocks
}

// New returns a Builder for a message of model info that hands events to
// yield. now stamps the message; nil means time.Now.
func New(info llm.ModelInfo, yield func(llm.Event) bool, now func() time.Time) *Builder {
	if now == nil {
		now = time.Now
	}
	b := &Builder{
		info: info,
		out:  events{yield: yield},
		msg: llm.Message{
			Role:       llm.RoleAssistant,
			Content:    []llm.Content{},
			API:        info.API,
			Provider:   info.Provider,
			Model:      info.ID,
			StopReason: llm.StopStop,
			Timestamp:  now().UnixMilli(),
		},
	}
	b.blocks = Blocks{msg: &b.msg, out: &b.out}
	return b
}

// Blocks returns the message's content blocks, to open, grow and end them.
func (b *Builder) Blocks() *Blocks { return &b.blocks }

// Stopped reports whether the consumer stopped iterating or a terminal
// event was sent; the caller must then return.
func (b *Builder) Stopped() bool { return b.out.over() }

// Message returns the message built so far (shared; copy to keep).
func (b *Builder) Message() *llm.Message { return &b.msg }

// SetResponse records the response id and the model the server reports.
func (b *Builder) SetResponse(id, model string) {
	if id != "" {
		b.msg.ResponseID = id
	}
	if model != "" && model != b.info.ID {
		b.msg.ResponseModel = model
	}
}

// Start emits the start event.
func (b *Builder) Start() bool {
	return b.out.emit(llm.Event{Type: llm.EventStart, Partial: &b.msg})
}

// SetUsage records usage (normalised by the caller) and prices it.
func (b *Builder) SetUsage(u llm.Usage) {
	if u.TotalTokens == 0 {
		u.TotalTokens = u.Input + u.Output + u.CacheRead + u.CacheWrite
	}
	u.Cost = b.info.CostOf(u)
	b.msg.Usage = u
}

// HasToolCalls reports whether the message contains a tool call.
func (b *Builder) HasToolCalls() bool {
	for _, c := range b.msg.Content {
		if c.Type == llm.ContentToolCall {
			return true
		}
	}
	return false
}

func (b *Builder) final() *llm.Message {
	m := b.msg
	m.Content = append([]llm.Content(nil), b.msg.Content...)
	return &m
}

// Done closes open blocks and emits done with reason (stop, length or
// toolUse). It returns the final message.
func (b *Builder) Done(reason llm.StopReason) *llm.Message {
	if !b.blocks.endOpen() {
		return b.final()
	}
	b.msg.StopReason = reason
	m := b.final()
	b.out.last(llm.Event{Type: llm.EventDone, Reason: reason, Message: m})
	return m
}

// Fail emits the terminal error event with reason error or aborted and the
// partial content kept. Open blocks are left without end events, like pi.
func (b *Builder) Fail(reason llm.StopReason, text string) *llm.Message {
	return b.fail(reason, text, nil)
}

// fail is Fail with the Go error behind it (nil when none), handed to the
// consumer on the error event (llm.Event.Err).
func (b *Builder) fail(reason llm.StopReason, text string, err error) *llm.Message {
	b.blocks.drop()
	b.msg.StopReason = reason
	b.msg.ErrorMessage = text
	m := b.final()
	b.out.last(llm.Event{Type: llm.EventError, Reason: reason, Message: m, Err: err})
	return m
}

// Abort is Fail with pi's aborted reason and text.
func (b *Builder) Abort() *llm.Message { return b.Fail(llm.StopAborted, AbortedMessage) }

// FailErr ends the stream for err: aborted when ctx was cancelled,
// otherwise error with err's text (credentials are redacted by the
// transport before they get here), and err itself on the error event, so
// that the agent decides a retry on the typed error (llm.RetryableErr).
func (b *Builder) FailErr(ctx context.Context, err error) *llm.Message {
	if ctx.Err() != nil {
		return b.Abort()
	}
	return b.fail(llm.StopError, err.Error(), err)
}
