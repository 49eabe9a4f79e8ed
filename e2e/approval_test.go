package e2e_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// answers returns the answerCallbackQuery calls for query id.
func (w *world) answers(id string) []telegramtest.Call {
	var out []telegramtest.Call
	for _, c := range w.srv.Calls("answerCallbackQuery") {
		if c.Params["callback_query_id"] == id {
			out = append(out, c)
		}
	}
	return out
}

// approvalWorld is a DM where bash needs approval: the user asked for a
// deploy, the approval message is up and pibot has restarted since.
type approvalWorld struct {
	*world
	prompt    telegramtest.Message
	allowOnce string // callback data
	runs      atomic.Int32
	ranAt     atomic.Int64
}

func newApprovalWorld(t *testing.T) *approvalWorld {
	return newApprovalWorldWith(t, nil)
}

// newApprovalWorldWith is newApprovalWorld with a bash tool that calls
// body (when not nil) before it returns "deployed ok".
func newApprovalWorldWith(t *testing.T, body func(ctx context.Context) error) *approvalWorld {
	t.Helper()
	aw := &approvalWorld{}
	bash := &agenttest.Tool{Name: "bash", Fn: func(ctx context.Context, _ string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		aw.runs.Add(1)
		aw.ranAt.Store(time.Now().UnixNano())
		if body != nil {
			if err := body(ctx); err != nil {
				return llm.ToolOutput{}, err
			}
		}
		return agenttest.TextOutput("deployed ok"), nil
	}}
	aw.world = newWorld(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "bash", `{"command":"make deploy"}`)),
		faux.Text("deploy finished"),
	}, withTools(bash), withConfig(func(c *gateway.Config) { c.DMApprovals = map[string]string{"bash": "ask"} }))
	aw.say(ownerChat, owner, "deploy please")

	aw.prompt = aw.waitMessage(ownerChat, "make deploy")
	if len(aw.prompt.Buttons) == 0 {
		t.Fatalf("approval message %q has no inline keyboard", aw.prompt.Text)
	}
	for _, row := range aw.prompt.Buttons {
		for _, b := range row {
			if len(b.CallbackData) == 0 || len(b.CallbackData) > 64 {
				t.Errorf("button %q: callback_data of %d bytes", b.Text, len(b.CallbackData))
			}
			if b.Text == "Allow once" {
				aw.allowOnce = b.CallbackData
			}
		}
	}
	if aw.allowOnce == "" {
		t.Fatalf("no \"Allow once\" button in %+v", aw.prompt.Buttons)
	}
	if aw.runs.Load() != 0 {
		t.Fatal("the tool ran before it was approved")
	}
	aw.restart()
	// Let the new process settle (recovery notes, rate-limit pauses) so
	// that the press meets a running bot.
	aw.waitFor("the new process polling", func() bool { return len(aw.srv.Calls("deleteWebhook")) == 2 })
	return aw
}

// press presses a button of the approval message and returns the query id.
func (aw *approvalWorld) press(data string) string {
	return aw.srv.AddCallback(owner, ownerChat, aw.prompt.ID, data)
}

// A tool that needs approval asks with an inline keyboard; pibot restarts
// while the question is open; "Allow once" is answered, runs the tool
// exactly once and completes the reply; a second press is told the
// question is already decided.
func TestApprovalButtonAcrossRestart(t *testing.T) {
	t.Parallel()
	aw := newApprovalWorld(t)
	q1 := aw.press(aw.allowOnce)
	aw.waitMessage(ownerChat, "deploy finished")
	if n := aw.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	aw.waitFor("the press answered", func() bool { return len(aw.answers(q1)) > 0 })
	if a := aw.answers(q1); len(a) != 1 || a[0].Code != 200 || !strings.Contains(a[0].Params["text"], "Allowed") {
		t.Fatalf("answerCallbackQuery for the press = %+v, want one \"Allowed\"", a)
	}
	aw.waitBranch(locKey(ownerChat, 0), []string{"user:deploy please", "toolResult:deployed ok", "assistant:deploy finished"})

	q2 := aw.press(aw.allowOnce)
	aw.waitFor("the second press answered", func() bool { return len(aw.answers(q2)) > 0 })
	if a2 := aw.answers(q2); !strings.Contains(strings.ToLower(a2[0].Params["text"]), "already decided") {
		t.Errorf("second press answered %q, want \"Already decided\"", a2[0].Params["text"])
	}
	aw.never("the tool runs again", 300*time.Millisecond, func() bool { return aw.runs.Load() != 1 })
	// The run frozen by the restart may have asked the model once more with
	// a cancelled context (the agent loop does, like pi); after the restart
	// the model is asked once, with the tool's real result.
	reqs := aw.model.Requests()
	want := []string{"user:deploy please", "toolResult:deployed ok"}
	if got := requestTexts(reqs[len(reqs)-1]); !slices.Equal(got, want) {
		t.Errorf("last model request = %q, want %q", got, want)
	}
	for i, r := range reqs[:len(reqs)-1] {
		if slices.Contains(requestTexts(r), "toolResult:deployed ok") {
			t.Errorf("request %d also has the tool result: %q", i, requestTexts(r))
		}
	}
}

