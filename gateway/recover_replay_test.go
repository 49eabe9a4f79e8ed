package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// followModel answers "the first question" (or, after its tool, the
// question that asked for it) slowly with "first answer", and "the second
// question" with "second answer" (hanging while hang is set); a question
// asking for the tool calls it first.
func followModel(hang *atomic.Bool) faux.Turn {
	slow := strings.Repeat("word ", 60)
	return faux.Turn{Reply: func(req llm.Request) faux.Turn {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == llm.RoleToolResult:
			return faux.Text(slow + "first answer").WithDelay(10 * time.Millisecond)
		case strings.Contains(last.Text(), "second question"):
			if hang.Load() {
				return faux.Text("never").WithDelay(time.Hour)
			}
			return faux.Text("second answer")
		case strings.Contains(last.Text(), "use the tool"):
			return faux.ToolCalls(faux.Call("c1", "mark", `{}`))
		}
		return faux.Text(slow + "first answer").WithDelay(10 * time.Millisecond)
	}}
}

// onDisk reports whether the only session file holds every one of subs.
func onDisk(h *harness, subs ...string) bool {
	s := h.sessions()
	if len(s) != 1 {
		return false
	}
	b, _ := os.ReadFile(s[0])
	for _, sub := range subs {
		if !bytes.Contains(b, []byte(sub)) {
			return false
		}
	}
	return true
}

// TestAnswerFollowedByAMessageIsDeliveredAfterACrash: a run answered the
// first message ("first answer", complete in the session) and took a
// second one (steered into it, queued as its follow-up, collected, or
// steered after a tool call), and pibot died while the model answered
// that. The restart delivers the first answer, which never reached the
// chat, before the resumed run's: each once. (The old code saw the later
// message at the branch's tail and only resumed the run: the first
// answer was never sent.)
func TestAnswerFollowedByAMessageIsDeliveredAfterACrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, mode, first string
	}{
		{"steered", "steer", "the first question"},
		{"queued as a follow-up", "followup", "the first question"},
		{"collected", "collect", "the first question"},
		{"steered after a tool call", "steer", "the first question: use the tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hang atomic.Bool
			hang.Store(true)
			var marks atomic.Int32
			tool := &agenttest.Tool{Name: "mark", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
				marks.Add(1)
				return agenttest.TextOutput("marked"), nil
			}}
			mode := withConfig(func(c *gateway.Config) { c.QueueMode = tc.mode; fastDrain(c) })
			h := newHarness(t, []faux.Turn{followModel(&hang)}, mode, withTools(tool))
			h.send(tc.first)
			h.waitText(dmConv, "word word")
			h.send("the second question")
			h.waitFor("the second question's model call", func() bool {
				reqs := h.model.Requests()
				return len(reqs) > 0 && strings.Contains(reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1].Text(), "second question")
			})
			h.waitFor("the first answer and the second question on disk", func() bool {
				return onDisk(h, "first answer", "the second question")
			})
			dir := crashCopy(t, h.dir)
			h.stop()

			// The same chat: the restart marks the cut reply (which
			// showed the first answer streaming) interrupted.
			hang.Store(false)
			h2 := newHarness(t, []faux.Turn{followModel(&hang)}, withDir(dir), mode, withTools(tool), withChat(h.ad))
			h2.waitText(dmConv, "first answer", "second answer")
			h2.waitFor("an empty inbox", func() bool { return h2.inbox.Len() == 0 })
			h2.waitFor("the cut reply marked", func() bool { return h2.countIn(interrupted) == 1 })
			for _, a := range []string{"first answer", "second answer"} {
				if n := h2.countIn(a); n != 1 {
					t.Errorf("%q is in the chat %d times after the restart, want 1; messages: %q", a, n, h2.ad.Messages(dmConv))
				}
			}
			if n := marks.Load(); tc.first != "the first question" && n != 1 {
				t.Errorf("the tool ran %d times, want once", n)
			}
			if s := h2.sessions(); len(s) != 1 {
				t.Errorf("%d session files, want 1", len(s))
			}
		})
	}
}

// TestAnswersOfOneRunDeliveredTogetherAfterACrash: one run answered two
// messages (the second steered in after the first answer), both answers
// are in the session, and pibot died before the run's delivery was
// recorded (and before the inbox let go of either message). The restart
// sends both answers, without asking the model again. (The old code
// delivered only the answer at the branch's tail.)
func TestAnswersOfOneRunDeliveredTogetherAfterACrash(t *testing.T) {
	t.Parallel()
	var hang atomic.Bool
	h := newHarness(t, []faux.Turn{followModel(&hang)})
	h.send("the first question")
	h.waitText(dmConv, "word word")
	h.send("the second question")
	h.waitText(dmConv, "first answer", "second answer")
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	if n := len(deliveries(h)); n != 1 {
		t.Fatalf("%d deliveries, want one for the run that answered both", n)
	}
	h.stop()
	dir := crashCopy(t, h.dir)
	sessions := (&harness{dir: dir}).sessions()
	if len(sessions) != 1 {
		t.Fatalf("session files %q", sessions)
	}
	dropLines(t, sessions[0], `"pibot.delivery"`, `"pibot.reply"`)
	dropLines(t, filepath.Join(dir, "inbox.jsonl"), `"op":"ack"`, `"op":"clean"`)

	h2 := newHarness(t, []faux.Turn{followModel(&hang)}, withDir(dir))
	h2.waitText(dmConv, "first answer", "second answer")
	h2.waitFor("an empty inbox", func() bool { return h2.inbox.Len() == 0 })
	if n := h2.model.Calls(); n != 0 {
		t.Errorf("the model was asked %d times; the stored answers are enough", n)
	}
	for _, a := range []string{"first answer", "second answer"} {
		if n := h2.countIn(a); n != 1 {
			t.Errorf("%q is in the chat %d times, want 1; messages: %q", a, n, h2.ad.Messages(dmConv))
		}
	}
	if n := len(deliveries(h2)); n != 1 {
		t.Errorf("%d deliveries, want the one after the restart", n)
	}
}
