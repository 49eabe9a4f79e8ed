package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/stream"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// runReply is the reply a run streams to its conversation: the stream
// controller that shows it, what it ends with (the note of an interrupted
// run, the failure of the last model call) and the answer entry it
// carries. It makes no chat call once silenced. The run's goroutine shows
// the agent's events through it; other goroutines use controller, stop
// and silence only.
type runReply struct {
	// ctl shows the reply; set once by the run's goroutine (setController),
	// which reads it without the lock.
	ctl *stream.Controller
	// resumes names the chat messages of a reply posted before a crash
	// that this run finishes instead of posting a new one (redeliver).
	resumes []chat.MsgRef
	// silent: the session's lease is lost; the run makes no chat call at
	// all any more (cluster_shared.go).
	silent atomic.Bool

	mu sync.Mutex
	// note is shown on the reply of an interrupted run (run.interrupt).
	note string
	// failure is the error of the last failed model call, shown when the
	// reply is delivered unless the agent retried the call (show): the
	// chat shows a failure once, not once per attempt.
	failure string
	// entry is the last answer entry the reply shows; its delivery names
	// it.
	entry string
}

// setController publishes ctl to other goroutines.
func (rp *runReply) setController(ctl *stream.Controller) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.ctl = ctl
}

// controller returns the reply's stream controller; nil until the run set
// it up. Goroutines other than the run's own use this.
func (rp *runReply) controller() *stream.Controller {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.ctl
}

// silence makes the reply make no chat call any more.
func (rp *runReply) silence() { rp.silent.Store(true) }

// silenced reports that the reply makes no chat call any more.
func (rp *runReply) silenced() bool { return rp.silent.Load() }

// stop notes why the run was interrupted: the first note is shown on the
// reply.
func (rp *runReply) stop(note string) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.note == "" {
		rp.note = note
	}
}

// stopped is the note of an interrupted run, "" if it was not.
func (rp *runReply) stopped() string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.note
}

// show shows an agent event other than a message's end on the reply.
func (rp *runReply) show(e agent.Event) {
	switch e.Type {
	case agent.EventMessageUpdate:
		if e.Message != nil && e.Message.Role == llm.RoleAssistant {
			rp.ctl.SetText(e.Message.Text())
			if th := thinkingText(e.Message); th != "" {
				rp.ctl.SetThinking(th)
			}
		}
	case agent.EventToolExecutionStart:
		rp.ctl.ToolStart(e.ToolCallID, e.ToolName, e.Args)
	case agent.EventToolExecutionEnd:
		rp.ctl.ToolEnd(e.ToolCallID, e.IsError, toolText(e.Result))
	case agent.EventAutoRetryStart:
		rp.mu.Lock()
		rp.failure = "" // retried: the status line says why
		rp.mu.Unlock()
		rp.ctl.Status(fmt.Sprintf("retrying (%d/%d) in %s: %s", e.Attempt, e.MaxAttempts, time.Duration(e.DelayMs)*time.Millisecond, e.ErrorMessage))
	case agent.EventAutoRetryEnd:
		if !e.Success && e.Attempt > 0 {
			rp.mu.Lock()
			if rp.failure != "" { // the reply says why it stopped, and how hard pibot tried
				rp.failure += " (retried " + times(e.Attempt) + ")"
			}
			rp.mu.Unlock()
		}
		rp.ctl.Status("")
	case agent.EventCompactionEnd:
		rp.ctl.Status("")
	case agent.EventCompactionStart:
		rp.ctl.Status("compacting the conversation…")
	case agent.EventQueueUpdate:
		if n := len(e.Steering) + len(e.FollowUp); n > 0 {
			rp.ctl.Status(plural(n, "queued message"))
		} else {
			rp.ctl.Status("")
		}
	}
}

// answer shows the model's answer m, recorded as entry id.
func (rp *runReply) answer(m *llm.Message, id string) {
	rp.mu.Lock()
	rp.entry = id
	rp.mu.Unlock()
	rp.ctl.SetText(m.Text())
	if m.StopReason != llm.StopError {
		rp.ctl.EndMessage()
	}
	// A failed call's partial answer stays open: a retry's answer
	// replaces it, so the reply shows one partial answer however often
	// the call was retried (the failure follows it at delivery).
	rp.mu.Lock()
	rp.failure = ""
	if m.StopReason == llm.StopError {
		rp.failure = m.ErrorMessage
	}
	rp.mu.Unlock()
}

// seed puts recorded answers first in the reply: they were never shown in
// the chat.
func (rp *runReply) seed(answers []session.Entry) {
	for _, a := range answers {
		rp.ctl.SetText(answerText(a.Message))
		rp.ctl.EndMessage()
	}
	rp.mu.Lock()
	rp.entry = answers[len(answers)-1].ID
	rp.mu.Unlock()
}

// answered is the last answer entry the reply shows, "" if none.
func (rp *runReply) answered() string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.entry
}

// finish ends the reply: with the failure of the last model call, if
// any, and the note of an interrupted run; before its final edit it calls
// before. It returns the chat messages that carry the reply.
func (rp *runReply) finish(ctx context.Context, before func()) ([]chat.MsgRef, error) {
	rp.mu.Lock()
	note, failure := rp.note, rp.failure
	rp.failure = ""
	rp.mu.Unlock()
	if failure != "" {
		if !strings.HasPrefix(failure, "⛔") { // a spend cap's refusal has its own sign
			failure = "⚠️ " + failure
		}
		rp.ctl.EndMessage()
		rp.ctl.SetText(failure)
		rp.ctl.EndMessage()
	}
	before()
	if note != "" {
		return rp.ctl.Abort(ctx, "_"+note+"_")
	}
	return rp.ctl.Finish(ctx, chat.Out{})
}

// notice posts text to conv through ad, outside the reply (a fork's
// worktree), unless the reply is silenced.
func (rp *runReply) notice(ctx context.Context, ad chat.Adapter, conv chat.ConvRef, text string) error {
	if ad == nil || text == "" || rp.silenced() {
		return nil
	}
	_, err := ad.Send(ctx, conv, chat.Out{Markdown: text})
	return err
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
