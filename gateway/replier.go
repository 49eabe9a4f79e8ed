package gateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/pibot/pibot/chat"
)

// replier sends the gateway's own short messages to the chats: answers,
// reactions, queue notices and edits retried past rate limits.
type replier struct {
	adapters map[chat.Platform]chat.Adapter
	log      *slog.Logger
	metrics  *Metrics
	// finalWait bounds how long editRetry waits out rate limits.
	finalWait time.Duration
}

// redelivery is what the platform of in does with an event the intake
// refused (chat.Caps.Redelivery).
func (c *replier) redelivery(in chat.Inbound) chat.Redelivery {
	if a := c.adapters[in.Conv.Platform]; a != nil {
		return a.Caps(in.Conv).Redelivery
	}
	return chat.NoRedelivery
}

// reply sends a short answer to the conversation of in.
func (c *replier) reply(ctx context.Context, in chat.Inbound, md string) {
	c.replyRef(ctx, in, md)
}

// replyRef is reply, returning the message sent.
func (c *replier) replyRef(ctx context.Context, in chat.Inbound, md string) (chat.MsgRef, bool) {
	a := c.adapters[in.Conv.Platform]
	if a == nil || md == "" {
		return chat.MsgRef{}, false
	}
	out := chat.Out{Markdown: md}
	if in.Msg.ID != "" && in.Msg.Conv.Key() == in.Conv.Key() {
		// (Not a channel message answered in the thread opened on it.)
		ref := in.Msg
		out.ReplyTo = &ref
	}
	ref, err := a.Send(ctx, in.Conv, out)
	if err != nil {
		c.log.Warn("send reply", "conv", in.Conv.Key(), "err", err)
		return chat.MsgRef{}, false
	}
	return ref, true
}

// react marks a message with an emoji where the platform can.
func (c *replier) react(ctx context.Context, ref chat.MsgRef, emoji string) bool {
	a, ok := c.adapters[ref.Conv.Platform].(chat.Reactor)
	if !ok || ref.ID == "" {
		return false
	}
	if err := a.React(ctx, ref, emoji); err != nil {
		c.log.Debug("react", "err", err)
		return false
	}
	return true
}

// queued tells the user their message is queued: a reaction where the
// platform has them, a status line otherwise.
// The caller sets p.queued before the message can be applied.
func (c *replier) queued(ctx context.Context, p *pending, status string) {
	c.metrics.queued()
	if c.react(ctx, p.item.In.Msg, "👀") {
		if p.note != nil {
			p.note.posted(nil)
		}
		return
	}
	ref, ok := c.replyRef(ctx, p.item.In, "_"+status+"_")
	if p.note == nil {
		return
	}
	if !ok {
		p.note.posted(nil)
		return
	}
	// Settled before the notice was out: it says so at once.
	if final, edit := p.note.posted(&ref); edit {
		c.editNote(ctx, ref, final)
	}
}

// editRetry edits a message, waiting out rate limits up to finalWait.
func (c *replier) editRetry(ctx context.Context, ad chat.Adapter, ref chat.MsgRef, out chat.Out) {
	deadline := time.Now().Add(c.finalWait)
	for {
		err := ad.Edit(ctx, ref, out)
		var rl *chat.RateLimitError
		if err == nil {
			return
		}
		if !errors.As(err, &rl) || time.Now().Add(rl.RetryAfter).After(deadline) {
			c.log.Warn("edit message", "ref", ref.Key(), "err", err)
			return
		}
		t := time.NewTimer(rl.RetryAfter)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// respond answers in in words. An event that came with an interaction (a
// Slack slash command, a Discord application command) is answered through
// it, for the sender's eyes only when private (chat.Out.Ephemeral); an
// interaction that cannot be answered any more, and every other event, get
// a reply in the conversation as reply sends it.
func (c *replier) respond(ctx context.Context, in chat.Inbound, md string, private bool) {
	if in.Interaction != nil {
		out := chat.Out{Markdown: md}
		if private {
			out.Ephemeral = in.User.ID
		}
		var a chat.Answer
		if md != "" {
			a.Reply = &out
		}
		if c.answer(ctx, *in.Interaction, a) {
			return
		}
	}
	c.reply(ctx, in, md)
}

// answer answers an interaction through its platform's chat.Responder and
// says whether that worked. The zero Answer just ends the client's spinner.
func (c *replier) answer(ctx context.Context, ix chat.Interaction, a chat.Answer) bool {
	r, ok := c.adapters[ix.Platform].(chat.Responder)
	if !ok {
		return false
	}
	if _, err := r.Answer(ctx, ix, a); err != nil {
		c.log.Warn("answer an interaction", "platform", ix.Platform, "conv", ix.Conv.Key(), "err", err)
		return false
	}
	return true
}