// A button press is answered (answerCallbackQuery) before anything else
// is done about it, even when Telegram rate-limits the edit of the
// approval message: the user's spinner must not wait for retry_after, and
// the tool must not run before the press is acknowledged.
func TestApprovalPressAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	aw := newApprovalWorld(t)
	aw.srv.Fail("editMessageText", 1, telegramtest.Fault{Kind: telegramtest.Fault429, RetryAfter: 2})
	q := aw.press(aw.allowOnce)
	aw.waitMessage(ownerChat, "deploy finished")
	aw.waitFor("the press answered", func() bool { return len(aw.answers(q)) > 0 })
	a := aw.answers(q)[0]
	if ran := time.Unix(0, aw.ranAt.Load()); a.Time.After(ran) {
		t.Errorf("the press was answered %v after the tool started running", a.Time.Sub(ran).Round(time.Millisecond))
	}
	for _, c := range aw.srv.Calls("editMessageText", "editMessageReplyMarkup") {
		if c.Params["message_id"] == itoa(aw.prompt.ID) && c.Time.Before(a.Time) {
			t.Errorf("the approval message was edited (%s, HTTP %d) before the press was answered", c.Method, c.Code)
		}
	}
}

// The approval message shows the decision (and loses its buttons) even if
// the first edit of it meets a 429.
func TestApprovalDecisionShownAfter429(t *testing.T) {
	t.Parallel()
	aw := newApprovalWorld(t)
	aw.srv.Fail("editMessageText", 1, telegramtest.Fault{Kind: telegramtest.Fault429, RetryAfter: 1})
	aw.press(aw.allowOnce)
	aw.waitMessage(ownerChat, "deploy finished")
	aw.waitFor("the approval message shows the decision", func() bool {
		for _, m := range aw.srv.Messages(ownerChat) {
			if m.ID == aw.prompt.ID {
				return strings.Contains(m.Text, "allowed once") && len(m.Buttons) == 0
			}
		}
		return false
	})
}

// A restart notice is posted once: the run frozen by the shutdown already
// says it will be resumed, so recovery must not post a second notice.
func TestRestartNoticedOnce(t *testing.T) {
	t.Parallel()
	aw := newApprovalWorld(t)
	aw.waitFor("recovery done", func() bool { return len(aw.srv.Calls("getUpdates")) > 0 })
	aw.never("a second restart notice", 500*time.Millisecond, func() bool {
		n := 0
		for _, m := range aw.srv.Messages(ownerChat) {
			if strings.Contains(m.Text, "restart") {
				n++
			}
		}
		return n > 1
	})
}

// pibot stops while an approved tool runs (the approval was given after an
// earlier restart); after the next start the conversation still gets its
// reply, and the tool's stop does not go unrecorded.
func TestApprovedToolOutlivesShutdown(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	var returned atomic.Bool
	aw := newApprovalWorldWith(t, func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		returned.Store(true)
		return ctx.Err()
	})
	aw.press(aw.allowOnce)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the approved tool did not start")
	}
	// Shutdown drains: the approved tool runs under the gateway, so Run
	// returns only after the tool was stopped.
	aw.stop()
	if !returned.Load() {
		t.Fatal("gateway.Run returned while an approved tool was still running")
	}
	// After the restart the call's outcome is recorded as unknown (it is not
	// run again blindly) and the model continues.
	aw.start()
	aw.waitMessage(ownerChat, "deploy finished")
}
