package stream

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/pibot/pibot/chat"
)

// step does the work that is due and returns how long the loop may sleep
// before the next check; -1 means until content changes.
func (c *Controller) step(ctx context.Context) time.Duration {
	c.mu.Lock()
	now := c.now()
	if now.Before(c.out.pausedUntil) {
		d := c.out.pausedUntil.Sub(now)
		c.mu.Unlock()
		return d
	}
	c.mu.Unlock()
	return earliest(c.typing(ctx), c.show(ctx))
}

// earliest returns the smaller of two sleep durations, where -1 is none.
func earliest(a, b time.Duration) time.Duration {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	default:
		return min(a, b)
	}
}

// typing refreshes the typing indicator before the first visible output
// and while a tool runs.
func (c *Controller) typing(ctx context.Context) time.Duration {
	refresh := c.caps.TypingRefresh
	if c.typer == nil || refresh <= 0 {
		return -1
	}
	c.mu.Lock()
	now := c.now()
	run := c.doc.running()
	if (c.out.visible && run == nil) || now.Before(c.out.pausedUntil) {
		c.mu.Unlock()
		return -1
	}
	if due := c.out.lastTyping.Add(refresh); c.out.typed && now.Before(due) {
		c.mu.Unlock()
		return due.Sub(now)
	}
	status := c.doc.status
	switch {
	case status != "":
	case run != nil:
		status = "running " + run.name + "…"
	default:
		status = "thinking…"
	}
	c.out.lastTyping, c.out.typed = now, true
	c.mu.Unlock()
	if err := c.typer.SetStatus(ctx, c.conv, status); err != nil {
		c.mu.Lock()
		c.rateLimited(err)
		c.mu.Unlock()
		c.log.Debug("stream: typing", "err", err)
	}
	return refresh
}

// show publishes the current render if it is due and returns when to look
// again.
func (c *Controller) show(ctx context.Context) time.Duration {
	c.mu.Lock()
	now := c.now()
	running := c.doc.running() != nil
	switch {
	case c.out.finalOnly || c.firstAt.IsZero():
		c.mu.Unlock()
		return -1
	case now.Before(c.out.pausedUntil):
		d := c.out.pausedUntil.Sub(now)
		c.mu.Unlock()
		return d
	case c.version == c.out.sentVersion && !running:
		c.mu.Unlock()
		return -1
	}
	if due := c.out.lastOut.Add(c.out.interval); !c.out.lastOut.IsZero() && now.Before(due) {
		c.mu.Unlock()
		return due.Sub(now)
	}
	md := c.doc.render(c.opts.Verbosity, now, true)
	version := c.version
	if !c.out.visible {
		if md == "" {
			c.out.sentVersion = version
			c.mu.Unlock()
			return -1
		}
		if wait := c.firstAt.Add(firstPostDelay).Sub(now); wait > 0 && utf8.RuneCountInString(md) < firstPostChars {
			c.mu.Unlock()
			return wait
		}
	}
	c.mu.Unlock()

	ok := c.publish(ctx, c.split(md))

	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.lastOut = c.now()
	if ok {
		c.out.sentVersion = version
	}
	if c.out.finalOnly || (c.version == c.out.sentVersion && !running) {
		return -1
	}
	return earliest(c.out.interval, c.out.pausedUntil.Sub(c.out.lastOut))
}

// split cuts md into message-sized chunks. Only the goroutine that
// publishes calls it (the loop, then Finish or Abort).
func (c *Controller) split(md string) []string {
	if md == "" {
		return nil
	}
	if c.limit == 0 {
		return []string{md}
	}
	if c.splitter == nil {
		if c.opts.Splitters != nil {
			c.splitter = c.opts.Splitters.For(c.caps.Dialect)
		} else {
			c.splitter = chat.NewSplitter(c.caps.Dialect)
		}
	}
	return c.splitter.Split(md, c.limit)
}

// publish shows chunks, the last one live. It reports whether everything
// is shown.
func (c *Controller) publish(ctx context.Context, chunks []string) bool {
	c.mu.Lock()
	native := !c.out.nativeOff
	c.mu.Unlock()
	if native {
		done, ok := c.publishNative(ctx, chunks)
		if done {
			return ok
		}
	}
	for i, chunk := range chunks {
		if c.stopping() {
			return false
		}
		text := chunk
		if i == len(chunks)-1 {
			text = withCursor(chunk)
		}
		c.mu.Lock()
		var s *slot
		if i < len(c.out.slots) {
			s = c.out.slots[i]
		}
		first := len(c.out.refs) == 0
		c.mu.Unlock()
		if s != nil && s.last == text {
			continue
		}
		if s != nil {
			err := c.ad.Edit(ctx, s.ref, chat.Out{Markdown: text})
			c.mu.Lock()
			c.edited(i, s, text, err)
			c.mu.Unlock()
			if err != nil {
				return false
			}
			continue
		}
		out := chat.Out{Markdown: text}
		if first {
			out.ReplyTo = c.opts.ReplyTo
		}
		ref, err := c.ad.Send(ctx, c.conv, out)
		c.mu.Lock()
		c.sent(ref, text, err)
		c.mu.Unlock()
		if err != nil {
			return false
		}
	}
	return true
}

