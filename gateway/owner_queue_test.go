package gateway_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

func headBranch(h *harness) []string {
	h.t.Helper()
	ss := h.sessions()
	if len(ss) == 0 {
		return nil // not created yet: its first group commit makes it
	}
	path := ss[0]
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		h.t.Fatal(err)
	}
	head, _ := s.Tree().Head(dmConv.Key())
	s.Close()
	var out []string
	for _, t := range h.branchTexts(path, head) {
		if t != "assistant:" {
			out = append(out, t)
		}
	}
	return out
}

func TestSteerDuringToolBatch(t *testing.T) {
	g := newGate()
	h := newHarness(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "work", `{}`)),
		faux.Text("after steer"),
	}, withTools(g.tool("work")))
	h.send("do it")
	<-g.started
	h.send("also consider X")
	// The queued message is acknowledged to the user right away.
	h.waitFor("queued reaction", func() bool {
		return len(chattest.Filter(h.ad.Calls(), chattest.MethodReact)) > 0
	})
	close(g.release)
	h.waitText(dmConv, "after steer")
	h.waitFor("steer persisted", func() bool { return slices.Contains(headBranch(h), "assistant:after steer") })
	want := []string{"user:do it", "toolResult:done c1", "user:also consider X", "assistant:after steer"}
	if got := headBranch(h); !slices.Equal(got, want) {
		t.Fatalf("branch = %q, want %q", got, want)
	}
	if n := h.model.Calls(); n != 2 {
		t.Fatalf("model calls = %d, want 2 (steering joins the run)", n)
	}
	// The user saw it queued (👀), then applied (✅).
	var emojis []string
	for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodReact) {
		emojis = append(emojis, c.Text)
	}
	if !slices.Equal(emojis, []string{"👀", "✅"}) {
		t.Fatalf("reactions = %q, want queued then applied", emojis)
	}
}

func TestFollowupRunsAfterTheRun(t *testing.T) {
	g := newGate()
	h := newHarness(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "work", `{}`)),
		faux.Text("first done"),
		faux.Text("follow-up done"),
	}, withTools(g.tool("work")))
	h.send("start")
	<-g.started
	h.send("/followup then this")
	close(g.release)
	h.waitText(dmConv, "follow-up done")
	h.waitFor("follow-up persisted", func() bool { return slices.Contains(headBranch(h), "assistant:follow-up done") })
	want := []string{"user:start", "toolResult:done c1", "assistant:first done", "user:then this", "assistant:follow-up done"}
	if got := headBranch(h); !slices.Equal(got, want) {
		t.Fatalf("branch = %q, want %q", got, want)
	}
}

func TestCollectMergesMessages(t *testing.T) {
	t.Parallel()
	// The debounce must outlast the gap between two sends, and each send
	// waits for the inbox's fsync: the harness's 100 ms was outlasted on a
	// loaded machine, and "part one" ran alone.
	h := newHarness(t, []faux.Turn{faux.Text("ok").WithDelay(time.Millisecond)},
		withConfig(func(c *gateway.Config) { c.CollectDebounce = 2 * time.Second }))
	h.send("/queue collect")
	h.waitText(dmConv, "Queue mode set to **collect**")
	h.send("part one")
	h.send("part two")
	h.send("part three")
	h.waitFor("one merged run", func() bool { return slices.Contains(headBranch(h), "assistant:ok") })
	if n := h.model.Calls(); n != 1 {
		t.Fatalf("model calls = %d, want 1", n)
	}
	got := headBranch(h)
	if !slices.Contains(got, "user:part one\n\npart two\n\npart three") {
		t.Fatalf("branch = %q, want one merged user message", got)
	}
	h.waitFor("every merged message acknowledged", func() bool { return len(pendingOf(h)) == 0 })
}

func TestInterruptAbortsAndRunsTheNewMessage(t *testing.T) {
	g := newGate()
	h := newHarness(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "work", `{}`)),
		faux.Text("answer to the new message"),
	}, withTools(g.tool("work")))
	h.send("/queue interrupt")
	h.waitText(dmConv, "**interrupt**")
	h.send("slow task")
	<-g.started
	h.send("never mind, do this")
	h.waitText(dmConv, "answer to the new message")
	h.waitFor("persisted", func() bool { return slices.Contains(headBranch(h), "assistant:answer to the new message") })
	got := headBranch(h)
	if !slices.Contains(got, "user:never mind, do this") {
		t.Fatalf("branch = %q", got)
	}
	h.waitText(dmConv, "interrupted by a newer message")
}

func TestStopAndQueueCommands(t *testing.T) {
	g := newGate()
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "work", `{}`)), faux.Text("late")}, withTools(g.tool("work")))
	h.send("/queue followup")
	h.waitText(dmConv, "**followup**")
	h.send("long job")
	<-g.started
	h.send("queued one")
	h.send("/queue list")
	h.waitText(dmConv, "follow-up: queued one")
	h.send("/stop")
	h.waitText(dmConv, "Stopping", "Dropped 1")
	h.waitText(dmConv, "dropped: /queue drop")
	h.waitText(dmConv, "stopped by /stop")
	h.waitFor("run ended", func() bool {
		for _, p := range h.sessions() {
			for _, e := range h.entries(p) {
				if e.Type == session.TypeMessage && e.Message.Role == llm.RoleAssistant && e.Message.StopReason == llm.StopAborted {
					return true
				}
			}
		}
		return false
	})
	for _, m := range h.ad.Messages(dmConv) {
		if strings.Contains(m, "late") {
			t.Fatal("the model ran after /stop")
		}
	}
}

// TestMessageAfterStopIsAnswered replays a lost message: someone wrote
// while the run was stopping (its tool still dying). The message was
// steered into the stopping run, which recorded it (✅) and answered
// nothing. Now it starts the next run and gets its answer.
func TestMessageAfterStopIsAnswered(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	// A tool that takes its time to die, like a process ignoring SIGTERM.
	stubborn := &agenttest.Tool{Name: "work", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
		close(started)
		<-release
		return agenttest.TextOutput("done"), nil
	}}
	h := newHarness(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "work", `{}`)),
		faux.Text("taken by the aborted call"),
		faux.Text("answer to the late message"),
	}, withTools(stubborn))
	h.send("long job")
	<-started
	h.send("/stop")
	h.waitText(dmConv, "Stopping")
	h.send("one more thing")
	close(release)
	h.waitText(dmConv, "answer to the late message")
	h.waitFor("answer persisted", func() bool {
		return slices.Contains(headBranch(h), "assistant:answer to the late message")
	})
	got := headBranch(h)
	i := slices.Index(got, "user:one more thing")
	if i < 0 || i+1 >= len(got) || got[i+1] != "assistant:answer to the late message" {
		t.Fatalf("branch = %q: the late message must be followed by its answer", got)
	}
}
