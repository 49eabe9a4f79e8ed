package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pibot/pibot/chat"
)

// appendSurface shows a reply on a native stream that can only append
// (Caps.AppendOnly: Slack's chat.appendStream). The stream only ever
// receives finished text: the settled heads of assistant messages (settled)
// and the lines of finished tool calls, in order, never a change to what it
// has shown.
// Unfinished text, running tools and the status show on the typing line.
//
// Every Update (and the Finish) carries the stream's whole markdown so far
// and extends the one before: the adapter appends the difference. A stream
// that reaches the message limit is finished and the reply continues in a
// new one. Only the publishing goroutine uses it.
type appendSurface struct {
	outlet
	streamer chat.Streamer
	edit     *editSurface // sends what a failed stream could not show

	taken   string       // the part of the reply's view handed on so far
	pending string       // taken text not yet on a stream
	st      chat.Stream  // open stream, nil if none
	stReply *chat.MsgRef // the message st answers
	cur     string       // markdown st shows
	fails   int          // consecutive failed calls on st
	opens   int          // consecutive failures to open a stream
	dropped int          // streams left behind
}

func (a *appendSurface) view(d *document, v Verbosity, _ time.Time) string {
	return d.renderFinished(v)
}

// showsProgress is false: the stream holds finished text only, so the
// typing line reports progress for the whole reply.
func (a *appendSurface) showsProgress() bool { return false }

func (a *appendSurface) publish(ctx context.Context, view string) bool {
	a.take(view)
	for a.pending != "" {
		if a.loop.stopping() {
			return false
		}
		if err := a.push(ctx); err != nil {
			a.failed(ctx, err)
			return false
		}
	}
	return true
}

// take hands on what view adds to the text taken so far. A view that does
// not extend it (the final text replaced a message) is appended from its
// first block that changed: what was shown cannot be taken back.
func (a *appendSurface) take(view string) {
	switch {
	case strings.HasPrefix(view, a.taken):
		a.pending += view[len(a.taken):]
	case strings.HasPrefix(a.taken, view):
		return // shorter: everything in it is shown already
	default:
		n := 0
		for n < len(view) && n < len(a.taken) && view[n] == a.taken[n] {
			n++
		}
		// The change is in text not on a stream yet: it is replaced.
		if k := len(a.taken) - len(a.pending); strings.HasSuffix(a.taken, a.pending) && n >= k {
			a.pending = view[k:]
			break
		}
		start := strings.LastIndex(view[:n], "\n\n") + 1 // 0 when none
		a.pending += "\n\n" + strings.TrimLeft(view[start:], "\n")
	}
	a.taken = view
	if strings.TrimSpace(a.pending) == "" {
		a.pending = ""
	}
}

// push makes one platform call towards showing pending: it opens a
// stream, appends to it, or finishes it when it is full. On error nothing
// changed.
func (a *appendSurface) push(ctx context.Context) error {
	if a.st == nil {
		reply := a.firstReplyTo()
		st, err := a.open(ctx, a.streamer, reply)
		if err != nil {
			return err
		}
		a.st, a.stReply, a.opens = st, reply, 0
		return nil
	}
	next, rest := a.fill()
	switch {
	case next == a.cur && rest == "":
		a.pending = ""
	case next == a.cur:
		return a.seal(ctx, chat.Out{Markdown: a.cur})
	default:
		if err := a.st.Update(ctx, next); err != nil {
			return err
		}
		a.cur, a.pending, a.fails = next, rest, 0
		a.msgs.show()
		a.pace.ok()
	}
	return nil
}

// fill returns the markdown the open stream shows with as much of pending
// as fits in one message, and what is left of pending. next == a.cur with
// a rest means the stream is full.
func (a *appendSurface) fill() (next, rest string) {
	add := a.pending
	if a.cur == "" {
		add = strings.TrimLeft(add, "\n")
	}
	if len(a.chunks.split(a.cur+add)) <= 1 {
		return a.cur + add, ""
	}
	if a.cur != "" {
		return a.cur, a.pending
	}
	chunks := a.chunks.split(add)
	return chunks[0], "\n\n" + strings.Join(chunks[1:], "\n\n")
}

// seal finishes the open stream with out and records its message.
func (a *appendSurface) seal(ctx context.Context, out chat.Out) error {
	out.ReplyTo = a.stReply
	ref, err := a.st.Finish(ctx, out)
	if err != nil {
		return err
	}
	a.msgs.add(ref)
	a.st, a.cur, a.fails = nil, "", 0
	a.pace.ok()
	return nil
}

// failed handles a failed live call: a rate limit pauses; streams that
// keep failing to open leave only the final text; a stream that keeps
// failing (or is gone) is left behind and its text appended again in a
// new one.
func (a *appendSurface) failed(ctx context.Context, err error) {
	if a.pace.limited(err) {
		return
	}
	if a.st == nil {
		a.opens++
		a.log.Warn("stream: open append stream", "fails", a.opens, "err", err)
		if a.opens >= maxSendFails {
			a.pace.giveUp("streams keep failing to open")
		}
		return
	}
	a.fails++
	a.log.Warn("stream: append", "fails", a.fails, "err", err)
	if errors.Is(err, chat.ErrNotFound) || a.fails >= maxEditFails {
		a.leave(ctx)
		if a.dropped++; a.dropped >= maxAbandons {
			a.pace.giveUp("append streams keep failing")
		}
	}
}

// leave abandons the open stream: its text goes to the next one.
func (a *appendSurface) leave(ctx context.Context) {
	st := a.st
	if a.cur != "" {
		a.pending = a.cur + "\n\n" + strings.TrimLeft(a.pending, "\n")
	}
	a.st, a.cur, a.fails = nil, "", 0
	if err := st.Abort(ctx); err != nil {
		a.log.Debug("stream: abort append stream", "err", err)
	}
}

// deliver appends the rest of the complete reply and finishes the stream
// with the buttons. When the stream fails, what it has not shown for good
// is sent as new messages.
func (a *appendSurface) deliver(ctx context.Context, f final) error {
	a.take(f.md)
	if a.pending == "" && a.st == nil && len(f.buttons) > 0 {
		a.pending = "…"
	}
	err := a.drain(ctx, f.deadline)
	if err == nil && a.st != nil {
		err = a.pace.retry(ctx, f.deadline, sendAttempts, 0, func() error {
			return a.seal(ctx, chat.Out{Markdown: a.cur, Buttons: f.buttons, Silent: f.silent})
		})
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("stream: append: %w", err)
	}
	a.log.Warn("stream: append stream failed, sending the rest as messages", "err", err)
	if a.st != nil {
		a.leave(ctx)
	}
	chunks := a.chunks.split(strings.TrimLeft(a.pending, "\n"))
	if len(chunks) == 0 && len(f.buttons) > 0 {
		chunks = []string{"…"}
	}
	return a.edit.deliverChunks(ctx, f, chunks, 0)
}

// drain puts all of pending on streams, retrying each call.
func (a *appendSurface) drain(ctx context.Context, deadline time.Time) error {
	for a.pending != "" {
		if err := a.pace.retry(ctx, deadline, editAttempts, editAttempts, func() error { return a.push(ctx) }); err != nil {
			return err
		}
	}
	return nil
}
