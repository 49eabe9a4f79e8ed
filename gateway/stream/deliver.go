package stream

import (
	"context"

	"github.com/pibot/pibot/chat"
)

// Finish stops streaming and delivers the complete reply: final.Markdown,
// if not empty, replaces the text of the last assistant message (open or
// just ended; tool lines and earlier messages stay), or follows the last
// tool line; final.Buttons go on the last message.
// It returns every message of the reply, in order. An error means part of
// the reply could not be delivered within ctx and Options.FinalWait.
func (c *Controller) Finish(ctx context.Context, final chat.Out) ([]chat.MsgRef, error) {
	return c.finish(ctx, final, "")
}

// Abort stops streaming and marks the reply interrupted: what was said so
// far stays, followed by note (for example "⏹ stopped").
func (c *Controller) Abort(ctx context.Context, note string) ([]chat.MsgRef, error) {
	return c.finish(ctx, chat.Out{}, note)
}

// finish marks the reply finished, stops the loop and delivers the whole
// reply (with out's final text and buttons, and note after it) through
// the surface.
func (c *Controller) finish(ctx context.Context, out chat.Out, note string) ([]chat.MsgRef, error) {
	c.r.mu.Lock()
	if c.r.finished {
		c.r.mu.Unlock()
		return c.Refs(), ErrFinished
	}
	c.r.finished = true
	started := c.r.started
	c.r.mu.Unlock()
	c.loop.halt(started)

	c.r.mu.Lock()
	if out.Markdown != "" {
		c.r.doc.setFinal(out.Markdown)
	}
	c.r.doc.endMessage()
	md := c.r.doc.render(c.opts.Verbosity, c.now(), false)
	c.r.mu.Unlock()
	if note != "" {
		if md != "" {
			md += "\n\n"
		}
		md += note
	}
	c.pub.Lock() // a Cut may still be showing its part
	defer c.pub.Unlock()
	err := c.out.surf.deliver(ctx, final{md: md, buttons: out.Buttons, silent: out.Silent, deadline: c.now().Add(c.opts.FinalWait)})
	c.out.typing.clear(ctx, c.now())
	return c.Refs(), err
}
