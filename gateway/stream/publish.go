package stream

import (
	"context"
	"time"
	"unicode/utf8"
)

// step is one turn of the loop: it refreshes the typing line and publishes
// the reply when that is due, and returns how long the loop may sleep
// before the next turn; -1 means until content changes.
func (c *Controller) step(ctx context.Context) time.Duration {
	if d := c.pace.pausedFor(c.now()); d > 0 {
		return d
	}
	c.mu.Lock()
	run := c.doc.running()
	status := statusLine(c.doc.status, run, c.typing.always && !c.firstAt.IsZero())
	c.mu.Unlock()
	want := run != nil || c.typing.always || !c.surf.showsProgress()
	return earliest(c.typing.tick(ctx, want, status, c.now()), c.show(ctx))
}

// show publishes the surface's view of the reply if it is due and returns
// when to look again.
func (c *Controller) show(ctx context.Context) time.Duration {
	c.mu.Lock()
	now := c.now()
	running := c.doc.running() != nil
	c.waitsFirst = false
	switch {
	case c.pace.onlyFinal() || c.firstAt.IsZero():
		c.mu.Unlock()
		return -1
	case c.pace.pausedFor(now) > 0:
		c.mu.Unlock()
		return c.pace.pausedFor(now)
	case c.version == c.sentVersion && !running:
		c.mu.Unlock()
		return -1
	}
	if d := c.pace.dueIn(now); d > 0 {
		c.mu.Unlock()
		return d
	}
	view := c.surf.view(&c.doc, c.opts.Verbosity, now)
	version := c.version
	if !c.msgs.shown() {
		if view == "" {
			c.sentVersion = version
			c.mu.Unlock()
			return -1
		}
		if wait := c.firstAt.Add(firstPostDelay).Sub(now); wait > 0 && utf8.RuneCountInString(view) < firstPostChars {
			c.waitsFirst = true
			c.mu.Unlock()
			return wait
		}
	}
	c.mu.Unlock()

	ok := c.surf.publish(ctx, view)

	after := c.pace.published(c.now())
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.sentVersion = version
	}
	if c.pace.onlyFinal() || (c.version == c.sentVersion && !running) {
		return -1
	}
	return after
}
