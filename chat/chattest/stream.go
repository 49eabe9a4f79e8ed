package chattest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pibot/pibot/chat"
)

// StreamAdapter is an Adapter that also implements chat.Streamer. Its
// native streams keep a draft per conversation (see Adapter.Draft) and post
// a real message on Finish. When the conversation's Caps say AppendOnly,
// they enforce the append-only contract: an Update or Finish whose text
// does not extend the previous one fails with chat.ErrNotAppend.
type StreamAdapter struct {
	*Adapter
}

var _ chat.Streamer = StreamAdapter{}

// Streaming returns a view of a that also implements chat.Streamer. Both
// share calls, messages and faults. Set Caps.NativeStream with WithCaps for
// the gateway to use it.
func (a *Adapter) Streaming() StreamAdapter { return StreamAdapter{a} }

// errStreamClosed is returned by calls on a finished or aborted stream.
var errStreamClosed = errors.New("chattest: stream closed")

// OpenStream opens a native stream in conv.
func (s StreamAdapter) OpenStream(ctx context.Context, conv chat.ConvRef, opts chat.StreamOptions) (chat.Stream, error) {
	a := s.Adapter
	replyTo := opts.ReplyTo
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodOpenStream, Conv: conv, ReplyTo: replyTo, Recipient: opts.Recipient, RecipientTeam: opts.RecipientTeam}
	if err := a.beginLocked(&c, ""); err != nil {
		return nil, err
	}
	a.drafts[conv.Key()] = ""
	a.recordLocked(c)
	return &nativeStream{a: a, conv: conv, replyTo: replyTo, appendOnly: a.Caps(conv).AppendOnly}, nil
}

// nativeStream is one open native stream.
type nativeStream struct {
	a       *Adapter
	conv    chat.ConvRef
	replyTo *chat.MsgRef
	// appendOnly enforces chat.Caps.AppendOnly.
	appendOnly bool
	closed     bool // guarded by a.mu
}

// extendsLocked checks the append-only rule for the new text, recording c
// as failed when it is broken.
func (n *nativeStream) extendsLocked(c *Call, text string) error {
	prev := n.a.drafts[n.conv.Key()]
	if !n.appendOnly || strings.HasPrefix(text, prev) {
		return nil
	}
	c.Err = fmt.Errorf("chattest: stream %s: %w", n.conv.Key(), chat.ErrNotAppend)
	n.a.recordLocked(*c)
	return c.Err
}

func (n *nativeStream) Update(ctx context.Context, markdown string) error {
	a := n.a
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodStreamUpdate, Conv: n.conv, Text: markdown}
	if err := n.checkLocked(&c); err != nil {
		return err
	}
	if err := n.extendsLocked(&c, markdown); err != nil {
		return err
	}
	a.drafts[n.conv.Key()] = markdown
	a.recordLocked(c)
	return nil
}

func (n *nativeStream) Finish(ctx context.Context, final chat.Out) (chat.MsgRef, error) {
	a := n.a
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodStreamFinish, Conv: n.conv, Text: final.Markdown, Buttons: final.Buttons, ReplyTo: n.replyTo}
	if err := n.checkLocked(&c); err != nil {
		return chat.MsgRef{}, err
	}
	if err := n.extendsLocked(&c, final.Markdown); err != nil {
		return chat.MsgRef{}, err
	}
	if final.ReplyTo == nil {
		final.ReplyTo = n.replyTo
	}
	msg := a.postLocked(n.conv, final)
	n.closed = true
	delete(a.drafts, n.conv.Key())
	c.Ref = msg.Ref
	a.recordLocked(c)
	return msg.Ref, nil
}

func (n *nativeStream) Abort(ctx context.Context) error {
	a := n.a
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodStreamAbort, Conv: n.conv}
	if err := n.checkLocked(&c); err != nil {
		return err
	}
	n.closed = true
	delete(a.drafts, n.conv.Key())
	a.recordLocked(c)
	return nil
}

// checkLocked admits a call on the stream.
func (n *nativeStream) checkLocked(c *Call) error {
	if n.closed {
		c.Time = n.a.now()
		c.Err = errStreamClosed
		n.a.recordLocked(*c)
		return errStreamClosed
	}
	return n.a.beginLocked(c, "")
}
