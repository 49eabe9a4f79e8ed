package e2e_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// A channel: a top-level mention starts a session answered in that
// message's thread (a native stream for the one who asked); a reply in the
// thread continues it without a mention, from anyone in the channel. A
// mention in a channel that is not allowed runs nothing.
func TestSlackChannelThread(t *testing.T) {
	t.Parallel()
	w := newSlackWorld(t, []faux.Turn{faux.Text("first answer"), faux.Text("second answer")})
	w.say(slacktest.Say{Channel: slackOther, User: slackBob, Text: slackMention + " not here"})
	q := w.say(slacktest.Say{Channel: slackChannel, User: slackBob, Text: slackMention + " what is up?"})
	a1 := w.waitSlack(slackChannel, q, "first answer")
	if a1.Stream == nil || a1.Stream.RecipientUser != slackBob || a1.Stream.RecipientTeam != slackTeam {
		t.Errorf("the answer is not a stream for its recipient: %+v", a1)
	}
	w.say(slacktest.Say{Channel: slackChannel, User: slackOwner, Text: "and then?", ThreadTS: q})
	w.waitSlack(slackChannel, q, "second answer")
	w.waitBranch(slackLoc(slackChannel, q), []string{"user:what is up?", "assistant:first answer",
		"user:and then?", "assistant:second answer"})
	if n := len(w.slack.Messages(slackOther)); n != 1 {
		t.Errorf("the channel that is not allowed has %d messages, want only the user's", n)
	}
	if w.model.Calls() != 2 {
		t.Errorf("%d model calls, want 2", w.model.Calls())
	}
	// A top-level message without a mention is not for the bot.
	w.say(slacktest.Say{Channel: slackChannel, User: slackBob, Text: "lunch?"})
	w.never("a run without a mention", 300*time.Millisecond, func() bool { return w.model.Calls() > 2 })
}

// Steering: a thread reply while a tool runs reaches the run.
func TestSlackSteerFromThread(t *testing.T) {
	t.Parallel()
	g := newGate()
	w := newSlackWorld(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "slow", `{}`)),
		faux.Text("done, with the hint"),
	}, slackTools(g.tool("slow")))
	q := w.say(slacktest.Say{Channel: slackChannel, User: slackBob, Text: slackMention + " build it"})
	<-g.started
	hint := w.say(slacktest.Say{Channel: slackChannel, User: slackBob, Text: "use -race", ThreadTS: q})
	// 👀 is added once the run holds the message; a tool released before
	// that would end the run without it (a fixed sleep here could lose
	// that race under load).
	w.waitFor("the steering message taken by the run (👀)", func() bool {
		for _, m := range w.slack.Messages(slackChannel) {
			if m.TS == hint && slices.Contains(m.Reacts, "eyes") {
				return true
			}
		}
		return false
	})
	close(g.release)
	w.waitSlack(slackChannel, q, "done, with the hint")
	reqs := w.model.Requests()
	last := requestTexts(reqs[len(reqs)-1])
	if !slices.Contains(last, "user:use -race") {
		t.Errorf("the steering message is not in the model's request: %q", last)
	}
}

// /pi stop in a DM and !stop in a channel thread: each is acknowledged
// visibly and stops the run, whose stream is closed.
func TestSlackStop(t *testing.T) {
	t.Parallel()
	var started, cancelled atomic.Int32
	slow := &agenttest.Tool{Name: "slow", Fn: func(ctx context.Context, _ string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		started.Add(1)
		<-ctx.Done()
		cancelled.Add(1)
		return llm.ToolOutput{}, ctx.Err()
	}}
	w := newSlackWorld(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "slow", `{}`)),
		faux.ToolCalls(faux.Call("c2", "slow", `{}`)),
		faux.ToolCalls(faux.Call("c3", "slow", `{}`)),
	}, slackTools(slow))
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "work"})
	w.waitFor("the tool to run", func() bool { return started.Load() >= 1 })
	w.command(slackOwnerDM, slackOwner, "stop")
	w.waitFor("the run to stop", func() bool { return cancelled.Load() == 1 })
	w.waitFor("a visible acknowledgement", func() bool { return len(w.slack.Ephemerals())+len(w.botMessages(slackOwnerDM, "")) > 0 })

	q := w.say(slacktest.Say{Channel: slackChannel, User: slackBob, Text: slackMention + " work too"})
	w.waitFor("the second tool to run", func() bool { return started.Load() >= 2 })
	before := len(w.botMessages(slackChannel, q)) + len(w.slack.Ephemerals())
	w.say(slacktest.Say{Channel: slackChannel, User: slackBob, Text: "!stop", ThreadTS: q})
	w.waitFor("the second run to stop", func() bool { return cancelled.Load() == 2 })
	w.waitFor("an acknowledgement in the thread", func() bool {
		return len(w.botMessages(slackChannel, q))+len(w.slack.Ephemerals()) > before
	})
	// /pi stop in the channel (Slack sends no slash commands from
	// threads) stops the channel's most recent conversation.
	w.waitSlack(slackChannel, q, "stopped by")
	w.say(slacktest.Say{Channel: slackChannel, User: slackBob, Text: "go on", ThreadTS: q})
	w.waitFor("the third tool to run", func() bool { return started.Load() >= 3 })
	w.command(slackChannel, slackBob, "stop")
	w.waitFor("the third run to stop", func() bool { return cancelled.Load() == 3 })
	for _, m := range w.slack.Messages(slackChannel) {
		if m.Stream != nil && !m.Stream.Stopped {
			w.waitFor("the stream to stop", func() bool {
				for _, x := range w.slack.Messages(slackChannel) {
					if x.TS == m.TS {
						return x.Stream.Stopped
					}
				}
				return true
			})
		}
	}
}