// publishNative shows a reply that fits in one message through the native
// stream. When the reply outgrows one message, the stream is finished with
// the first chunk and editing takes over. done is false when the caller
// must publish by editing.
func (c *Controller) publishNative(ctx context.Context, chunks []string) (done, ok bool) {
	c.mu.Lock()
	st, last := c.out.native, c.out.nativeLast
	if st == nil && len(chunks) > 1 {
		c.out.nativeOff = true
		c.mu.Unlock()
		return false, false
	}
	c.mu.Unlock()
	if st == nil {
		s, err := c.streamer.OpenStream(ctx, c.conv, c.opts.ReplyTo)
		if err != nil {
			c.nativeFailed(ctx, nil, err)
			return true, false
		}
		c.mu.Lock()
		c.out.native = s
		c.mu.Unlock()
		st = s
	}
	if len(chunks) > 1 {
		ref, err := st.Finish(ctx, chat.Out{Markdown: chunks[0], ReplyTo: c.opts.ReplyTo})
		if err != nil {
			c.nativeFailed(ctx, st, err)
			return true, false
		}
		c.mu.Lock()
		c.out.native, c.out.nativeOff = nil, true
		c.out.slots = append(c.out.slots, &slot{ref: ref, last: chunks[0]})
		c.out.refs = append(c.out.refs, ref)
		c.out.strikes = 0
		c.mu.Unlock()
		return false, false
	}
	if chunks[0] == last {
		return true, true
	}
	if err := st.Update(ctx, chunks[0]); err != nil {
		c.nativeFailed(ctx, st, err)
		return true, false
	}
	c.mu.Lock()
	c.out.nativeLast = chunks[0]
	c.out.visible = true
	c.out.strikes = 0
	c.mu.Unlock()
	return true, true
}

// nativeFailed handles a failed native stream call: a rate limit pauses,
// anything else abandons native streaming (aborting st) for send+edit.
func (c *Controller) nativeFailed(ctx context.Context, st chat.Stream, err error) {
	c.mu.Lock()
	limited := c.rateLimited(err)
	if !limited {
		c.out.nativeOff = true
		c.out.native = nil
		c.out.nativeLast = ""
	}
	c.mu.Unlock()
	if limited {
		return
	}
	c.log.Warn("stream: native stream failed, falling back to edits", "err", err)
	if st != nil {
		if err := st.Abort(ctx); err != nil {
			c.log.Debug("stream: abort native stream", "err", err)
		}
	}
}

// rateLimited handles a *chat.RateLimitError: it pauses the reply, doubles
// the interval and counts a strike. It reports whether err was one. c.mu is
// held.
func (c *Controller) rateLimited(err error) bool {
	rl, ok := errors.AsType[*chat.RateLimitError](err)
	if !ok {
		return false
	}
	c.pause(rl.RetryAfter)
	c.out.interval = min(max(2*c.out.interval, c.caps.EditInterval), maxInterval)
	c.out.strikes++
	if c.out.strikes >= maxStrikes && !c.out.finalOnly {
		c.out.finalOnly = true
		c.log.Info("stream: rate limited repeatedly, only the final text will be sent", "retry_after", rl.RetryAfter)
	}
	return true
}

// pause holds every call of the reply for d. c.mu is held.
func (c *Controller) pause(d time.Duration) {
	if until := c.now().Add(max(d, minPause)); until.After(c.out.pausedUntil) {
		c.out.pausedUntil = until
	}
}

// edited records the result of editing slot i (s) to text. c.mu is held.
func (c *Controller) edited(i int, s *slot, text string, err error) {
	switch {
	case err == nil:
		s.last, s.fails = text, 0
		c.out.strikes = 0
	case c.rateLimited(err):
	case errors.Is(err, chat.ErrNotFound):
		c.log.Info("stream: message gone, continuing in a new one", "msg", s.ref.ID)
		c.dropRef(s.ref)
		c.abandon(i)
	default:
		s.fails++
		c.log.Warn("stream: edit", "msg", s.ref.ID, "fails", s.fails, "err", err)
		if s.fails >= maxEditFails {
			c.abandon(i)
		}
	}
}

// abandon leaves slot i and later ones behind: the reply continues from
// chunk i in new messages. After maxAbandons only the final is sent. c.mu
// is held.
func (c *Controller) abandon(i int) {
	c.out.slots = c.out.slots[:i]
	c.out.abandons++
	if c.out.abandons >= maxAbandons && !c.out.finalOnly {
		c.out.finalOnly = true
		c.log.Info("stream: edits keep failing, only the final text will be sent")
	}
}

// sent records the result of posting text as a new message. c.mu is held.
func (c *Controller) sent(ref chat.MsgRef, text string, err error) {
	switch {
	case err == nil:
		c.out.slots = append(c.out.slots, &slot{ref: ref, last: text})
		c.out.refs = append(c.out.refs, ref)
		c.out.visible = true
		c.out.strikes, c.out.sendFails = 0, 0
	case c.rateLimited(err):
	default:
		c.out.sendFails++
		c.log.Warn("stream: send", "fails", c.out.sendFails, "err", err)
		if c.out.sendFails >= maxSendFails {
			c.out.finalOnly = true
		}
	}
}

// dropRef forgets a message that no longer exists. c.mu is held.
func (c *Controller) dropRef(ref chat.MsgRef) {
	for i, r := range c.out.refs {
		if r == ref {
			c.out.refs = append(c.out.refs[:i:i], c.out.refs[i+1:]...)
			return
		}
	}
}
