package e2e_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pibot/pibot/adapters/discord/discordtest"
	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// A mention in a guild channel opens a thread on that message and the
// answer streams there; a later message in the thread continues the
// session without a mention, from any member of the listed guild; the
// session file reads back as a pi session.
func TestDiscordMentionOpensThread(t *testing.T) {
	t.Parallel()
	answer := strings.TrimSpace(strings.Repeat("streamed words arrive one by one ", 12))
	dw := newDiscordWorld(t, []faux.Turn{
		{Text: answer, Delay: 15 * time.Millisecond},
		faux.Text("second answer"),
	})
	m := dw.say(dChan, dOwner, "explain streaming", true, "")
	dw.waitFor("the thread", func() bool { _, ok := dw.dsrv.Channel(m.ID); return ok })
	th, _ := dw.dsrv.Channel(m.ID)
	if th.ParentID != dChan || utf8.RuneCountInString(th.Name) < 1 || utf8.RuneCountInString(th.Name) > 100 {
		t.Fatalf("thread %+v", th)
	}
	final := dw.waitText(m.ID, dOwner.ID, answer)
	if len(final.Edits) == 0 {
		t.Errorf("the answer was not streamed (no edit)")
	}
	for i := 1; i < len(final.Edits); i++ {
		if gap := final.Edits[i].Sub(final.Edits[i-1]); gap < time.Second {
			t.Errorf("edits %d and %d are %s apart", i-1, i, gap)
		}
	}
	for _, msg := range dw.dsrv.Messages(dChan) {
		if msg.Author.ID == dw.dsrv.Bot.ID {
			t.Errorf("pibot answered in the channel's main line: %q", msg.Content)
		}
	}
	thread := dLoc(dGuild, dChan, m.ID, false)
	dw.waitBranch(thread, []string{"user:explain streaming", "assistant:" + answer})

	// A member continues in the thread without mentioning the bot.
	dw.say(m.ID, dMember, "and then?", false, "")
	dw.waitText(m.ID, dMember.ID, "second answer")
	dw.waitBranch(thread, []string{"user:explain streaming", "assistant:" + answer, "user:and then?", "assistant:second answer"})
	// Chatter in the main line without a mention is ignored.
	dw.say(dChan, dMember, "lunch anyone?", false, "")
	dw.never("an answer to main-line chatter", 300*time.Millisecond, func() bool { return dw.model.Calls() > 2 })

	for _, p := range dw.sessionFiles() {
		s, err := session.OpenFile(p, session.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("session %s: %v", p, err)
		}
		s.Close()
	}
}

// In a DM a reply to an earlier answer branches from it: the model sees
// exactly that branch.
func TestDiscordDMReplyBranch(t *testing.T) {
	t.Parallel()
	dw := newDiscordWorld(t, []faux.Turn{faux.Text("answer one"), faux.Text("answer two"), faux.Text("answer three")})
	dw.say(dDM, dOwner, "first", false, "")
	one := dw.waitText(dDM, dOwner.ID, "answer one")
	dw.say(dDM, dOwner, "second", false, "")
	dw.waitText(dDM, dOwner.ID, "answer two")
	dw.say(dDM, dOwner, "back to one", false, one.ID)
	dw.waitText(dDM, dOwner.ID, "answer three")
	reqs := dw.model.Requests()
	want := []string{"user:first", "assistant:answer one", "user:back to one"}
	if got := requestTexts(reqs[len(reqs)-1]); !slices.Equal(got, want) {
		t.Errorf("the branch request = %q, want %q", got, want)
	}
}

// A message in the thread while a tool runs steers the run: the model's
// next request has it.
func TestDiscordSteerInThread(t *testing.T) {
	t.Parallel()
	g := newGate()
	dw := newDiscordWorld(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "slow", `{}`)),
		faux.Text("done, with the extra"),
	}, withTools(g.tool("slow")))
	m := dw.say(dChan, dOwner, "do the slow thing", true, "")
	<-g.started
	extra := dw.say(m.ID, dOwner, "also mind the extra", false, "")
	// A reaction (👀) is added once the run holds the message; a tool
	// released before that would end the run without it (a fixed sleep
	// here could lose that race under load).
	dw.waitFor("the steering message taken by the run (👀)", func() bool {
		got, ok := dw.dsrv.Message(extra.ID)
		return ok && len(got.Reactions) > 0
	})
	close(g.release)
	dw.waitText(m.ID, dOwner.ID, "done, with the extra")
	reqs := dw.model.Requests()
	if got := requestTexts(reqs[len(reqs)-1]); !slices.Contains(got, "user:also mind the extra") {
		t.Errorf("last request %q lacks the steering message", got)
	}
}

