package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/session"
)

// emit receives every agent event, in order, on the run goroutine.
func (r *run) emit(e agent.Event) {
	if r.reply.silenced() {
		return // the lease is lost: nothing more reaches the chat or the file
	}
	if e.Type == agent.EventMessageEnd {
		r.record(e)
		return
	}
	r.reply.show(e)
}

// fail stops the run after a storage failure: nothing more can be recorded.
func (r *run) fail(err error) {
	if r.o.lease != nil && !permanent(r.o.lease) && errors.Is(err, session.ErrOtherWriter) {
		// Cluster mode: another replica wrote the file, so it holds the
		// session now, whatever this replica's lease still says. As after
		// a lost lease, not a word more to the chat: the new holder
		// answers.
		r.o.log.Warn("session file written by another replica; stopping the run silently", "path", r.o.path, "err", err)
		r.o.metrics.fenceRejected()
		r.silence()
		return
	}
	r.o.log.Error("session write failed; stopping the run", "path", r.o.path, "err", err)
	msg := "⚠️ the session could not be written (the details are in pibot's log)"
	if lostToStorage(r.o.sess, err) {
		msg += ". This message is taken up again once pibot can write its data again."
	}
	r.interrupt(msg)
}

// deliver finishes the reply and records which messages carry it.
func (r *run) deliver() {
	if r.reply.silenced() {
		return // the lease is lost: the new holder answers
	}
	o := r.o
	fctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), o.cfg.FinalWait+10*time.Second)
	defer cancel()
	refs, err := r.reply.finish(fctx, func() {
		// The run's lines (its answer above all) go into the file before
		// the final edit: a crash of pibot after the platform took the
		// edit then finds the answer after the message and the reply's
		// journaled messages, and finishes that reply instead of
		// answering again (redeliver). write(2) only: the end write and
		// the group commit's fsync follow as before.
		if err := errors.Join(o.sess.Write(), o.index.Sync(fctx)); err != nil {
			o.log.Warn("write the run's lines before its final edit", "loc", r.loc.key, "err", err)
		}
	})
	if err != nil {
		o.log.Error("deliver reply", "loc", r.loc.key, "err", err)
	}
	if r.journal.frozen() {
		// The restart resumes this run, and the reply already says so:
		// it is not marked again.
		r.journal.endReply(refs, replyNoted)
		return
	}
	if len(refs) == 0 || err != nil {
		// Not recorded as delivered: after a crash the answer is sent
		// again rather than never.
		r.journal.endReply(refs, replyEnded)
		return
	}
	crashpoint.Hit(crashpoint.ReplyFinal)
	keys := make([]string, len(refs))
	for i, ref := range refs {
		keys[i] = ref.Key()
	}
	// Recorded only after the platform confirmed the reply: never is a
	// delivery recorded that did not happen. The entry reaches the file
	// with the run's end write (afterRun), which follows at once, or on
	// its own first when agent_end hooks run in between (they may take
	// long); the run's messages leave the inbox only once the session's
	// next fsync made it durable (OnDurable). A crash of pibot before
	// that write leaves the messages in the inbox with the answer in the
	// file (written above) and every message of the reply journaled (as
	// the platform posted it): the next owner edits those messages to the
	// answer and records the delivery, without a second answer or model
	// call (queue.accept, redeliver). A crash of the machine before the
	// fsync may lose those lines too: the next owner then answers again,
	// at least once, never lost.
	sync := session.SyncGrouped
	if o.agentConfig().Extensions != nil {
		sync = session.SyncWritten
	}
	if err := r.journal.delivered(r.reply.answered(), keys, sync); err != nil {
		o.log.Warn("record delivery", "err", err)
		return
	}
	crashpoint.Hit(crashpoint.DeliveryRecord)
}

// attacher sends files from a tool to the run's conversation.
type attacher struct{ r *run }

func (a *attacher) Attach(ctx context.Context, name, mimeType string, rd io.Reader, size int64) error {
	o := a.r.o
	if a.r.reply.silenced() || !leaseLive(o.lease) {
		return errors.New("attach: the session's lease is lost; another replica answers")
	}
	up, ok := o.adapters[a.r.loc.conv.Platform].(chat.Uploader)
	if !ok {
		return fmt.Errorf("attach: %s cannot receive files", a.r.loc.conv.Platform)
	}
	_, err := up.Upload(ctx, a.r.loc.conv, chat.OutFile{Name: name, MimeType: mimeType, Reader: rd, Size: size}, nil)
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	return nil
}
