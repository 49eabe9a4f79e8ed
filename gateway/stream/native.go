package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/pibot/pibot/chat"
)

// nativeSurface shows a reply through the platform's native stream
// (chat.Streamer: Telegram drafts, the web chat's server-sent events)
// while it fits in one message. When it outgrows one message the stream is
// finished with the first chunk and edit takes over; when the stream fails
// it is aborted and edit shows the reply. Only the publishing goroutine
// uses it.
type nativeSurface struct {
	outlet
	streamer chat.Streamer
	edit     *editSurface
	st       chat.Stream  // open stream
	stReply  *chat.MsgRef // the message st answers (none after a Cut)
	last     string       // markdown last shown on st
	off      bool         // no longer streaming natively
}

func (n *nativeSurface) view(d *document, v Verbosity, now time.Time) string {
	return d.render(v, now, true)
}

func (n *nativeSurface) showsProgress() bool { return n.msgs.shown() }

func (n *nativeSurface) publish(ctx context.Context, view string) bool {
	chunks := n.chunks.split(view)
	if !n.off {
		if done, ok := n.stream(ctx, chunks); done {
			return ok
		}
	}
	return n.edit.publishChunks(ctx, chunks)
}

// stream shows chunks on the native stream. done is false when the
// caller must publish by editing instead.
func (n *nativeSurface) stream(ctx context.Context, chunks []string) (done, ok bool) {
	if n.st == nil && len(chunks) > 1 {
		n.off = true
		return false, false
	}
	if n.st == nil {
		reply := n.firstReplyTo()
		st, err := n.open(ctx, n.streamer, reply)
		if err != nil {
			n.failed(ctx, err)
			return true, false
		}
		n.st, n.stReply = st, reply
	}
	if len(chunks) > 1 {
		ref, err := n.st.Finish(ctx, chat.Out{Markdown: chunks[0], ReplyTo: n.stReply})
		if err != nil {
			n.failed(ctx, err)
			return true, false
		}
		n.st, n.off = nil, true
		n.edit.adopt(ref, chunks[0])
		n.pace.ok()
		return false, false
	}
	if chunks[0] == n.last {
		return true, true
	}
	if err := n.st.Update(ctx, chunks[0]); err != nil {
		n.failed(ctx, err)
		return true, false
	}
	n.last = chunks[0]
	n.msgs.show()
	n.pace.ok()
	return true, true
}

// failed handles a failed stream call: a rate limit pauses, anything else
// abandons native streaming (aborting the stream) for send+edit.
func (n *nativeSurface) failed(ctx context.Context, err error) {
	if n.pace.limited(err) {
		return
	}
	n.log.Warn("stream: native stream failed, falling back to edits", "err", err)
	st := n.st
	n.st, n.off, n.last = nil, true, ""
	n.abort(ctx, st)
}

// abort ends st, if any, without a final message.
func (n *nativeSurface) abort(ctx context.Context, st chat.Stream) {
	if st == nil {
		return
	}
	if err := st.Abort(ctx); err != nil {
		n.log.Debug("stream: abort native stream", "err", err)
	}
}

func (n *nativeSurface) deliver(ctx context.Context, f final) error {
	chunks := n.chunks.split(f.md)
	if len(chunks) == 0 && len(f.buttons) > 0 {
		chunks = []string{"…"}
	}
	st := n.st
	n.st = nil
	if st == nil {
		return n.edit.deliverChunks(ctx, f, chunks, 0)
	}
	if len(chunks) == 0 {
		n.abort(ctx, st)
		return nil
	}
	out := chat.Out{Markdown: chunks[0], ReplyTo: n.stReply, Silent: f.silent}
	if len(chunks) == 1 {
		out.Buttons = f.buttons
	}
	var ref chat.MsgRef
	err := n.pace.retry(ctx, f.deadline, sendAttempts, 0, func() (err error) {
		ref, err = st.Finish(ctx, out)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stream: finish native stream: %w", err)
		}
		n.log.Warn("stream: native finish failed, sending instead", "err", err)
		n.abort(ctx, st)
		return n.edit.deliverChunks(ctx, f, chunks, 0)
	}
	n.edit.adopt(ref, chunks[0])
	return n.edit.deliverChunks(ctx, f, chunks, 1)
}