// /pi stop is answered with a deferred response within 3 s, stops the run
// in the thread, and the answer follows through the interaction.
func TestDiscordStopCommand(t *testing.T) {
	t.Parallel()
	g := newGate()
	dw := newDiscordWorld(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "slow", `{}`)), faux.Text("never")}, withTools(g.tool("slow")))
	m := dw.say(dChan, dOwner, "work long", true, "")
	<-g.started
	sent := time.Now()
	dw.dsrv.Command(m.ID, dOwner, "pi", discordtest.Option{Name: "stop", Type: 1})
	dw.waitFor("the deferred answer", func() bool { return len(dw.dsrv.Callbacks()) > 0 })
	cb := dw.dsrv.Callbacks()[0]
	if cb.Type != discordtest.CallbackDeferred || cb.Time.Sub(sent) > 3*time.Second {
		t.Fatalf("first answer: type %d after %s, want a deferred answer (5) within 3 s", cb.Type, cb.Time.Sub(sent))
	}
	dw.waitFor("the run stopped", func() bool {
		for _, c := range dw.dsrv.Calls() {
			if c.Method == "PATCH" && strings.Contains(c.Route, "/webhooks/") && c.Status == 200 {
				return true
			}
		}
		return false
	})
	dw.never("the stopped run's answer", 500*time.Millisecond, func() bool {
		for _, msg := range dw.dsrv.Messages(m.ID) {
			if strings.Contains(msg.Content, "never") {
				return true
			}
		}
		return false
	})
}

// Approval buttons: a press by another member is refused ephemerally; the
// requester's press runs the tool once and the approval message shows the
// decision.
func TestDiscordApprovalButtons(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	bash := &agenttest.Tool{Name: "bash", Fn: func(context.Context, string, json.RawMessage, func(llm.ToolOutput)) (llm.ToolOutput, error) {
		runs.Add(1)
		return agenttest.TextOutput("deployed ok"), nil
	}}
	dw := newDiscordWorld(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "bash", `{"command":"make deploy"}`)),
		faux.Text("deploy finished"),
	}, withTools([]agent.Tool{bash}...), withConfig(func(c *gateway.Config) { c.GroupApprovals = map[string]string{"bash": "ask"} }))
	m := dw.say(dChan, dMember, "deploy please", true, "")
	prompt := dw.waitText(m.ID, dMember.ID, "make deploy")
	var comps []struct {
		Components []struct {
			Label    string `json:"label"`
			CustomID string `json:"custom_id"`
		} `json:"components"`
	}
	if err := json.Unmarshal(prompt.Components, &comps); err != nil {
		t.Fatalf("components %s: %v", prompt.Components, err)
	}
	allow := ""
	for _, row := range comps {
		for _, b := range row.Components {
			if b.Label == "Allow once" {
				allow = b.CustomID
			}
		}
	}
	if allow == "" {
		t.Fatalf("no Allow once button in %s", prompt.Components)
	}
	// Another member (not the requester, not an owner) presses.
	intruder := discordtest.User{ID: "710000000000000009", Username: "mallory"}
	dw.dsrv.Press(prompt.ID, intruder, allow)
	dw.waitFor("the refusal", func() bool {
		for _, msg := range dw.dsrv.Messages(m.ID) {
			if msg.Ephemeral == intruder.ID {
				return true
			}
		}
		return false
	})
	if runs.Load() != 0 {
		t.Fatal("the tool ran on another member's press")
	}
	dw.dsrv.Press(prompt.ID, dMember, allow)
	dw.waitText(m.ID, dMember.ID, "deploy finished")
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times", n)
	}
	dw.waitFor("the decision on the approval message", func() bool {
		p, _ := dw.dsrv.Message(prompt.ID)
		return strings.Contains(strings.ToLower(p.Content), "allow") && !strings.Contains(string(p.Components), "custom_id")
	})
}

// A MESSAGE_CREATE replayed around a resume (with a new sequence number)
// runs once; the session is resumed, not identified again.
func TestDiscordResumeReplayRunsOnce(t *testing.T) {
	t.Parallel()
	dw := newDiscordWorld(t, []faux.Turn{faux.Text("hello back"), faux.Text("a second run")})
	dw.say(dDM, dOwner, "hello", false, "")
	dw.waitText(dDM, dOwner.ID, "hello back")
	dw.dsrv.ReplayOnResume(1)
	dw.dsrv.Drop()
	dw.waitFor("the resume", func() bool { return dw.dsrv.Resumes() == 1 })
	dw.never("the replayed message runs again", time.Second, func() bool { return dw.model.Calls() > 1 })
	if n := dw.dsrv.Identifies(); n != 1 {
		t.Errorf("%d identifies, want 1", n)
	}
}

