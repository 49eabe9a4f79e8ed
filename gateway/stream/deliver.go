package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pibot/pibot/chat"
)

// errWaitExceeded is wrapped when a retry-after reaches past FinalWait.
var errWaitExceeded = errors.New("stream: retry-after beyond the final wait")

// deliver shows md as the complete reply, with buttons on its last
// message. It runs after the loop has stopped.
func (c *Controller) deliver(ctx context.Context, md string, buttons [][]chat.Button, silent bool) error {
	chunks := c.split(md)
	if len(chunks) == 0 && len(buttons) > 0 {
		chunks = []string{"…"}
	}
	deadline := c.now().Add(c.opts.FinalWait)
	c.mu.Lock()
	st := c.out.native
	c.out.native = nil
	c.mu.Unlock()

	start := 0
	if st != nil {
		if len(chunks) == 0 {
			if err := st.Abort(ctx); err != nil {
				c.log.Debug("stream: abort native stream", "err", err)
			}
			return nil
		}
		out := chat.Out{Markdown: chunks[0], ReplyTo: c.opts.ReplyTo, Silent: silent}
		if len(chunks) == 1 {
			out.Buttons = buttons
		}
		var ref chat.MsgRef
		err := c.retry(ctx, deadline, sendAttempts, 0, func() (err error) {
			ref, err = st.Finish(ctx, out)
			return err
		})
		if err == nil {
			c.mu.Lock()
			c.out.slots = append(c.out.slots, &slot{ref: ref, last: chunks[0]})
			c.out.refs = append(c.out.refs, ref)
			c.mu.Unlock()
			start = 1
		} else {
			if ctx.Err() != nil {
				return fmt.Errorf("stream: finish native stream: %w", err)
			}
			c.log.Warn("stream: native finish failed, sending instead", "err", err)
			if err := st.Abort(ctx); err != nil {
				c.log.Debug("stream: abort native stream", "err", err)
			}
		}
	}

	for i := start; i < len(chunks); i++ {
		out := chat.Out{Markdown: chunks[i], Silent: silent}
		lastChunk := i == len(chunks)-1
		if lastChunk {
			out.Buttons = buttons
		}
		c.mu.Lock()
		var s *slot
		if i < len(c.out.slots) {
			s = c.out.slots[i]
		}
		c.mu.Unlock()
		if s != nil {
			if s.last == out.Markdown && (!lastChunk || len(buttons) == 0) {
				continue
			}
			err := c.retry(ctx, deadline, editAttempts, editAttempts, func() error { return c.ad.Edit(ctx, s.ref, out) })
			if err == nil {
				c.mu.Lock()
				s.last = out.Markdown
				c.mu.Unlock()
				continue
			}
			if ctx.Err() != nil {
				return fmt.Errorf("stream: edit part %d of %d: %w", i+1, len(chunks), err)
			}
			c.log.Warn("stream: final edit failed, sending the rest as new messages", "msg", s.ref.ID, "err", err)
			c.mu.Lock()
			if errors.Is(err, chat.ErrNotFound) {
				c.dropRef(s.ref)
			}
			c.out.slots = c.out.slots[:i]
			c.mu.Unlock()
		}
		c.mu.Lock()
		if len(c.out.refs) == 0 {
			out.ReplyTo = c.opts.ReplyTo
		}
		c.mu.Unlock()
		var ref chat.MsgRef
		err := c.retry(ctx, deadline, sendAttempts, 0, func() (err error) {
			ref, err = c.ad.Send(ctx, c.conv, out)
			return err
		})
		if err != nil {
			return fmt.Errorf("stream: send part %d of %d: %w", i+1, len(chunks), err)
		}
		c.mu.Lock()
		c.out.slots = append(c.out.slots, &slot{ref: ref, last: out.Markdown})
		c.out.refs = append(c.out.refs, ref)
		c.mu.Unlock()
	}
	c.trim(ctx, deadline, len(chunks))
	return nil
}

// trim removes messages beyond the first n, left over when the reply
// shrank, or blanks them when the adapter cannot delete.
func (c *Controller) trim(ctx context.Context, deadline time.Time, n int) {
	c.mu.Lock()
	var extra []*slot
	if len(c.out.slots) > n {
		extra = c.out.slots[n:]
		c.out.slots = c.out.slots[:n]
	}
	c.mu.Unlock()
	for _, s := range extra {
		var err error
		if c.deleter != nil {
			err = c.retry(ctx, deadline, editAttempts, editAttempts, func() error { return c.deleter.Delete(ctx, s.ref) })
			if err == nil || errors.Is(err, chat.ErrNotFound) {
				c.mu.Lock()
				c.dropRef(s.ref)
				c.mu.Unlock()
				continue
			}
		}
		err = c.retry(ctx, deadline, editAttempts, editAttempts, func() error { return c.ad.Edit(ctx, s.ref, chat.Out{Markdown: "…"}) })
		if err != nil {
			c.log.Warn("stream: blank leftover message", "msg", s.ref.ID, "err", err)
		}
	}
}

// retry calls f until it succeeds, waiting out rate-limit pauses and
// backing off after other errors, never past deadline. It gives up after
// attempts failures that are not rate limits, or limits rate limits if
// limits > 0. chat.ErrNotFound is not retried.
func (c *Controller) retry(ctx context.Context, deadline time.Time, attempts, limits int, f func() error) error {
	backoff := 500 * time.Millisecond
	for failures, limited := 0, 0; ; {
		if err := c.waitPause(ctx, deadline); err != nil {
			return err
		}
		err := f()
		if err == nil {
			c.mu.Lock()
			c.out.strikes = 0
			c.mu.Unlock()
			return nil
		}
		if errors.Is(err, chat.ErrNotFound) || ctx.Err() != nil {
			return err
		}
		c.mu.Lock()
		isLimit := c.rateLimited(err)
		c.mu.Unlock()
		if isLimit {
			if limited++; limits > 0 && limited >= limits {
				return err
			}
			continue
		}
		failures++
		if failures >= attempts || c.now().Add(backoff).After(deadline) {
			return err
		}
		if err := sleep(ctx, backoff); err != nil {
			return err
		}
		backoff *= 2
	}
}

// waitPause sleeps until the reply's pause ends, failing if it ends after
// deadline.
func (c *Controller) waitPause(ctx context.Context, deadline time.Time) error {
	c.mu.Lock()
	until := c.out.pausedUntil
	c.mu.Unlock()
	now := c.now()
	if !now.Before(until) {
		return nil
	}
	if until.After(deadline) {
		return fmt.Errorf("%w: paused until %s", errWaitExceeded, until.Format(time.RFC3339))
	}
	return sleep(ctx, until.Sub(now))
}

// sleep waits for d or the end of ctx.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// clearStatus clears a typing status the reply set, unless the reply is
// paused by a rate limit.
func (c *Controller) clearStatus(ctx context.Context) {
	c.mu.Lock()
	clear := c.out.typed && !c.now().Before(c.out.pausedUntil)
	c.out.typed = false
	c.mu.Unlock()
	if !clear {
		return
	}
	if err := c.typer.SetStatus(ctx, c.conv, ""); err != nil {
		c.log.Debug("stream: clear status", "err", err)
	}
}
