package gateway

import (
	"context"
	"sync"

	"github.com/pibot/pibot/chat"
)

// queueNote is the notice that told a sender their message waits for a
// run, where the platform showed it as a message (no reactions, or the
// reaction failed). It is edited once the message was taken into a run or
// dropped, so it never keeps saying "will steer" about a message that was
// answered long ago. The run that takes the message and the mailbox that
// posts the notice may come in either order.
type queueNote struct {
	run   *run // the run the message was queued to (nil: the next one)
	steer bool // queued to steer run, rather than to follow it up

	mu     sync.Mutex
	ref    *chat.MsgRef // the notice, once posted
	gone   bool         // shown as a reaction or not at all: nothing to edit
	final  string       // what the notice says now that it is settled
	edited bool
}

// posted records the notice's message, or that there is none (ref nil).
// It returns the final text to edit in when the message was settled
// meanwhile.
func (n *queueNote) posted(ref *chat.MsgRef) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ref, n.gone = ref, ref == nil
	if ref == nil || n.final == "" || n.edited {
		return "", false
	}
	n.edited = true
	return n.final, true
}

// settle sets the final text and returns the notice to edit, if it was
// posted; otherwise posted edits it when it is.
func (n *queueNote) settle(text string) (chat.MsgRef, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.final != "" {
		return chat.MsgRef{}, false // settled once
	}
	n.final = text
	if n.ref == nil || n.edited {
		return chat.MsgRef{}, false
	}
	n.edited = true
	return *n.ref, true
}

// shown reports whether the notice is (or will be) a message of its own.
func (n *queueNote) shown() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.gone
}

// takenText is what the notice says once r took the message.
func (n *queueNote) takenText(r *run) string {
	switch {
	case n.run != r:
		return "✅ taken up by the next run"
	case n.steer:
		return "✅ steered into the run"
	}
	return "✅ taken up as a follow-up"
}

// settleNote edits p's queue notice, if it has one, to md.
func (c *replier) settleNote(ctx context.Context, p *pending, md string) {
	if p.note == nil {
		return
	}
	if ref, ok := p.note.settle(md); ok {
		c.editNote(ctx, ref, md)
	}
}

// editNote edits a queue notice in place.
func (c *replier) editNote(ctx context.Context, ref chat.MsgRef, md string) {
	a := c.adapters[ref.Conv.Platform]
	if a == nil {
		return
	}
	if err := a.Edit(ctx, ref, chat.Out{Markdown: "_" + md + "_"}); err != nil {
		c.log.Warn("edit the queue notice", "ref", ref.Key(), "err", err)
	}
}