// A 429 on an edit while streaming: no call inside the window (checked at
// cleanup), and the full answer arrives.
func TestDiscord429OnEdits(t *testing.T) {
	t.Parallel()
	answer := words("w", 120)
	dw := newDiscordWorld(t, []faux.Turn{{Text: answer, Delay: 20 * time.Millisecond}})
	dw.dsrv.Fail("PATCH message", 1, discordtest.Fault{Kind: discordtest.Fault429, RetryAfter: 1500 * time.Millisecond})
	dw.say(dDM, dOwner, "count", false, "")
	dw.waitText(dDM, dOwner.ID, answer)
	limited := false
	for _, c := range dw.dsrv.Calls() {
		if c.Status == 429 {
			limited = true
		}
	}
	if !limited {
		t.Error("the fault was never hit: no edit while streaming")
	}
}

// A 5,000-character answer with code arrives in messages of at most 2,000
// code points, each with balanced fences, nothing lost.
func TestDiscordLongAnswerSplit(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("Intro.\n\n```python\n")
	for i := 0; b.Len() < 2600; i++ {
		b.WriteString("print('line é')\n")
	}
	b.WriteString("```\n\n")
	for utf8.RuneCountInString(b.String()) < 5000 {
		b.WriteString("Closing words here. ")
	}
	answer := strings.TrimSpace(b.String())
	dw := newDiscordWorld(t, []faux.Turn{faux.Text(answer)})
	dw.say(dDM, dOwner, "long please", false, "")
	dw.waitFor("every closing word", func() bool {
		var all strings.Builder
		for _, m := range dw.dsrv.Messages(dDM) {
			if m.Author.ID == dw.dsrv.Bot.ID {
				all.WriteString(m.Content)
			}
		}
		return strings.Count(all.String(), "Closing words here.") == strings.Count(answer, "Closing words here.")
	})
	n := 0
	for _, m := range dw.dsrv.Messages(dDM) {
		if m.Author.ID != dw.dsrv.Bot.ID {
			continue
		}
		n++
		if c := utf8.RuneCountInString(m.Content); c > 2000 {
			t.Errorf("a message of %d code points", c)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Errorf("unbalanced fences in:\n%s", m.Content)
		}
	}
	if n < 3 {
		t.Errorf("%d messages for 5,000 characters", n)
	}
}

// pibot restarts: the new process resumes the Discord session (no new
// identify), gets what was said meanwhile, and answers nothing twice.
func TestDiscordRestartResumes(t *testing.T) {
	t.Parallel()
	dw := newDiscordWorld(t, []faux.Turn{faux.Text("first answer"), faux.Text("second answer")})
	dw.say(dDM, dOwner, "hello", false, "")
	dw.waitText(dDM, dOwner.ID, "first answer")
	dw.stop()
	dw.dsrv.Drop()
	dw.say(dDM, dOwner, "said while pibot restarted", false, "")
	// As after a crash whose last sequence number was not saved: Discord
	// replays events the old process had handled.
	dw.dsrv.ReplayOnResume(4)
	dw.start()
	dw.waitText(dDM, dOwner.ID, "second answer")
	dw.never("a third run", 500*time.Millisecond, func() bool { return dw.model.Calls() > 2 })
	if r, i := dw.dsrv.Resumes(), dw.dsrv.Identifies(); r != 1 || i != 1 {
		t.Errorf("resumes %d, identifies %d; want 1 and 1", r, i)
	}
	reqs := dw.model.Requests()
	want := []string{"user:hello", "assistant:first answer", "user:said while pibot restarted"}
	if got := requestTexts(reqs[len(reqs)-1]); !slices.Equal(got, want) {
		t.Errorf("request after the restart = %q, want %q", got, want)
	}
}

// An attachment reaches the agent as a file in the workspace; one above
// the size cap is refused with a note, never downloaded.
func TestDiscordAttachment(t *testing.T) {
	t.Parallel()
	dw := newDiscordWorld(t, []faux.Turn{faux.Text("got the file"), faux.Text("too big")})
	at := dw.dsrv.AddFile("notes.txt", "text/plain", []byte("attached notes\n"))
	m := dw.dsrv.PostUser(dDM, dOwner, "read this", "")
	m.Attachments = []discordtest.Attachment{at}
	dw.dsrv.DispatchMessage(m, false)
	dw.waitText(dDM, dOwner.ID, "got the file")
	reqs := dw.model.Requests()
	if got := strings.Join(requestTexts(reqs[0]), "\n"); !strings.Contains(got, "file received: uploads/") || !strings.Contains(got, "notes.txt") {
		t.Errorf("request = %q, want the file note", got)
	}
	big := at
	big.Size = 30 << 20
	m2 := dw.dsrv.PostUser(dDM, dOwner, "and this", "")
	m2.Attachments = []discordtest.Attachment{big}
	dw.dsrv.DispatchMessage(m2, false)
	dw.waitText(dDM, dOwner.ID, "too big")
	reqs = dw.model.Requests()
	if got := strings.Join(requestTexts(reqs[len(reqs)-1]), "\n"); !strings.Contains(got, "limit; not downloaded") {
		t.Errorf("request = %q, want the refusal note", got)
	}
}
