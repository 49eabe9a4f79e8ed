package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// emit receives every agent event, in order, on the run goroutine.
func (r *run) emit(e agent.Event) {
	if r.silent.Load() {
		return // the lease is lost: nothing more reaches the chat or the file
	}
	switch e.Type {
	case agent.EventMessageUpdate:
		if e.Message != nil && e.Message.Role == llm.RoleAssistant {
			r.ctl.SetText(e.Message.Text())
			if th := thinkingText(e.Message); th != "" {
				r.ctl.SetThinking(th)
			}
		}
	case agent.EventMessageEnd:
		r.record(e)
	case agent.EventToolExecutionStart:
		r.ctl.ToolStart(e.ToolCallID, e.ToolName, e.Args)
	case agent.EventToolExecutionEnd:
		r.ctl.ToolEnd(e.ToolCallID, e.IsError, toolText(e.Result))
	case agent.EventAutoRetryStart:
		r.mu.Lock()
		r.failure = "" // retried: the status line says why
		r.mu.Unlock()
		r.ctl.Status(fmt.Sprintf("retrying (%d/%d) in %s: %s", e.Attempt, e.MaxAttempts, time.Duration(e.DelayMs)*time.Millisecond, e.ErrorMessage))
	case agent.EventAutoRetryEnd:
		if !e.Success && e.Attempt > 0 {
			r.mu.Lock()
			if r.failure != "" { // the reply says why it stopped, and how hard pibot tried
				r.failure += " (retried " + times(e.Attempt) + ")"
			}
			r.mu.Unlock()
		}
		r.ctl.Status("")
	case agent.EventCompactionEnd:
		r.ctl.Status("")
	case agent.EventCompactionStart:
		r.ctl.Status("compacting the conversation…")
	case agent.EventQueueUpdate:
		if n := len(e.Steering) + len(e.FollowUp); n > 0 {
			r.ctl.Status(plural(n, "queued message"))
		} else {
			r.ctl.Status("")
		}
	}
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
	if r.silent.Load() {
		return // the lease is lost: the new holder answers
	}
	o := r.o
	fctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), o.cfg.FinalWait+10*time.Second)
	defer cancel()
	r.mu.Lock()
	note, failure := r.interrupted, r.failure
	r.failure = ""
	r.mu.Unlock()
	if failure != "" {
		if !strings.HasPrefix(failure, "⛔") { // a spend cap's refusal has its own sign
			failure = "⚠️ " + failure
		}
		r.ctl.EndMessage()
		r.ctl.SetText(failure)
		r.ctl.EndMessage()
	}
	// The run's lines (its answer above all) go into the file before the
	// final edit: a crash of pibot after the platform took the edit then
	// finds the answer after the message and the reply's journaled
	// messages, and finishes that reply instead of answering again
	// (redeliver). write(2) only: the end write and the group commit's
	// fsync follow as before.
	if err := errors.Join(o.sess.Write(), o.index.Sync(fctx)); err != nil {
		o.log.Warn("write the run's lines before its final edit", "loc", r.loc.key, "err", err)
	}
	var refs []chat.MsgRef
	var err error
	if note != "" {
		refs, err = r.ctl.Abort(fctx, "_"+note+"_")
	} else {
		refs, err = r.ctl.Finish(fctx, chat.Out{})
	}
	if err != nil {
		o.log.Error("deliver reply", "loc", r.loc.key, "err", err)
	}
	if r.frozen.Load() {
		// The restart resumes this run, and the reply already says so:
		// it is not marked again.
		r.journal.close(refs, replyNoted, replySite{r})
		return
	}
	if len(refs) == 0 || err != nil {
		// Not recorded as delivered: after a crash the answer is sent
		// again rather than never.
		r.journal.close(refs, replyEnded, replySite{r})
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
	data, _ := json.Marshal(delivery{Entry: r.lastEntry, Refs: keys, State: "delivered"})
	if _, err := r.o.append(r.loc, session.Entry{Type: session.TypeCustom, CustomType: customDelivery, Data: data, Pibot: &session.Meta{Msg: keys[len(keys)-1]}}, sync); err != nil {
		o.log.Warn("record delivery", "err", err)
		return
	}
	crashpoint.Hit(crashpoint.DeliveryRecord)
}

// times says how often: "once", "twice", "3 times".
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

func thinkingText(m *llm.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == llm.ContentThinking && !c.Redacted {
			b.WriteString(c.Thinking)
		}
	}
	return b.String()
}

// toolText is the text of a tool's result, whole: the stream controller
// decides what of it a reply shows (gateway/stream/render.go).
func toolText(o *llm.ToolOutput) string {
	if o == nil {
		return ""
	}
	return llm.JoinText(o.Content, "\n")
}

// attacher sends files from a tool to the run's conversation.
type attacher struct{ r *run }

func (a *attacher) Attach(ctx context.Context, name, mimeType string, rd io.Reader, size int64) error {
	o := a.r.o
	if a.r.silent.Load() || !leaseLive(o.lease) {
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
