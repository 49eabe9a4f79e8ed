package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pibot/pibot/chat"
)

// editSurface shows a reply by sending messages and editing them at the
// platform's cadence: the reply is split into chunks, full chunks become
// follow-on messages and the last one stays live with a cursor. Only the
// publishing goroutine uses it.
type editSurface struct {
	outlet
	slots     []*slot // live messages; slots[i] shows chunk i
	abandons  int     // messages left behind
	sendFails int     // consecutive failed sends
}

// slot is a posted message showing one chunk of the reply.
type slot struct {
	ref   chat.MsgRef
	last  string // markdown last shown
	fails int    // consecutive failed edits
}

func (e *editSurface) view(d *document, v Verbosity, now time.Time) string {
	return d.render(v, now, true)
}

func (e *editSurface) showsProgress() bool { return e.msgs.shown() }

func (e *editSurface) publish(ctx context.Context, view string) bool {
	return e.publishChunks(ctx, e.chunks.split(view))
}

// publishChunks shows chunks, the last one live. It reports whether
// everything is shown.
func (e *editSurface) publishChunks(ctx context.Context, chunks []string) bool {
	for i, chunk := range chunks {
		if e.loop.stopping() {
			return false
		}
		text := chunk
		if i == len(chunks)-1 {
			text = withCursor(chunk)
		}
		if i < len(e.slots) {
			s := e.slots[i]
			if s.last == text {
				continue
			}
			if !e.edited(i, text, e.ad.Edit(ctx, s.ref, chat.Out{Markdown: text})) {
				return false
			}
			continue
		}
		ref, err := e.ad.Send(ctx, e.conv, chat.Out{Markdown: text, ReplyTo: e.firstReplyTo()})
		if !e.sent(ref, text, err) {
			return false
		}
	}
	return true
}

// adopt makes a message posted elsewhere (a finished native stream) the
// next slot.
func (e *editSurface) adopt(ref chat.MsgRef, text string) {
	e.slots = append(e.slots, &slot{ref: ref, last: text})
	e.msgs.add(ref)
}

// resume takes over refs, the messages of a reply posted earlier, as the
// slots of this one. What they show is not known: the final delivery
// edits each of them (an edit to the text a message already has is
// harmless on every adapter).
func (e *editSurface) resume(refs []chat.MsgRef) {
	for _, ref := range refs {
		e.slots = append(e.slots, &slot{ref: ref})
	}
	e.msgs.mu.Lock()
	e.msgs.refs = append(e.msgs.refs, refs...)
	e.msgs.visible = true
	e.msgs.mu.Unlock()
}

// edited records the result of editing slot i to text and reports whether
// it went through.
func (e *editSurface) edited(i int, text string, err error) bool {
	s := e.slots[i]
	switch {
	case err == nil:
		s.last, s.fails = text, 0
		e.pace.ok()
		return true
	case e.pace.limited(err):
	case errors.Is(err, chat.ErrNotFound):
		e.log.Info("stream: message gone, continuing in a new one", "message", s.ref.ID)
		e.msgs.drop(s.ref)
		e.abandon(i)
	default:
		s.fails++
		e.log.Warn("stream: edit", "message", s.ref.ID, "fails", s.fails, "err", err)
		if s.fails >= maxEditFails {
			e.abandon(i)
		}
	}
	return false
}

// abandon leaves slot i and later ones behind: the reply continues from
// chunk i in new messages. After maxAbandons only the final is sent.
func (e *editSurface) abandon(i int) {
	e.slots = e.slots[:i]
	if e.abandons++; e.abandons >= maxAbandons {
		e.pace.giveUp("edits keep failing")
	}
}

// sent records the result of posting text as a new message and reports
// whether it went through.
func (e *editSurface) sent(ref chat.MsgRef, text string, err error) bool {
	switch {
	case err == nil:
		e.adopt(ref, text)
		e.sendFails = 0
		e.pace.ok()
		return true
	case e.pace.limited(err):
	default:
		e.sendFails++
		e.log.Warn("stream: send", "fails", e.sendFails, "err", err)
		if e.sendFails >= maxSendFails {
			e.pace.giveUp("sends keep failing")
		}
	}
	return false
}

