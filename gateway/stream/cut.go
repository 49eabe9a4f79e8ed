package stream

import (
	"context"
	"slices"
)

// Cut closes the part of the reply said so far: it is shown complete (no
// cursor, no status line) in the messages that show it now, and
// everything from the first unfinished tool call on goes into new
// messages, after whatever the conversation gets meanwhile. The gateway
// cuts the reply before it posts an approval card, so the card, and the
// decision that replaces its buttons, stay between what led to the call
// and what followed it. Cut returns once the first part is on screen (or
// could not be shown within Options.FinalWait); it does nothing once the
// reply is finished.
func (c *Controller) Cut(ctx context.Context) error {
	c.pub.Lock()
	defer c.pub.Unlock()
	c.r.mu.Lock()
	if c.r.finished {
		c.r.mu.Unlock()
		return nil
	}
	c.r.doc.endMessage()
	i := 0
	for i < len(c.r.doc.items) && (c.r.doc.items[i].tool == nil || c.r.doc.items[i].tool.done) {
		i++
	}
	before := document{items: c.r.doc.items[:i]}
	now := c.now()
	md := before.render(c.opts.Verbosity, now, false)
	c.r.doc.items = slices.Clone(c.r.doc.items[i:])
	c.r.version++ // what is left (a running tool, the status) is shown anew
	c.r.mu.Unlock()
	err := c.out.surf.cut(ctx, final{md: md, deadline: now.Add(c.opts.FinalWait)})
	c.loop.poke()
	return err
}

// cut shows f.md as the complete content of the messages shown so far and
// starts the rest of the reply afresh.
func (e *editSurface) cut(ctx context.Context, f final) error {
	err := e.deliverChunks(ctx, f, e.chunks.split(f.md), 0)
	e.slots = nil
	return err
}

// cut finishes the native stream (or the messages editing took over) with
// f.md; the rest of the reply opens a new stream.
func (n *nativeSurface) cut(ctx context.Context, f final) error {
	err := n.deliver(ctx, f)
	n.edit.slots = nil
	n.st, n.last, n.off = nil, "", false
	return err
}

// cut appends what f.md adds and finishes the stream; the rest of the
// reply opens a new one.
func (a *appendSurface) cut(ctx context.Context, f final) error {
	err := a.deliver(ctx, f)
	a.edit.slots = nil
	a.st, a.cur, a.taken, a.pending, a.fails = nil, "", "", "", 0
	return err
}