// Approvals in a channel: the buttons are posted for everyone; a press by
// a member who is not the requester is refused ephemerally, leaves the
// buttons and is no denial; the requester's press approves and the
// buttons give way to the decision.
func TestSlackApprovalButtons(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	bash := &agenttest.Tool{Name: "bash", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
		ran.Add(1)
		return agenttest.TextOutput("deployed"), nil
	}}
	w := newSlackWorld(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "bash", `{"command":"make deploy"}`)),
		faux.Text("deploy finished"),
	}, slackTools(bash), slackConfig(func(c *gateway.Config) { c.GroupApprovals = map[string]string{"bash": "ask"} }))
	q := w.say(slacktest.Say{Channel: slackChannel, User: slackBob, Text: slackMention + " deploy"})
	var prompt slacktest.Message
	w.waitFor("the approval buttons", func() bool {
		for _, m := range w.botMessages(slackChannel, q) {
			if len(m.Buttons) > 0 && strings.Contains(m.Text, "make deploy") {
				prompt = m
				return true
			}
		}
		return false
	})
	allow := prompt.Buttons[0]
	w.press(slackChannel, prompt.TS, "USTRANGER", allow)
	w.waitFor("the refusal", func() bool {
		for _, e := range w.slack.Ephemerals() {
			if e.User == "USTRANGER" {
				return true
			}
		}
		return false
	})
	time.Sleep(200 * time.Millisecond)
	for _, m := range w.slack.Messages(slackChannel) {
		if m.TS == prompt.TS && len(m.Buttons) == 0 {
			t.Fatal("a stranger's press removed the buttons")
		}
	}
	if ran.Load() != 0 {
		t.Fatal("a stranger's press ran the tool")
	}
	w.press(slackChannel, prompt.TS, slackBob, allow)
	w.waitSlack(slackChannel, q, "deploy finished")
	if ran.Load() != 1 {
		t.Errorf("the tool ran %d times", ran.Load())
	}
	w.waitFor("the buttons to give way", func() bool {
		for _, m := range w.slack.Messages(slackChannel) {
			if m.TS == prompt.TS {
				return len(m.Buttons) == 0
			}
		}
		return false
	})
}

// Files: a file the user attaches reaches the agent (downloaded with the
// bot token into the workspace); a file the agent attaches is uploaded
// into the thread.
func TestSlackFiles(t *testing.T) {
	t.Parallel()
	attach := func(a gateway.Attacher) *agenttest.Tool {
		return &agenttest.Tool{Name: "attach", Fn: func(ctx context.Context, _ string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
			body := "col\n1\n"
			if err := a.Attach(ctx, "report.csv", "text/csv", strings.NewReader(body), int64(len(body))); err != nil {
				return llm.ToolOutput{}, err
			}
			return agenttest.TextOutput("attached"), nil
		}}
	}
	w := newSlackWorld(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "attach", `{}`)),
		faux.Text("here is the report"),
	}, slackConfig(func(c *gateway.Config) {
		c.Tools = func(r gateway.ToolRun) []agent.Tool { return []agent.Tool{attach(r.Attach)} }
	}))
	f := w.slack.AddFile("data.csv", "text/csv", []byte("a,b\n1,2\n"))
	w.say(slacktest.Say{Channel: slackChannel, User: slackOwner, Text: slackMention + " summarise this", Files: []map[string]any{f}})
	var q string
	for _, m := range w.slack.Messages(slackChannel) {
		if strings.Contains(m.Text, "summarise") {
			q = m.TS
		}
	}
	w.waitSlack(slackChannel, q, "here is the report")
	first := requestTexts(w.model.Requests()[0])
	if len(first) == 0 || !strings.Contains(first[len(first)-1], "data.csv (8 bytes)") {
		t.Errorf("the model's request does not carry the file: %q", first)
	}
	b, ok := w.slack.File("report.csv")
	if !ok || string(b) != "col\n1\n" {
		t.Fatalf("uploaded %q", b)
	}
	shared := false
	for _, m := range w.slack.Messages(slackChannel) {
		shared = shared || (len(m.Files) == 1 && m.Files[0] == "report.csv" && m.ThreadTS == q)
	}
	if !shared {
		t.Error("the report was not shared in the thread")
	}
}

// /pi status answers only the one who asked; /pi alone lists the
// commands.
func TestSlackEphemeralCommands(t *testing.T) {
	t.Parallel()
	w := newSlackWorld(t, []faux.Turn{faux.Text("hi")})
	w.command(slackOwnerDM, slackOwner, "status")
	w.command(slackOwnerDM, slackOwner, "")
	w.waitFor("two ephemeral answers", func() bool { return len(w.slack.Ephemerals()) >= 2 })
	e := w.slack.Ephemerals()
	if e[0].User != slackOwner || e[0].Via != "response_url" || !strings.Contains(strings.ToLower(e[1].Text), "stop") {
		t.Errorf("ephemerals %+v", e)
	}
	if n := len(w.botMessages(slackOwnerDM, "")); n != 0 {
		t.Errorf("%d visible messages for commands only the sender needs", n)
	}
}