func (e *editSurface) deliver(ctx context.Context, f final) error {
	chunks := e.chunks.split(f.md)
	if len(chunks) == 0 && len(f.buttons) > 0 {
		chunks = []string{"…"}
	}
	return e.deliverChunks(ctx, f, chunks, 0)
}

// deliverChunks shows chunks[from:] as the rest of the complete reply,
// editing the live messages and sending what they cannot show, then
// removes leftover messages.
func (e *editSurface) deliverChunks(ctx context.Context, f final, chunks []string, from int) error {
	for i := from; i < len(chunks); i++ {
		out := chat.Out{Markdown: chunks[i], Silent: f.silent}
		if i == len(chunks)-1 {
			out.Buttons = f.buttons
		}
		done, err := e.finalEdit(ctx, f.deadline, i, out)
		if err != nil {
			return fmt.Errorf("stream: edit part %d of %d: %w", i+1, len(chunks), err)
		}
		if done {
			continue
		}
		if err := e.finalSend(ctx, f.deadline, out); err != nil {
			return fmt.Errorf("stream: send part %d of %d: %w", i+1, len(chunks), err)
		}
	}
	e.trim(ctx, f.deadline, len(chunks))
	return nil
}

// finalEdit edits slot i, if there is one, to show out. done is false when
// out must be sent as a new message; err is set only when ctx ended.
func (e *editSurface) finalEdit(ctx context.Context, deadline time.Time, i int, out chat.Out) (done bool, err error) {
	if i >= len(e.slots) {
		return false, nil
	}
	s := e.slots[i]
	if s.last == out.Markdown && len(out.Buttons) == 0 {
		return true, nil
	}
	err = e.pace.retry(ctx, deadline, editAttempts, editAttempts, func() error { return e.ad.Edit(ctx, s.ref, out) })
	if err == nil {
		s.last = out.Markdown
		return true, nil
	}
	if ctx.Err() != nil {
		return false, err
	}
	e.log.Warn("stream: final edit failed, sending the rest as new messages", "message", s.ref.ID, "err", err)
	if errors.Is(err, chat.ErrNotFound) {
		e.msgs.drop(s.ref)
	}
	e.slots = e.slots[:i]
	return false, nil
}

// finalSend posts out as the next message of the reply.
func (e *editSurface) finalSend(ctx context.Context, deadline time.Time, out chat.Out) error {
	out.ReplyTo = e.firstReplyTo()
	var ref chat.MsgRef
	err := e.pace.retry(ctx, deadline, sendAttempts, 0, func() (err error) {
		ref, err = e.ad.Send(ctx, e.conv, out)
		return err
	})
	if err != nil {
		return err
	}
	e.adopt(ref, out.Markdown)
	return nil
}

// trim removes messages beyond the first n, left over when the reply
// shrank, or blanks them when the adapter cannot delete.
func (e *editSurface) trim(ctx context.Context, deadline time.Time, n int) {
	if len(e.slots) <= n {
		return
	}
	extra := e.slots[n:]
	e.slots = e.slots[:n]
	for _, s := range extra {
		if e.deleter != nil {
			err := e.pace.retry(ctx, deadline, editAttempts, editAttempts, func() error { return e.deleter.Delete(ctx, s.ref) })
			if err == nil || errors.Is(err, chat.ErrNotFound) {
				e.msgs.drop(s.ref)
				continue
			}
		}
		err := e.pace.retry(ctx, deadline, editAttempts, editAttempts, func() error { return e.ad.Edit(ctx, s.ref, chat.Out{Markdown: "…"}) })
		if err != nil {
			e.log.Warn("stream: blank leftover message", "message", s.ref.ID, "err", err)
		}
	}
}
